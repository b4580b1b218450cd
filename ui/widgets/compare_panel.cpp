#include "widgets/compare_panel.h"

#include "charts/chart_export.h"
#include "charts/pareto_chart.h"
#include "gkq/atomic_file.h"
#include "gkq/quantize.h"
#include "gkq/workflows.h"
#include "jobs/job_runner.h"
#include "jobs/job_watch.h"
#include "widgets/output_guard.h"
#include "widgets/preset_availability.h"
#include "widgets/result_table.h"

#include <QBuffer>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace gkq::ui {

namespace {
const QString kLastTextKey = QStringLiteral("evaluation/lastText");  // shared with QuantizePanel::evaluate

// What the compare job returns: every preset's point (also delivered one by one) and the session's base passes.
struct CompareRun {
    std::vector<ComparePoint> points;
    qint64 basePasses = 0;
};
}  // namespace

ComparePanel::ComparePanel(JobRunner* runner, QWidget* parent) : QWidget(parent), m_runner(runner) {
    m_presetList = new QListWidget(this);
    for (const std::string& name : preset_names()) {
        auto* item = new QListWidgetItem(QString::fromStdString(name), m_presetList);
        item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
        const QString why = presetUnavailableReason(name);
        item->setCheckState(name == "paper" || !why.isEmpty() ? Qt::Unchecked : Qt::Checked);
        if (!why.isEmpty()) {
            item->setFlags(item->flags() & ~Qt::ItemIsEnabled);
            item->setToolTip(why);
        }
    }
    m_presetList->setMaximumHeight(120);
    m_text = new QLineEdit(this);
    m_text->setPlaceholderText(tr("Text to evaluate on (UTF-8)"));
    auto* browse = new QPushButton(tr("Browse..."), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = m_model ? QFileInfo(QString::fromStdString(m_model->label())).absolutePath() : QString();
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Text to evaluate on"), dir, tr("Text (*.txt);;All files (*)"));
        if (!path.isEmpty()) m_text->setText(path);
    });
    m_runButton = new QPushButton(tr("Compare"), this);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_csvButton = new QPushButton(tr("Export CSV..."), this);
    m_pngButton = new QPushButton(tr("Export PNG..."), this);
    m_svgButton = new QPushButton(tr("Export SVG..."), this);
    connect(m_runButton, &QPushButton::clicked, this, &ComparePanel::run);
    connect(m_cancelButton, &QPushButton::clicked, this, &ComparePanel::cancel);
    // The dialogs propose "<model>-compare.<suffix>" beside the model (or in a folder the user can write to).
    const auto suggested = [this](const QString& suffix) {
        return suggestedOutputPath(m_model ? QString::fromStdString(m_model->label()) : QString(),
                                   QStringLiteral("compare"), suffix);
    };
    connect(m_csvButton, &QPushButton::clicked, this, [this, suggested] {
        const QString p =
            QFileDialog::getSaveFileName(this, tr("Export CSV"), suggested(QStringLiteral("csv")), tr("CSV (*.csv)"));
        if (!p.isEmpty() && !exportCsv(p)) m_status->setText(tr("Cannot write %1").arg(p));
    });
    connect(m_pngButton, &QPushButton::clicked, this, [this, suggested] {
        const QString p =
            QFileDialog::getSaveFileName(this, tr("Export chart"), suggested(QStringLiteral("png")), tr("PNG (*.png)"));
        if (!p.isEmpty() && !exportPng(p)) m_status->setText(tr("Cannot write %1").arg(p));
    });
    connect(m_svgButton, &QPushButton::clicked, this, [this, suggested] {
        const QString p =
            QFileDialog::getSaveFileName(this, tr("Export chart"), suggested(QStringLiteral("svg")), tr("SVG (*.svg)"));
        QString error;
        if (!p.isEmpty() && !exportSvg(p, &error)) m_status->setText(error);
    });
    const ProgressWidgets progress = makeProgressWidgets(this);
    m_progress = progress.bar;
    m_status = progress.status;

    auto* textRow = new QHBoxLayout();
    textRow->addWidget(m_text, 1);
    textRow->addWidget(browse);
    auto* buttons = new QHBoxLayout();
    buttons->addWidget(m_runButton);
    buttons->addWidget(m_cancelButton);
    buttons->addStretch(1);
    buttons->addWidget(m_csvButton);
    buttons->addWidget(m_pngButton);
    buttons->addWidget(m_svgButton);

    m_chart = new ParetoChart(this);
    m_chart->setMinimumHeight(260);
    m_results = new CompareResultModel(this);
    auto* resultTable = new ResultTable(this);  // one row per preset: no totals
    resultTable->setSourceModel(m_results, CompareResultModel::RawRole);
    m_table = resultTable->view();
    m_table->horizontalHeader()->setStretchLastSection(true);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_chart);
    split->addWidget(resultTable);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(new QLabel(tr("Presets to compare:"), this));
    layout->addWidget(m_presetList);
    layout->addLayout(textRow);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(split, 1);

    watchJobs(
        m_runner, this, [this](quint64 id) { return id == m_job; }, progress,
        [this](quint64 id, JobEnd how, const QString& message) {
            if (how == JobEnd::Failed) m_status->setText(message);
            onEnded(id, how);
        });
    m_cancelButton->setEnabled(false);
}

