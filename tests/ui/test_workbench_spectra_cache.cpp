// The workbench's spectra cache (issues #16 and #19), offscreen in the real window: the first open computes the
// spectra and writes them beside the model; a second open (same window or a new one) reads them from that file
// without computing (the panel's compute counter stays, the store says Cache and names the file, the values are
// the same); touching the model or rewriting it makes the next open compute again, and a rewritten model shows its
// own spectra, never the old ones; an analysis cancelled shows none. The tree is there when modelLoaded fires, before
// any spectrum. With GKQ_OPEN_MEASURE_MODEL=PATH set, one more slot opens that model and prints the time to the tree
// and the worst event-loop stall (a measurement to report, not an assertion).
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "jobs/job_runner.h"
#include "jobs/stall_meter.h"
#include "models/model_tree_model.h"
#include "models/spectrum_store.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/main_window.h"
#include "widgets/model_browser.h"
#include "widgets/spectrum_panel.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <QElapsedTimer>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QtTest>
#include <cmath>
#include <cstdio>

using namespace gkq;
using ui::MainWindow;
using Source = ui::SpectrumStore::Source;

#define VERIFY_CONTAINS(haystack, needle)        \
    QVERIFY2(QString(haystack).contains(needle), \
             qPrintable(QString(haystack) + QStringLiteral("  [expected: ") + (needle) + "]"))

class TestWorkbenchSpectraCache : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    test::TempDir m_home;  // XDG_CACHE_HOME: nothing lands in the user's own cache
    QString m_model;

    // Opens `path` and waits for its spectra; false when either does not come.
    static bool openAndAnalyze(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QSignalSpy analyzed(w.spectrumPanel(), &ui::SpectrumPanel::analyzed);
        if (w.openModel(path) == 0) return false;
        if (!loaded.wait(60000)) return false;
        return analyzed.count() > 0 || analyzed.wait(120000);
    }

    // The spectrum of the (role, layer) matrix the window shows; empty when it has none.
    static std::vector<double> valuesOf(const MainWindow& w, TensorRole role, int32_t layer) {
        for (const auto& s : w.spectrumPanel()->store()->byRole(role))
            if (s->layer == layer) return s->singular_values;
        return {};
    }

    static void writeModel(const QString& path, uint64_t seed) {
        const test::TinyModel m = test::make_tiny_model(test::tiny_config(true), seed);
        QVERIFY(write_safetensors(path.toStdString(), m.config, m.tensors).is_ok());
    }

