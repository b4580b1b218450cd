// The workbench made steady (issue #19), driven offscreen in the real widgets: opening another model asks first and
// then stops the old model's server, keeps or discards its unsaved tuning and clears its Compare results (Cancel
// keeps all of it); every job ends in a final state (the status bar's job label says done, failed or cancelled);
// Compare shows each preset's row and point as soon as it is measured, runs the base over the text once and defaults
// to the last text evaluated on; Analyze says when the spectra are already there; New from model asks before it
// quantizes; a view without what it works on says what is missing; Saturation defaults to the last text profiled on
// and a minimum frequency that leaves cold neurons.
#include "charts/pareto_chart.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/rknot.h"
#include "jobs/job_runner.h"
#include "models/compare_result_model.h"
#include "models/rknot_tree_model.h"
#include "models/spectrum_store.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/compare_panel.h"
#include "widgets/main_window.h"
#include "widgets/quantize_panel.h"
#include "widgets/reconstruct_panel.h"
#include "widgets/rknot_editor.h"
#include "widgets/saturation_panel.h"
#include "widgets/server_panel.h"
#include "widgets/spectrum_panel.h"

#include <QAbstractButton>
#include <QChart>
#include <QDir>
#include <QFile>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScatterSeries>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QtTest>
#include <cstdio>

using namespace gkq;
using ui::MainWindow;

#define VERIFY_CONTAINS(haystack, needle)        \
    QVERIFY2(QString(haystack).contains(needle), \
             qPrintable(QString(haystack) + QStringLiteral("  [expected: ") + (needle) + "]"))

namespace {
QAbstractButton* buttonOf(QMessageBox* box, const QString& name) {
    return box ? box->findChild<QAbstractButton*>(name) : nullptr;
}

// Points the Pareto chart draws (its scatter series; the front line repeats some of them).
int chartPoints(const ui::ParetoChart& chart) {
    int n = 0;
    for (QAbstractSeries* s : chart.chart()->series())
        if (auto* scatter = qobject_cast<QScatterSeries*>(s)) n += static_cast<int>(scatter->count());
    return n;
}
}  // namespace

class TestWorkbenchSteady : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_demo;   // the bundled demo model (a tokenizer and a text beside it); empty when absent
    QString m_tiny;   // the tiny test model (no tokenizer)
    QString m_text;   // 2 KB of the demo's heldout.txt
    QString m_rknot;  // an rknot of the tiny model, written by the core

    static bool open(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QSignalSpy analyzed(w.spectrumPanel(), &ui::SpectrumPanel::analyzed);
        if (w.openModel(path) == 0) return false;
        return loaded.wait(60000) && (analyzed.count() > 0 || analyzed.wait(120000));
    }

    static bool quantize(ui::QuantizePanel& panel, const QString& preset) {
        panel.setPreset(preset);
        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        if (panel.startQuantize() != 0 && quantized.wait(120000)) return true;
        std::printf("quantize %s: %s\n", qPrintable(preset), qPrintable(panel.statusText()));
        return false;
    }

    static QString modelName(ui::RknotEditor& editor) {
        return editor.treeModel()
            ->indexOfPath(QStringLiteral("model_name"), ui::RknotTreeModel::Value)
            .data()
            .toString();
    }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_workbench_steady"));
        QSettings().clear();
        const std::string tiny = m_dir.file("tiny.safetensors");
        auto m = test::make_tiny_model(test::tiny_config(true));
        QVERIFY(write_safetensors(tiny, m.config, m.tensors).is_ok());
        m_tiny = QString::fromStdString(tiny);

        m_rknot = QString::fromStdString(m_dir.file("tiny.rknot"));
        const Status files =
            test::write_knot_and_rknot(tiny, "paper", m_dir.file("tiny-paper.knot"), m_rknot.toStdString());
        QVERIFY2(files.is_ok(), files.message().c_str());

        m_demo = MainWindow::demoModelPath();
        if (m_demo.isEmpty()) return;
        QFile in(QDir(m_demo).filePath(QStringLiteral("heldout.txt")));
        QVERIFY(in.open(QIODevice::ReadOnly));
        m_text = QString::fromStdString(m_dir.file("eval.txt"));
        QFile out(m_text);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(in.read(2048));
    }

    // Item 1: the server, the unsaved tuning and Compare's results belong to the model that was open.
    void openingAnotherModelAsksFirst() {
        if (m_demo.isEmpty()) QSKIP("needs the bundled demo model (a tokenizer and a text)");
        QSettings().clear();
        MainWindow w;
        QVERIFY(open(w, m_demo));
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("q8_0")));
        ui::ServerPanel* serve = w.serverPanel();
        QCOMPARE(serve->knotPath(), q->lastKnotPath());
