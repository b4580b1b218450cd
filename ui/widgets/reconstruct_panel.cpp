#include "widgets/reconstruct_panel.h"

#include "gkq/encoded_tensor.h"
#include "gkq/kernels.h"
#include "gkq/knot.h"
#include "jobs/job_runner.h"
#include "jobs/job_watch.h"
#include "models/backend_result_model.h"
#include "widgets/result_table.h"

#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPointer>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>

namespace gkq::ui {

namespace {

constexpr int kBackendsPerTensor = 4;  // cpu-ref, cpu-simd, cuda, wasm
constexpr int kChildPollMs = 50;       // how soon Cancel reaches a running node child

// What a job needs, copied from the controls on the GUI thread.
struct Request {
    std::string knot;
    std::vector<std::string> tensors;
    int runs = 5;
    int threads = 0;
    QString node;  // empty: not found
    QString wasmModule;
    QString runnerScript;
    QString scratchDir;
    QPointer<ReconstructPanel> panel;  // for the child's started/killed signals, delivered on the GUI thread
};

QString shapeText(const std::vector<int64_t>& shape) {
    QStringList dims;
    for (int64_t d : shape) dims << QString::number(d);
    return dims.join(QStringLiteral(" x "));
}

int64_t countDiffering(const float* a, const float* b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; ++i) d += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
    return d;
}

// max |out - ref| and ||out - ref||_F / ||ref||_F, as gkq::kernels::run_backend computes them.
void measureErrors(const float* out, const std::vector<double>& ref, BackendResultRow& row) {
    double diff2 = 0.0, ref2 = 0.0, worst = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double d = static_cast<double>(out[i]) - ref[i];
        diff2 += d * d;
        ref2 += ref[i] * ref[i];
        worst = std::max(worst, std::fabs(d));
    }
    row.maxAbsError = worst;
    row.relError = diff2 == 0.0 ? 0.0 : (ref2 > 0.0 ? std::sqrt(diff2 / ref2) : INFINITY);
}

void notify(const QPointer<ReconstructPanel>& panel, bool started, qint64 pid) {
    ReconstructPanel* p = panel.data();
    if (!p) return;
    QMetaObject::invokeMethod(
        p, [p, started, pid] { started ? emit p->wasmChildStarted(pid) : emit p->wasmChildKilled(pid); },
        Qt::QueuedConnection);
}

// Why the WASM tier cannot run with these settings; empty when it can.
QString wasmUnavailable(const Request& r) {
    if (r.node.isEmpty()) return QObject::tr("node was not found on PATH");
    if (!QFileInfo(r.node).isExecutable()) return QObject::tr("node '%1' is not an executable file").arg(r.node);
    if (r.wasmModule.isEmpty())
        return QObject::tr(
            "no WebAssembly module: this build has no gkq_kernels.wasm (emcc was not found when CMake "
            "configured)");
    if (!QFileInfo::exists(r.wasmModule))
        return QObject::tr("no WebAssembly module at %1 (build the gkq_wasm target)").arg(r.wasmModule);
    if (r.runnerScript.isEmpty())
        return QObject::tr(
            "no WASM runner: this build has no reconstruct_cli.mjs (tsc was not found when CMake "
            "configured)");
    if (!QFileInfo::exists(r.runnerScript)) return QObject::tr("the WASM runner %1 is missing").arg(r.runnerScript);
    return {};
}