ComparePanel::~ComparePanel() {
    if (m_job) {
        m_runner->cancel(m_job);
        m_runner->waitForAll();  // the job writes into m_tempDir
    }
}

void ComparePanel::setModel(std::shared_ptr<const Weights> model) {
    if (m_job) m_runner->cancel(m_job);
    m_model = std::move(model);
    ++m_run;  // points still on their way belong to the model that was open
    m_results->setPoints({});
    m_chart->setPoints({});
    m_basePasses = -1;
    m_status->clear();
    m_progress->setValue(0);
    if (m_model) {
        // The last text evaluated on, else the held-out text beside the model.
        const QString last = QSettings().value(kLastTextKey).toString();
        const QFileInfo info(QString::fromStdString(m_model->label()));
        const QString heldout =
            QDir(info.isDir() ? info.absoluteFilePath() : info.absolutePath()).filePath(QStringLiteral("heldout.txt"));
        if (!last.isEmpty() && QFileInfo::exists(last))
            m_text->setText(last);
        else if (QFileInfo::exists(heldout))
            m_text->setText(heldout);
    }
}

void ComparePanel::setPresets(const QStringList& presets) {
    for (int i = 0; i < m_presetList->count(); ++i) {
        QListWidgetItem* item = m_presetList->item(i);
        const bool runnable = (item->flags() & Qt::ItemIsEnabled) != 0;  // presetUnavailableReason: disabled
        item->setCheckState(runnable && presets.contains(item->text()) ? Qt::Checked : Qt::Unchecked);
    }
}

QStringList ComparePanel::presets() const {
    QStringList out;
    for (int i = 0; i < m_presetList->count(); ++i)
        if (m_presetList->item(i)->checkState() == Qt::Checked) out << m_presetList->item(i)->text();
    return out;
}

void ComparePanel::setTextPath(const QString& path) {
    m_text->setText(path);
}
QString ComparePanel::textPath() const {
    return m_text->text();
}
QString ComparePanel::statusText() const {
    return m_status->text();
}

