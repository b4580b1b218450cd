#include "widgets/quantize_panel.h"

#include "charts/layer_role_heat_map.h"
#include "gkq/atomic_file.h"
#include "gkq/knot.h"
#include "gkq/quantize_fields.h"
#include "gkq/workflows.h"
#include "jobs/job_runner.h"
#include "jobs/job_watch.h"
#include "models/display_format.h"
#include "models/layer_role_model.h"
#include "models/quant_result_model.h"
#include "widgets/output_guard.h"
#include "widgets/preset_availability.h"
#include "widgets/result_table.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <fstream>
#include <span>
#include <sstream>

namespace gkq::ui {

QuantizePanel::QuantizePanel(JobRunner* runner, QWidget* parent) : QWidget(parent), m_runner(runner) {
    m_presetCombo = new QComboBox(this);
    m_presetCombo->setToolTip(
        tr("The preset's method and parameters (gkq quantize --preset); the rows below override "
           "them, and the text beside it describes the preset"));
    for (const std::string& name : preset_names()) {
        m_presetCombo->addItem(QString::fromStdString(name));
        if (const QString why = presetUnavailableReason(name); !why.isEmpty()) {
            const int row = m_presetCombo->count() - 1;
            m_presetCombo->setItemData(row, 0, Qt::UserRole - 1);  // Qt::ItemIsEnabled off: listed, not selectable
            m_presetCombo->setItemData(row, why, Qt::ToolTipRole);
        }
    }
    m_presetDescription = new QLabel(this);
    m_presetDescription->setWordWrap(true);
    m_presetDescription->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_presetDescription->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
    m_presetDescription->setTextInteractionFlags(Qt::TextSelectableByMouse);
    connect(m_presetCombo, &QComboBox::currentTextChanged, this, [this](const QString& name) {
        auto p = find_preset(name.toStdString());
        m_presetDescription->setText(p ? QString::fromStdString(p->description) : QString::fromStdString(p.message()));
        QSettings().setValue(QStringLiteral("quantize/preset"), name);
    });

    // One control per row of the override table (gkq/quantize_fields.h): a list for words, a spin box for numbers,
    // each starting at "preset" (unset).
    for (const OverrideField& f : override_fields()) {
        OverrideControl c;
        c.flag = QString::fromUtf8(f.flag.data(), static_cast<qsizetype>(f.flag.size()));
        c.label = QString::fromUtf8(f.label.data(), static_cast<qsizetype>(f.label.size()));
        const QString tip = QStringLiteral("--%1: %2")
                                .arg(c.flag, QString::fromUtf8(f.help.data(), static_cast<qsizetype>(f.help.size())));
        if (!f.choices.empty()) {  // words, or the few numbers a row admits (bits)
            c.choice = new QComboBox(this);
            c.choice->addItem(tr("preset"));
            for (std::string_view w : f.choices)
                c.choice->addItem(QString::fromUtf8(w.data(), static_cast<qsizetype>(w.size())));
            c.choice->setToolTip(tip);
            c.choice->setObjectName(QStringLiteral("override-") + c.flag);
        } else if (f.kind == OverrideKind::Integer) {
            c.integer = new QSpinBox(this);
            c.integer->setRange(static_cast<int>(f.min_value) - 1, static_cast<int>(std::min(f.max_value, 1e9)));
            c.integer->setSpecialValueText(tr("preset"));
            c.integer->setValue(c.integer->minimum());
            c.integer->setToolTip(tip);
            c.integer->setObjectName(QStringLiteral("override-") + c.flag);
        } else {
            c.real = new QDoubleSpinBox(this);
            c.real->setDecimals(6);
            c.real->setRange(f.min_value > 0.0 ? 0.0 : f.min_value - 1.0, f.max_value);
            c.real->setSingleStep(0.001);
            c.real->setSpecialValueText(tr("preset"));
            c.real->setValue(c.real->minimum());
            c.real->setToolTip(tip);
            c.real->setObjectName(QStringLiteral("override-") + c.flag);
        }
        m_overrides.push_back(c);
    }
    m_threads = new QSpinBox(this);
    m_threads->setRange(0, 256);
    m_threads->setSpecialValueText(tr("all cores"));
    m_threads->setToolTip(tr("Threads that encode the tensors (gkq quantize --threads); 0: all cores"));

    auto* form = new QFormLayout();
    form->setFieldGrowthPolicy(QFormLayout::FieldsStayAtSizeHint);
    form->addRow(tr("Preset"), m_presetCombo);
    for (const OverrideControl& c : m_overrides)
        form->addRow(c.label, c.choice    ? static_cast<QWidget*>(c.choice)
                              : c.integer ? static_cast<QWidget*>(c.integer)
                                          : static_cast<QWidget*>(c.real));
    form->addRow(tr("Threads"), m_threads);

    m_runButton = new QPushButton(tr("Quantize"), this);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_evaluateButton = new QPushButton(tr("Evaluate..."), this);
    m_evaluateButton->setToolTip(
        tr("KL divergence of the last knot against the open model on a text you choose "
           "(llama.cpp's --kl-divergence quantities)"));
    m_exportKnotButton = new QPushButton(tr("Export knot..."), this);
    m_exportModelButton = new QPushButton(tr("Export model..."), this);
    m_exportModelButton->setToolTip(tr("Reconstruct the knot to safetensors, GGUF or a llama2.c checkpoint"));
    connect(m_runButton, &QPushButton::clicked, this, &QuantizePanel::startQuantize);
    connect(m_cancelButton, &QPushButton::clicked, this, &QuantizePanel::cancel);
    connect(m_exportKnotButton, &QPushButton::clicked, this, &QuantizePanel::exportKnotDialog);
    connect(m_exportModelButton, &QPushButton::clicked, this, &QuantizePanel::exportReconstructedDialog);
    connect(m_evaluateButton, &QPushButton::clicked, this, &QuantizePanel::evaluateDialog);
    auto* buttons = new QHBoxLayout();
    buttons->addWidget(m_runButton);
    buttons->addWidget(m_cancelButton);
    buttons->addStretch(1);
    buttons->addWidget(m_evaluateButton);
    buttons->addWidget(m_exportKnotButton);
    buttons->addWidget(m_exportModelButton);

    const ProgressWidgets progress = makeProgressWidgets(this);
    m_progress = progress.bar;
    m_status = progress.status;
    m_totals = new QLabel(this);
    m_totals->setWordWrap(true);
    m_totals->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_evalLabel = new QLabel(this);
    m_evalLabel->setWordWrap(true);
    m_evalLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_results = new QuantResultModel(this);
    auto* resultTable = new ResultTable(this);
    resultTable->setSourceModel(m_results, QuantResultModel::RawRole);
    // Totals of the rows shown: their bytes, and bits per weight as their bytes over their weights.
    resultTable->setTotals([](const QAbstractItemModel& rows) {
        QStringList cells(QuantResultModel::ColumnCount);
        const double bytes = columnSum(rows, QuantResultModel::Bytes, QuantResultModel::RawRole);
        const double elements = columnSum(rows, QuantResultModel::Name, QuantResultModel::ElementsRole);
        cells[QuantResultModel::Name] =
            totalsLabel(static_cast<int>(columnSum(rows, QuantResultModel::Name, QuantResultModel::TensorsRole)));
        cells[QuantResultModel::Bytes] = formatCount(static_cast<quint64>(bytes));
        if (elements > 0) cells[QuantResultModel::Bpw] = formatNumber(8.0 * bytes / elements);
        return cells;
    });
    m_table = resultTable->view();
    m_table->horizontalHeader()->setSectionResizeMode(QuantResultModel::Name, QHeaderView::Stretch);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] {
        if (const QString name = selectedTensor(); !name.isEmpty()) emit tensorSelected(name);
    });

    // The heat map: layers x matrix roles, coloured by the chosen measure.
    m_layerRoles = new LayerRoleModel(this);
    m_heatMap = new LayerRoleHeatMap(this);
    m_heatMap->setModel(m_layerRoles);
    m_measureCombo = new QComboBox(this);
    m_measureCombo->setToolTip(
        tr("What each cell's colour and text say: the method, the bits per weight (the "
           "tensor's bytes x 8 over its weights) or the relative error ||W - W'||_F / ||W||_F"));
    m_measureCombo->addItem(tr("Method"), static_cast<int>(LayerRoleModel::Measure::Method));
    m_measureCombo->addItem(tr("Bits per weight"), static_cast<int>(LayerRoleModel::Measure::BitsPerWeight));
    m_measureCombo->addItem(tr("Relative error"), static_cast<int>(LayerRoleModel::Measure::RelError));
    m_logScale = new QCheckBox(tr("Log scale"), this);
    m_logScale->setToolTip(tr("Colour the relative error by its log10"));
    m_logScale->setEnabled(false);
    connect(m_measureCombo, &QComboBox::currentIndexChanged, this, [this] {
        const auto m = static_cast<LayerRoleModel::Measure>(m_measureCombo->currentData().toInt());
        m_layerRoles->setMeasure(m);
        m_logScale->setEnabled(m == LayerRoleModel::Measure::RelError);
    });
    connect(m_logScale, &QCheckBox::toggled, m_layerRoles, &LayerRoleModel::setLogScale);
    connect(m_heatMap, &LayerRoleHeatMap::tensorClicked, this, [this](const QString& name) {
        if (!selectTensor(name)) emit tensorSelected(name);  // no table row (an open knot): the browser still follows
    });
    auto* heatPage = new QWidget(this);
    auto* heatControls = new QHBoxLayout();
    heatControls->addWidget(new QLabel(tr("Colour by"), heatPage));
    heatControls->addWidget(m_measureCombo);
    heatControls->addWidget(m_logScale);
    heatControls->addStretch(1);
    auto* heatLayout = new QVBoxLayout(heatPage);
    heatLayout->setContentsMargins(0, 0, 0, 0);
    heatLayout->addLayout(heatControls);
    // A model of many layers asks for more height than a small window has: the grid scrolls, its cells keep a
    // height a pointer can hit.
    auto* heatScroll = new QScrollArea(heatPage);
    heatScroll->setWidget(m_heatMap);
    heatScroll->setWidgetResizable(true);
    heatScroll->setFrameShape(QFrame::NoFrame);
    heatLayout->addWidget(heatScroll, 1);
    m_resultTabs = new QTabWidget(this);
    // Group by: one row per tensor, per layer or per role (a 7-8 B model's 291 tensors read as 32 layers or 7 roles).
    m_groupCombo = new QComboBox(this);
    m_groupCombo->setToolTip(
        tr("One row per tensor, or per layer or matrix role: its tensors' methods, summed bytes, bits per weight "
           "(their bytes x 8 over their weights) and the largest relative error among them"));
    m_groupCombo->addItem(tr("Tensor"), static_cast<int>(QuantResultModel::GroupBy::Tensor));
    m_groupCombo->addItem(tr("Layer"), static_cast<int>(QuantResultModel::GroupBy::Layer));
    m_groupCombo->addItem(tr("Role"), static_cast<int>(QuantResultModel::GroupBy::Role));
    connect(m_groupCombo, &QComboBox::currentIndexChanged, this, [this] {
        m_results->setGroupBy(static_cast<QuantResultModel::GroupBy>(m_groupCombo->currentData().toInt()));
    });
    auto* tensorsPage = new QWidget(this);
    auto* tensorsLayout = new QVBoxLayout(tensorsPage);
    tensorsLayout->setContentsMargins(0, 0, 0, 0);
    auto* groupRow = new QHBoxLayout();
    groupRow->addWidget(new QLabel(tr("Group by"), tensorsPage));
    groupRow->addWidget(m_groupCombo);
    groupRow->addStretch(1);
    tensorsLayout->addLayout(groupRow);
    tensorsLayout->addWidget(resultTable, 1);
    m_resultTabs->addTab(tensorsPage, tr("Tensors"));
    m_resultTabs->addTab(heatPage, tr("Layers x roles"));

    auto* top = new QHBoxLayout();
    top->addLayout(form);
    top->addWidget(m_presetDescription, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(m_totals);
    layout->addWidget(m_evalLabel);
    layout->addWidget(m_resultTabs, 1);

    watchJobs(
        m_runner, this, [this](quint64 id) { return id == m_job || id == m_exportJob || id == m_evalJob; }, progress,
        [this](quint64 id, JobEnd how, const QString& message) {
            if (how == JobEnd::Failed) {
                m_status->setText(message);
                emit errorOccurred(message);
            }
            onJobEnded(id, how);
        });

    const QString saved = QSettings().value(QStringLiteral("quantize/preset"), QStringLiteral("lowrank-q4")).toString();
    m_presetCombo->setCurrentText(saved);
    if (m_presetDescription->text().isEmpty()) emit m_presetCombo->currentTextChanged(m_presetCombo->currentText());
    updateButtons();
}