// Runs reconstruct_cli.mjs on one tensor; fills seconds, GB/s, device and the output (n floats) or row.error.
// Returns Cancelled when the progress callback asks to stop (the child is killed and reaped first).
Status runWasm(const Request& r, const std::string& tensor, int64_t n, int index, double fraction,
               const ProgressFn& progress, BackendResultRow& row, std::vector<float>& out) {
    const QString outFile = QDir(r.scratchDir).filePath(QStringLiteral("wasm-%1.f32").arg(index));
    QProcess proc;
    proc.setProgram(r.node);
    proc.setArguments({r.runnerScript, QStringLiteral("--wasm"), r.wasmModule, QStringLiteral("--knot"),
                       QString::fromStdString(r.knot), QStringLiteral("--tensor"), QString::fromStdString(tensor),
                       QStringLiteral("--runs"), QString::number(r.runs), QStringLiteral("--out"), outFile});
    proc.start();
    if (!proc.waitForStarted(30000)) {
        row.error = QObject::tr("node did not start: %1").arg(proc.errorString());
        return Status::ok();
    }
    const qint64 pid = proc.processId();
    notify(r.panel, true, pid);
    const std::string what = "wasm (node): " + tensor;
    while (!proc.waitForFinished(kChildPollMs)) {
        if (proc.state() == QProcess::NotRunning) break;
        if (!report_progress(progress, fraction, what)) {
            proc.kill();
            proc.waitForFinished(30000);
            notify(r.panel, false, pid);
            QFile::remove(outFile);
            return error(StatusCode::Cancelled, "reconstruction cancelled");
        }
    }
    const QByteArray stdoutBytes = proc.readAllStandardOutput();
    const QByteArray stderrBytes = proc.readAllStandardError();
    const QList<QByteArray> lines = stdoutBytes.trimmed().split('\n');
    const QJsonObject reply = QJsonDocument::fromJson(lines.isEmpty() ? QByteArray() : lines.last()).object();
    if (proc.exitStatus() != QProcess::NormalExit || proc.exitCode() != 0 || reply.isEmpty() ||
        reply.contains(QStringLiteral("error"))) {
        QString why = reply.value(QStringLiteral("error")).toString();
        if (why.isEmpty()) why = QString::fromUtf8(stderrBytes.trimmed().right(400));
        row.error = QObject::tr("node exited with status %1: %2").arg(proc.exitCode()).arg(why);
        QFile::remove(outFile);
        return Status::ok();
    }
    QFile f(outFile);
    const qint64 want = 4 * n;
    if (!f.open(QIODevice::ReadOnly) || f.size() != want) {
        row.error = QObject::tr("node wrote %1 bytes to %2, expected %3").arg(f.size()).arg(outFile).arg(want);
        QFile::remove(outFile);
        return Status::ok();
    }
    out.resize(static_cast<size_t>(n));
    const qint64 got = f.read(reinterpret_cast<char*>(out.data()), want);
    f.close();
    QFile::remove(outFile);
    if (got != want) {
        row.error = QObject::tr("reading %1 failed").arg(outFile);
        return Status::ok();
    }
    row.seconds = reply.value(QStringLiteral("seconds")).toDouble();
    row.gbPerS = reply.value(QStringLiteral("gb_per_s")).toDouble();
    row.device = QObject::tr("node %1, WebAssembly SIMD128").arg(reply.value(QStringLiteral("node")).toString());
    row.threads = 1;
    return Status::ok();
}

