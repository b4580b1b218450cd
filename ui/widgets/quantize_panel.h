// QuantizePanel: choose a preset, override its parameters (one control per row of the core's override table,
// gkq/quantize_fields.h: the fields and values `gkq quantize` accepts), quantize the open model into a knot (a
// JobRunner job with a progress bar and a working Cancel), see the core's per-tensor report and whole-model totals, and
// export the knot or a reconstructed safetensors / GGUF / llama2.c model (written atomically by the core), and evaluate
// the knot against the open model on a chosen text (the core's KLD report).
// Calibration files (CalibrationFiles: an importance matrix, the activations' Gram matrices) and a target bits per
// weight (mixed precision by measurement: the core's plan_target_bpw chooses each projection's block type, then the
// run quantizes with that choice as per-layer overrides, as `gkq quantize --target-bpw` does) go into a run as
// `gkq quantize --imatrix / --gram / --target-bpw` take them, and so does a sensitivity text (--sensitivity-text:
// the core's make_output_probe weights the plan by each matrix's measured effect on the output). What keeps a run from
// starting (a whitened preset without a Gram file, a target with a base preset that stores no blocks) disables
// Quantize, and the reason is its tooltip and the line beside it. The knot of the last run lives in a temporary
// directory until exported or replaced. Beside the result table, a per-layer x role heat map (LayerRoleModel,
// LayerRoleHeatMap) of the last run's method, bits per weight or error; with a knot open and no run yet, of the knot's
// records. Clicking a cell (or a row of the table) selects that tensor in the table and emits tensorSelected (the model
// browser follows).
#pragma once

#include "gkq/evaluate.h"
#include "gkq/quantize.h"
#include "gkq/weights.h"
#include "jobs/job_watch.h"
#include "jobs/scratch_dir.h"

#include <QStringList>
#include <QTemporaryDir>

#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QTabWidget;

namespace gkq::ui {

class CalibrationFiles;
class JobRunner;
class LayerRoleHeatMap;
class LayerRoleModel;
class QuantResultModel;

class QuantizePanel : public QWidget {
    Q_OBJECT
public:
    QuantizePanel(JobRunner* runner, QWidget* parent = nullptr);
    ~QuantizePanel() override;

    void setModel(std::shared_ptr<const Weights> model);
    void setPreset(const QString& name);
    QString preset() const;
    // The options the controls describe (preset + overrides that are set).
    QuantizeOptions options() const;
    // Sets the control of override `flag` (a row of gkq::override_fields(), "rank") to `value` as the command line
    // writes it ("8", "q4_0", "on"); an empty value sets it back to the preset's. False when the row does not
    // accept the value or the control cannot show it.
    bool setOverride(const QString& flag, const QString& value);
    QStringList overrideFlags() const;  // the rows' flags, in table order

    // The target bits per weight (0: off, the default); false when `bpw` is outside [0, 32] (the range of
    // `gkq quantize --target-bpw`) or the control cannot show it.
    bool setTargetBpw(double bpw);
    double targetBpw() const;
    // The calibration text whose output sensitivities scale each projection's errors in the target's choice (gkq
    // quantize --target-bpw --sensitivity-text FILE): the model runs over it once, then once per matrix with that
    // matrix alone at its cheapest type, and the mean KLD against the model's own logits is the matrix's weight.
    // Empty clears it; false (and unchanged) when `path` is not a readable file.
    bool setSensitivityText(const QString& path);
    QString sensitivityText() const { return m_sensitivityText; }
    CalibrationFiles* calibrationFiles() const { return m_calibration; }

    // Why Quantize cannot start now (no model, a run, a calibration file loading, a whitened preset without a Gram
    // file, a target with a preset or override it excludes, a sensitivity text without a target); empty when it can.
    QString quantizeUnavailableReason() const;
    quint64 startQuantize();  // 0 when refused: quantizeUnavailableReason() is then the status line
    // One run with per-layer overrides (an rknot tuning, rknot_layer_overrides) above the controls' options;
    // `source` names the tuning in the status line. Later runs are untuned again. Refused with a target bits per
    // weight set (its plan chooses every projection's type: `gkq quantize` refuses --target-bpw with --tuning).
    quint64 startQuantizeWithTuning(std::vector<LayerOverride> perLayer, const QString& source);
    void cancel();
    // Export the last knot, or a reconstruction of it (format from the extension: .safetensors, .gguf, .bin).
    quint64 exportKnot(const QString& path);
    quint64 exportReconstructed(const QString& path);
    // KLD of the last knot against the open model on the text in `textPath` (job key "evaluate").
    quint64 evaluate(const QString& textPath);
    const std::optional<EvalReport>& lastEvaluation() const { return m_eval; }
    QString evaluationText() const;

