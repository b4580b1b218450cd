// SpectrumPanel: the selected tensor's singular values (log) and cumulative energy, a rank slider that shows the
// exact relative error, energy kept and bits per weight at that rank (rank_stats.h), an overlay of pinned tensors,
// the WeightWatcher metrics with their reliability flags, and a heat map of one role across all layers.
// Spectra come from one job (through the JobRunner, with a progress bar and a status line that ends in its final
// state): the spectra cache beside the model when it holds them for the files as they are now
// (gkq/spectrum_cache.h), else analyze_model, whose per-tensor progress says how many tensors are done and the time
// left at the rate so far, and whose result is written to the cache. They are kept per tensor in a SpectrumStore,
// which says where they came from; Analyze again says they are already there. Cancel stops the job.
// "As the data sees it": Load Gram file... reads a Gram file of the open model (gkq imatrix --gram) and computes, in a
// job of its own (key "whiten", its own progress bar, status line and Cancel; jobs/whitened_spectra_job.h), the
// spectrum of W L for every matrix the file covers, L the Cholesky factor of the Gram matrix X^T X of the matrix's
// inputs. The toggle beside it draws the selected matrix's W L spectrum next to W's, both over their own s_1, with
// W L's cumulative energy (the layer's output energy on the calibration text), and a readout of both: energy kept and
// relative error at rank k, stable rank, ranks for 90 / 99 / 99.9 % energy. A matrix the file has no entry for says
// so ("no activations for this matrix in FILE"); a file that does not fit the model says why and changes nothing.
#pragma once

#include "gkq/weights.h"

#include <QStringList>
#include <QWidget>
#include <memory>

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSlider;
class QSpinBox;

namespace gkq {
struct WhitenedSpectrum;
}

class QCheckBox;

namespace gkq::ui {

class JobRunner;
struct WhitenedSpectra;
class SpectrumChart;
class SpectrumHeatMap;
class SpectrumStore;

class SpectrumPanel : public QWidget {
    Q_OBJECT
public:
    SpectrumPanel(JobRunner* runner, QWidget* parent = nullptr);

    void setModel(std::shared_ptr<const Weights> model);
    // Starts the analysis of every matrix (job key "analyze"); returns the job id. 0, with statusText() saying why,
    // without a model, while one runs, or when the open model's spectra are already there.
    quint64 analyze();
    QString statusText() const;
    void showTensor(const QString& name);
    void setRank(int k);
    void pinCurrent();
    void clearOverlay();
    void setHeatMapRole(TensorRole role);
    // The spectrum chart as PNG or SVG (charts/chart_export.h), written atomically; false with `error` naming the file.
    bool exportPng(const QString& path, QString* error = nullptr) const;
    bool exportSvg(const QString& path, QString* error = nullptr) const;

    SpectrumStore* store() const { return m_store; }
    // Analyses that computed spectra (not read them from the cache) since this panel was made.
    int computeCount() const { return m_computeCount; }
    SpectrumChart* chart() const { return m_chart; }
    SpectrumHeatMap* heatMap() const { return m_heatMap; }
    QString currentTensor() const { return m_current; }
    int rank() const;
    QString rankText() const;
    QString metricsText() const;
    QStringList overlay() const { return m_overlay; }

    // Reads the Gram file `path` for the open model and computes the W L spectra (job key "whiten"); returns the job
    // id. 0, with gramStatusText() saying why, without a model or while one runs. A load that fails (the file of
    // another model, not a Gram file) keeps what was shown before and says so.
    quint64 loadGram(const QString& path);
    void cancelGram();
    // The "as the data sees it" overlay and readout; turned on when a Gram file's spectra arrive. Without them it
    // stays off (the toggle is disabled).
    void setDataView(bool on);
    bool dataView() const;
    QString gramFile() const;  // the file whose W L spectra are held; empty when none
    QString gramStatusText() const;
    QString dataText() const;  // the readout under the rank line (rich text); empty while the overlay is off
    // The W L spectrum of the tensor (by stored name) as whitened_spectrum() gave it; nullptr when none is held.
    const WhitenedSpectrum* whitened(const QString& name) const;

signals:
    void analyzed();
    void gramLoaded();
    void gramFailed(const QString& message);

private:
    void refreshChart();
    void refreshRank();
    void refreshMetrics();
    void refreshHeatMap();
    void refreshRoles();
    void refreshData();

    JobRunner* m_runner = nullptr;
    SpectrumStore* m_store = nullptr;
    std::shared_ptr<const Weights> m_model;
    QString m_current;
    quint64 m_analyzeJob = 0;
    QStringList m_overlay;
    QString m_analyzedText;  // the status line of the last finished analysis
    int m_computeCount = 0;
    quint64 m_gramJob = 0;
    std::shared_ptr<const WhitenedSpectra> m_whitened;
    QString m_gramText;  // the status line of the last finished Gram load

    QLabel* m_title = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QPushButton* m_analyzeButton = nullptr;
    QPushButton* m_pinButton = nullptr;
    QPushButton* m_clearButton = nullptr;
    SpectrumChart* m_chart = nullptr;
    QSlider* m_slider = nullptr;
    QSpinBox* m_rankSpin = nullptr;
    QLabel* m_rankLabel = nullptr;
    QLabel* m_metrics = nullptr;
    QPushButton* m_gramButton = nullptr;
    QCheckBox* m_dataBox = nullptr;
    QPushButton* m_gramCancel = nullptr;
    QProgressBar* m_gramProgress = nullptr;
    QLabel* m_gramStatus = nullptr;
    QLabel* m_data = nullptr;
    QComboBox* m_roleCombo = nullptr;
    SpectrumHeatMap* m_heatMap = nullptr;
};

}  // namespace gkq::ui
