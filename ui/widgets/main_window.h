// MainWindow: the workbench's top-level window — the model browser (dock), and the Overview, Spectrum, Quantize
// and Compare views (tabs); a status bar with the running job, its progress and a Cancel button; a Help menu
// (help_content.h: F1 help on the current view, the manual, keyboard shortcuts, About).
// Models open from the command line, File > Open, File > Open Recent, or by dropping a file on any view; the
// load runs through the JobRunner, then the spectra are analyzed in the background. File > Export writes the
// Quantize view's last knot or a model reconstructed from it (the dialogs propose "<model>-<preset>.<suffix>" in
// a folder the user can write to); File > Close closes the open model. Open Recent lists the files opened and
// the knots and models exported, newest first. Window layout, recent files and the last directory persist in
// QSettings. Errors show in the window (status bar and a message box on a real
// display) and never take the app down.
// Opening another model (or closing it) while the open one has a running server, unsaved tuning or Compare results
// asks first
// (switchPrompt(): a window-modal, non-blocking box, also under the offscreen platform): it names what stops (the
// server), what is cleared (Compare's results) and offers to keep or discard the unsaved tuning; nothing changes
// until the new model has loaded, so a failed open keeps all of it.
// Every tab stays selectable: a view that lacks what it works on (no model open, no knot yet) says so in a notice
// above the tabs (viewNotice()).
#pragma once

#include "gkq/weights.h"
#include "jobs/open_model_job.h"
#include "jobs/scratch_dir.h"

#include <QHash>
#include <QMainWindow>
#include <QStringList>

#include <functional>
#include <memory>

class QLabel;
class QMenu;
class QMessageBox;
class QProgressBar;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;
class QToolButton;

namespace gkq::ui {

class ComparePanel;
class JobRunner;
class ManualWindow;
class ModelBrowser;
class QuantizePanel;
class ReconstructPanel;
class RknotEditor;
class SaturationPanel;
class ServerPanel;
class SpectrumPanel;
class TensorTableModel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum Tab { OverviewTab, SpectrumTab, QuantizeTab, CompareTab, SaturationTab, TuningTab, ReconstructTab, ServeTab };

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // The bundled demo model's folder when it exists in the source tree this was built from, else empty.
    static QString demoModelPath();

    // Starts loading `path` (job id); on failure the window shows the error (lastError()) and keeps the model
    // that was open. Emits modelLoaded or loadFailed. When the open model has something that opening another
    // would stop or drop (switchLosses()), it asks first and returns 0: the load starts when switchPrompt() is
    // answered Open (Keep tuning / Discard tuning with unsaved tuning), and never on Cancel.
    quint64 openModel(const QString& path);
    // Closes the open model: every view goes back to "no model open". Asks first as openModel() does (switchPrompt(),
    // with Close for Open); without a model only the status bar says so.
    void closeModel();
    // What opening another model stops or drops of the open one's, one line each (empty: nothing).
    QStringList switchLosses() const;
    // The question openModel() or closeModel() is waiting on (nullptr when none).
    QMessageBox* switchPrompt() const { return m_switchPrompt; }
    QString lastError() const { return m_lastError; }
    QString modelPath() const { return m_modelPath; }
    std::shared_ptr<const Weights> model() const { return m_model; }
    // Open Recent's files, newest first: the models and knots opened and the knots and models exported.
    QStringList recentFiles() const;
    QMenu* recentMenu() const { return m_recentMenu; }

