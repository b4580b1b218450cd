// A whole workbench session in the real main window, offscreen, driven as a user would: open the demo model
// (the tiny test model when the demo is absent) -> spectra analyzed -> select a tensor and move the rank ->
// quantize with lowrank-q4 (measuring the worst event-loop stall meanwhile) -> export the knot and verify it ->
// evaluate the knot (KLD on 4 KB of the demo's held-out text) -> reconstruct a model from it and reopen that in the
// window. Also: Cancel, a failed open, drag and drop, recent files.
#include "charts/pareto_chart.h"
#include "charts/rank_stats.h"
#include "charts/spectrum_chart.h"
#include "charts/spectrum_heat_map.h"
#include "gkq/knot.h"
#include "gkq/model_writer.h"
#include "jobs/job_runner.h"
#include "jobs/stall_meter.h"
#include "models/display_format.h"
#include "models/model_tree_model.h"
#include "models/quant_result_model.h"
#include "models/spectrum_store.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/compare_panel.h"
#include "widgets/main_window.h"
#include "widgets/model_browser.h"
#include "widgets/quantize_panel.h"
#include "widgets/spectrum_panel.h"

#include <QAbstractItemModelTester>
#include <QAbstractSeries>
#include <QApplication>
#include <QChart>
#include <QDir>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QThread>
#include <QtTest>
#include <cmath>
#include <cstdio>

using namespace gkq;
using ui::MainWindow;

