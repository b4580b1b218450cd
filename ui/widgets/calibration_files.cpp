#include "widgets/calibration_files.h"

#include "jobs/job_runner.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QToolButton>

namespace gkq::ui {

namespace {

QString text(const std::string& s) {
    return QString::fromStdString(s);
}

// One job key per kind: a newer load of the same kind replaces (cancels) an older one.
QString jobKey(CalibrationFiles::Kind kind) {
    return kind == CalibrationFiles::Kind::Importance ? QStringLiteral("calibration-imatrix")
                                                      : QStringLiteral("calibration-gram");
}

}  // namespace

CalibrationFiles::CalibrationFiles(JobRunner* runner, QWidget* parent) : QWidget(parent), m_runner(runner) {
    auto* grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->setColumnStretch(2, 1);
    const struct {
        Kind kind;
        QString button, tip, name;
    } rows[] = {
        {Kind::Importance, tr("Importance matrix..."),
         tr("gkq quantize --imatrix: an importance matrix of a calibration text (gkq imatrix or llama-imatrix; GGUF "
            "or legacy .dat). Each matrix's block quantization (the method or a low-rank residual) is fitted "
            "weighted by its columns' importance, as llama-quantize --imatrix does, and the target bits per weight "
            "weigh each type's error by it; the file's name and sha256 are recorded in the knot"),
         QStringLiteral("imatrix")},
        {Kind::Gram, tr("Activation Gram matrices..."),
         tr("gkq quantize --gram: the Gram matrices X^T X of each matrix's inputs on a calibration text (gkq imatrix "
            "MODEL --text FILE -o IMATRIX --gram FILE). The whitened presets (svd-llm, q4_0-lqer) need them: they "
            "take the SVD in the metric of the inputs; the other presets ignore them. The file's name and sha256 "
            "are recorded in the knot"),
         QStringLiteral("gram")},
    };
    int r = 0;
    for (const auto& d : rows) {
        Row& w = row(d.kind);
        w.choose = new QPushButton(d.button, this);
        w.choose->setToolTip(d.tip);
        w.choose->setObjectName(QStringLiteral("calibration-choose-") + d.name);
        w.clear = new QToolButton(this);
        w.clear->setText(tr("Clear"));
        w.clear->setToolTip(tr("No file: quantize without it"));
        w.clear->setObjectName(QStringLiteral("calibration-clear-") + d.name);
        w.label = new QLabel(this);
        w.label->setWordWrap(true);
        w.label->setTextInteractionFlags(Qt::TextSelectableByMouse);  // refusals name files: users copy them
        w.label->setObjectName(QStringLiteral("calibration-summary-") + d.name);
        grid->addWidget(w.choose, r, 0);
        grid->addWidget(w.clear, r, 1);
        grid->addWidget(w.label, r, 2);
        const Kind kind = d.kind;
        connect(w.choose, &QPushButton::clicked, this, [this, kind] { chooseDialog(kind); });
        connect(w.clear, &QToolButton::clicked, this, [this, kind] { clear(kind); });
        showRow(kind);
        ++r;
    }

    // A load's end other than its value (which its `done` callback takes): a refusal, a cancel, or replaced by a
    // newer load of its kind (its row's job is then the newer one, and nothing changes here).
    connect(m_runner, &JobRunner::failed, this, [this](quint64 id, const QString& m) { onEnded(id, m, false); });
    connect(m_runner, &JobRunner::cancelled, this, [this](quint64 id) { onEnded(id, {}, true); });
    connect(m_runner, &JobRunner::staleDropped, this, [this](quint64 id) { onEnded(id, {}, true); });
}

CalibrationFiles::~CalibrationFiles() {
    cancel();
}

void CalibrationFiles::setModel(std::shared_ptr<const Weights> model) {
    m_model = std::move(model);
    // What was matched with the previous model says nothing about this one: match the files again.
    m_importance.reset();
    m_gram.reset();
    for (Kind kind : {Kind::Importance, Kind::Gram}) {
        Row& w = row(kind);
        if (w.job) m_runner->cancel(w.job);
        w.job = 0;
        if (!w.path.isEmpty() && m_model)
            setFile(kind, w.path);
        else
            showRow(kind);
    }
    emit changed();
}

quint64 CalibrationFiles::setFile(Kind kind, const QString& path) {
    if (path.isEmpty()) {
        clear(kind);
        return 0;
    }
    Row& w = row(kind);
    if (w.job) m_runner->cancel(w.job);
    w.job = 0;
    w.path = path;
    w.summary.clear();
    if (kind == Kind::Importance)
        m_importance.reset();
    else
        m_gram.reset();
    if (!m_model) {
        showRow(kind);
        emit changed();
        return 0;
    }
    const std::string file = path.toStdString();
    std::shared_ptr<const Weights> model = m_model;
    const QString name = QFileInfo(path).fileName();
    if (kind == Kind::Importance) {
        w.job = m_runner->run<ModelImportance>(
            jobKey(kind), tr("Reading the importance matrix %1").arg(name),
            [file, model](const ProgressFn& progress) -> Result<ModelImportance> {
                if (!report_progress(progress, 0.0, "imatrix")) return error(StatusCode::Cancelled, "cancelled");
                return load_model_importance(file, *model);
            },
            [this](ModelImportance& mi) {
                Row& r = row(Kind::Importance);
                r.job = 0;
                r.summary = tr("%1: importance for %n matrices", nullptr, static_cast<int>(mi.n_weighted))
                                .arg(text(mi.file_name));
                if (!mi.without.empty())
                    r.summary += tr(", %n without an entry (quantized without importance)", nullptr,
                                    static_cast<int>(mi.without.size()));
                m_importance = std::make_shared<const ModelImportance>(std::move(mi));
                showRow(Kind::Importance);
                emit changed();
            });
    } else {
        w.job = m_runner->run<ModelGram>(
            jobKey(kind), tr("Reading the Gram matrices %1").arg(name),
            [file, model](const ProgressFn& progress) -> Result<ModelGram> {
                if (!report_progress(progress, 0.0, "gram")) return error(StatusCode::Cancelled, "cancelled");
                return load_model_gram(file, *model);
            },
            [this, name](ModelGram& mg) {
                Row& r = row(Kind::Gram);
                r.job = 0;
                r.summary = tr("%1: Gram matrices for %n matrices", nullptr, static_cast<int>(mg.n_matrices)).arg(name);
                m_gram = std::make_shared<const ModelGram>(std::move(mg));
                showRow(Kind::Gram);
                emit changed();
            });
    }
    showRow(kind);
    emit changed();
    return w.job;
}

void CalibrationFiles::clear(Kind kind) {
    Row& w = row(kind);
    if (w.job) m_runner->cancel(w.job);
    w = Row{QString(), 0, QString(), w.label, w.choose, w.clear};
    if (kind == Kind::Importance)
        m_importance.reset();
    else
        m_gram.reset();
    showRow(kind);
    emit changed();
}

void CalibrationFiles::cancel() {
    for (const Row& w : m_rows)
        if (w.job) m_runner->cancel(w.job);
}

void CalibrationFiles::onEnded(quint64 id, const QString& failure, bool cancelled) {
    for (Kind kind : {Kind::Importance, Kind::Gram}) {
        Row& w = row(kind);
        if (id == 0 || id != w.job) continue;
        w.job = 0;
        const QString path = w.path;
        w.path.clear();  // refused or not read: the row holds no file
        w.summary = cancelled ? tr("%1 was not read (cancelled)").arg(QFileInfo(path).fileName())
                              : tr("Refused: %1").arg(failure);
        showRow(kind);
        emit changed();
        if (!cancelled) emit loadFailed(failure);
    }
}

QString CalibrationFiles::file(Kind kind) const {
    const bool loaded = kind == Kind::Importance ? m_importance != nullptr : m_gram != nullptr;
    return loaded ? row(kind).path : QString();
}

bool CalibrationFiles::isLoading() const {
    return m_rows[0].job != 0 || m_rows[1].job != 0;
}

QString CalibrationFiles::loadingFile() const {
    for (const Row& w : m_rows)
        if (w.job) return w.path;
    return {};
}

QString CalibrationFiles::summary(Kind kind) const {
    return row(kind).label->text();
}

void CalibrationFiles::apply(QuantizeOptions& options) const {
    if (m_importance) {
        options.importance = m_importance->by_tensor;
        options.importance_command = m_importance->command;
        options.importance_metadata = m_importance->metadata;
    }
    if (m_gram) {
        options.gram = m_gram->by_tensor;
        options.gram_command = m_gram->command;
    }
}

void CalibrationFiles::showRow(Kind kind) {
    Row& w = row(kind);
    QString shown;
    if (w.job)
        shown = tr("Reading %1...").arg(QFileInfo(w.path).fileName());
    else if (!w.summary.isEmpty())
        shown = w.summary;
    else if (!w.path.isEmpty())
        shown = tr("%1: read once a model is open").arg(QFileInfo(w.path).fileName());
    else
        shown = tr("none");
    w.label->setText(shown);
    w.label->setToolTip(w.path.isEmpty() ? QString() : w.path);
    w.clear->setEnabled(!w.path.isEmpty() || !w.summary.isEmpty());
}

void CalibrationFiles::chooseDialog(Kind kind) {
    // The folder of the last calibration file chosen, else the model's.
    const QString last = QSettings().value(QStringLiteral("quantize/calibrationDir")).toString();
    const QString dir = !last.isEmpty() ? last : m_model ? QFileInfo(text(m_model->label())).absolutePath() : QString();
    const QString path = kind == Kind::Importance
                             ? QFileDialog::getOpenFileName(this, tr("Importance matrix"), dir,
                                                            tr("Importance matrix (*.gguf *.dat);;All files (*)"))
                             : QFileDialog::getOpenFileName(this, tr("Activation Gram matrices"), dir,
                                                            tr("Gram matrices (*.gguf *.gram);;All files (*)"));
    if (path.isEmpty()) return;
    QSettings().setValue(QStringLiteral("quantize/calibrationDir"), QFileInfo(path).absolutePath());
    setFile(kind, path);
}

}  // namespace gkq::ui