QuantizePanel::~QuantizePanel() {
    // Jobs write into m_tempDir: stop them before it goes away.
    if (m_job) m_runner->cancel(m_job);
    if (m_exportJob) m_runner->cancel(m_exportJob);
    if (m_evalJob) m_runner->cancel(m_evalJob);
    if (m_job || m_exportJob || m_evalJob) m_runner->waitForAll();
}

void QuantizePanel::setModel(std::shared_ptr<const Weights> model) {
    if (m_job) m_runner->cancel(m_job);
    m_model = std::move(model);
    if (m_evalJob) m_runner->cancel(m_evalJob);
    m_report.reset();
    m_eval.reset();
    m_evalLabel->clear();
    m_knotPath.clear();
    m_results->clear();
    // An open knot: its records fill the heat map until a run replaces them.
    if (m_model && dynamic_cast<const KnotFile*>(m_model.get()))
        m_layerRoles->setKnot(*m_model);
    else
        m_layerRoles->clear();
    m_totals->clear();
    m_status->clear();
    m_progress->setValue(0);
    updateButtons();
}

void QuantizePanel::setPreset(const QString& name) {
    m_presetCombo->setCurrentText(name);
}
QString QuantizePanel::preset() const {
    return m_presetCombo->currentText();
}
QString QuantizePanel::totalsText() const {
    return m_totals->text();
}

