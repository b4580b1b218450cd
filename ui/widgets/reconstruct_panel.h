// ReconstructPanel: reconstruct chosen tensors of a knot (the Quantize panel's last knot, or one the user opens) on
// every tier side by side — the CPU reference, CPU SIMD, CUDA (gkq::kernels::run_backend) and WebAssembly SIMD
// (reconstruct_cli.mjs, compiled from wasm/ts, run by node as a child process) — and show, per tensor and backend, the
// median decode time, GB/s of output, max abs and relative error against the float64 reference, and how many elements
// differ in their bits from cpu-ref's. A backend that cannot run here keeps its row with the reason (the kernels'
// backend_unavailable_reason, no node on PATH, no wasm module built). One JobRunner job (key "reconstruct") with
// progress; Cancel stops between backends and kills a running node child at once.
#pragma once

#include "jobs/scratch_dir.h"

#include <QPointer>
#include <QStringList>
#include <QTemporaryDir>

#include <QWidget>

class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace gkq::ui {

class BackendResultModel;
class JobRunner;
class ResultTable;

class ReconstructPanel : public QWidget {
    Q_OBJECT
public:
    ReconstructPanel(JobRunner* runner, QWidget* parent = nullptr);
    ~ReconstructPanel() override;

    // The build's gkq_kernels.wasm (empty when this build has none) and the build's wasm/js/reconstruct_cli.mjs
    // (compiled from wasm/ts).
    static QString builtWasmModulePath();
    static QString wasmRunnerScriptPath();

    // Lists the knot's tensors (all selected); false (and statusText() says why) when it cannot be opened.
    bool setKnotPath(const QString& path);
    QString knotPath() const { return m_knotPath; }
    QStringList tensorNames() const;
    void setSelectedTensors(const QStringList& names);
    QStringList selectedTensors() const;

    void setRuns(int runs);
    void setThreads(int threads);  // cpu-simd threads; 0 = all
    // node: an executable path; empty = none (the WASM row then says node was not found on PATH).
    void setNodePath(const QString& path);
    QString nodePath() const;
    void setWasmModulePath(const QString& path);
    QString wasmModulePath() const;

    quint64 start();  // 0 without a knot or a selected tensor
    void cancel();
    bool isRunning() const { return m_job != 0; }

    BackendResultModel* resultModel() const { return m_results; }
    ResultTable* resultTable() const { return m_table; }
    QString statusText() const;
    QProgressBar* progressBar() const { return m_progress; }
    QPushButton* runButton() const { return m_runButton; }
    QPushButton* cancelButton() const { return m_cancelButton; }

signals:
    void reconstructed();
    void reconstructCancelled();
    void errorOccurred(const QString& message);
    void wasmChildStarted(qint64 pid);
    void wasmChildKilled(qint64 pid);  // killed by Cancel and reaped

private:
    void openKnotDialog();
    void updateButtons();

    QPointer<JobRunner> m_runner;                // the main window may delete it first
    QTemporaryDir m_scratch{scratchTemplate()};  // node's .f32 outputs
    QString m_knotPath;
    quint64 m_job = 0;

    QLabel* m_knotLabel = nullptr;
    QListWidget* m_tensors = nullptr;
    QSpinBox* m_runs = nullptr;
    QSpinBox* m_threads = nullptr;
    QLineEdit* m_node = nullptr;
    QLineEdit* m_wasm = nullptr;
    QPushButton* m_openButton = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    ResultTable* m_table = nullptr;
    BackendResultModel* m_results = nullptr;
};

}  // namespace gkq::ui
