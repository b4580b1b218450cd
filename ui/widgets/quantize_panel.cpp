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
#include "widgets/calibration_files.h"
#include "widgets/output_guard.h"
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
#include <cmath>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

namespace gkq::ui {

namespace {

// A run's outcome: the knot's report and, with a target bits per weight, the plan of types it quantized with.
struct QuantizeRun {
    QuantizeReport report;
    std::optional<BpwPlan> plan;
};

// The plan's choice in words: target, planned and lowest payload bits per weight, the types and how many of each.
QString planText(const BpwPlan& plan) {
    std::map<std::string, int> count;
    for (const BpwPlanTensor& t : plan.tensors) ++count[std::string(method_name(t.candidates[t.chosen].method))];
    QStringList types;
    for (const auto& [m, n] : count) types << QStringLiteral("%1 x%2").arg(QString::fromStdString(m)).arg(n);
    return QuantizePanel::tr(
               "<b>Target %1 bits per weight</b>: planned %2 of payload (lowest reachable %3); types "
               "chosen: %4; errors %5")
               .arg(QString::number(plan.target_bpw, 'f', 3), QString::number(plan.planned_bpw, 'f', 3),
                    QString::number(plan.lowest_bpw, 'f', 3), types.join(QStringLiteral(", ")),
                    plan.weighted
                        ? QuantizePanel::tr("weighted by the importance matrix (squared output error, diagonal)")
                        : QuantizePanel::tr("unweighted (squared Frobenius; choose an importance matrix to weight "
                                            "them by the activations)")) +
           (plan.output_measured ? QuantizePanel::tr(", each matrix's scaled by its measured effect on the output "
                                                     "(mean KLD with it alone at its cheapest type, sensitivity text); "
                                                     "token_embd and output chosen too")
                                 : QString());
}

}  // namespace

QuantizePanel::QuantizePanel(JobRunner* runner, QWidget* parent) : QWidget(parent), m_runner(runner) {
    m_presetCombo = new QComboBox(this);
    m_presetCombo->setToolTip(
        tr("The preset's method and parameters (gkq quantize --preset); the rows below override "
           "them, and the text beside it describes the preset"));
    for (const std::string& name : preset_names()) {
        m_presetCombo->addItem(QString::fromStdString(name));
        if (auto p = find_preset(name); p && preset_needs_gram(*p))
            m_presetCombo->setItemData(m_presetCombo->count() - 1,
                                       tr("Whitens by the activations: needs a file under Activation Gram matrices "
                                          "(gkq imatrix MODEL --text FILE -o IMATRIX --gram FILE)"),
                                       Qt::ToolTipRole);
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
    m_targetBpw = new QDoubleSpinBox(this);
    m_targetBpw->setObjectName(QStringLiteral("target-bpw"));
    m_targetBpw->setRange(0.0, 32.0);  // gkq quantize --target-bpw's range; 0 is off
    m_targetBpw->setDecimals(3);
    m_targetBpw->setSingleStep(0.25);
    m_targetBpw->setSpecialValueText(tr("off"));
    m_targetBpw->setValue(0.0);
    m_targetBpw->setToolTip(
        tr("gkq quantize --target-bpw: mixed precision by measurement. Every attention and FFN projection is "
           "measured with Q2_K, Q3_K, Q4_K, IQ4_NL, Q5_K, Q6_K and Q8_0 (of two at the same bits, the smaller "
           "error kept; its squared error, weighted by the importance "
           "matrix's column importance when one is set), then each one's type is chosen greedily by error "
           "reduction per bit so that the payload fits this many bits per weight; token_embd Q4_K, output Q6_K, "
           "norms f32 (llama-quantize's fallbacks). The preset must be a k-quant mixture, q8_0 or q4_0, and Method "
           "stays at preset. The heat map's Method shows the types chosen."));
    m_calibration = new CalibrationFiles(m_runner, this);

    auto* form = new QFormLayout();
    form->setFieldGrowthPolicy(QFormLayout::FieldsStayAtSizeHint);
    form->addRow(tr("Preset"), m_presetCombo);
    for (const OverrideControl& c : m_overrides)
        form->addRow(c.label, c.choice    ? static_cast<QWidget*>(c.choice)
                              : c.integer ? static_cast<QWidget*>(c.integer)
                                          : static_cast<QWidget*>(c.real));
    form->addRow(tr("Threads"), m_threads);
    form->addRow(tr("Target bits per weight"), m_targetBpw);
    m_sensitivityLabel = new QLabel(tr("none"), this);
    m_sensitivityLabel->setObjectName(QStringLiteral("sensitivity-text"));
    auto* chooseSensitivity = new QPushButton(tr("Choose..."), this);
    chooseSensitivity->setToolTip(
        tr("gkq quantize --sensitivity-text: a calibration text on which the target's choice measures each "
           "projection's effect on the output. The model runs over it once, then once per matrix with that matrix "
           "alone at its cheapest type; the mean KL divergence of the logits against the model's own, per unit of "
           "that type's error, weights the matrix's errors, and token_embd and output are chosen too. Costs one "
           "pass over the text per matrix."));
    m_sensitivityClear = new QPushButton(tr("Clear"), this);
    connect(chooseSensitivity, &QPushButton::clicked, this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Sensitivity text (gkq quantize --sensitivity-text)"), QString(),
                                         tr("Text (*.txt);;All files (*)"));
        if (!path.isEmpty() && !setSensitivityText(path)) m_status->setText(tr("Cannot read %1").arg(path));
    });
    connect(m_sensitivityClear, &QPushButton::clicked, this, [this] { setSensitivityText(QString()); });
    auto* sensitivityRow = new QHBoxLayout();
    sensitivityRow->addWidget(m_sensitivityLabel, 1);
    sensitivityRow->addWidget(chooseSensitivity);
    sensitivityRow->addWidget(m_sensitivityClear);
    form->addRow(tr("Sensitivity text"), sensitivityRow);

