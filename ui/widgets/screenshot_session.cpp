#include "widgets/screenshot_session.h"

#include "gkq/codec.h"
#include "jobs/job_runner.h"
#include "models/rknot_tree_model.h"
#include "models/spectrum_store.h"
#include "widgets/compare_panel.h"
#include "widgets/main_window.h"
#include "widgets/model_browser.h"
#include "widgets/quantize_panel.h"
#include "widgets/reconstruct_panel.h"
#include "widgets/rknot_editor.h"
#include "widgets/saturation_panel.h"
#include "widgets/server_panel.h"
#include "widgets/spectrum_panel.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QPixmap>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTreeView>
#include <functional>

namespace gkq::ui {

namespace {
// Runs the event loop until `done` holds or the deadline passes.
bool waitUntil(const std::function<bool()>& done, QDeadlineTimer deadline) {
    while (!done()) {
        if (deadline.hasExpired()) return false;
        QCoreApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents, 50);
    }
    return true;
}

bool save(MainWindow& window, const QString& path, QStringList& written, QString* error) {
    QCoreApplication::processEvents();
    if (!window.grab().save(path, "PNG")) {
        *error = QStringLiteral("cannot write %1").arg(path);
        return false;
    }
    written << path;
    return true;
}
}  // namespace

QStringList renderScreenshots(MainWindow& window, const QString& modelPath, const QString& outDir, QString* error,
                              int timeoutMs, const QString& preset) {
    QStringList written;
    const QDeadlineTimer deadline(timeoutMs);
    if (!QDir().mkpath(outDir)) {
        *error = QStringLiteral("cannot create %1").arg(outDir);
        return {};
    }
    const QDir dir(outDir);
    window.resize(1440, 900);
    window.show();

    bool loaded = false;
    QString failure;
    QObject::connect(&window, &MainWindow::modelLoaded, &window, [&loaded] { loaded = true; });
    QObject::connect(&window, &MainWindow::loadFailed, &window, [&failure](const QString& m) { failure = m; });
    window.openModel(modelPath);
    SpectrumPanel* spectrum = window.spectrumPanel();
    if (!waitUntil([&] { return !failure.isEmpty() || (loaded && !window.runner()->isBusy()); }, deadline) ||
        !failure.isEmpty() || spectrum->store()->isEmpty()) {
        *error =
            failure.isEmpty() ? QStringLiteral("timed out or no spectra while opening %1").arg(modelPath) : failure;
        return {};
    }

    // The FFN up-projections (else the first analyzed role): layer 1 selected, the first and last layers overlaid.
    TensorRole role = TensorRole::FfnUp;
    auto spectra = spectrum->store()->byRole(role);
    if (spectra.empty()) {
        role = spectrum->store()->roles().front();
        spectra = spectrum->store()->byRole(role);
    }
    const auto name = [](const auto& s) { return QString::fromStdString(s->name); };
    const QString focus = name(spectra[std::min<size_t>(1, spectra.size() - 1)]);

    window.tabs()->setCurrentIndex(MainWindow::OverviewTab);
    window.browser()->selectTensor(focus);
    if (!save(window, dir.filePath(QStringLiteral("overview.png")), written, error)) return {};

    window.tabs()->setCurrentIndex(MainWindow::SpectrumTab);
    window.browser()->selectTensor(name(spectra.front()));
    spectrum->pinCurrent();
    window.browser()->selectTensor(name(spectra.back()));
    spectrum->pinCurrent();
    window.browser()->selectTensor(focus);
    spectrum->setHeatMapRole(role);
    if (!save(window, dir.filePath(QStringLiteral("spectrum.png")), written, error)) return {};

    window.tabs()->setCurrentIndex(MainWindow::QuantizeTab);
    QuantizePanel* quantize = window.quantizePanel();
    quantize->setPreset(preset);
    if (quantize->preset() != preset) {
        *error = QStringLiteral("no preset %1").arg(preset);
        return {};
    }
    bool quantized = false;
    QObject::connect(quantize, &QuantizePanel::quantized, &window, [&quantized] { quantized = true; });
    if (quantize->startQuantize() == 0 ||
        !waitUntil([&] { return quantized || !window.lastError().isEmpty(); }, deadline) || !quantized) {
        *error = window.lastError().isEmpty() ? QStringLiteral("quantization did not finish") : window.lastError();
        return {};
    }
    // Evaluate on the first 8 KB of the held-out text beside the model, when there is one (the demo has it).
    QTemporaryDir scratch;
    QFile heldout(QDir(modelPath).filePath(QStringLiteral("heldout.txt")));
    if (scratch.isValid() && heldout.open(QIODevice::ReadOnly)) {
        const QString textPath = scratch.filePath(QStringLiteral("heldout-first-8KB.txt"));
        QFile text(textPath);
        if (!text.open(QIODevice::WriteOnly) || text.write(heldout.read(8192)) <= 0) {
            *error = QStringLiteral("cannot write %1").arg(textPath);
            return {};
        }
        text.close();
        bool evaluated = false;
        QObject::connect(quantize, &QuantizePanel::evaluated, &window, [&evaluated] { evaluated = true; });
        if (quantize->evaluate(textPath) == 0 ||
            !waitUntil([&] { return evaluated || !window.lastError().isEmpty(); }, deadline) || !evaluated) {
            *error = window.lastError().isEmpty() ? QStringLiteral("evaluation did not finish") : window.lastError();
            return {};
        }
    }
    if (!save(window, dir.filePath(QStringLiteral("quantize.png")), written, error)) return {};
    // The same run as the layer x role heat map of methods, then back to the table.
    quantize->resultTabs()->setCurrentIndex(1);
    if (!save(window, dir.filePath(QStringLiteral("quantize-layers.png")), written, error)) return {};
    quantize->resultTabs()->setCurrentIndex(0);

    // Compare every preset on the same 8 KB of text.
    if (QFileInfo::exists(scratch.filePath(QStringLiteral("heldout-first-8KB.txt")))) {
        window.tabs()->setCurrentIndex(MainWindow::CompareTab);
        ComparePanel* compare = window.comparePanel();
        QStringList all;
        for (const std::string& p : preset_names()) all << QString::fromStdString(p);
        compare->setPresets(all);
        compare->setTextPath(scratch.filePath(QStringLiteral("heldout-first-8KB.txt")));
        bool compared = false;
        QObject::connect(compare, &ComparePanel::compared, &window, [&compared] { compared = true; });
        if (compare->run() == 0 || !waitUntil([&] { return compared || !window.lastError().isEmpty(); }, deadline) ||
            !compared) {
            *error = window.lastError().isEmpty() ? QStringLiteral("comparison did not finish") : window.lastError();
            return {};
        }
        if (!save(window, dir.filePath(QStringLiteral("compare.png")), written, error)) return {};
    }

    // Saturation masks of the first 1024 tokens of the panel's calibration text (heldout.txt beside the model).
    SaturationPanel* saturation = window.saturationPanel();
    if (!saturation->textPath().isEmpty()) {
        window.tabs()->setCurrentWidget(saturation);
        saturation->setMaxTokens(1024);
        bool profiled = false;
        QObject::connect(saturation, &SaturationPanel::profiled, &window, [&profiled] { profiled = true; });
        if (saturation->startProfile() == 0 ||
            !waitUntil([&] { return profiled || !saturation->errorText().isEmpty(); }, deadline) || !profiled) {
            *error = saturation->errorText().isEmpty() ? QStringLiteral("saturation profile did not finish")
                                                       : saturation->errorText();
            return {};
        }
        if (!save(window, dir.filePath(QStringLiteral("saturation.png")), written, error)) return {};
    }

    // The rknot of that knot (spectra of the model's matrices) in the Tuning view, the focus tensor's entry
    // opened.
    RknotEditor* tuning = window.rknotEditor();
    if (!quantize->lastKnotPath().isEmpty()) {
        window.tabs()->setCurrentWidget(tuning);
        bool encoded = false;
        QString failed;
        QObject::connect(tuning, &RknotEditor::encoded, &window, [&encoded] { encoded = true; });
        QObject::connect(tuning, &RknotEditor::errorOccurred, &window, [&failed](const QString& m) { failed = m; });
        if (tuning->newFromOpenModel(true) == 0 || !waitUntil([&] { return encoded || !failed.isEmpty(); }, deadline) ||
            !encoded) {
            *error = failed.isEmpty() ? QStringLiteral("the rknot was not encoded") : failed;
            return {};
        }
        const RknotTreeModel* tree = tuning->treeModel();
        const QModelIndex layers = tree->indexOfPath(QStringLiteral("folded_waves.layers"));
        tuning->view()->expand(layers);
        for (size_t i = 0; i < tree->rknot().layers.size(); ++i)
            if (QString::fromStdString(tree->rknot().layers[i].tensor) == focus) {
                const QModelIndex entry = tree->index(static_cast<int>(i), 0, layers);
                tuning->view()->expand(entry);
                tuning->view()->scrollTo(entry, QAbstractItemView::PositionAtTop);
            }
        if (!save(window, dir.filePath(QStringLiteral("tuning.png")), written, error)) return {};
    }

    // Reconstruct the focus tensor of the quantized knot on every backend (the panel holds the Quantize knot).
    ReconstructPanel* reconstruct = window.reconstructPanel();
    if (!reconstruct->knotPath().isEmpty()) {
        window.tabs()->setCurrentWidget(reconstruct);
        QStringList pick{focus};
        for (const QString& t : reconstruct->tensorNames())
            if (pick.size() < 2 && t != focus) pick << t;
        reconstruct->setSelectedTensors(pick);
        bool rebuilt = false;
        QString failed;
        QObject::connect(reconstruct, &ReconstructPanel::reconstructed, &window, [&rebuilt] { rebuilt = true; });
        QObject::connect(reconstruct, &ReconstructPanel::errorOccurred, &window,
                         [&failed](const QString& m) { failed = m; });
        if (reconstruct->start() == 0 || !waitUntil([&] { return rebuilt || !failed.isEmpty(); }, deadline) ||
            !rebuilt) {
            *error = failed.isEmpty() ? QStringLiteral("reconstruction did not finish") : failed;
            return {};
        }
        if (!save(window, dir.filePath(QStringLiteral("reconstruct.png")), written, error)) return {};
    }

#ifdef GKQ_WITH_SERVER  // a build without the server only says so in the Serve tab
    // Serve the knot on a free port: one greedy prompt, then a few seconds of its metrics.
    ServerPanel* serve = window.serverPanel();
    if (!serve->knotPath().isEmpty()) {
        window.tabs()->setCurrentWidget(serve);
        serve->setPort(0);
        if (!serve->start()) {
            *error = serve->statusText();
            return {};
        }
        QString failed;
        bool answered = false;
        QObject::connect(serve, &ServerPanel::errorOccurred, &window, [&failed](const QString& m) { failed = m; });
        QObject::connect(serve, &ServerPanel::answerReceived, &window, [&answered] { answered = true; });
        if (waitUntil([&] { return serve->isHealthy() || !failed.isEmpty(); }, deadline) && serve->isHealthy()) {
            serve->setPrompt(QStringLiteral("Once upon a time"));
            serve->setTemperature(0.0);
            serve->sendPrompt();
            const int scrapes = serve->scrapeCount();
            waitUntil([&] { return (answered && serve->scrapeCount() >= scrapes + 4) || !failed.isEmpty(); }, deadline);
        }
        const bool ok =
            failed.isEmpty() && answered && save(window, dir.filePath(QStringLiteral("serve.png")), written, error);
        serve->stop();
        if (!ok) {
            if (!failed.isEmpty())
                *error = failed;
            else if (error->isEmpty())
                *error = QStringLiteral("the server did not answer");
            return {};
        }
    }
#endif
    return written;
}

}  // namespace gkq::ui
