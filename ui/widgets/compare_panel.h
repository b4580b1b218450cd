// ComparePanel: quantize the open model with several presets and evaluate each knot against it on one text, then
// plot bits per weight against mean KLD (ParetoChart) with the points' table; export the chart as PNG or SVG and the
// data as CSV. One JobRunner job (key "compare") runs the presets in turn in one core EvalSession (gkq/workflows.h), so
// the open model runs over the text once, not once per preset (basePasses() is the session's count); Cancel stops it.
// Each preset's row and chart point appear as soon as it is measured (pointAdded), not at the end. The text defaults
// to the last one evaluated on (Compare, or Evaluate in the Quantize view: QSettings "evaluation/lastText"), else
// heldout.txt beside the model.
#pragma once

#include "gkq/weights.h"
#include "jobs/job_watch.h"
#include "jobs/scratch_dir.h"
#include "models/compare_result_model.h"

#include <QTemporaryDir>

#include <QWidget>
#include <memory>

class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QTableView;

namespace gkq::ui {

class JobRunner;
class ParetoChart;

class ComparePanel : public QWidget {
    Q_OBJECT
public:
    ComparePanel(JobRunner* runner, QWidget* parent = nullptr);
    ~ComparePanel() override;

    void setModel(std::shared_ptr<const Weights> model);
    void setPresets(const QStringList& presets);  // checks exactly these (those the workbench can run)
    QStringList presets() const;
    void setTextPath(const QString& path);
    QString textPath() const;
    QString statusText() const;
    // Times the base model ran over the text in the last finished run (the core session's count; -1 before one).
    qint64 basePasses() const { return m_basePasses; }
    quint64 run();  // 0 without a model, a text or a preset
    void cancel();
    bool isRunning() const { return m_job != 0; }
    bool exportCsv(const QString& path) const;
    bool exportPng(const QString& path) const;
    // The chart as SVG (charts/chart_export.h), written atomically.
    bool exportSvg(const QString& path, QString* error = nullptr) const;

    CompareResultModel* resultModel() const { return m_results; }
    ParetoChart* chart() const { return m_chart; }

signals:
    void pointAdded(int row);  // a preset measured while the run goes on
    void compared();
    void compareCancelled();

private:
    void onEnded(quint64 id, JobEnd how);
    // True (with a message box) when an export to `path` would replace the model or the evaluation text.
    bool refusesExport(const QString& path, QString* error) const;

    JobRunner* m_runner = nullptr;
    std::shared_ptr<const Weights> m_model;
    QTemporaryDir m_tempDir{scratchTemplate()};
    quint64 m_job = 0;
    quint64 m_run = 0;  // the run whose points are shown; points of an earlier one are dropped
    qint64 m_basePasses = -1;

    QListWidget* m_presetList = nullptr;
    QLineEdit* m_text = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QPushButton* m_csvButton = nullptr;
    QPushButton* m_pngButton = nullptr;
    QPushButton* m_svgButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    ParetoChart* m_chart = nullptr;
    QTableView* m_table = nullptr;
    CompareResultModel* m_results = nullptr;
};

}  // namespace gkq::ui