Result<std::vector<BackendResultRow>> reconstructAll(const Request& r, const ProgressFn& progress) {
    auto knot = KnotFile::open(r.knot);
    if (!knot) return knot.status();
    std::vector<BackendResultRow> rows;
    const QString wasmReason = wasmUnavailable(r);
    // A backend that cannot run here gets one row with the reason, not one per tensor.
    bool skip[std::size(kernels::kAllBackends)] = {};
    for (size_t bi = 0; bi < std::size(kernels::kAllBackends); ++bi) {
        const kernels::Backend b = kernels::kAllBackends[bi];
        const std::string why = kernels::backend_unavailable_reason(b);
        if (why.empty()) continue;
        skip[bi] = true;
        BackendResultRow row;
        row.backend = static_cast<ReconstructBackend>(static_cast<int>(b));
        row.unavailable = QString::fromStdString(why);
        row.tensors = static_cast<int>(r.tensors.size());
        rows.push_back(std::move(row));
    }
    if (!wasmReason.isEmpty()) {
        BackendResultRow row;
        row.backend = ReconstructBackend::Wasm;
        row.unavailable = wasmReason;
        row.tensors = static_cast<int>(r.tensors.size());
        rows.push_back(std::move(row));
    }
    const double steps = static_cast<double>(r.tensors.size() * (kBackendsPerTensor + 1));
    int step = 0;
    kernels::RunOptions options;
    options.n_runs = r.runs;
    options.kernel.n_threads = r.threads;
    for (size_t ti = 0; ti < r.tensors.size(); ++ti) {
        const std::string& name = r.tensors[ti];
        const int64_t index = knot->find(name);
        if (index < 0) return error(StatusCode::NotFound, r.knot + ": no tensor '" + name + "'");
        if (!report_progress(progress, step++ / steps, "reference (float64): " + name))
            return error(StatusCode::Cancelled, "reconstruction cancelled");
        auto t = knot->read(static_cast<size_t>(index));
        if (!t) return t.status();
        auto ref = kernels::reference_f64(*t);
        if (!ref) return ref.status();
        const int64_t n = t->n_elements();
        // cpu-ref's output: what every other backend's bits are compared with
        std::vector<float> base(static_cast<size_t>(n)), other(static_cast<size_t>(n));
        if (Status s = kernels::decode(kernels::Backend::CpuRef, *t, base.data(), static_cast<uint64_t>(n)); !s)
            return s;

        BackendResultRow proto;
        proto.tensor = QString::fromStdString(name);
        proto.shape = shapeText(t->shape);
        proto.elements = n;
        for (size_t bi = 0; bi < std::size(kernels::kAllBackends); ++bi) {
            const kernels::Backend b = kernels::kAllBackends[bi];
            if (!report_progress(progress, step++ / steps, std::string(kernels::backend_name(b)) + ": " + name))
                return error(StatusCode::Cancelled, "reconstruction cancelled");
            if (skip[bi]) continue;
            BackendResultRow row = proto;
            row.backend = static_cast<ReconstructBackend>(static_cast<int>(b));
            auto run = kernels::run_backend(b, *t, options, &*ref);
            if (!run) {
                row.error = QString::fromStdString(run.message());
            } else if (!run->unavailable.empty()) {
                // Found out only when run (no device at run time): still one row for the backend, not one per tensor.
                skip[bi] = true;
                row.tensor.clear();
                row.shape.clear();
                row.elements = 0;
                row.tensors = static_cast<int>(r.tensors.size() - ti);  // this one and the rest
                row.unavailable = QString::fromStdString(run->unavailable);
            } else {
                row.device = QString::fromStdString(run->device);
                row.threads = run->n_threads;
                row.seconds = run->seconds;
                row.gbPerS = run->gb_per_s;
                row.maxAbsError = run->max_abs_error;
                row.relError = run->rel_error;
                if (b != kernels::Backend::CpuRef) {
                    if (Status s = kernels::decode(b, *t, other.data(), static_cast<uint64_t>(n), options.kernel); !s)
                        row.error = QString::fromStdString(s.message());
                    else
                        row.bitsDiffering = countDiffering(base.data(), other.data(), n);
                }
            }
            rows.push_back(std::move(row));
        }

        const double fraction = step++ / steps;
        if (!report_progress(progress, fraction, "wasm (node): " + name))
            return error(StatusCode::Cancelled, "reconstruction cancelled");
        if (!wasmReason.isEmpty()) continue;
        BackendResultRow row = proto;
        row.backend = ReconstructBackend::Wasm;
        std::vector<float> out;
        if (Status s = runWasm(r, name, n, static_cast<int>(ti), fraction, progress, row, out); !s) return s;
        if (row.error.isEmpty()) {
            measureErrors(out.data(), *ref, row);
            row.bitsDiffering = countDiffering(base.data(), out.data(), n);
        }
        rows.push_back(std::move(row));
    }
    report_progress(progress, 1.0, "done");
    return rows;
}

}  // namespace

QString ReconstructPanel::builtWasmModulePath() {
#ifdef GKQ_WASM_MODULE_PATH
    return QStringLiteral(GKQ_WASM_MODULE_PATH);
#else
    return {};
#endif
}

QString ReconstructPanel::wasmRunnerScriptPath() {
#ifdef GKQ_WASM_RUNNER_SCRIPT
    return QStringLiteral(GKQ_WASM_RUNNER_SCRIPT);
#else
    return {};
#endif
}