quint64 ComparePanel::run() {
    const QStringList chosen = presets();
    if (!m_model || chosen.isEmpty() || m_text->text().isEmpty() || !m_tempDir.isValid()) return 0;
    std::shared_ptr<const Weights> model = m_model;
    std::vector<std::string> names;
    for (const QString& p : chosen) names.push_back(p.toStdString());
    const std::string text = m_text->text().toStdString();
    const std::string dir = m_tempDir.path().toStdString();
    QSettings().setValue(kLastTextKey, m_text->text());
    const quint64 run = ++m_run;
    m_results->setPoints({});
    m_chart->setPoints({});
    m_basePasses = -1;
    // A measured preset reaches the GUI thread at once (queued; the panel outlives the job: its destructor waits).
    const auto deliver = [this, run](ComparePoint p) {
        QMetaObject::invokeMethod(
            this,
            [this, run, p] {
                if (run != m_run) return;
                m_results->addPoint(p);
                m_chart->setPoints(m_results->points());
                m_table->resizeColumnsToContents();
                emit pointAdded(m_results->rowCount() - 1);
            },
            Qt::QueuedConnection);
    };
    m_job = m_runner->run<CompareRun>(
        QStringLiteral("compare"), tr("Comparing %1 presets").arg(chosen.size()),
        [model, names, text, dir, deliver](const ProgressFn& progress) -> Result<CompareRun> {
            // One evaluation session: the base's logits are computed with the first preset's knot and reused.
            EvalRequest request;
            request.base = model->label();
            request.text_path = text;
            auto session = EvalSession::open(request);
            if (!session) return session.status();
            CompareRun out;
            const double step = 1.0 / static_cast<double>(names.size());
            for (size_t i = 0; i < names.size(); ++i) {
                // Each preset: the first half of its share is the quantization, the second the evaluation.
                auto part = [&](double offset, const std::string& label) {
                    return [&progress, base = (static_cast<double>(i) + offset) * step, step, label](double f,
                                                                                                     std::string_view) {
                        return report_progress(progress, base + 0.5 * step * f, label);
                    };
                };
                QuantizeOptions options;
                options.preset = names[i];
                options.producer = "gkq-workbench";
                options.allow_requantize = model->kind() != "model-file";  // a knot: its decoded records, again
                const std::string knot = dir + "/compare-" + names[i] + ".knot";
                auto q = quantize_model(*model, options, knot, part(0.0, names[i] + ": quantizing"));
                if (!q) return q.status();
                auto e = session->compare(knot, part(0.5, names[i] + ": evaluating"), i + 1 < names.size());
                if (!e) return e.status();
                const EvalReport& r = e->report;
                ComparePoint p;
                p.preset = QString::fromStdString(names[i]);
                p.fileBytes = q->file_bytes;
                p.bitsPerWeight = q->bits_per_weight();
                p.meanKld = r.compare.mean_kld;
                p.meanKldSe = r.compare.mean_kld_se;
                p.sameTop = r.compare.same_top;
                p.pplRatio = r.compare.ppl_ratio;
                p.tokens = r.n_tokens;
                deliver(p);
                out.points.push_back(p);
            }
            out.basePasses = session->base_passes();
            return out;
        },
        [this](CompareRun& r) {
            // The rows arrived one by one; the job's list is the same, in order (queued before this).
            m_results->setPoints(std::move(r.points));
            m_chart->setPoints(m_results->points());
            m_table->resizeColumnsToContents();
            m_basePasses = r.basePasses;
            m_status->setText(tr("Done: %1 presets; the base model ran over the text %2 (its logits reused for "
                                 "every preset)")
                                  .arg(m_results->rowCount())
                                  .arg(r.basePasses == 1 ? tr("once") : tr("%1 times").arg(r.basePasses)));
        });
    m_runButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    return m_job;
}

void ComparePanel::cancel() {
    if (m_job) m_runner->cancel(m_job);
}

bool ComparePanel::refusesExport(const QString& path, QString* error) const {
    std::vector<std::string> inputs = m_model ? model_input_files(m_model->label()) : std::vector<std::string>{};
    if (!m_text->text().isEmpty()) inputs.push_back(m_text->text().toStdString());
    return refuseOutputOverInput(const_cast<ComparePanel*>(this), path, inputs, error);
}

bool ComparePanel::exportCsv(const QString& path) const {
    if (refusesExport(path, nullptr)) return false;
    return write_file_atomic(path.toStdString(), m_results->toCsv().toStdString()).is_ok();
}

bool ComparePanel::exportPng(const QString& path) const {
    if (refusesExport(path, nullptr)) return false;
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    if (!m_chart->grab().save(&buffer, "PNG")) return false;
    return write_file_atomic(path.toStdString(), std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())))
        .is_ok();
}

bool ComparePanel::exportSvg(const QString& path, QString* error) const {
    if (refusesExport(path, error)) return false;
    return exportChartSvg(m_chart, path, error);
}

void ComparePanel::onEnded(quint64 id, JobEnd how) {
    if (id != m_job) return;
    m_job = 0;
    m_runButton->setEnabled(true);
    m_cancelButton->setEnabled(false);
    if (how == JobEnd::Finished) {
        m_progress->setValue(1000);
        emit compared();
    } else if (how == JobEnd::Cancelled) {
        m_status->setText(tr("Cancelled"));
        emit compareCancelled();
    }
}

}  // namespace gkq::ui
