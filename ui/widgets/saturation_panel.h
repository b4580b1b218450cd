// SaturationPanel: the FFN neurons' activation ("saturation") masks of the open model. Profile a calibration text
// (default: the last text profiled on, else heldout.txt beside the model; its first N tokens; tokenized by the model's
// vocabulary, else a tokenizer.bin beside it, else the one the user picks) with the core's profile workflow
// (profile_model, gkq/workflows.h) through the JobRunner (job key "saturation", progress and Cancel), or load a masks
// file written by `gkq profile`. Shows the masks as an image (one row per block, one pixel column per FFN hidden
// neuron, coloured by the core's frequency bin, hot neurons bright and cold ones dark), the core's frequency
// histogram, and per block the hot count and share.
// The minimum frequency (default 0.1: hot when saturated on more than one token in ten; at 0 or 0.01 nearly every
// neuron is hot at T = 1) re-derives the masks from the stored counts (rederive_masks, no model run); the activation
// threshold T cannot be derived from the counts, so changing it starts a new profiling job, and the control says so.
// A profile made here matches `gkq profile MODEL --text FILE --threshold T --min-frequency F --max-tokens N`.
#pragma once

#include "gkq/metadata.h"
#include "gkq/saturation.h"
#include "gkq/weights.h"
#include "jobs/job_watch.h"

#include <QImage>
#include <QWidget>
#include <memory>
#include <optional>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace gkq::ui {

class JobRunner;
class MaskView;
class SaturationHistogram;

class SaturationPanel : public QWidget {
    Q_OBJECT
public:
    SaturationPanel(JobRunner* runner, QWidget* parent = nullptr);
    ~SaturationPanel() override;

    // A model file or a knot: its own vocabulary, else a tokenizer.bin beside it, tokenizes the text.
    void setModel(std::shared_ptr<const Weights> model);
    void setTextPath(const QString& path);
    // A llama2.c tokenizer.bin to use instead of the automatic choice (empty: automatic).
    void setTokenizerPath(const QString& path);
    QString textPath() const;
    void setMaxTokens(int n);  // 0: the whole text
    int maxTokens() const;

    // Profiles the open model on the text with the current T and minimum frequency; 0 without a model or text.
    quint64 startProfile();
    void cancel();
    // Changes T; when a profile is shown and T differs from its T, a profiling job starts (returned; else 0).
    quint64 setThreshold(double t);
    double threshold() const;
    // Re-derives the shown masks from the stored counts (no model run); false with errorText() when out of range.
    bool setMinFrequency(double f);
    double minFrequency() const;

    // Reads a masks file (`gkq profile -o`); false with errorText() naming the file. Synchronous: it is small.
    bool loadMasks(const QString& path);
    bool saveMasks(const QString& path);

    const std::optional<SaturationProfile>& currentProfile() const { return m_profile; }
    QImage masksImage() const { return m_image; }  // (n_ff wide, n_layers high)
    SaturationHistogram* histogram() const { return m_histogram; }
    QTableWidget* layerTable() const { return m_table; }
    QPushButton* cancelButton() const { return m_cancelButton; }
    QPushButton* profileButton() const { return m_profileButton; }
    QString errorText() const { return m_error; }
    QString summaryText() const;
    QString histogramText() const;  // the shown histogram's exact counts in words
    bool isRunning() const { return m_job != 0; }
    // Layer shown by the histogram: -1 all layers (the sum of every block's histogram).
    void setHistogramLayer(int layer);

signals:
    void profiled();
    void profileCancelled();
    void masksLoaded(const QString& path);
    void errorOccurred(const QString& message);

private:
    void onEnded(quint64 id, JobEnd how);
    void showProfile(SaturationProfile profile);
    void refreshViews();
    void refreshHistogram();
    void setError(const QString& message);
    void updateButtons();

    JobRunner* m_runner = nullptr;
    std::shared_ptr<const Weights> m_model;
    quint64 m_job = 0;
    std::optional<SaturationProfile> m_profile;
    QImage m_image;
    QString m_error;
    QString m_source;  // what the shown profile came from, for the summary

    QLineEdit* m_text = nullptr;
    QLineEdit* m_tokenizer = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QDoubleSpinBox* m_threshold = nullptr;
    QDoubleSpinBox* m_minFrequency = nullptr;
    QPushButton* m_profileButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QPushButton* m_loadButton = nullptr;
    QPushButton* m_saveButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_summary = nullptr;
    MaskView* m_maskView = nullptr;
    QComboBox* m_histLayer = nullptr;
    SaturationHistogram* m_histogram = nullptr;
    QLabel* m_histCounts = nullptr;
    QTableWidget* m_table = nullptr;
};

}  // namespace gkq::ui
