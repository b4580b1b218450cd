// The Reconstruct panel on a knot of the demo model (the tiny test model when the demo is absent) quantized with
// lowrank-q4 by the core: every backend has a row per tensor; cpu-ref's errors are exactly run_backend's; an
// unavailable backend (CUDA without a device) has one row for all tensors with the kernels' own reason; the WebAssembly
// tier through node reproduces cpu-ref bit for bit (wasm/README.md) or says why it could not run; Cancel kills the node
// child.
#include "gkq/encoded_tensor.h"
#include "gkq/kernels.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "jobs/job_runner.h"
#include "models/backend_result_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/main_window.h"
#include "widgets/reconstruct_panel.h"
#include "widgets/server_panel.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QFile>
#include <QFileInfo>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QtTest>
#include <cerrno>
#include <csignal>
#include <cstdio>

using namespace gkq;
using ui::BackendResultModel;
using ui::ReconstructBackend;
using ui::ReconstructPanel;

class TestReconstructPanel : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_knot;
    QStringList m_pick;  // one low-rank matrix and one tensor of another method

    // Runs the panel on m_pick and waits for the result.
    static bool runAll(ReconstructPanel& panel) {
        QSignalSpy done(&panel, &ReconstructPanel::reconstructed);
        QSignalSpy failed(&panel, &ReconstructPanel::errorOccurred);
        if (panel.start() == 0) return false;
        if (!done.wait(300000)) {
            std::printf("not finished: %s\n", qPrintable(panel.statusText()));
            return false;
        }
        return failed.isEmpty();
    }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_reconstruct_panel"));
        QSettings().clear();
        std::string model = ui::MainWindow::demoModelPath().toStdString();
        if (model.empty()) {
            model = m_dir.file("tiny.safetensors");
            auto m = test::make_tiny_model(test::tiny_config(true));
            QVERIFY(write_safetensors(model, m.config, m.tensors).is_ok());
        }
        auto opened = ModelFile::open(model);
        QVERIFY2(opened.is_ok(), opened.message().c_str());
        QuantizeOptions options;
        options.preset = "lowrank-q4";
        auto report = quantize_model(*opened, options, m_dir.file("model.knot"));
        QVERIFY2(report.is_ok(), report.message().c_str());
        m_knot = QString::fromStdString(report->path);
        auto knot = KnotFile::open(report->path);
        QVERIFY(knot.is_ok());
        QString lowRank, other;
        for (const KnotEntry& e : knot->entries()) {
            const bool lr = e.method == Method::LowRank || e.method == Method::LowRankResidual;
            if (lr && lowRank.isEmpty()) lowRank = QString::fromStdString(e.name);
            if (!lr && other.isEmpty()) other = QString::fromStdString(e.name);
        }
        QVERIFY(!lowRank.isEmpty());
        QVERIFY(!other.isEmpty());
        m_pick = {lowRank, other};
        std::printf("knot %s: %s\n", qPrintable(m_knot), qPrintable(m_pick.join(QStringLiteral(", "))));
    }

    void everyBackendHasARowWithItsNumbersOrItsReason() {
        ui::JobRunner runner;
        ReconstructPanel panel(&runner);
        QAbstractItemModelTester tester(panel.resultModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(!panel.runButton()->isEnabled());
        QVERIFY(panel.setKnotPath(m_knot));
        panel.setSelectedTensors(m_pick);
        QCOMPARE(panel.selectedTensors(), m_pick);
        panel.setRuns(3);
        QVERIFY(runAll(panel));
        const BackendResultModel* model = panel.resultModel();
        // One row per tensor for each backend that ran; one row for all tensors for a backend that cannot run here.
        int expected = 0;
        for (const ReconstructBackend b : {ReconstructBackend::CpuRef, ReconstructBackend::CpuSimd,
                                           ReconstructBackend::Cuda, ReconstructBackend::Wasm}) {
            int all = 0, each = 0;
            for (const auto& r : model->rows())
                if (r.backend == b) ++(r.tensor.isEmpty() ? all : each);
            QVERIFY2((all == 1 && each == 0) || (all == 0 && each == static_cast<int>(m_pick.size())),
                     qPrintable(ui::reconstructBackendName(b)));
            if (all == 1) {
                const int row = model->rowOf(QString(), b);
                QCOMPARE(model->data(model->index(row, BackendResultModel::Tensor)).toString(),
                         QStringLiteral("all %1 tensors").arg(m_pick.size()));
            }
            expected += all + each;
        }
        if (!kernels::backend_available(kernels::Backend::Cuda))
            QVERIFY(model->find(QString(), ReconstructBackend::Cuda) != nullptr);
        QCOMPARE(model->rowCount(), expected);
        QCOMPARE(panel.progressBar()->value(), 1000);

        auto knot = KnotFile::open(m_knot.toStdString());
        QVERIFY(knot.is_ok());
        for (const QString& name : m_pick) {
            auto t = knot->read(static_cast<size_t>(knot->find(name.toStdString())));
            QVERIFY(t.is_ok());
            kernels::RunOptions once;
            once.n_runs = 1;
            auto direct = kernels::run_backend(kernels::Backend::CpuRef, *t, once);
            QVERIFY(direct.is_ok());

            const ui::BackendResultRow* ref = model->find(name, ReconstructBackend::CpuRef);
            QVERIFY(ref);
            QVERIFY(ref->ran());
            QCOMPARE(ref->maxAbsError, direct->max_abs_error);  // the same reference, the same arithmetic
            QCOMPARE(ref->relError, direct->rel_error);
            QCOMPARE(ref->elements, t->n_elements());
            QVERIFY(ref->seconds > 0.0);
            QCOMPARE(ref->gbPerS, 4.0 * static_cast<double>(t->n_elements()) / ref->seconds / 1e9);
            QCOMPARE(ref->bitsDiffering, qint64{-1});

            for (kernels::Backend b : {kernels::Backend::CpuSimd, kernels::Backend::Cuda}) {
                const auto* row = model->find(name, static_cast<ReconstructBackend>(static_cast<int>(b)));
                QVERIFY(row);
                const std::string reason = kernels::backend_unavailable_reason(b);
                if (reason.empty()) {
                    QVERIFY2(row->ran(), qPrintable(row->error + row->unavailable));
                    QVERIFY(row->bitsDiffering >= 0 && row->bitsDiffering <= row->elements);
                } else {
                    QCOMPARE(row->unavailable, QString::fromStdString(reason));
                    const QModelIndex status =
                        model->index(model->rowOf(name, row->backend), BackendResultModel::Status);
                    QCOMPARE(model->data(status).toString(), QString::fromStdString(reason));
                    QVERIFY(model->data(model->index(status.row(), BackendResultModel::MedianMs)).toString().isEmpty());
                }
            }
            for (const auto& r : model->rows())
                if (r.tensor == name)
                    std::printf("%-28s %-8s %10.4f ms %8.3f GB/s  max abs %.3g  rel %.3g  bits != cpu-ref %lld  %s\n",
                                qPrintable(r.tensor), qPrintable(ui::reconstructBackendName(r.backend)),
                                1e3 * r.seconds, r.gbPerS, r.maxAbsError, r.relError,
                                static_cast<long long>(r.bitsDiffering),
                                qPrintable(r.ran() ? r.device : r.unavailable + r.error));
        }
    }

    void wasmRowReproducesCpuRefBitForBit() {
        ui::JobRunner runner;
        ReconstructPanel panel(&runner);
        if (panel.nodePath().isEmpty()) QSKIP("node is not on PATH");
        if (panel.wasmModulePath().isEmpty() || !QFileInfo::exists(panel.wasmModulePath()))
            QSKIP(qPrintable(QStringLiteral("no built WebAssembly module (%1)").arg(panel.wasmModulePath())));
        if (!QFileInfo::exists(ReconstructPanel::wasmRunnerScriptPath()))
            QSKIP(qPrintable(
                QStringLiteral("no compiled reconstruct_cli.mjs (%1)").arg(ReconstructPanel::wasmRunnerScriptPath())));
        QVERIFY(panel.setKnotPath(m_knot));
        panel.setSelectedTensors(m_pick);
        panel.setRuns(3);
        QVERIFY(runAll(panel));
        for (const QString& name : m_pick) {
            const auto* ref = panel.resultModel()->find(name, ReconstructBackend::CpuRef);
            const auto* wasm = panel.resultModel()->find(name, ReconstructBackend::Wasm);
            QVERIFY(ref && wasm);
            QVERIFY2(wasm->ran(), qPrintable(wasm->error + wasm->unavailable));
            QCOMPARE(wasm->bitsDiffering, qint64{0});
            QCOMPARE(wasm->maxAbsError, ref->maxAbsError);
            QCOMPARE(wasm->relError, ref->relError);
            QVERIFY(wasm->seconds > 0.0);
            QVERIFY(wasm->device.startsWith(QStringLiteral("node v")));
            std::printf("wasm %s: %.4f ms (cpu-ref %.4f ms), %s\n", qPrintable(name), 1e3 * wasm->seconds,
                        1e3 * ref->seconds, qPrintable(wasm->device));
        }
    }

    void wasmRowSaysWhyItDidNotRun() {
        ui::JobRunner runner;
        ReconstructPanel panel(&runner);
        QVERIFY(panel.setKnotPath(m_knot));
        panel.setSelectedTensors({m_pick[1]});
        panel.setRuns(1);
        panel.setNodePath(QString());
        QVERIFY(runAll(panel));
        const auto* wasm = panel.resultModel()->find(m_pick[1], ReconstructBackend::Wasm);
        QVERIFY(wasm);
        QCOMPARE(wasm->unavailable, QStringLiteral("node was not found on PATH"));

        const QString absent = QString::fromStdString(m_dir.file("absent.wasm"));
        panel.setNodePath(QStringLiteral("/bin/sh"));  // any executable: the module is checked next
        panel.setWasmModulePath(absent);
        QVERIFY(runAll(panel));
        wasm = panel.resultModel()->find(m_pick[1], ReconstructBackend::Wasm);
        QVERIFY(wasm);
        QCOMPARE(wasm->unavailable,
                 QStringLiteral("no WebAssembly module at %1 (build the gkq_wasm target)").arg(absent));
        QCOMPARE(panel.resultModel()->rowCount(), 4);  // never hidden
    }

    void mainWindowHasTheReconstructAndServeTabs() {
        ui::MainWindow w;
        QTabWidget* tabs = w.tabs();
        const int reconstruct = tabs->indexOf(w.reconstructPanel());
        const int serve = tabs->indexOf(w.serverPanel());
        QVERIFY(reconstruct >= 0 && serve >= 0);
        QCOMPARE(tabs->tabText(reconstruct), QStringLiteral("Reconstruct"));
        QCOMPARE(tabs->tabText(serve), QStringLiteral("Serve"));
        QCOMPARE(reconstruct, static_cast<int>(ui::MainWindow::ReconstructTab));
        QCOMPARE(serve, static_cast<int>(ui::MainWindow::ServeTab));
        int shortcuts = 0;
        for (QAction* a : w.findChildren<QAction*>()) {
            if (a->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_7)) {
                a->trigger();
                QCOMPARE(tabs->currentIndex(), reconstruct);
                ++shortcuts;
            } else if (a->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_8)) {
                a->trigger();
                QCOMPARE(tabs->currentIndex(), serve);
                ++shortcuts;
            }
        }
        QCOMPARE(shortcuts, 2);
        // A knot the window opens is what the Reconstruct tab lists.
        QSignalSpy loaded(&w, &ui::MainWindow::modelLoaded);
        w.openModel(m_knot);
        QVERIFY(loaded.wait(120000));
        QCOMPARE(w.reconstructPanel()->knotPath(), m_knot);
        QVERIFY(w.reconstructPanel()->tensorNames().contains(m_pick[0]));
    }

    void cancelKillsTheNodeChild() {
        if (!QFileInfo::exists(ReconstructPanel::wasmRunnerScriptPath()))
            QSKIP("no compiled reconstruct_cli.mjs: the panel starts no child");
        // A stand-in for node that never finishes: cat blocks on its stdin, which the panel never closes.
        const QString fakeNode = QString::fromStdString(m_dir.file("fake-node"));
        QFile f(fakeNode);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("#!/bin/sh\nexec cat\n");
        f.close();
        QVERIFY(f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));

        ui::JobRunner runner;
        ReconstructPanel panel(&runner);
        QVERIFY(panel.setKnotPath(m_knot));
        panel.setSelectedTensors({m_pick[1]});
        panel.setRuns(1);
        panel.setNodePath(fakeNode);
        panel.setWasmModulePath(m_knot);  // exists; the stand-in never reads it
        QSignalSpy started(&panel, &ReconstructPanel::wasmChildStarted);
        QSignalSpy killed(&panel, &ReconstructPanel::wasmChildKilled);
        QSignalSpy cancelled(&panel, &ReconstructPanel::reconstructCancelled);
        QSignalSpy done(&panel, &ReconstructPanel::reconstructed);
        QVERIFY(panel.start() != 0);
        QVERIFY(started.wait(120000));
        const auto pid = static_cast<pid_t>(started.at(0).at(0).toLongLong());
        QVERIFY(pid > 0);
        QCOMPARE(::kill(pid, 0), 0);  // running
        QVERIFY(panel.cancelButton()->isEnabled());
        panel.cancelButton()->click();
        QTRY_COMPARE_WITH_TIMEOUT(killed.count(), 1, 30000);
        QCOMPARE(static_cast<pid_t>(killed.at(0).at(0).toLongLong()), pid);
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 30000);
        errno = 0;
        QCOMPARE(::kill(pid, 0), -1);  // killed and reaped
        QCOMPARE(errno, ESRCH);
        QCOMPARE(done.count(), 0);
        QCOMPARE(panel.resultModel()->rowCount(), 0);
        QVERIFY(!panel.cancelButton()->isEnabled());
        QVERIFY(panel.runButton()->isEnabled());
    }
};

QTEST_MAIN(TestReconstructPanel)
#include "test_reconstruct_panel.moc"
