// CalibrationFiles: the Quantize view's calibration inputs, the two files `gkq quantize` takes — an importance matrix
// (--imatrix: gkq imatrix or llama-imatrix, GGUF or legacy .dat) and the activations' Gram matrices (--gram: gkq
// imatrix --gram; the whitened presets svd-llm and q4_0-lqer need it). Each is a row with a file picker and a clear
// button. A chosen file is matched with the open model's matrices by the core (load_model_importance,
// load_model_gram) in a JobRunner job; a file that does not fit — another model's, not such a file, corrupt — is
// refused with the core's message, which names the file and the entry or tensor, and the row then holds no file.
// Opening another model matches the files held again (a refusal clears them as above).
// apply() gives a run what `gkq quantize --imatrix FILE --gram FILE` gives it: the values and the recorded command.
#pragma once

#include "gkq/imatrix.h"
#include "gkq/quantize.h"
#include "gkq/weights.h"

#include <QString>
#include <QWidget>
#include <array>
#include <memory>

class QLabel;
class QPushButton;
class QToolButton;

namespace gkq::ui {

class JobRunner;

class CalibrationFiles : public QWidget {
    Q_OBJECT
public:
    enum class Kind { Importance, Gram };

    explicit CalibrationFiles(JobRunner* runner, QWidget* parent = nullptr);
    ~CalibrationFiles() override;

    // The model the files are matched with; each file held is loaded again for it (none: held, not loaded).
    void setModel(std::shared_ptr<const Weights> model);
    // Loads `path` for the open model (job id). An empty path clears the row; without a model the path is held
    // and 0 returned.
    quint64 setFile(Kind kind, const QString& path);
    void clear(Kind kind);
    void cancel();  // stops the loads that run; their rows hold no file

    // The file loaded and matched with the open model; empty while it loads, after a refusal and when none is set.
    QString file(Kind kind) const;
    bool isLoading() const;
    QString loadingFile() const;       // the file a running load reads (the first kind's), empty when none
    QString summary(Kind kind) const;  // the row's text: what the file gives, or why it was refused
    bool hasGram() const { return m_gram != nullptr; }
    const ModelImportance* importance() const { return m_importance.get(); }
    const ModelGram* gram() const { return m_gram.get(); }

    // Adds the loaded files to a run's options as `gkq quantize` does (importance, importance_command and _metadata;
    // gram and gram_command).
    void apply(QuantizeOptions& options) const;

    QPushButton* chooseButton(Kind kind) const { return row(kind).choose; }
    QToolButton* clearButton(Kind kind) const { return row(kind).clear; }

signals:
    void changed();                           // a file loaded, was refused, cleared or is loading
    void loadFailed(const QString& message);  // the core's message: it names the file

private:
    struct Row {
        QString path;  // chosen: loading or loaded
        quint64 job = 0;
        QString summary;
        QLabel* label = nullptr;
        QPushButton* choose = nullptr;
        QToolButton* clear = nullptr;
    };
    Row& row(Kind kind) { return m_rows[static_cast<size_t>(kind)]; }
    const Row& row(Kind kind) const { return m_rows[static_cast<size_t>(kind)]; }
    void chooseDialog(Kind kind);
    void onEnded(quint64 id, const QString& failure, bool cancelled);
    void showRow(Kind kind);

    JobRunner* m_runner = nullptr;
    std::shared_ptr<const Weights> m_model;
    std::array<Row, 2> m_rows;
    std::shared_ptr<const ModelImportance> m_importance;
    std::shared_ptr<const ModelGram> m_gram;
};

}  // namespace gkq::ui