bool QuantizePanel::selectTensor(const QString& name) {
    m_groupCombo->setCurrentIndex(0);                   // a tensor is a row of the ungrouped table
    const QAbstractItemModel* rows = m_table->model();  // sorted rows, then the totals row
    for (int r = 0; r < rows->rowCount(); ++r) {
        if (rows->index(r, QuantResultModel::Name).data(QuantResultModel::RawRole).toString() != name) continue;
        const QModelIndex target = rows->index(r, QuantResultModel::Name);
        const bool already = m_table->currentIndex().row() == r;
        m_table->setCurrentIndex(target);  // a new current row emits tensorSelected (the connection above)
        m_table->selectRow(r);
        m_table->scrollTo(target);
        if (already) emit tensorSelected(name);
        return true;
    }
    return false;
}

QString QuantizePanel::selectedTensor() const {
    const QModelIndex current = m_table->currentIndex();
    if (!current.isValid()) return {};
    if (m_results->groupBy() != QuantResultModel::GroupBy::Tensor) return {};  // a group is no tensor
    return current.siblingAtColumn(QuantResultModel::Name).data(QuantResultModel::RawRole).toString();
}

QString QuantizePanel::statusText() const {
    return m_status->text();
}

QuantizeOptions QuantizePanel::options() const {
    QuantizeOptions o;
    o.preset = preset().toStdString();
    const std::span<const OverrideField> fields = override_fields();
    for (size_t i = 0; i < fields.size(); ++i)
        if (const QString v = overrideValue(m_overrides[i]); !v.isEmpty())
            (void)set_override(fields[i], o.global, v.toStdString());  // a control holds only values the row admits
    o.n_threads = m_threads->value();
    o.per_layer = m_tuning;
    o.producer = "gkq-workbench";
    // An open knot is re-encoded from its decoded records: every lossy record is quantized again, by choice.
    o.allow_requantize = m_model && m_model->kind() != "model-file";
    return o;
}