class TestWorkbenchSession : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_model;

    // Opens `path` in `w` and waits until it is loaded and analyzed.
    static bool openAndAnalyze(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QSignalSpy analyzed(w.spectrumPanel(), &ui::SpectrumPanel::analyzed);
        w.openModel(path);
        return loaded.wait(60000) && (analyzed.count() > 0 || analyzed.wait(120000));
    }

    // 1-minute load average (0 when unknown).
    static double machineLoad() {
        QFile f(QStringLiteral("/proc/loadavg"));
        if (!f.open(QIODevice::ReadOnly)) return 0.0;
        return f.readAll().split(' ').value(0).toDouble();
    }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_workbench_session"));
        QSettings().clear();
        m_model = MainWindow::demoModelPath();
        if (m_model.isEmpty()) {
            const std::string path = m_dir.file("tiny.safetensors");
            auto m = test::make_tiny_model(test::tiny_config(true));
            QVERIFY(write_safetensors(path, m.config, m.tensors).is_ok());
            m_model = QString::fromStdString(path);
        }
        std::printf("session model: %s\n", qPrintable(m_model));
    }

    void wholeSession() {
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QVERIFY(openAndAnalyze(w, m_model));
        QVERIFY(w.lastError().isEmpty());
        QCOMPARE(w.recentFiles().value(0), QFileInfo(m_model).absoluteFilePath());
        QAbstractItemModelTester treeTester(w.browser()->treeModel(),
                                            QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester proxyTester(w.browser()->proxyModel(),
                                             QAbstractItemModelTester::FailureReportingMode::QtTest);

        // Select an FFN up-projection in the browser: the spectrum view follows it.
        ui::SpectrumPanel* spectrum = w.spectrumPanel();
        const auto ups = spectrum->store()->byRole(TensorRole::FfnUp);
        QVERIFY(ups.size() >= 2);
        const TensorSpectrum& s = *ups[1];
        const QString name = QString::fromStdString(s.name);
        QVERIFY(w.browser()->selectTensor(name));
        QCOMPARE(spectrum->currentTensor(), name);
        QCOMPARE(spectrum->chart()->seriesCount(), 3);  // singular values, energy curve, rank marker
        QCOMPARE(spectrum->rank(), static_cast<int>(s.metrics.rank_90));
        // Pinned and overlaid: each curve's legend names its layer and role ("layer 0 ffn_up"), never the same text
        // twice.
        {
            QVERIFY(w.browser()->selectTensor(QString::fromStdString(ups[0]->name)));
            spectrum->pinCurrent();
            QVERIFY(w.browser()->selectTensor(name));
            QStringList legends;
            for (QAbstractSeries* series : spectrum->chart()->chart()->series()) legends << series->name();
            QVERIFY2(legends.contains(QStringLiteral("layer %1 ffn_up").arg(s.layer)), qPrintable(legends.join('|')));
            QVERIFY2(legends.contains(QStringLiteral("layer %1 ffn_up").arg(ups[0]->layer)),
                     qPrintable(legends.join('|')));
            QCOMPARE(legends.removeDuplicates(), 0);
            spectrum->clearOverlay();
        }

        // The rank readout is exact: compare with the core's functions at a rank we choose.
        const int k = 7;
        spectrum->setRank(k);
        const auto n = static_cast<int64_t>(s.singular_values.size());
        const double err = relative_error_at_rank(s.singular_values.data(), n, k);
        const double kept = top_k_energy(s.singular_values.data(), n, k);
        const double bpw32 = k * double(s.rows + s.cols + 1) * 32 / (double(s.rows) * s.cols);
        QVERIFY2(spectrum->rankText().contains(ui::formatNumber(err, 6)), qPrintable(spectrum->rankText()));
        QVERIFY(spectrum->rankText().contains(ui::formatNumber(100.0 * kept, 6)));
        QVERIFY(spectrum->rankText().contains(ui::formatNumber(bpw32)));
        QVERIFY(spectrum->metricsText().contains(QStringLiteral("stable rank")));
        QVERIFY(spectrum->metricsText().contains(s.heavy_tail.power_law.reliable ? QStringLiteral("reliable")
                                                                                 : QStringLiteral("unreliable")));

        // Overlay and heat map.
        spectrum->pinCurrent();
        QVERIFY(w.browser()->selectTensor(QString::fromStdString(ups[0]->name)));
        QCOMPARE(spectrum->overlay(), QStringList{name});
        QCOMPARE(spectrum->chart()->seriesCount(), 4);
        spectrum->setHeatMapRole(TensorRole::FfnUp);
        QCOMPARE(spectrum->heatMap()->rowCount(), static_cast<int>(ups.size()));
        QVERIFY(!spectrum->grab().isNull());

        // Quantize with lowrank-q4 while measuring the event loop.
        ui::QuantizePanel* quantize = w.quantizePanel();
        w.tabs()->setCurrentWidget(quantize);
        quantize->setPreset(QStringLiteral("lowrank-q4"));
        QVERIFY(!quantize->evaluateButton()->isEnabled());  // nothing to evaluate before a knot exists
        QSignalSpy quantized(quantize, &ui::QuantizePanel::quantized);
        QSignalSpy progress(w.runner(), &ui::JobRunner::progressChanged);
        ui::StallMeter meter;
        meter.start();
        QVERIFY(quantize->startQuantize() != 0);
        QVERIFY(quantize->cancelButton()->isEnabled());
        QVERIFY(quantized.wait(300000));
        meter.stop();
        std::printf("worst event-loop stall during quantization: %.1f ms (%lld ticks of %d ms)\n", meter.worstStallMs(),
                    static_cast<long long>(meter.ticks()), ui::StallMeter::kIntervalMs);
        QVERIFY(progress.count() > 0);
        QCOMPARE(quantize->progressBar()->value(), 1000);
        // The event loop must not block for 100 ms. On a machine whose run queue is far longer than its core count
        // the GUI thread waits for a CPU whatever the program does, so the bound is only asserted when it can hold.
        const double load = machineLoad();
        const int cores = QThread::idealThreadCount();
        if (load <= 2.0 * cores)
            QVERIFY2(meter.worstStallMs() < 100.0, qPrintable(QString::number(meter.worstStallMs())));
        else
            std::printf("not asserting the 100 ms bound: load average %.1f on %d cores\n", load, cores);
        QVERIFY(quantize->lastReport().has_value());
        const QuantizeReport& report = *quantize->lastReport();
        QCOMPARE(report.preset, std::string("lowrank-q4"));
        QCOMPARE(quantize->resultModel()->rowCount(), static_cast<int>(w.model()->n_tensors()));
        QAbstractItemModelTester resultTester(quantize->resultModel(),
                                              QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(quantize->totalsText().contains(ui::formatNumber(report.bits_per_weight())));

        // Evaluate the knot against the model (the demo model has a tokenizer and held-out text; 4 KB of it).
        QVERIFY(quantize->evaluateButton()->isEnabled());
        const QString heldout = QDir(m_model).filePath(QStringLiteral("heldout.txt"));
        if (QFileInfo::exists(heldout)) {
            QFile in(heldout);
            QVERIFY(in.open(QIODevice::ReadOnly));
            const QString textPath = QString::fromStdString(m_dir.file("eval.txt"));
            QFile out(textPath);
            QVERIFY(out.open(QIODevice::WriteOnly));
            out.write(in.read(4096));
            out.close();
            QSignalSpy evaluated(quantize, &ui::QuantizePanel::evaluated);
            QVERIFY(quantize->evaluate(textPath) != 0);
            QVERIFY(evaluated.wait(300000));
            QVERIFY(quantize->lastEvaluation().has_value());
            const EvalReport& e = *quantize->lastEvaluation();
            QVERIFY(e.compared);
            QVERIFY(e.n_tokens > 0);
            QVERIFY(std::isfinite(e.compare.mean_kld) && e.compare.mean_kld > 0.0);  // lowrank-q4 is lossy
            QVERIFY2(quantize->evaluationText().contains(QString::number(e.compare.mean_kld, 'f', 6)),
                     qPrintable(quantize->evaluationText()));
            std::printf("evaluate: %lld tokens, mean KLD %.6f ± %.6f, same top %.3f %%\n",
                        static_cast<long long>(e.n_tokens), e.compare.mean_kld, e.compare.mean_kld_se,
                        100.0 * e.compare.same_top);
        } else {
            std::printf("evaluate: skipped (no heldout.txt beside %s)\n", qPrintable(m_model));
        }

        // Export the knot; it opens and holds every tensor.
        QSignalSpy exported(quantize, &ui::QuantizePanel::exported);
        const QString knotPath = QString::fromStdString(m_dir.file("session.knot"));
        QVERIFY(quantize->exportKnot(knotPath) != 0);
        QVERIFY(exported.wait(60000));
        QCOMPARE(exported.last().at(0).toString(), knotPath);
        auto knot = KnotFile::open(knotPath.toStdString());
        QVERIFY2(knot.is_ok(), knot.message().c_str());
        QCOMPARE(knot->n_records(), w.model()->n_tensors());
        QCOMPARE(knot->file_bytes(), report.file_bytes);

        // Reconstruct it to safetensors and reopen that in the window.
        const QString rebuilt = QString::fromStdString(m_dir.file("rebuilt.safetensors"));
        QVERIFY(quantize->exportReconstructed(rebuilt) != 0);
        QVERIFY(exported.wait(120000));
        const size_t nTensors = w.model()->n_tensors();
        QVERIFY(openAndAnalyze(w, rebuilt));
        QCOMPARE(w.modelPath(), rebuilt);
        QCOMPARE(w.model()->n_tensors(), nTensors);
        // Open Recent: the files opened and the ones exported, newest first.
        QCOMPARE(w.recentFiles().mid(0, 3),
                 (QStringList{QFileInfo(rebuilt).absoluteFilePath(), QFileInfo(knotPath).absoluteFilePath(),
                              QFileInfo(m_model).absoluteFilePath()}));
    }

    // The same session on the real pretrained checkpoints in ../shared/models (llama2.c files, with their tokenizer
    // beside them): open -> analyze -> quantize (lowrank-q4) -> evaluate on 2 KB of text -> export the knot -> open it.
    void sharedCheckpointSession_data() {
        QTest::addColumn<QString>("relative");
        QTest::newRow("llama2xs-279K") << QStringLiteral("llama2xs-279K/model.bin");
        QTest::newRow("babyllama-tok105") << QStringLiteral("babyllama-tok105/model5000.bin");
    }
    void sharedCheckpointSession() {
        QFETCH(QString, relative);
        const auto path = test::shared_model(relative.toStdString());
        if (!path) QSKIP(test::shared_models_skip_reason(relative.toStdString()).c_str());
        const QString heldout = QDir(MainWindow::demoModelPath()).filePath(QStringLiteral("heldout.txt"));
        if (!QFileInfo::exists(heldout)) QSKIP("needs the demo's heldout.txt as the evaluation text");
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        const QString model = QString::fromStdString(*path);
        QVERIFY(openAndAnalyze(w, model));
        QVERIFY2(w.lastError().isEmpty(), qPrintable(w.lastError()));
        const size_t nTensors = w.model()->n_tensors();
        QVERIFY(!w.spectrumPanel()->store()->byRole(TensorRole::FfnUp).empty());

        ui::QuantizePanel* quantize = w.quantizePanel();
        quantize->setPreset(QStringLiteral("lowrank-q4"));
        QSignalSpy quantized(quantize, &ui::QuantizePanel::quantized);
        QVERIFY(quantize->startQuantize() != 0);
        QVERIFY(quantized.wait(300000));
        QCOMPARE(quantize->resultModel()->rowCount(), static_cast<int>(nTensors));

        // The tokenizer (tok512.bin / tok105.bin) is found beside the checkpoint, as `gkq eval` finds it.
        QFile in(heldout);
        QVERIFY(in.open(QIODevice::ReadOnly));
        const QString textPath = QString::fromStdString(m_dir.file("shared-eval.txt"));
        QFile out(textPath);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(in.read(2048));
        out.close();
        QSignalSpy evaluated(quantize, &ui::QuantizePanel::evaluated);
        QSignalSpy failed(quantize, &ui::QuantizePanel::errorOccurred);
        QVERIFY(quantize->evaluate(textPath) != 0);
        QVERIFY2(evaluated.wait(300000), failed.isEmpty() ? "" : qPrintable(failed.last().at(0).toString()));
        const EvalReport& e = *quantize->lastEvaluation();
        QVERIFY(e.compared && e.n_tokens > 0);
        QVERIFY(std::isfinite(e.compare.mean_kld) && e.compare.mean_kld > 0.0);
        std::printf("%s: lowrank-q4 %.3f bpw, %lld tokens, mean KLD %.6f\n", qPrintable(relative),
                    quantize->lastReport()->bits_per_weight(), static_cast<long long>(e.n_tokens), e.compare.mean_kld);

        QSignalSpy exported(quantize, &ui::QuantizePanel::exported);
        const QString knotPath = QString::fromStdString(m_dir.file(QTest::currentDataTag() + std::string(".knot")));
        QVERIFY(quantize->exportKnot(knotPath) != 0);
        QVERIFY(exported.wait(60000));
        QVERIFY(openAndAnalyze(w, knotPath));
        QVERIFY2(w.lastError().isEmpty(), qPrintable(w.lastError()));
        QCOMPARE(w.model()->n_tensors(), nTensors);
    }

    // The window driven by keyboard and mouse events (QTest sends them through the platform: offscreen in CTest,
    // a real X server under xvfb-run): View shortcuts switch every tab, Ctrl+R quantizes, a click on Cancel stops it,
    // a click on Quantize runs it to the end, Escape cancels from anywhere.
    void keyboardAndMouseDriveTheWindow() {
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        QVERIFY(openAndAnalyze(w, m_model));
        for (int i = 0; i < w.tabs()->count(); ++i) {
            QTest::keyClick(&w, static_cast<Qt::Key>(Qt::Key_1 + i), Qt::ControlModifier);
            QCOMPARE(w.tabs()->currentIndex(), i);
        }

        ui::QuantizePanel* quantize = w.quantizePanel();
        quantize->setPreset(QStringLiteral("lowrank-q4"));
        QSignalSpy cancelled(quantize, &ui::QuantizePanel::quantizeCancelled);
        QSignalSpy quantized(quantize, &ui::QuantizePanel::quantized);
        QTest::keyClick(&w, Qt::Key_R, Qt::ControlModifier);
        QVERIFY(quantize->isRunning());
        QCOMPARE(w.tabs()->currentWidget(), quantize);  // Ctrl+R shows what it runs
        QTest::mouseClick(quantize->cancelButton(), Qt::LeftButton);
        QVERIFY(cancelled.wait(60000));
        QCOMPARE(quantized.count(), 0);
        QVERIFY(!quantize->isRunning());

        QTest::keyClick(&w, Qt::Key_R, Qt::ControlModifier);
        QVERIFY(quantize->isRunning());
        QTest::keyClick(&w, Qt::Key_Escape);
        QVERIFY(cancelled.wait(60000));
        QCOMPARE(cancelled.count(), 2);

        QTest::mouseClick(quantize->runButton(), Qt::LeftButton);
        QVERIFY(quantized.wait(300000));
        QCOMPARE(quantize->resultModel()->rowCount(), static_cast<int>(w.model()->n_tensors()));
    }

    void compareRunsPresetsAndExports() {
        const QString heldout = QDir(m_model).filePath(QStringLiteral("heldout.txt"));
        if (!QFileInfo::exists(heldout)) QSKIP("needs the demo model's heldout.txt (a tokenizer and a text)");
        MainWindow w;
        QVERIFY(openAndAnalyze(w, m_model));
        ui::ComparePanel* compare = w.comparePanel();
        QFile in(heldout);
        QVERIFY(in.open(QIODevice::ReadOnly));
        const QString textPath = QString::fromStdString(m_dir.file("compare.txt"));
        QFile out(textPath);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(in.read(2048));
        out.close();
        compare->setTextPath(textPath);
        compare->setPresets({QStringLiteral("q8_0"), QStringLiteral("lowrank-q4")});
        QCOMPARE(compare->presets(), (QStringList{QStringLiteral("q8_0"), QStringLiteral("lowrank-q4")}));
        QAbstractItemModelTester tester(compare->resultModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy compared(compare, &ui::ComparePanel::compared);
        QVERIFY(compare->run() != 0);
        QVERIFY(compared.wait(300000));
        const auto& points = compare->resultModel()->points();
        QCOMPARE(points.size(), size_t{2});
        QCOMPARE(points[0].preset, QStringLiteral("q8_0"));
        QCOMPARE(points[1].preset, QStringLiteral("lowrank-q4"));
        for (const auto& p : points) {
            QVERIFY(p.tokens > 0);
            QVERIFY(std::isfinite(p.meanKld) && p.meanKld > 0.0);
            std::printf("compare: %s %.3f bpw, mean KLD %.6f ± %.6f\n", qPrintable(p.preset), p.bitsPerWeight,
                        p.meanKld, p.meanKldSe);
        }
        QVERIFY(points[0].bitsPerWeight > points[1].bitsPerWeight);
        QCOMPARE(ui::ParetoChart::paretoFront(points).size(),
                 points[0].meanKld < points[1].meanKld ? size_t{2} : size_t{1});

        const QString csvPath = QString::fromStdString(m_dir.file("compare.csv"));
        QVERIFY(compare->exportCsv(csvPath));
        QFile csv(csvPath);
        QVERIFY(csv.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(csv.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 3);
        QCOMPARE(lines[0],
                 QStringLiteral("preset,bits_per_weight,mean_kld,mean_kld_se,same_top,ppl_ratio,file_bytes,tokens"));
        QVERIFY(lines[1].startsWith(
            QStringLiteral("q8_0,%1,%2,").arg(points[0].bitsPerWeight, 0, 'g', 17).arg(points[0].meanKld, 0, 'g', 17)));
        const QString pngPath = QString::fromStdString(m_dir.file("pareto.png"));
        QVERIFY(compare->exportPng(pngPath));
        QVERIFY(!QImage(pngPath).isNull());
    }

    void cancelStopsAQuantization() {
        MainWindow w;
        QVERIFY(openAndAnalyze(w, m_model));
        ui::QuantizePanel* quantize = w.quantizePanel();
        quantize->setPreset(QStringLiteral("paper"));
        QSignalSpy cancelled(quantize, &ui::QuantizePanel::quantizeCancelled);
        QSignalSpy quantized(quantize, &ui::QuantizePanel::quantized);
        QVERIFY(quantize->startQuantize() != 0);
        quantize->cancelButton()->click();
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
        QCOMPARE(quantized.count(), 0);
        QVERIFY(!quantize->lastReport().has_value());
        QVERIFY(quantize->lastKnotPath().isEmpty());
        QVERIFY(!quantize->cancelButton()->isEnabled());
        QVERIFY(quantize->runButton()->isEnabled());
    }

    void failedOpenKeepsTheModelAndSaysWhy() {
        MainWindow w;
        QVERIFY(openAndAnalyze(w, m_model));
        QSignalSpy failed(&w, &MainWindow::loadFailed);
        w.openModel(QStringLiteral("/nonexistent/x.gguf"));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("/nonexistent/x.gguf")),
                 qPrintable(failed.at(0).at(0).toString()));
        QVERIFY(w.lastError().contains(QStringLiteral("/nonexistent/x.gguf")));
        QCOMPARE(w.modelPath(), m_model);
    }

    void droppingAFileOpensIt() {
        MainWindow w;
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(m_model)});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&w, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&w, &drop);
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        QCOMPARE(w.modelPath(), m_model);
    }
};

QTEST_MAIN(TestWorkbenchSession)
#include "test_workbench_session.moc"