    QuantResultModel* resultModel() const { return m_results; }
    QTableView* resultView() const { return m_table; }
    // The heat map, its model and its controls (the measure list: Method, Bits per weight, Relative error).
    LayerRoleModel* layerRoleModel() const { return m_layerRoles; }
    LayerRoleHeatMap* heatMap() const { return m_heatMap; }
    QComboBox* measureCombo() const { return m_measureCombo; }
    QComboBox* groupCombo() const { return m_groupCombo; }
    QCheckBox* logScaleCheck() const { return m_logScale; }
    QTabWidget* resultTabs() const { return m_resultTabs; }
    // Selects tensor `name`'s row in the result table (false when no row shows it) and emits tensorSelected.
    bool selectTensor(const QString& name);
    QString selectedTensor() const;  // the result table's current row's tensor, empty without one
    const std::optional<QuantizeReport>& lastReport() const { return m_report; }
    // The last run's plan of types, when it had a target bits per weight.
    const std::optional<BpwPlan>& lastPlan() const { return m_plan; }
    QString lastKnotPath() const { return m_knotPath; }
    // What the export dialogs propose: "<model>-<preset>.<suffix>" beside the open model (suggestedOutputPath).
    QString suggestedExportPath(const QString& suffix) const;
    // The save dialogs of Export knot and Export model (File > Export too), proposing suggestedExportPath().
    void exportKnotDialog();
    void exportReconstructedDialog();
    // Why neither export can start now (no knot yet, a job running); empty when they can.
    QString exportUnavailableReason() const;
    QString totalsText() const;
    QString statusText() const;  // the line under the progress bar
    QProgressBar* progressBar() const { return m_progress; }
    QPushButton* cancelButton() const { return m_cancelButton; }
    QPushButton* runButton() const { return m_runButton; }
    QLabel* runNote() const { return m_runNote; }
    QPushButton* evaluateButton() const { return m_evaluateButton; }
    bool isRunning() const { return m_job != 0; }

signals:
    void quantized();
    void quantizeCancelled();
    void exported(const QString& path);
    void evaluated();
    void errorOccurred(const QString& message);
    void tensorSelected(const QString& name);

private:
    void onJobEnded(quint64 id, JobEnd how);
    void updateButtons();
    // The files an export must not replace: the model's (gkq::model_input_files) and the knot being exported.
    std::vector<std::string> exportInputs() const;
    void evaluateDialog();

    JobRunner* m_runner = nullptr;
    std::shared_ptr<const Weights> m_model;
    QTemporaryDir m_tempDir{scratchTemplate()};
    int m_runCount = 0;
    quint64 m_job = 0;
    quint64 m_exportJob = 0;
    quint64 m_evalJob = 0;
    std::optional<EvalReport> m_eval;
    std::optional<QuantizeReport> m_report;
    std::optional<BpwPlan> m_plan;
    QString m_knotPath;
    std::vector<LayerOverride> m_tuning;  // set only while startQuantizeWithTuning() starts its run

    QComboBox* m_presetCombo = nullptr;
    QLabel* m_presetDescription = nullptr;
    // The override controls, one per row of override_fields() and in its order; exactly one pointer is set.
    struct OverrideControl {
        QString flag;
        QString label;
        QComboBox* choice = nullptr;
        QSpinBox* integer = nullptr;
        QDoubleSpinBox* real = nullptr;
    };
    static QString overrideValue(const OverrideControl& c);  // the control's text; empty: the preset's
    ParamOverride globalOverrides() const;                   // the controls that are set
    std::vector<OverrideControl> m_overrides;
    QSpinBox* m_threads = nullptr;
    QDoubleSpinBox* m_targetBpw = nullptr;
    QString m_sensitivityText;  // gkq quantize --sensitivity-text; empty: none
    QLabel* m_sensitivityLabel = nullptr;
    QPushButton* m_sensitivityClear = nullptr;
    CalibrationFiles* m_calibration = nullptr;
    QLabel* m_runNote = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QPushButton* m_evaluateButton = nullptr;
    QPushButton* m_exportKnotButton = nullptr;
    QPushButton* m_exportModelButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_totals = nullptr;
    QLabel* m_evalLabel = nullptr;
    QTableView* m_table = nullptr;
    QuantResultModel* m_results = nullptr;
    QTabWidget* m_resultTabs = nullptr;
    LayerRoleModel* m_layerRoles = nullptr;
    LayerRoleHeatMap* m_heatMap = nullptr;
    QComboBox* m_measureCombo = nullptr;
    QComboBox* m_groupCombo = nullptr;
    QCheckBox* m_logScale = nullptr;
};

}  // namespace gkq::ui