QString QuantizePanel::overrideValue(const OverrideControl& c) {
    if (c.choice) return c.choice->currentIndex() > 0 ? c.choice->currentText() : QString();
    if (c.integer) return c.integer->value() > c.integer->minimum() ? QString::number(c.integer->value()) : QString();
    return c.real->value() > c.real->minimum() ? QString::number(c.real->value(), 'g', 17) : QString();
}

bool QuantizePanel::setOverride(const QString& flag, const QString& value) {
    const std::span<const OverrideField> fields = override_fields();
    for (size_t i = 0; i < fields.size(); ++i) {
        OverrideControl& c = m_overrides[i];
        if (c.flag != flag) continue;
        if (value.isEmpty()) {  // back to the preset's
            if (c.choice) c.choice->setCurrentIndex(0);
            if (c.integer) c.integer->setValue(c.integer->minimum());
            if (c.real) c.real->setValue(c.real->minimum());
            return true;
        }
        ParamOverride check;
        if (!set_override(fields[i], check, value.toStdString())) return false;
        if (c.choice) c.choice->setCurrentText(value);
        if (c.integer) c.integer->setValue(value.toInt());
        if (c.real) c.real->setValue(value.toDouble());
        // What the control now holds must read back as the same value (a spin box rounds to its decimals).
        ParamOverride shown;
        const QString now = overrideValue(c);
        return !now.isEmpty() && set_override(fields[i], shown, now.toStdString()).is_ok() &&
               fields[i].get(shown) == fields[i].get(check);
    }
    return false;
}