ReconstructPanel::ReconstructPanel(JobRunner* runner, QWidget* parent) : QWidget(parent), m_runner(runner) {
    m_knotLabel = new QLabel(tr("No knot: quantize a model in the Quantize tab, or open a knot file."), this);
    m_knotLabel->setWordWrap(true);
    m_knotLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_openButton = new QPushButton(tr("Open knot..."), this);
    connect(m_openButton, &QPushButton::clicked, this, &ReconstructPanel::openKnotDialog);

    m_tensors = new QListWidget(this);
    m_tensors->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_tensors->setToolTip(tr("The tensors to reconstruct (Ctrl/Shift-click to choose several)"));
    connect(m_tensors, &QListWidget::itemSelectionChanged, this, &ReconstructPanel::updateButtons);

    m_runs = new QSpinBox(this);
    m_runs->setRange(1, 1000);
    m_runs->setValue(5);
    m_runs->setToolTip(tr("Timed runs after one warm-up; the table shows their median"));
    m_threads = new QSpinBox(this);
    m_threads->setRange(0, 1024);
    m_threads->setSpecialValueText(tr("all cores"));
    m_threads->setToolTip(tr("Threads of the cpu-simd backend"));
    m_node = new QLineEdit(QStandardPaths::findExecutable(QStringLiteral("node")), this);
    m_node->setPlaceholderText(tr("node was not found on PATH"));
    m_node->setToolTip(tr("The node executable that runs the WebAssembly tier"));
    m_wasm = new QLineEdit(
        QSettings().value(QStringLiteral("reconstruct/wasmModule"), builtWasmModulePath()).toString(), this);
    m_wasm->setPlaceholderText(tr("gkq_kernels.wasm (not built here)"));
    connect(m_wasm, &QLineEdit::editingFinished, this,
            [this] { QSettings().setValue(QStringLiteral("reconstruct/wasmModule"), m_wasm->text()); });
    auto* form = new QFormLayout();
    form->addRow(tr("Runs"), m_runs);
    form->addRow(tr("SIMD threads"), m_threads);
    form->addRow(tr("node"), m_node);
    form->addRow(tr("WASM module"), m_wasm);

    m_runButton = new QPushButton(tr("Reconstruct on every backend"), this);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    connect(m_runButton, &QPushButton::clicked, this, &ReconstructPanel::start);
    connect(m_cancelButton, &QPushButton::clicked, this, &ReconstructPanel::cancel);
    const ProgressWidgets progress = makeProgressWidgets(this);
    m_progress = progress.bar;
    m_status = progress.status;

    m_results = new BackendResultModel(this);
    // Sortable by every column (numbers as numbers), filtered, Home / End; no totals row: a sum of times or errors
    // across backends and tensors means nothing.
    m_table = new ResultTable(this);
    m_table->setSourceModel(m_results, BackendResultModel::RawRole);
    m_table->view()->horizontalHeader()->setStretchLastSection(true);

    auto* knotRow = new QHBoxLayout();
    knotRow->addWidget(m_knotLabel, 1);
    knotRow->addWidget(m_openButton);
    auto* top = new QHBoxLayout();
    top->addWidget(m_tensors, 1);
    top->addLayout(form, 1);
    auto* buttons = new QHBoxLayout();
    buttons->addWidget(m_runButton);
    buttons->addWidget(m_cancelButton);
    buttons->addStretch(1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(knotRow);
    layout->addLayout(top);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(m_table, 2);

    watchJobs(
        m_runner, this, [this](quint64 id) { return id == m_job; }, progress,
        [this](quint64, JobEnd how, const QString& message) {
            m_job = 0;
            if (how == JobEnd::Finished) m_progress->setValue(1000);
            if (how == JobEnd::Cancelled) {
                m_progress->setValue(0);
                m_status->setText(tr("Cancelled"));
            }
            if (how == JobEnd::Failed) m_status->setText(message);
            updateButtons();
            if (how == JobEnd::Finished) emit reconstructed();
            if (how == JobEnd::Cancelled) emit reconstructCancelled();
            if (how == JobEnd::Failed) emit errorOccurred(message);
        });
    updateButtons();
}

ReconstructPanel::~ReconstructPanel() {
    // The job writes into m_scratch and signals this panel: stop it first.
    if (m_job && m_runner) {
        m_runner->cancel(m_job);
        m_runner->waitForAll();
    }
}

bool ReconstructPanel::setKnotPath(const QString& path) {
    auto knot = KnotFile::open(path.toStdString());
    m_tensors->clear();
    m_results->clear();
    if (!knot) {
        m_knotPath.clear();
        m_status->setText(QString::fromStdString(knot.message()));
        m_knotLabel->setText(tr("No knot open."));
        updateButtons();
        return false;
    }
    m_knotPath = path;
    for (const KnotEntry& e : knot->entries()) {
        auto* item = new QListWidgetItem(QStringLiteral("%1  [%2]  %3")
                                             .arg(QString::fromStdString(e.name), shapeText(e.shape),
                                                  QString::fromStdString(std::string(method_name(e.method)))),
                                         m_tensors);
        item->setData(Qt::UserRole, QString::fromStdString(e.name));
    }
    m_tensors->selectAll();
    m_knotLabel->setText(tr("Knot: %1 (%2 tensors)").arg(path).arg(knot->n_records()));
    m_status->clear();
    m_progress->setValue(0);
    updateButtons();
    return true;
}

QStringList ReconstructPanel::tensorNames() const {
    QStringList names;
    for (int i = 0; i < m_tensors->count(); ++i) names << m_tensors->item(i)->data(Qt::UserRole).toString();
    return names;
}

void ReconstructPanel::setSelectedTensors(const QStringList& names) {
    for (int i = 0; i < m_tensors->count(); ++i)
        m_tensors->item(i)->setSelected(names.contains(m_tensors->item(i)->data(Qt::UserRole).toString()));
}

QStringList ReconstructPanel::selectedTensors() const {
    QStringList names;
    for (int i = 0; i < m_tensors->count(); ++i)
        if (m_tensors->item(i)->isSelected()) names << m_tensors->item(i)->data(Qt::UserRole).toString();
    return names;
}

void ReconstructPanel::setRuns(int runs) {
    m_runs->setValue(runs);
}
void ReconstructPanel::setThreads(int threads) {
    m_threads->setValue(threads);
}
void ReconstructPanel::setNodePath(const QString& path) {
    m_node->setText(path);
}
QString ReconstructPanel::nodePath() const {
    return m_node->text().trimmed();
}
void ReconstructPanel::setWasmModulePath(const QString& path) {
    m_wasm->setText(path);
}
QString ReconstructPanel::wasmModulePath() const {
    return m_wasm->text().trimmed();
}
QString ReconstructPanel::statusText() const {
    return m_status->text();
}

quint64 ReconstructPanel::start() {
    const QStringList names = selectedTensors();
    if (m_knotPath.isEmpty() || names.isEmpty() || !m_scratch.isValid()) return 0;
    Request r;
    r.knot = m_knotPath.toStdString();
    for (const QString& n : names) r.tensors.push_back(n.toStdString());
    r.runs = m_runs->value();
    r.threads = m_threads->value();
    r.node = nodePath();
    r.wasmModule = wasmModulePath();
    r.runnerScript = wasmRunnerScriptPath();
    r.scratchDir = m_scratch.path();
    r.panel = this;
    m_results->clear();
    m_progress->setValue(0);
    m_status->setText(tr("Reconstructing %n tensor(s)...", nullptr, static_cast<int>(names.size())));
    m_job = m_runner->run<std::vector<BackendResultRow>>(
        QStringLiteral("reconstruct"), tr("Reconstructing on every backend"),
        [r](const ProgressFn& progress) { return reconstructAll(r, progress); },
        [this](std::vector<BackendResultRow>& rows) {
            const size_t n = rows.size();
            m_results->setRows(std::move(rows));
            m_table->view()->resizeColumnsToContents();
            m_status->setText(tr("Done: %1 rows").arg(n));
        });
    updateButtons();
    return m_job;
}

void ReconstructPanel::cancel() {
    if (m_job) m_runner->cancel(m_job);
}

void ReconstructPanel::openKnotDialog() {
    QSettings settings;
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open knot"), settings.value(QStringLiteral("lastDir")).toString(),
                                     tr("Knots (*.knot *.knot.gz);;All files (*)"));
    if (path.isEmpty()) return;
    settings.setValue(QStringLiteral("lastDir"), QFileInfo(path).absolutePath());
    setKnotPath(path);
}

void ReconstructPanel::updateButtons() {
    m_runButton->setEnabled(!m_job && !m_knotPath.isEmpty() && !selectedTensors().isEmpty());
    m_cancelButton->setEnabled(m_job != 0);
}

}  // namespace gkq::ui
