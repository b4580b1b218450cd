// gkq-workbench: the GUI. Opens the model given on the command line (or none), and refuses clearly when
// there is no display instead of letting Qt abort on a missing platform plugin.
#include "widgets/main_window.h"

#include <QApplication>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#ifndef GKQ_VERSION
#define GKQ_VERSION "unknown"
#endif

namespace {
const char* const kHelp =
    "usage: gkq-workbench [MODEL]\n\n"
    "GKQ Workbench: open a model (safetensors file or folder, GGUF, llama2.c checkpoint) and see what it holds.\n\n"
    "arguments:\n"
    "  MODEL          model file or folder to open (optional)\n\n"
    "options:\n"
    "  -h, --help     show this help and exit\n"
    "  -v, --version  print the version and exit\n\n"
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
    }
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

    const QStringList args = QApplication::arguments().mid(1);
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

    gkq::ui::MainWindow window;
    if (!args.isEmpty() && !window.openModel(args.first())) {
        std::fprintf(stderr, "gkq-workbench: %s\n", qPrintable(window.lastError()));
    }
    window.show();
    return QApplication::exec();
}