    JobRunner* runner() const { return m_runner; }
    TensorTableModel* tensorModel() const { return m_tensorModel; }
    ModelBrowser* browser() const { return m_browser; }
    SpectrumPanel* spectrumPanel() const { return m_spectrum; }
    QuantizePanel* quantizePanel() const { return m_quantize; }
    ComparePanel* comparePanel() const { return m_compare; }
    SaturationPanel* saturationPanel() const { return m_saturation; }
    ReconstructPanel* reconstructPanel() const { return m_reconstruct; }
    ServerPanel* serverPanel() const { return m_serve; }
    RknotEditor* rknotEditor() const { return m_tuning; }
    // Set while the open model is a knot (the views read its records): what the knot records about itself.
    const std::optional<KnotSummary>& knot() const { return m_knot; }
    // The Overview's summary of the open model (objectName "overviewSummary"): file, shapes, tokenizer.
    QLabel* overviewSummary() const { return m_summary; }
    // What Quantize, Evaluate and Compare measure while a knot is open (the knot, not its original); empty otherwise.
    QString knotNotice() const;
    QTabWidget* tabs() const { return m_tabs; }
    QTableView* tensorTable() const { return m_table; }
    // What Help showed last: the rich text of About, Keyboard shortcuts or the view's help (F1), or the manual's path.
    QString lastHelp() const { return m_lastHelp; }
    ManualWindow* manualWindow() const { return m_manual; }  // null until Help > Manual
    // The status bar's job label: the running job, or once none runs how the last one ended ("<label>: done",
    // "failed" or "cancelled").
    QString jobStatusText() const;
    // What the notice above the current view says is missing for it to work (no model open, no knot yet, no
    // server in this build); empty, and hidden, when the view has what it needs. Every tab stays selectable.
    QString viewNotice() const;

signals:
    void modelLoaded(const QString& path);
    void loadFailed(const QString& message);

protected:
    void closeEvent(QCloseEvent* event) override;
    // Drops of a local file on any widget of the window open it.
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void buildMenus();
    void openDialog();
    // File > Export: the Quantize view's export dialogs; without a knot yet the status bar says how to make one.
    void exportDialog(bool reconstructed);
    // What happens to the open model's things once the new one has loaded.
    enum class Tuning { Keep, Discard };
    // Asks `question` (what switchLosses() lists, and for unsaved tuning whether to keep it), window-modal and
    // non-blocking; `proceed` runs once answered with `verb`'s button (object name `acceptName`), never on Cancel.
    void confirmLeaving(const QString& question, const QString& verb, const QString& acceptName, const QString& waiting,
                        std::function<void(Tuning)> proceed);
    quint64 loadModel(const QString& path, Tuning tuning);
    // What belonged to the open model goes: its server stops and forgets its knot, its unsaved tuning is kept or
    // discarded (`previous` names the model it was made on).
    void releaseOpenModel(const QString& previous);
    void unloadModel(Tuning tuning);
    void onModelOpened(const QString& path, std::shared_ptr<const Weights> model);
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();
    void showError(const QString& message);
    void showHelp(const QString& title, const QString& text);
    void showTensorInOverview(const QString& name);
    void showRknotErrors(const QString& rknotPath);
    void saveLayout();
    QString noticeFor(int tab) const;
    void refreshViewNotice();

    JobRunner* m_runner = nullptr;
    TensorTableModel* m_tensorModel = nullptr;
    QSortFilterProxyModel* m_tableProxy = nullptr;
    QTableView* m_table = nullptr;
    QLabel* m_summary = nullptr;
    ModelBrowser* m_browser = nullptr;
    SpectrumPanel* m_spectrum = nullptr;
    QuantizePanel* m_quantize = nullptr;
    ComparePanel* m_compare = nullptr;
    SaturationPanel* m_saturation = nullptr;
    ReconstructPanel* m_reconstruct = nullptr;
    ServerPanel* m_serve = nullptr;
    RknotEditor* m_tuning = nullptr;
    std::optional<KnotSummary> m_knot;
    TokenizerSummary m_tokenizer;  // of the open model
    QTabWidget* m_tabs = nullptr;
    QLabel* m_viewNotice = nullptr;
    QMenu* m_recentMenu = nullptr;
    QLabel* m_jobLabel = nullptr;
    QHash<quint64, QString> m_jobLabels;  // running jobs' labels
    QString m_lastJobEnd;
    QProgressBar* m_jobProgress = nullptr;
    QToolButton* m_jobCancel = nullptr;
    std::shared_ptr<const Weights> m_model;
    QString m_modelPath;
    QString m_lastError;
    QString m_lastHelp;
    ManualWindow* m_manual = nullptr;
    quint64 m_loadJob = 0;
    Tuning m_loadTuning = Tuning::Keep;  // for the running load
    QMessageBox* m_switchPrompt = nullptr;
};

}  // namespace gkq::ui