#ifdef GKQ_WITH_SERVER
        serve->setPort(0);
        QVERIFY2(serve->start(), qPrintable(serve->statusText()));
#endif
        ui::ComparePanel* compare = w.comparePanel();
        compare->setTextPath(m_text);
        compare->setPresets({QStringLiteral("q8_0")});
        QSignalSpy compared(compare, &ui::ComparePanel::compared);
        QVERIFY(compare->run() != 0);
        QVERIFY(compared.wait(300000));
        QCOMPARE(compare->resultModel()->rowCount(), 1);
        ui::RknotEditor* tuning = w.rknotEditor();
        QVERIFY(tuning->openFile(m_rknot));
        QVERIFY(tuning->treeModel()->setData(
            tuning->treeModel()->indexOfPath(QStringLiteral("model_name"), ui::RknotTreeModel::Value),
            QStringLiteral("edited")));
        QVERIFY(tuning->isModified());

        // Another model: nothing starts until the question is answered; Cancel keeps everything.
        QCOMPARE(w.openModel(m_tiny), quint64{0});
        QMessageBox* box = w.switchPrompt();
        QVERIFY(box != nullptr);
        QVERIFY(!w.runner()->isKeyBusy(QStringLiteral("load")));
        const QString said = box->informativeText();
#ifdef GKQ_WITH_SERVER
        VERIFY_CONTAINS(said, QStringLiteral("The server at %1 stops").arg(serve->url()));
#endif
        VERIFY_CONTAINS(said, QStringLiteral("The tuning %1 has unsaved edits").arg(m_rknot));
        VERIFY_CONTAINS(said, QStringLiteral("Compare's results (1 preset measured on the open model) are cleared"));
        QVERIFY(buttonOf(box, QStringLiteral("keep")) && buttonOf(box, QStringLiteral("discard")));
        buttonOf(box, QStringLiteral("cancel"))->click();
        QVERIFY(w.switchPrompt() == nullptr);
        QCOMPARE(w.modelPath(), m_demo);
#ifdef GKQ_WITH_SERVER
        QVERIFY(serve->isRunning());