QStringList QuantizePanel::overrideFlags() const {
    QStringList out;
    for (const OverrideControl& c : m_overrides) out << c.flag;
    return out;
}

quint64 QuantizePanel::startQuantize() {
    if (!m_model || !m_tempDir.isValid()) return 0;
    const QuantizeOptions opts = options();
    const std::string out = m_tempDir.filePath(QStringLiteral("run-%1.knot").arg(++m_runCount)).toStdString();
    std::shared_ptr<const Weights> model = m_model;
    m_progress->setValue(0);
    m_status->setText(tr("Quantizing with preset %1...").arg(preset()));
    m_job = m_runner->run<QuantizeReport>(
        QStringLiteral("quantize"), tr("Quantizing (%1)").arg(preset()),
        [model, opts, out](const ProgressFn& progress) { return quantize_model(*model, opts, out, progress); },
        [this](QuantizeReport& report) {
            m_knotPath = QString::fromStdString(report.path);
            m_results->setReport(report);
            m_layerRoles->setReport(report, m_model ? static_cast<int>(m_model->config().n_layers) : 0);
            m_table->resizeColumnsToContents();
            m_totals->setText(
                tr("<b>%1</b>: %2 tensors, %3 parameters, knot %4 bytes = <b>%5 bits per weight</b> (whole file), "
                   "%6x smaller than bf16, %7x than f32; %8 s")
                    .arg(QString::fromStdString(report.command).toHtmlEscaped())
                    .arg(formatCount(static_cast<qint64>(report.tensors.size())))
                    .arg(formatCount(static_cast<qint64>(report.n_params)))
                    .arg(formatCount(static_cast<quint64>(report.file_bytes)))
                    .arg(formatNumber(report.bits_per_weight()))
                    .arg(formatNumber(report.ratio_vs_bf16(), 3))
                    .arg(formatNumber(report.ratio_vs_fp32(), 3))
                    .arg(formatNumber(report.seconds, 3)));
            m_report = std::move(report);
            m_status->setText(tr("Done: %1").arg(m_knotPath));
        });
    updateButtons();
    return m_job;
}

quint64 QuantizePanel::startQuantizeWithTuning(std::vector<LayerOverride> perLayer, const QString& source) {
    m_tuning = std::move(perLayer);
    const quint64 id = startQuantize();  // options() copies m_tuning into this run's options
    m_tuning.clear();
    if (id != 0) m_status->setText(tr("Quantizing with preset %1 and the tuning of %2...").arg(preset(), source));
    return id;
}

void QuantizePanel::cancel() {
    if (m_job) m_runner->cancel(m_job);
    if (m_exportJob) m_runner->cancel(m_exportJob);
    if (m_evalJob) m_runner->cancel(m_evalJob);
}

QString QuantizePanel::evaluationText() const {
    return m_evalLabel->text();
}

