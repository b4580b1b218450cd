// gkq-workbench: the GUI. Opens the model given on the command line (else the bundled demo model when this
// build's source tree has it), and refuses clearly when there is no display instead of letting Qt abort on a
// missing platform plugin. --screenshot DIR renders each main view to DIR/*.png and exits (offscreen by default).
#include "widgets/main_window.h"
#include "widgets/screenshot_session.h"

#include <QApplication>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#ifndef GKQ_VERSION
#define GKQ_VERSION "unknown"
#endif

namespace {
const char* const kHelp =
    "usage: gkq-workbench [--screenshot DIR [--screenshot-preset NAME] [--screenshot-timeout S]] [MODEL]\n\n"
    "GKQ Workbench: open a model (safetensors file or folder, GGUF, llama2.c checkpoint) or a knot (shown decoded),\n"
    "look at its spectra and saturation masks, quantize it and export the result.\n\n"
    "arguments:\n"
    "  MODEL             model file or folder, or a knot, to open (default: the bundled demo model, when present)\n\n"
    "options:\n"
    "  --screenshot DIR  open the model, compute each main view and save it as DIR/<view>.png, then exit\n"
    "                    (uses the offscreen platform unless QT_QPA_PLATFORM is set)\n"
    "  --screenshot-preset NAME\n"
    "                    the preset the Quantize, Tuning, Reconstruct and Serve views show (default lowrank-q4)\n"
    "  --screenshot-timeout S\n"
    "                    give up after S seconds in all (default 600; a 1 B model's spectra take minutes)\n"
    "  -h, --help        show this help and exit\n"
    "  -v, --version     print the version and exit\n\n"
    "Needs a display: a desktop session, 'xvfb-run -a gkq-workbench', or QT_QPA_PLATFORM=offscreen.\n";

bool has_display() {
    auto set = [](const char* name) {
        const char* v = std::getenv(name);
        return v && *v;
    };
    return set("DISPLAY") || set("WAYLAND_DISPLAY") || set("QT_QPA_PLATFORM");
}
}  // namespace

int main(int argc, char** argv) {
    bool screenshot = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::printf("%s", kHelp);
            return 0;
        }
        if (a == "--version" || a == "-v") {
            std::printf("gkq-workbench %s\n", GKQ_VERSION);
            return 0;
        }
        if (a == "--screenshot") screenshot = true;
    }
    if (screenshot && !std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    if (!has_display()) {
        std::fprintf(stderr,
                     "gkq-workbench: no display (DISPLAY and WAYLAND_DISPLAY are unset); run it in a desktop session, "
                     "under 'xvfb-run -a gkq-workbench', or headless with QT_QPA_PLATFORM=offscreen\n");
        return 1;
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName("gkq-workbench");
    QApplication::setOrganizationName("gkq");
    QApplication::setApplicationVersion(GKQ_VERSION);

    QStringList args = QApplication::arguments().mid(1);
    QString screenshotDir;
    const qsizetype shot = args.indexOf(QStringLiteral("--screenshot"));
    if (shot >= 0) {
        if (shot + 1 >= args.size()) {
            std::fprintf(stderr, "gkq-workbench: --screenshot needs a directory (see --help)\n");
            return 2;
        }
        screenshotDir = args[shot + 1];
        args.remove(shot, 2);
    }
    QString screenshotPreset = QStringLiteral("lowrank-q4");
    int screenshotTimeoutS = 600;
    for (const QString& option : {QStringLiteral("--screenshot-preset"), QStringLiteral("--screenshot-timeout")}) {
        const qsizetype at = args.indexOf(option);
        if (at < 0) continue;
        if (screenshotDir.isEmpty() || at + 1 >= args.size()) {
            std::fprintf(stderr, "gkq-workbench: %s needs a value and --screenshot (see --help)\n", qPrintable(option));
            return 2;
        }
        const QString value = args[at + 1];
        args.remove(at, 2);
        if (option == QLatin1String("--screenshot-preset")) {
            screenshotPreset = value;
            continue;
        }
        bool ok = false;
        screenshotTimeoutS = value.toInt(&ok);
        if (!ok || screenshotTimeoutS < 1 || screenshotTimeoutS > 86400) {
            std::fprintf(stderr, "gkq-workbench: --screenshot-timeout: '%s' is not 1 to 86400 seconds\n",
                         qPrintable(value));
            return 2;
        }
    }
    for (const QString& a : args) {
        if (a.startsWith('-')) {
            std::fprintf(stderr, "gkq-workbench: unknown option '%s' (see --help)\n", qPrintable(a));
            return 2;
        }
    }
    if (args.size() > 1) {
        std::fprintf(stderr, "gkq-workbench: one model at a time (see --help)\n");
        return 2;
    }
    const QString model = args.isEmpty() ? gkq::ui::MainWindow::demoModelPath() : args.first();

    gkq::ui::MainWindow window;
    if (!screenshotDir.isEmpty()) {
        if (model.isEmpty()) {
            std::fprintf(stderr, "gkq-workbench: --screenshot needs a model (the demo model is not in this build)\n");
            return 2;
        }
        QString error;
        const QStringList files = gkq::ui::renderScreenshots(window, model, screenshotDir, &error,
                                                             screenshotTimeoutS * 1000, screenshotPreset);
        if (files.isEmpty()) {
            std::fprintf(stderr, "gkq-workbench: screenshots failed: %s\n", qPrintable(error));
            return 1;
        }
        for (const QString& f : files) std::printf("wrote %s\n", qPrintable(f));
        return 0;
    }
    QObject::connect(&window, &gkq::ui::MainWindow::loadFailed, &window,
                     [](const QString& m) { std::fprintf(stderr, "gkq-workbench: %s\n", qPrintable(m)); });
    if (!model.isEmpty()) window.openModel(model);
    window.show();
    return QApplication::exec();
}