private slots:
    void initTestCase() {
        qputenv("XDG_CACHE_HOME", QByteArray::fromStdString(m_home.path()));
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_workbench_spectra_cache"));
        QSettings().clear();
        m_model = QString::fromStdString(m_dir.file("tiny.safetensors"));
        writeModel(m_model, 1);
    }

    void treeComesBeforeSpectra() {
        MainWindow w;
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        bool treeAtLoad = false, spectraAtLoad = true;
        connect(&w, &MainWindow::modelLoaded, this, [&] {
            treeAtLoad = w.browser()->treeModel()->rowCount() > 0;
            spectraAtLoad = !w.spectrumPanel()->store()->isEmpty();
        });
        QVERIFY(w.openModel(m_model) != 0);
        QVERIFY(loaded.wait(60000));
        QVERIFY(treeAtLoad);
        QVERIFY(!spectraAtLoad);  // the spectra come from their own job, after the tree
        QSignalSpy analyzed(w.spectrumPanel(), &ui::SpectrumPanel::analyzed);
        QVERIFY(analyzed.count() > 0 || analyzed.wait(120000));
    }

    void secondOpenReadsTheCache() {
        const QString cache = m_model + QStringLiteral(".gkq-spectra");
        QFile::remove(cache);
        MainWindow w;
        ui::SpectrumPanel* panel = w.spectrumPanel();
        // The computing open reports per tensor: how many of how many, which, and the time left at the rate so far.
        QStringList progress;
        connect(w.runner(), &ui::JobRunner::progressChanged, this,
                [&](quint64, double, const QString& what) { progress << what; });
        QVERIFY(openAndAnalyze(w, m_model));
        QCOMPARE(panel->computeCount(), 1);
        // The runner coalesces progress updates, so on a fast machine only the last may arrive: every line names its
        // tensor and count; the time left, where it is there, has its form.
        const QRegularExpression perTensor(
            QStringLiteral("^tensor (\\d+) of (\\d+) \\(.+\\)(, about \\d+ (s|min \\d+ s) left at the rate so far)?$"));
        int perTensorLines = 0;
        for (const QString& line : progress)
            if (const QRegularExpressionMatch m = perTensor.match(line); m.hasMatch()) {
                ++perTensorLines;
                QVERIFY2(m.captured(1).toInt() <= m.captured(2).toInt(), qPrintable(line));
            }
        QVERIFY2(perTensorLines > 0, qPrintable(progress.join(QStringLiteral(" | "))));
        QCOMPARE(panel->store()->source(), Source::Computed);
        QCOMPARE(panel->store()->cacheFile(), cache);
        QVERIFY(QFileInfo::exists(cache));
        VERIFY_CONTAINS(panel->statusText(), QStringLiteral("cached in ") + cache);
        const std::vector<double> computed = valuesOf(w, TensorRole::FfnUp, 1);
        QVERIFY(!computed.empty());

        // Again in the same window: read, not computed.
        QVERIFY(openAndAnalyze(w, m_model));
        QCOMPARE(panel->computeCount(), 1);
        QCOMPARE(panel->store()->source(), Source::Cache);
        QCOMPARE(panel->store()->cacheFile(), cache);
        VERIFY_CONTAINS(panel->statusText(), QStringLiteral("read from the cache ") + cache);
        QVERIFY(valuesOf(w, TensorRole::FfnUp, 1) == computed);

        // And in a new window (the next session).
        MainWindow w2;
        QVERIFY(openAndAnalyze(w2, m_model));
        QCOMPARE(w2.spectrumPanel()->computeCount(), 0);
        QCOMPARE(w2.spectrumPanel()->store()->source(), Source::Cache);
        QVERIFY(valuesOf(w2, TensorRole::FfnUp, 1) == computed);
    }

    void touchedModelIsComputedAgain() {
        MainWindow w;
        ui::SpectrumPanel* panel = w.spectrumPanel();
        QVERIFY(openAndAnalyze(w, m_model));
        QCOMPARE(panel->store()->source(), Source::Cache);
        const std::string p = m_model.toStdString();
        struct stat st {};
        QCOMPARE(::stat(p.c_str(), &st), 0);
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        times[1].tv_sec -= 10;  // the same bytes, another modification time
        QCOMPARE(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
        QVERIFY(openAndAnalyze(w, m_model));
        QCOMPARE(panel->computeCount(), 1);
        QCOMPARE(panel->store()->source(), Source::Computed);
        VERIFY_CONTAINS(panel->statusText(), QStringLiteral("made for other data"));
        // Written under the new key: the next open reads it.
        QVERIFY(openAndAnalyze(w, m_model));
        QCOMPARE(panel->computeCount(), 1);
        QCOMPARE(panel->store()->source(), Source::Cache);
    }

    void rewrittenModelShowsItsOwnSpectra() {
        MainWindow w;
        ui::SpectrumPanel* panel = w.spectrumPanel();
        QVERIFY(openAndAnalyze(w, m_model));
        QCOMPARE(panel->store()->source(), Source::Cache);
        const std::vector<double> before = valuesOf(w, TensorRole::AttnQ, 0);
        QVERIFY(!before.empty());
        // Other weights, same shapes, same size on disk, same tensor index: only the file's time tells them apart.
        const QString other = QString::fromStdString(m_dir.file("other.safetensors"));
        writeModel(other, 2);
        QCOMPARE(QFileInfo(other).size(), QFileInfo(m_model).size());
        struct stat st {};
        QCOMPARE(::stat(m_model.toStdString().c_str(), &st), 0);
        QVERIFY(QFile::remove(m_model));
        QVERIFY(QFile::rename(other, m_model));
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        times[1].tv_nsec = (times[1].tv_nsec + 1) % 1000000000;  // one nanosecond off is enough
        QCOMPARE(::utimensat(AT_FDCWD, m_model.toStdString().c_str(), times, 0), 0);
        QVERIFY(openAndAnalyze(w, m_model));
        QCOMPARE(panel->store()->source(), Source::Computed);
        QCOMPARE(panel->computeCount(), 1);
        const std::vector<double> after = valuesOf(w, TensorRole::AttnQ, 0);
        QCOMPARE(after.size(), before.size());
        QVERIFY(after != before);
        // What was computed is what the core computes for this file now.
        auto model = ModelFile::open(m_model.toStdString());
        QVERIFY2(model.is_ok(), model.message().c_str());
        const int64_t i = model->index_of(TensorRole::AttnQ, 0);
        QVERIFY(i >= 0);
        auto values = model->read_f32(static_cast<size_t>(i));
        QVERIFY(values.is_ok());
        std::vector<double> exact;
        const TensorInfo& t = model->tensor_info(static_cast<size_t>(i));
        QVERIFY(singular_values(values->data(), t.shape[0], t.shape[1], exact).is_ok());
        // (The same values up to the rounding of another BLAS thread count; the old spectrum is nowhere near.)
        const auto worst = [&exact](const std::vector<double>& v) {
            double d = 0.0;
            for (size_t k = 0; k < v.size(); ++k) d = std::max(d, std::fabs(v[k] - exact[k]) / exact[0]);
            return d;
        };
        QCOMPARE(exact.size(), after.size());
        QVERIFY2(worst(after) < 1e-9, qPrintable(QString::number(worst(after))));
        QVERIFY2(worst(before) > 1e-3, qPrintable(QString::number(worst(before))));
    }

    void analysisCanBeCancelled() {
        QVERIFY(QFile::remove(m_model + QStringLiteral(".gkq-spectra")));
        MainWindow w;
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        // Cancel the moment the window has the model: the analysis job has started; it ends cancelled, and no
        // spectrum is shown.
        connect(&w, &MainWindow::modelLoaded, this, [&] { w.runner()->cancelKey(QStringLiteral("analyze")); });
        QVERIFY(w.openModel(m_model) != 0);
        QVERIFY(loaded.wait(60000));
        QTRY_VERIFY_WITH_TIMEOUT(!w.runner()->isKeyBusy(QStringLiteral("analyze")), 60000);
        QVERIFY(w.spectrumPanel()->store()->isEmpty());
        QCOMPARE(w.spectrumPanel()->computeCount(), 0);
        VERIFY_CONTAINS(w.spectrumPanel()->statusText(), QStringLiteral("cancelled"));
    }

    void measureOpen() {
        const QByteArray path = qgetenv("GKQ_OPEN_MEASURE_MODEL");
        if (path.isEmpty()) QSKIP("GKQ_OPEN_MEASURE_MODEL is not set (a measurement to run by hand)");
        // Twice: the first open computes (or reads what an earlier run cached), the second reads the cache.
        for (int round = 1; round <= 2; ++round) {
            MainWindow w;
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            ui::StallMeter meter;
            QSignalSpy loaded(&w, &MainWindow::modelLoaded);
            QSignalSpy analyzed(w.spectrumPanel(), &ui::SpectrumPanel::analyzed);
            QElapsedTimer clock;
            meter.start();
            clock.start();
            QVERIFY(w.openModel(QString::fromLocal8Bit(path)) != 0);
            QVERIFY(loaded.wait(600000));
            const qint64 treeMs = clock.elapsed();
            const double openStall = meter.worstStallMs();
            meter.start();
            QElapsedTimer after;
            after.start();
            // Up to 10 s more with the analysis running (or the cache read) behind the tree.
            while (analyzed.count() == 0 && after.elapsed() < 10000) QTest::qWait(50);
            std::printf(
                "measure %d: %s: tree (%d top-level rows) after %lld ms, worst stall while opening %.1f ms; "
                "then worst stall %.1f ms over %.1f s (%lld ticks of 10 ms); spectra %s; status: %s\n",
                round, path.constData(), w.browser()->treeModel()->rowCount(), static_cast<long long>(treeMs),
                openStall, meter.worstStallMs(), after.elapsed() / 1000.0, static_cast<long long>(meter.ticks()),
                analyzed.count() ? qPrintable(QStringLiteral("after %1 ms").arg(clock.elapsed())) : "not yet",
                qPrintable(w.spectrumPanel()->statusText()));
            std::fflush(stdout);
            if (analyzed.count() == 0 && qEnvironmentVariableIsSet("GKQ_OPEN_MEASURE_WAIT")) {
                QElapsedTimer report;
                report.start();
                while (analyzed.count() == 0 && clock.elapsed() < 3600000) {
                    QTest::qWait(100);
                    if (report.elapsed() > 30000) {
                        report.restart();
                        std::printf("measure %d: at %lld s: %s\n", round,
                                    static_cast<long long>(clock.elapsed() / 1000),
                                    qPrintable(w.spectrumPanel()->statusText()));
                        std::fflush(stdout);
                    }
                }
                std::printf("measure %d: spectra after %lld ms; worst stall %.1f ms; status: %s\n", round,
                            static_cast<long long>(clock.elapsed()), meter.worstStallMs(),
                            qPrintable(w.spectrumPanel()->statusText()));
                std::fflush(stdout);
            }
            w.runner()->cancelAll();
            if (analyzed.count() == 0) break;  // nothing cached: a second open would compute again
        }
    }
};

QTEST_MAIN(TestWorkbenchSpectraCache)
#include "test_workbench_spectra_cache.moc"