quint64 QuantizePanel::evaluate(const QString& textPath) {
    if (m_knotPath.isEmpty() || !m_model) return 0;
    const std::string base = m_model->label();
    const std::string knot = m_knotPath.toStdString();
    const std::string text = textPath.toStdString();
    QSettings().setValue(QStringLiteral("evaluation/lastText"), textPath);  // Compare's default text too
    m_progress->setValue(0);
    m_status->setText(tr("Evaluating on %1...").arg(textPath));
    m_evalJob = m_runner->run<EvalReport>(
        QStringLiteral("evaluate"), tr("Evaluating (KLD)"),
        [base, knot, text](const ProgressFn& progress) -> Result<EvalReport> {
            EvalRequest request;  // the default windows, the base's own tokenizer
            request.base = base;
            request.text_path = text;
            auto runs = evaluate_candidates(request, {knot}, progress);
            if (!runs) return runs.status();
            return std::move(runs->front().report);
        },
        [this](EvalReport& r) {
            const CompareStats& c = r.compare;
            m_evalLabel->setText(
                tr("<b>Evaluation</b> on %1 (%2 tokens, %3 windows of %4, stride %5): mean KLD <b>%6 ± %7</b>, "
                   "median %8, 99 %: %9, 99.9 %: %10, max %11; same top token %12 ± %13 %; RMS Δp %14 %; "
                   "PPL %15 → %16 (ratio %17 ± %18); bits per byte %19 → %20")
                    .arg(QString::fromStdString(r.text_label).toHtmlEscaped())
                    .arg(r.n_tokens)
                    .arg(r.n_windows)
                    .arg(r.n_ctx)
                    .arg(r.stride)
                    .arg(c.mean_kld, 0, 'f', 6)
                    .arg(c.mean_kld_se, 0, 'f', 6)
                    .arg(c.median_kld, 0, 'f', 6)
                    .arg(c.kld_p99, 0, 'f', 6)
                    .arg(c.kld_p999, 0, 'f', 6)
                    .arg(c.max_kld, 0, 'f', 6)
                    .arg(100.0 * c.same_top, 0, 'f', 3)
                    .arg(100.0 * c.same_top_se, 0, 'f', 3)
                    .arg(100.0 * c.rms_delta_p, 0, 'f', 3)
                    .arg(c.base.perplexity, 0, 'f', 4)
                    .arg(c.candidate.perplexity, 0, 'f', 4)
                    .arg(c.ppl_ratio, 0, 'f', 6)
                    .arg(c.ppl_ratio_se, 0, 'f', 6)
                    .arg(c.base.bits_per_byte, 0, 'f', 4)
                    .arg(c.candidate.bits_per_byte, 0, 'f', 4) +
                (c.kld_exact() ? tr("; KLD over the whole vocabulary (%1 tokens)").arg(c.n_vocab)
                               : tr("; KLD over the base's top %1 of %2 tokens a position and one bucket for the rest")
                                     .arg(c.kld_top_k)
                                     .arg(c.n_vocab)));
            m_eval = std::move(r);
            m_status->setText(tr("Evaluated"));
        });
    updateButtons();
    return m_evalJob;
}

void QuantizePanel::evaluateDialog() {
    // The last text evaluated on (here or in Compare), else the model's folder.
    const QString last = QSettings().value(QStringLiteral("evaluation/lastText")).toString();
    const QString dir = QFileInfo::exists(last) ? last
                        : m_model               ? QFileInfo(QString::fromStdString(m_model->label())).absolutePath()
                                                : QString();
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Text to evaluate on"), dir, tr("Text (*.txt);;All files (*)"));
    if (!path.isEmpty()) evaluate(path);
}

quint64 QuantizePanel::exportKnot(const QString& path) {
    if (m_knotPath.isEmpty()) return 0;
    QString refused;
    if (refuseOutputOverInput(this, path, exportInputs(), &refused)) {
        m_status->setText(refused);
        return 0;
    }
    const std::string from = m_knotPath.toStdString();
    const std::string to = path.toStdString();
    m_exportJob = m_runner->run<std::string>(
        QStringLiteral("export"), tr("Exporting knot"),
        [from, to](const ProgressFn& progress) -> Result<std::string> {
            std::ifstream in(from, std::ios::binary);
            if (!in) return Status(StatusCode::IoError, "cannot read " + from);
            std::ostringstream bytes;
            bytes << in.rdbuf();
            if (!report_progress(progress, 0.5, "read")) return Status(StatusCode::Cancelled, "cancelled");
            Status s = write_file_atomic(to, bytes.str());
            if (!s) return s;
            return to;
        },
        [this](std::string& written) {
            m_status->setText(tr("Exported %1").arg(QString::fromStdString(written)));
            emit exported(QString::fromStdString(written));
        });
    updateButtons();
    return m_exportJob;
}