    m_runButton = new QPushButton(tr("Quantize"), this);
    m_runNote = new QLabel(this);
    m_runNote->setObjectName(QStringLiteral("quantize-note"));
    m_runNote->setWordWrap(true);
    m_runNote->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_runNote->setVisible(false);
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

    auto* settings = new QVBoxLayout();
    settings->addLayout(form);
    settings->addWidget(m_calibration);
    auto* top = new QHBoxLayout();
    top->addLayout(settings);
    top->addWidget(m_presetDescription, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addLayout(buttons);
    layout->addWidget(m_runNote);
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

    // Whether Quantize can start follows the preset, the Method override, the target and the calibration files.
    connect(m_presetCombo, &QComboBox::currentTextChanged, this, &QuantizePanel::updateButtons);
    for (const OverrideControl& c : m_overrides) {
        if (c.choice) connect(c.choice, &QComboBox::currentIndexChanged, this, &QuantizePanel::updateButtons);
        if (c.integer) connect(c.integer, &QSpinBox::valueChanged, this, &QuantizePanel::updateButtons);
        if (c.real) connect(c.real, &QDoubleSpinBox::valueChanged, this, &QuantizePanel::updateButtons);
    }
    connect(m_targetBpw, &QDoubleSpinBox::valueChanged, this, &QuantizePanel::updateButtons);
    connect(m_calibration, &CalibrationFiles::changed, this, &QuantizePanel::updateButtons);
    connect(m_calibration, &CalibrationFiles::loadFailed, this, [this](const QString& message) {
        m_status->setText(message);
        emit errorOccurred(message);
    });
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
    m_calibration->setModel(m_model);  // the files are matched with the new model's matrices again
    m_report.reset();
    m_plan.reset();
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

ParamOverride QuantizePanel::globalOverrides() const {
    ParamOverride global;
    const std::span<const OverrideField> fields = override_fields();
    for (size_t i = 0; i < fields.size(); ++i)
        if (const QString v = overrideValue(m_overrides[i]); !v.isEmpty())
            (void)set_override(fields[i], global, v.toStdString());  // a control holds only values the row admits
    return global;
}

QuantizeOptions QuantizePanel::options() const {
    QuantizeOptions o;
    o.preset = preset().toStdString();
    o.global = globalOverrides();
    m_calibration->apply(o);  // --imatrix and --gram, values and recorded command
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

bool QuantizePanel::setTargetBpw(double bpw) {
    if (!std::isfinite(bpw) || bpw < m_targetBpw->minimum() || bpw > m_targetBpw->maximum()) return false;
    m_targetBpw->setValue(bpw);
    return std::fabs(m_targetBpw->value() - bpw) < 0.5e-3;  // the control rounds to its decimals
}

double QuantizePanel::targetBpw() const {
    return m_targetBpw->value();
}

bool QuantizePanel::setSensitivityText(const QString& path) {
    if (!path.isEmpty() && !QFileInfo(path).isFile()) return false;
    if (!path.isEmpty() && !QFileInfo(path).isReadable()) return false;
    m_sensitivityText = path;
    m_sensitivityLabel->setText(path.isEmpty() ? tr("none") : QFileInfo(path).fileName());
    m_sensitivityLabel->setToolTip(path);
    updateButtons();
    return true;
}

QString QuantizePanel::quantizeUnavailableReason() const {
    if (!m_model) return tr("Open a model first: Quantize encodes the open model");
    if (m_job != 0) return tr("A quantization is running: wait for it, or cancel it");
    if (m_calibration->isLoading())
        return tr("Reading %1: Quantize once it is loaded").arg(QFileInfo(m_calibration->loadingFile()).fileName());
    const std::string name = preset().toStdString();
    if (!m_sensitivityText.isEmpty() && targetBpw() <= 0.0)
        return tr(
            "A sensitivity text weights the choice of a target bits per weight: set a target, or clear the text "
            "(gkq quantize takes --sensitivity-text only with --target-bpw)");
    if (targetBpw() > 0.0) {
        if (Status s = check_target_bpw_preset(name); !s)
            return tr("Target bits per weight: %1; choose one of them, or set the target to off")
                .arg(QString::fromStdString(s.message()));
        if (globalOverrides().method)
            return tr(
                "Target bits per weight chooses every projection's method: set Method back to preset, or the "
                "target to off (gkq quantize refuses --target-bpw with --method)");
    }
    auto p = find_preset(name);
    if (!p) return QString::fromStdString(p.message());
    if (preset_needs_gram(*p) && !m_calibration->hasGram())
        return tr("Preset %1 whitens by the activations and needs their Gram matrices: choose a file under "
                  "\"Activation Gram matrices...\" (written by gkq imatrix MODEL --text FILE -o IMATRIX --gram FILE)")
            .arg(preset());
    return {};
}

quint64 QuantizePanel::startQuantize() {
    if (!m_model) return 0;
    if (const QString why = quantizeUnavailableReason(); !why.isEmpty()) {
        m_status->setText(why);
        return 0;
    }
    if (!m_tempDir.isValid()) {
        m_status->setText(tr("No scratch folder for the knot: %1").arg(m_tempDir.errorString()));
        return 0;
    }
    const QuantizeOptions opts = options();
    const double target = targetBpw();
    const std::string sensitivity = m_sensitivityText.toStdString();
    const std::string out = m_tempDir.filePath(QStringLiteral("run-%1.knot").arg(++m_runCount)).toStdString();
    std::shared_ptr<const Weights> model = m_model;
    m_progress->setValue(0);
    m_status->setText(
        target <= 0.0 ? tr("Quantizing with preset %1...").arg(preset())
        : sensitivity.empty()
            ? tr("Measuring the types for %1 bits per weight, then quantizing with preset %2...")
                  .arg(QString::number(target, 'f', 3), preset())
            : tr("Measuring each matrix's effect on the output over %1 and the types for %2 bits per "
                 "weight, then quantizing with preset %3...")
                  .arg(QFileInfo(m_sensitivityText).fileName(), QString::number(target, 'f', 3), preset()));
    m_job = m_runner->run<QuantizeRun>(
        QStringLiteral("quantize"), tr("Quantizing (%1)").arg(preset()),
        [model, opts, out, target, sensitivity](const ProgressFn& progress) -> Result<QuantizeRun> {
            QuantizeRun run;
            QuantizeOptions o = opts;
            ProgressFn encode = progress;
            if (target > 0.0) {  // as gkq quantize --target-bpw: the plan's choice becomes the per-layer overrides
                // Progress: the sensitivity base pass (when a text is set) to 0.1, the measurements to 0.5, then
                // the encoding.
                BpwOutputProbe probe;
                const double from = sensitivity.empty() ? 0.0 : 0.1;
                if (!sensitivity.empty()) {  // as --sensitivity-text, with eval's windows and the model's tokenizer
                    OutputProbeRequest request;
                    request.text_path = sensitivity;
                    request.n_threads = o.n_threads;
                    auto made = make_output_probe(*model, request, [&progress](double f, std::string_view what) {
                        return report_progress(progress, 0.1 * f, what);
                    });
                    if (!made) return made.status();
                    probe = std::move(made).value();
                }
                auto plan = plan_target_bpw(
                    *model, target, o.importance, o.n_threads,
                    [&progress, from](double f, std::string_view what) {
                        return report_progress(progress, from + (0.5 - from) * f, what);
                    },
                    probe);
                if (!plan) return plan.status();
                o.per_layer = plan->overrides;
                run.plan = std::move(plan).value();
                encode = [progress](double f, std::string_view what) {
                    return report_progress(progress, 0.5 + 0.5 * f, what);
                };
            }
            auto report = quantize_model(*model, o, out, encode);
            if (!report) return report.status();
            run.report = std::move(report).value();
            return run;
        },
        [this](QuantizeRun& run) {
            QuantizeReport& report = run.report;
            m_plan = std::move(run.plan);
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
                    .arg(formatNumber(report.seconds, 3)) +
                (m_plan ? QStringLiteral("<br>") + planText(*m_plan) : QString()));
            m_report = std::move(report);
            m_status->setText(tr("Done: %1").arg(m_knotPath));
        });
    updateButtons();
    return m_job;
}

quint64 QuantizePanel::startQuantizeWithTuning(std::vector<LayerOverride> perLayer, const QString& source) {
    if (targetBpw() > 0.0) {
        m_status->setText(tr("Target bits per weight chooses every projection's type, a tuning sets them: set the "
                             "target to off to quantize with the tuning of %1")
                              .arg(source));
        return 0;
    }
    m_tuning = std::move(perLayer);
    const quint64 id = startQuantize();  // options() copies m_tuning into this run's options
    m_tuning.clear();
    if (id != 0) m_status->setText(tr("Quantizing with preset %1 and the tuning of %2...").arg(preset(), source));
    return id;
}

void QuantizePanel::cancel() {
    m_calibration->cancel();
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
    const QString why = quantizeUnavailableReason();
    m_runButton->setEnabled(why.isEmpty());
    m_runButton->setToolTip(why.isEmpty() ? tr("Quantize the open model with these settings (Ctrl+R)") : why);
    // Said beside the button too when it is about the settings (the view's notice says "open a model", the
    // progress line "running").
    const bool aboutSettings = m_model != nullptr && m_job == 0 && !why.isEmpty();
    m_runNote->setText(aboutSettings ? why : QString());
    m_runNote->setVisible(aboutSettings);
    m_cancelButton->setEnabled(busy || m_calibration->isLoading());
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
