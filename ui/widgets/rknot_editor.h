// RknotEditor: the Tuning view — open, edit and save an rknot (the per-layer report and tuning file, gzipped JSON;
// docs/rknot-format.md), make a new one from the open model's last quantization, and re-quantize the model with the
// edited tuning.
// Contract: reading and writing go through the core (read_rknot; write_rknot writes atomically); a new rknot is the
// core's encode_rknot of the Quantize view's last knot with the open model as the spectrum source, run as a
// JobRunner job with a progress bar and a working Cancel. Every field is shown in an RknotTreeModel; edits are
// validated by the core, one undo command each (Ctrl+Z / Ctrl+Shift+Z). A list shows the changed JSON paths against
// the file on disk (on-disk value -> edited value) and the title carries " *" while the edits are unsaved. Opening
// another file, making a new one or closing with unsaved edits asks first: a window-modal, non-blocking box on a
// real display; under the offscreen platform (tests) the action is refused and the warning is lastMessage().
// "New from model" with no knot of the model yet asks (quantizePrompt()) before it runs a quantization.
// "Re-quantize with this tuning" hands the rknot's per-layer overrides (rknot_layer_overrides, as
// `gkq quantize --tuning`) to the QuantizePanel for one run.
#pragma once

#include "gkq/weights.h"

#include <QString>
#include <QWidget>
#include <functional>
#include <memory>

class QAction;
class QLabel;
class QMessageBox;
class QProgressBar;
class QPushButton;
class QTreeView;
class QTreeWidget;
class QUndoStack;

namespace gkq::ui {

class JobRunner;
class QuantizePanel;
class RknotTreeModel;

class RknotEditor : public QWidget {
    Q_OBJECT
public:
    RknotEditor(JobRunner* runner, QuantizePanel* quantize, QWidget* parent = nullptr);
    ~RknotEditor() override;

    // The open model: the spectrum source of a new rknot and the model a re-quantization runs on. `knotPath`: the
    // open model is that knot (read through its records): a new rknot encodes it alone, and there is no original to
    // re-quantize.
    void setModel(std::shared_ptr<const Weights> model, const QString& knotPath = {});

    // Reads `path` (read_rknot). With unsaved edits and !discardEdits: asks (see the contract) and returns false.
    bool openFile(const QString& path, bool discardEdits = false);
    bool save();                       // to filePath(); false without one (use saveAs)
    bool saveAs(const QString& path);  // write_rknot, atomic; the file becomes the one on disk
    bool revert();                     // re-reads the file, dropping the edits (and the undo history)
    void discardEdits();               // revert(), or forget a new rknot that was never saved
    // Another model was opened and the unsaved edits stay: the status line says whose they were.
    void noteCarriedOver(const QString& previousModel);
    // encode_rknot of `knotPath` with `modelPath` as the spectrum source (job id, 0 when refused).
    quint64 newFromKnot(const QString& knotPath, const QString& modelPath, bool discardEdits = false);
    // From the open model: encodes the Quantize view's last knot, quantizing first when there is none (an open knot:
    // encodes that knot).
    quint64 newFromOpenModel(bool discardEdits = false);
    // The "New from model" button: newFromOpenModel(), except that with no knot to encode it first asks
    // (quantizePrompt(), window-modal and non-blocking) whether to run the quantization, and runs none on Cancel.
    void askNewFromOpenModel();
    QMessageBox* quantizePrompt() const { return m_quantizePrompt; }
    QPushButton* newButton() const { return m_newButton; }
    void cancel();
    // Starts a quantization of the open model with this rknot's per-layer overrides (job id, 0 when refused).
    quint64 requantize();

    // With unsaved edits: warns that `action` would lose them (and returns false); on a real display the box's
    // Save / Discard buttons then run `proceed`. Without unsaved edits: true, and `proceed` is not called.
    bool confirmDiscard(const QString& action, const std::function<void()>& proceed);

    RknotTreeModel* treeModel() const { return m_tree; }
    QUndoStack* undoStack() const { return m_undo; }
    QTreeView* view() const { return m_view; }
    QTreeWidget* diffView() const { return m_diffView; }
    QPushButton* cancelButton() const { return m_cancelButton; }
    QPushButton* requantizeButton() const { return m_requantizeButton; }
    QProgressBar* progressBar() const { return m_progress; }
    QString filePath() const { return m_path; }
    bool isModified() const;
    bool isEncoding() const { return m_encodeJob != 0 || m_encodeAfterQuantize; }
    QString title() const;
    QString lastMessage() const { return m_message; }

signals:
    void titleChanged(const QString& title);
    void loaded(const QString& path);
    void saved(const QString& path);
    void encoded();
    void encodeCancelled();
    void requantizeStarted(quint64 job);
    void errorOccurred(const QString& message);
    void unsavedEditsWarning(const QString& message);

private:
    void fail(const QString& message);
    void setMessage(const QString& message);
    void onJobEnded(quint64 id, bool finished);
    void updateDiff();
    void updateState();
    void openDialog();
    void saveAsDialog();

    JobRunner* m_runner = nullptr;
    QuantizePanel* m_quantize = nullptr;
    std::shared_ptr<const Weights> m_model;
    QString m_openKnot;
    QString m_path;
    quint64 m_encodeJob = 0;
    bool m_encodeAfterQuantize = false;  // a new rknot waits for the quantization it started
    QString m_message;
    QMessageBox* m_quantizePrompt = nullptr;

    RknotTreeModel* m_tree = nullptr;
    QUndoStack* m_undo = nullptr;
    QTreeView* m_view = nullptr;
    QTreeWidget* m_diffView = nullptr;
    QLabel* m_diffLabel = nullptr;
    QLabel* m_status = nullptr;
    QProgressBar* m_progress = nullptr;
    QPushButton* m_newButton = nullptr;
    QPushButton* m_openButton = nullptr;
    QPushButton* m_saveButton = nullptr;
    QPushButton* m_saveAsButton = nullptr;
    QPushButton* m_revertButton = nullptr;
    QPushButton* m_requantizeButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QAction* m_undoAction = nullptr;
    QAction* m_redoAction = nullptr;
};

}  // namespace gkq::ui