quint64 QuantizePanel::exportReconstructed(const QString& path) {
    if (m_knotPath.isEmpty()) return 0;
    QString refused;
    if (refuseOutputOverInput(this, path, exportInputs(), &refused)) {
        m_status->setText(refused);
        return 0;
    }
    const std::string from = m_knotPath.toStdString();
    const std::string to = path.toStdString();
    m_exportJob = m_runner->run<ReconstructReport>(
        QStringLiteral("export"), tr("Reconstructing %1").arg(QFileInfo(path).fileName()),
        [from, to](const ProgressFn& progress) { return reconstruct(from, to, 0, progress); },
        [this](ReconstructReport& r) {
            m_status->setText(tr("Exported %1").arg(QString::fromStdString(r.path)));
            emit exported(QString::fromStdString(r.path));
        });
    updateButtons();
    return m_exportJob;
}

std::vector<std::string> QuantizePanel::exportInputs() const {
    std::vector<std::string> inputs = m_model ? model_input_files(m_model->label()) : std::vector<std::string>{};
    if (!m_knotPath.isEmpty()) inputs.push_back(m_knotPath.toStdString());
    return inputs;
}

QString QuantizePanel::suggestedExportPath(const QString& suffix) const {
    const QString input = m_model ? QString::fromStdString(m_model->label()) : QString();
    const QString tag = m_report ? QString::fromStdString(m_report->preset) : preset();
    return suggestedOutputPath(input, tag, suffix);
}

void QuantizePanel::exportKnotDialog() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export knot"),
                                                      suggestedExportPath(QStringLiteral("knot")), tr("Knot (*.knot)"));
    if (!path.isEmpty()) exportKnot(path);
}

void QuantizePanel::exportReconstructedDialog() {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export reconstructed model"), suggestedExportPath(QStringLiteral("safetensors")),
        tr("safetensors (*.safetensors);;GGUF (*.gguf);;llama2.c checkpoint (*.bin)"));
    if (!path.isEmpty()) exportReconstructed(path);
}

void QuantizePanel::onJobEnded(quint64 id, JobEnd how) {
    if (id == m_job) {
        m_job = 0;
        if (how == JobEnd::Finished) {
            m_progress->setValue(1000);
            emit quantized();
        } else if (how == JobEnd::Cancelled) {
            m_status->setText(tr("Cancelled; no knot was written"));
            m_progress->setValue(0);
            emit quantizeCancelled();
        }
    } else if (id == m_exportJob) {
        m_exportJob = 0;
        if (how == JobEnd::Cancelled) m_status->setText(tr("Export cancelled"));
    } else if (id == m_evalJob) {
        m_evalJob = 0;
        if (how == JobEnd::Cancelled) m_status->setText(tr("Evaluation cancelled"));
        if (how == JobEnd::Finished) {
            m_progress->setValue(1000);
            emit evaluated();
        }
    } else {
        return;
    }
    updateButtons();
}

void QuantizePanel::updateButtons() {
    const bool busy = m_job != 0 || m_exportJob != 0 || m_evalJob != 0;
    m_runButton->setEnabled(m_model != nullptr && m_job == 0);
    m_cancelButton->setEnabled(busy);
    m_exportKnotButton->setEnabled(!m_knotPath.isEmpty() && !busy);
    m_exportModelButton->setEnabled(!m_knotPath.isEmpty() && !busy);
    m_evaluateButton->setEnabled(!m_knotPath.isEmpty() && !busy);
}

QString QuantizePanel::exportUnavailableReason() const {
    if (m_exportJob != 0) return tr("An export is running: wait for it, or cancel it");
    if (m_job != 0) return tr("A quantization is running: its knot can be exported once it has finished");
    if (m_evalJob != 0) return tr("An evaluation is running: export once it has finished, or cancel it");
    if (m_knotPath.isEmpty())
        return m_model ? tr("No knot to export yet: quantize the open model first (Quantize, Ctrl+R)")
                       : tr("No knot to export yet: open a model and quantize it (Quantize, Ctrl+R)");
    return {};
}

}  // namespace gkq::ui