#endif
        QVERIFY(tuning->isModified());
        QCOMPARE(compare->resultModel()->rowCount(), 1);

        // Keep the tuning and open: once the model has loaded the server is stopped and forgets the old knot,
        // Compare is empty, and the tuning stays with a line saying whose it was.
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QCOMPARE(w.openModel(m_tiny), quint64{0});
        buttonOf(w.switchPrompt(), QStringLiteral("keep"))->click();
        QVERIFY(loaded.wait(60000));
        QCOMPARE(w.modelPath(), m_tiny);
        QVERIFY(!serve->isRunning());
        QVERIFY(serve->knotPath().isEmpty());
        QCOMPARE(compare->resultModel()->rowCount(), 0);
        QVERIFY(tuning->isModified());
        QCOMPARE(modelName(*tuning), QStringLiteral("edited"));
        VERIFY_CONTAINS(tuning->lastMessage(),
                        QStringLiteral("Kept the unsaved edits of %1, made while %2 was open").arg(m_rknot, m_demo));

        // Back to the demo, discarding the tuning: it goes back to its file. Nothing else is left to lose.
        QCOMPARE(w.openModel(m_demo), quint64{0});
        box = w.switchPrompt();
        QVERIFY(box != nullptr);
        QVERIFY2(!box->informativeText().contains(QStringLiteral("server")), qPrintable(box->informativeText()));
        buttonOf(box, QStringLiteral("discard"))->click();
        QVERIFY(loaded.wait(60000));
        QCOMPARE(w.modelPath(), m_demo);
        QVERIFY(!tuning->isModified());
        QCOMPARE(modelName(*tuning), QStringLiteral("tiny"));

        // Nothing of the open model's to lose: the next open starts at once.
        QVERIFY(w.switchLosses().isEmpty());
        QVERIFY(w.openModel(m_tiny) != 0);
        QVERIFY(w.switchPrompt() == nullptr);
        QVERIFY(loaded.wait(60000));
    }

    // Item 2: the status bar's job label, and each panel's bar and line, end in done, failed or cancelled.
    void everyJobEndsInAFinalState() {
        QSettings().clear();
        MainWindow w;
        QVERIFY(open(w, m_tiny));
        QTRY_COMPARE_WITH_TIMEOUT(w.jobStatusText(), QStringLiteral("Analyzing spectra: done"), 60000);
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("q8_0")));
        QTRY_COMPARE_WITH_TIMEOUT(w.jobStatusText(), QStringLiteral("Quantizing (q8_0): done"), 60000);

        const QString to = QString::fromStdString(m_dir.file("exported.knot"));
        QSignalSpy exported(q, &ui::QuantizePanel::exported);
        QVERIFY(q->exportKnot(to) != 0);
        QVERIFY(exported.wait(60000));
        QTRY_COMPARE_WITH_TIMEOUT(w.jobStatusText(), QStringLiteral("Exporting knot: done"), 60000);
        QCOMPARE(q->progressBar()->value(), q->progressBar()->maximum());
        QCOMPARE(q->statusText(), QStringLiteral("Exported %1").arg(to));

        // Reconstruct (the same job watch as Compare and Saturation): done, the bar full, the line in words.
        ui::ReconstructPanel* rebuild = w.reconstructPanel();
        QVERIFY(rebuild->setKnotPath(q->lastKnotPath()));
        rebuild->setSelectedTensors({QStringLiteral("model.layers.0.mlp.up_proj.weight")});
        rebuild->setRuns(1);
        QSignalSpy rebuilt(rebuild, &ui::ReconstructPanel::reconstructed);
        QVERIFY(rebuild->start() != 0);
        QVERIFY(rebuilt.wait(120000));
        QTRY_COMPARE_WITH_TIMEOUT(w.jobStatusText(), QStringLiteral("Reconstructing on every backend: done"), 60000);
        QCOMPARE(rebuild->progressBar()->value(), rebuild->progressBar()->maximum());
        QVERIFY2(rebuild->statusText().startsWith(QStringLiteral("Done: ")), qPrintable(rebuild->statusText()));

        // A failure: the line says what failed, never a step; the bar is empty.
        const QString missing = QString::fromStdString(m_dir.file("missing.txt"));
        QSignalSpy errors(q, &ui::QuantizePanel::errorOccurred);
        QVERIFY(q->evaluate(missing) != 0);
        QVERIFY(errors.wait(60000));
        QTRY_COMPARE_WITH_TIMEOUT(w.jobStatusText(), QStringLiteral("Evaluating (KLD): failed"), 60000);
        VERIFY_CONTAINS(q->statusText(), missing);
        QVERIFY2(!q->statusText().contains(QStringLiteral("% —")), qPrintable(q->statusText()));
        QCOMPARE(q->progressBar()->value(), 0);

        // Cancelled at once.
        QSignalSpy cancelled(q, &ui::QuantizePanel::quantizeCancelled);
        QVERIFY(q->startQuantize() != 0);
        q->cancelButton()->click();
        QVERIFY(cancelled.count() > 0 || cancelled.wait(60000));
        QTRY_COMPARE_WITH_TIMEOUT(w.jobStatusText(), QStringLiteral("Quantizing (q8_0): cancelled"), 60000);
        QCOMPARE(q->statusText(), QStringLiteral("Cancelled; no knot was written"));
        QCOMPARE(q->progressBar()->value(), 0);
    }

    // Item 3: each preset as soon as it is measured, the base over the text once, the last text by default.
    void compareShowsEachPresetAsItIsMeasured() {
        if (m_demo.isEmpty()) QSKIP("needs the bundled demo model (a tokenizer and a text)");
        QSettings().clear();
        MainWindow w;
        QVERIFY(open(w, m_demo));
        ui::ComparePanel* compare = w.comparePanel();
        QCOMPARE(compare->textPath(), QDir(m_demo).filePath(QStringLiteral("heldout.txt")));  // nothing used yet
        compare->setTextPath(m_text);
        compare->setPresets({QStringLiteral("q8_0"), QStringLiteral("q4_0")});
        struct Seen {
            bool running;
            int rows;
            int points;
        };
        std::vector<Seen> seen;
        connect(compare, &ui::ComparePanel::pointAdded, this, [&](int row) {
            QCOMPARE(row, static_cast<int>(seen.size()));
            seen.push_back({compare->isRunning(), compare->resultModel()->rowCount(), chartPoints(*compare->chart())});
        });
        QSignalSpy compared(compare, &ui::ComparePanel::compared);
        QVERIFY(compare->run() != 0);
        QVERIFY(compared.wait(300000));
        QCOMPARE(seen.size(), size_t{2});
        QVERIFY(seen[0].running);  // the first preset was shown while the second was still being measured
        QCOMPARE(seen[0].rows, 1);
        QCOMPARE(seen[0].points, 1);
        QCOMPARE(seen[1].rows, 2);
        QCOMPARE(compare->resultModel()->rowCount(), 2);
        QCOMPARE(chartPoints(*compare->chart()), 2);
        QCOMPARE(compare->resultModel()->points()[0].preset, QStringLiteral("q8_0"));
        QCOMPARE(compare->basePasses(), qint64{1});
        VERIFY_CONTAINS(compare->statusText(), QStringLiteral("the base model ran over the text once"));

        // The text evaluated on is the default for the next model, here and in a new window.
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QCOMPARE(w.openModel(m_tiny), quint64{0});  // Compare's results would go: it asks first
        QVERIFY(buttonOf(w.switchPrompt(), QStringLiteral("open")) != nullptr);
        buttonOf(w.switchPrompt(), QStringLiteral("open"))->click();
        QVERIFY(loaded.wait(60000));
        QCOMPARE(w.modelPath(), m_tiny);
        QCOMPARE(compare->textPath(), m_text);
        {
            MainWindow other;
            QVERIFY(open(other, m_demo));
            QCOMPARE(other.comparePanel()->textPath(), m_text);
        }
        // Evaluate in the Quantize view sets it too.
        QVERIFY(open(w, m_demo));
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("q8_0")));
        const QString second = QString::fromStdString(m_dir.file("eval-2.txt"));
        QVERIFY(QFile::copy(m_text, second));
        QSignalSpy evaluated(q, &ui::QuantizePanel::evaluated);
        QVERIFY(q->evaluate(second) != 0);
        QVERIFY(evaluated.wait(120000));
        QVERIFY(open(w, m_tiny));
        QCOMPARE(compare->textPath(), second);
    }

    // Item 4: Analyze, New from model and the views without what they need all say something.
    void viewsSayWhatIsMissing() {
        QSettings().clear();
        MainWindow w;
        QTabWidget* tabs = w.tabs();
        for (int i = 0; i < tabs->count(); ++i) QVERIFY(tabs->isTabEnabled(i));
        tabs->setCurrentIndex(MainWindow::OverviewTab);
        QCOMPARE(w.viewNotice(), QString());
        for (int tab : {MainWindow::SpectrumTab, MainWindow::QuantizeTab, MainWindow::CompareTab,
                        MainWindow::SaturationTab, MainWindow::TuningTab}) {
            tabs->setCurrentIndex(tab);
            VERIFY_CONTAINS(w.viewNotice(), QStringLiteral("No model open"));
        }
        tabs->setCurrentIndex(MainWindow::ReconstructTab);
        VERIFY_CONTAINS(w.viewNotice(), QStringLiteral("No knot yet"));
        tabs->setCurrentIndex(MainWindow::ServeTab);
#ifdef GKQ_WITH_SERVER
        VERIFY_CONTAINS(w.viewNotice(), QStringLiteral("No knot yet"));
#else
        VERIFY_CONTAINS(w.viewNotice(), QStringLiteral("no HTTP server"));
#endif
        tabs->setCurrentIndex(MainWindow::SpectrumTab);
        QVERIFY(open(w, m_tiny));
        QCOMPARE(w.viewNotice(), QString());
        tabs->setCurrentIndex(MainWindow::ReconstructTab);
        VERIFY_CONTAINS(w.viewNotice(), QStringLiteral("No knot yet"));

        // Analyze once more: the spectra are there, and the view says so instead of doing nothing.
        ui::SpectrumPanel* spectrum = w.spectrumPanel();
        const int n = spectrum->store()->size();
        QVERIFY(n > 0);
        VERIFY_CONTAINS(spectrum->statusText(), QStringLiteral("the spectra of %1 matrices").arg(n));
        QCOMPARE(spectrum->analyze(), quint64{0});
        QVERIFY(!w.runner()->isKeyBusy(QStringLiteral("analyze")));
        QCOMPARE(spectrum->statusText(),
                 QStringLiteral("Already analyzed: the spectra of all %1 matrices are shown; select a tensor in "
                                "the model browser")
                     .arg(n));

        // New from model without a knot asks; Cancel quantizes nothing, the answer Quantize makes the rknot.
        ui::RknotEditor* tuning = w.rknotEditor();
        ui::QuantizePanel* q = w.quantizePanel();
        q->setPreset(QStringLiteral("paper"));
        tuning->newButton()->click();
        QVERIFY(tuning->quantizePrompt() != nullptr);
        VERIFY_CONTAINS(tuning->quantizePrompt()->text(), QStringLiteral("preset paper"));
        QVERIFY(!w.runner()->isKeyBusy(QStringLiteral("quantize")));
        buttonOf(tuning->quantizePrompt(), QStringLiteral("cancel"))->click();
        QVERIFY(tuning->quantizePrompt() == nullptr);
        QVERIFY(!w.runner()->isKeyBusy(QStringLiteral("quantize")));
        QVERIFY(!tuning->isEncoding());
        VERIFY_CONTAINS(tuning->lastMessage(), QStringLiteral("No rknot made"));
        QSignalSpy encoded(tuning, &ui::RknotEditor::encoded);
        tuning->newButton()->click();
        buttonOf(tuning->quantizePrompt(), QStringLiteral("quantize"))->click();
        QVERIFY(w.runner()->isKeyBusy(QStringLiteral("quantize")));
        QTRY_COMPARE_WITH_TIMEOUT(encoded.count(), 1, 120000);
        QVERIFY(tuning->treeModel()->hasRknot());
        // With a knot there is nothing to ask: a new rknot of that knot (the unsaved one is refused offscreen).
        QVERIFY(!q->lastKnotPath().isEmpty());
        QCOMPARE(w.viewNotice(), QString());  // Reconstruct now lists the knot's tensors
    }

    // Item 6: the last text profiled on, and a minimum frequency at which not every neuron is hot.
    void saturationDefaultsToTheLastTextAndColdNeurons() {
        if (m_demo.isEmpty()) QSKIP("needs the bundled demo model (a tokenizer and a text)");
        QSettings().clear();
        auto model = ModelFile::open(m_demo.toStdString());
        QVERIFY2(model.is_ok(), model.message().c_str());
        const auto weights = std::make_shared<ModelFile>(std::move(model).value());
        ui::JobRunner runner;
        {
            ui::SaturationPanel panel(&runner);
            QCOMPARE(panel.minFrequency(), 0.1);
            panel.setModel(weights);
            QCOMPARE(panel.textPath(), QDir(m_demo).filePath(QStringLiteral("heldout.txt")));
            panel.setTextPath(m_text);
            panel.setMaxTokens(400);
            QSignalSpy profiled(&panel, &ui::SaturationPanel::profiled);
            QVERIFY(panel.startProfile() != 0);
            QVERIFY(profiled.wait(120000));
            const SaturationProfile& p = *panel.currentProfile();
            QCOMPARE(p.min_frequency, 0.1);
            int64_t hot = 0, total = 0, everHot = 0;
            for (const LayerSaturation& l : p.layers) {
                hot += l.hot_count();
                total += l.neuron_count;
                for (uint64_t c : l.counts) everHot += c > 0 ? 1 : 0;
            }
            std::printf("saturation on %lld tokens: %lld of %lld neurons hot at frequency > 0.1, %lld at > 0\n",
                        static_cast<long long>(p.n_tokens), static_cast<long long>(hot), static_cast<long long>(total),
                        static_cast<long long>(everHot));
            QVERIFY(hot > 0);
            QVERIFY(2 * hot < total);  // a mask, not every neuron: most neurons that saturated stay cold
            QVERIFY(hot < everHot);
        }
        ui::SaturationPanel next(&runner);
        next.setModel(weights);
        QCOMPARE(next.textPath(), m_text);
    }
};

QTEST_MAIN(TestWorkbenchSteady)
#include "test_workbench_steady.moc"
