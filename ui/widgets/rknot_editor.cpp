#include "widgets/rknot_editor.h"

#include "gkq/rknot.h"
#include "jobs/job_runner.h"
#include "jobs/job_watch.h"
#include "models/rknot_tree_model.h"
#include "widgets/output_guard.h"
#include "widgets/quantize_panel.h"

#include <QAbstractButton>
#include <QAction>
#include <QFileDialog>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QToolButton>
#include <QTreeView>
#include <QTreeWidget>
#include <QUndoStack>
#include <QVBoxLayout>
#include <set>

namespace gkq::ui {

namespace {
const QString kEncodeKey = QStringLiteral("rknot-encode");

QString text(const std::string& s) {
    return QString::fromStdString(s);
}

QString fieldsChanged(size_t n) {
    return n == 1 ? RknotEditor::tr("1 field changed") : RknotEditor::tr("%1 fields changed").arg(n);
}
}  // namespace

RknotEditor::RknotEditor(JobRunner* runner, QuantizePanel* quantize, QWidget* parent)
    : QWidget(parent), m_runner(runner), m_quantize(quantize) {
    m_tree = new RknotTreeModel(this);
    m_undo = new QUndoStack(this);
    m_tree->setUndoStack(m_undo);

    m_view = new QTreeView(this);
    m_view->setModel(m_tree);
    m_view->setUniformRowHeights(true);
    m_view->setAlternatingRowColors(true);
    m_view->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                            QAbstractItemView::AnyKeyPressed | QAbstractItemView::SelectedClicked);
    m_view->header()->resizeSection(RknotTreeModel::Key, 300);  // fixed widths: a large rknot has ~10^5 rows
    m_view->header()->setStretchLastSection(true);
    m_view->header()->resizeSection(RknotTreeModel::Value, 320);  // tensor names and commands
    m_view->header()->resizeSection(RknotTreeModel::Type, 120);
    m_view->header()->resizeSection(RknotTreeModel::Allowed, 170);

    m_diffLabel = new QLabel(tr("No rknot open."), this);
    m_diffLabel->setWordWrap(true);
    m_diffView = new QTreeWidget(this);
    m_diffView->setColumnCount(3);
    m_diffView->setHeaderLabels({tr("Changed field"), tr("On disk"), tr("Edited")});
    m_diffView->setRootIsDecorated(false);
    m_diffView->setUniformRowHeights(true);
    auto* diffPane = new QWidget(this);
    auto* diffLayout = new QVBoxLayout(diffPane);
    diffLayout->setContentsMargins(0, 0, 0, 0);
    diffLayout->addWidget(m_diffLabel);
    diffLayout->addWidget(m_diffView, 1);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(m_view);
    split->addWidget(diffPane);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);

    // Undo / redo / save act while focus is anywhere in this view (the other views have shortcuts of their own).
    // The buttons keep their one-word text (QUndoStack's own actions grow with the edit, "Undo set rank of
    // blk.3.ffn_up to 8", and squeeze the row); what they undo or redo is in the tooltip.
    m_undoAction = new QAction(tr("Undo"), this);
    m_undoAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Z));
    m_redoAction = new QAction(tr("Redo"), this);
    m_redoAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z));
    const auto follow = [this](QAction* action, const QString& verb, bool can, const QString& what) {
        action->setEnabled(can);
        action->setToolTip(can ? tr("%1 %2 (%3)").arg(verb, what, action->shortcut().toString(QKeySequence::NativeText))
                               : tr("Nothing to %1").arg(verb.toLower()));
    };
    connect(m_undoAction, &QAction::triggered, m_undo, &QUndoStack::undo);
    connect(m_redoAction, &QAction::triggered, m_undo, &QUndoStack::redo);
    const auto refreshUndo = [this, follow] {
        follow(m_undoAction, tr("Undo"), m_undo->canUndo(), m_undo->undoText());
        follow(m_redoAction, tr("Redo"), m_undo->canRedo(), m_undo->redoText());
    };
    connect(m_undo, &QUndoStack::indexChanged, this, refreshUndo);
    connect(m_undo, &QUndoStack::canUndoChanged, this, refreshUndo);
    connect(m_undo, &QUndoStack::canRedoChanged, this, refreshUndo);
    refreshUndo();
    auto* saveAction = new QAction(tr("Save"), this);
    saveAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_S));
    connect(saveAction, &QAction::triggered, this, [this] { m_path.isEmpty() ? saveAsDialog() : void(save()); });
    for (QAction* a : {m_undoAction, m_redoAction, saveAction}) {
        a->setShortcutContext(Qt::WidgetWithChildrenShortcut);
        addAction(a);
    }

    m_newButton = new QPushButton(tr("New from model"), this);
    m_newButton->setToolTip(
        tr("Encode the rknot of the Quantize view's last knot, with the open model's spectra "
           "(asks before it quantizes when there is no knot yet)"));
    m_openButton = new QPushButton(tr("Open..."), this);
    m_saveButton = new QPushButton(tr("Save"), this);
    m_saveAsButton = new QPushButton(tr("Save as..."), this);
    m_revertButton = new QPushButton(tr("Revert"), this);
    m_revertButton->setToolTip(tr("Re-read the file, dropping the edits"));
    auto* undoButton = new QToolButton(this);
    undoButton->setDefaultAction(m_undoAction);
    auto* redoButton = new QToolButton(this);
    redoButton->setDefaultAction(m_redoAction);
    m_requantizeButton = new QPushButton(tr("Re-quantize with this tuning"), this);
    m_requantizeButton->setToolTip(
        tr("Quantize the open model with each matrix's method, rank and bit width from "
           "this rknot (as gkq quantize --tuning)"));
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    connect(m_newButton, &QPushButton::clicked, this, &RknotEditor::askNewFromOpenModel);
    connect(m_openButton, &QPushButton::clicked, this, &RknotEditor::openDialog);
    connect(m_saveButton, &QPushButton::clicked, this, [this] { m_path.isEmpty() ? saveAsDialog() : void(save()); });
    connect(m_saveAsButton, &QPushButton::clicked, this, &RknotEditor::saveAsDialog);
    connect(m_revertButton, &QPushButton::clicked, this, &RknotEditor::revert);
    connect(m_requantizeButton, &QPushButton::clicked, this, &RknotEditor::requantize);
    connect(m_cancelButton, &QPushButton::clicked, this, &RknotEditor::cancel);
    auto* buttons = new QHBoxLayout();
    for (QWidget* w : std::initializer_list<QWidget*>{m_newButton, m_openButton, m_saveButton, m_saveAsButton,
                                                      m_revertButton, undoButton, redoButton})
        buttons->addWidget(w);
    buttons->addStretch(1);
    buttons->addWidget(m_requantizeButton);
    buttons->addWidget(m_cancelButton);

    const ProgressWidgets progress = makeProgressWidgets(this);
    m_progress = progress.bar;
    m_status = progress.status;

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(split, 1);

    connect(m_tree, &RknotTreeModel::editRejected, this, &RknotEditor::fail);
    connect(m_tree, &RknotTreeModel::modifiedChanged, this, [this] { updateState(); });
    connect(m_tree, &RknotTreeModel::edited, this, [this](const QString& path) {
        setMessage(tr("%1 = %2").arg(path, m_tree->literal(path)));
        updateDiff();
        updateState();
    });

    watchJobs(
        m_runner, this, [this](quint64 id) { return id == m_encodeJob; }, progress,
        [this](quint64 id, JobEnd how, const QString& message) {
            if (how == JobEnd::Failed) fail(message);
            onJobEnded(id, how == JobEnd::Finished);
        },
        tr("Encoding the rknot: "));

    // A new rknot that waits for its quantization.
    connect(m_quantize, &QuantizePanel::quantized, this, [this] {
        if (!m_encodeAfterQuantize) return;
        m_encodeAfterQuantize = false;
        if (m_model) newFromKnot(m_quantize->lastKnotPath(), text(m_model->label()), true);
        updateState();
    });
    const auto stopWaiting = [this] {
        if (!m_encodeAfterQuantize) return;
        m_encodeAfterQuantize = false;
        setMessage(tr("No rknot: the quantization it needs did not finish"));
        emit encodeCancelled();
        updateState();
    };
    connect(m_quantize, &QuantizePanel::quantizeCancelled, this, stopWaiting);
    connect(m_quantize, &QuantizePanel::errorOccurred, this, stopWaiting);
    updateState();
}

RknotEditor::~RknotEditor() {
    if (m_encodeJob) m_runner->cancel(m_encodeJob);
}

void RknotEditor::setModel(std::shared_ptr<const Weights> model, const QString& knotPath) {
    m_model = std::move(model);
    m_openKnot = knotPath;
    if (m_encodeJob) m_runner->cancel(m_encodeJob);
    m_encodeAfterQuantize = false;
    updateState();
}

bool RknotEditor::isModified() const {
    return m_tree->isModified();
}

QString RknotEditor::title() const {
    if (!m_tree->hasRknot()) return tr("Tuning");
    const QString name = m_path.isEmpty() ? tr("new rknot") : QFileInfo(m_path).fileName();
    return tr("Tuning — %1").arg(name) + (isModified() ? QStringLiteral(" *") : QString());
}

void RknotEditor::setMessage(const QString& message) {
    m_message = message;
    m_status->setText(message);
}

void RknotEditor::fail(const QString& message) {
    setMessage(message);
    emit errorOccurred(message);
}

// ---- files --------------------------------------------------------------------------------------------------------

bool RknotEditor::openFile(const QString& path, bool discardEdits) {
    if (!discardEdits && !confirmDiscard(tr("open %1").arg(path), [this, path] { openFile(path, true); })) return false;
    auto r = read_rknot(path.toStdString());
    if (!r) {
        fail(text(r.message()));
        return false;
    }
    if (m_encodeJob) m_runner->cancel(m_encodeJob);  // its result would replace this file
    m_encodeAfterQuantize = false;
    m_undo->clear();
    m_path = path;
    m_tree->setRknot(*r, *r, path);
    m_view->expandToDepth(0);
    setMessage(tr("Opened %1: %n matrices", nullptr, static_cast<int>(r->layers.size())).arg(path) +
               (r->saturation_maps
                    ? tr(", %n saturation masks", nullptr, static_cast<int>(r->saturation_maps->layers.size()))
                    : QString()));
    updateDiff();
    updateState();
    emit loaded(path);
    return true;
}

bool RknotEditor::save() {
    if (m_path.isEmpty()) {
        fail(tr("The new rknot has no file yet: use Save as"));
        return false;
    }
    return saveAs(m_path);
}

bool RknotEditor::saveAs(const QString& path) {
    if (!m_tree->hasRknot()) {
        fail(tr("No rknot to save"));
        return false;
    }
    if (Status s = write_rknot(path.toStdString(), m_tree->rknot()); !s) {
        fail(text(s.message()));
        return false;
    }
    m_path = path;
    m_tree->markSaved(path);
    m_undo->setClean();
    setMessage(tr("Saved %1").arg(path));
    updateDiff();
    updateState();
    emit saved(path);
    return true;
}

bool RknotEditor::revert() {
    if (m_path.isEmpty()) {
        fail(tr("The new rknot has no file to revert to"));
        return false;
    }
    return openFile(m_path, true);
}

void RknotEditor::discardEdits() {
    if (!m_path.isEmpty() && revert()) return;
    m_undo->clear();
    m_path.clear();
    m_tree->clear();
    setMessage(tr("Edits discarded"));
    updateDiff();
    updateState();
}

void RknotEditor::noteCarriedOver(const QString& previousModel) {
    if (!isModified()) return;
    const QString what = m_path.isEmpty() ? tr("the new rknot") : m_path;
    setMessage(tr("Kept the unsaved edits of %1, made while %2 was open: save it (Ctrl+S); Re-quantize checks its "
                  "tensors against the open model.")
                   .arg(what, previousModel));
}

bool RknotEditor::confirmDiscard(const QString& action, const std::function<void()>& proceed) {
    if (!isModified()) return true;
    const QString what = m_path.isEmpty()
                             ? tr("The new rknot has not been saved")
                             : tr("%1 has unsaved edits (%2)").arg(m_path, fieldsChanged(m_tree->diff().size()));
    setMessage(tr("%1: save it (Ctrl+S) or revert it before you %2.").arg(what, action));
    emit unsavedEditsWarning(m_message);
    // No modal loop under the offscreen platform (tests): the action is refused and the warning stays.
    if (QGuiApplication::platformName() == QLatin1String("offscreen")) return false;
    auto* box =
        new QMessageBox(QMessageBox::Warning, tr("Unsaved tuning"), tr("%1. Save before you %2?").arg(what, action),
                        QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this, box, proceed](int) {
        const auto button = box->standardButton(box->clickedButton());
        if (button == QMessageBox::Save) {
            if (m_path.isEmpty())
                saveAsDialog();
            else
                save();
            if (!isModified()) proceed();
        } else if (button == QMessageBox::Discard) {
            proceed();
        }
    });
    box->open();  // window-modal, no nested event loop: jobs keep reporting
    return false;
}

void RknotEditor::openDialog() {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open rknot"), QString(), tr("rknot (*.rknot);;All files (*)"));
    if (!path.isEmpty()) openFile(path);
}

void RknotEditor::saveAsDialog() {
    // A new rknot: "<model>-<preset>.rknot" beside the open model (or in a folder the user can write to).
    const QString proposed =
        !m_path.isEmpty() ? m_path
                          : suggestedOutputPath(m_model ? QString::fromStdString(m_model->label()) : QString(),
                                                m_quantize ? m_quantize->preset() : QString(), QStringLiteral("rknot"));
    const QString path = QFileDialog::getSaveFileName(this, tr("Save rknot"), proposed, tr("rknot (*.rknot)"));
    if (!path.isEmpty()) saveAs(path);
}

// ---- making one -----------------------------------------------------------------------------------------------------

quint64 RknotEditor::newFromKnot(const QString& knotPath, const QString& modelPath, bool discardEdits) {
    if (!discardEdits && !confirmDiscard(tr("make a new rknot"),
                                         [this, knotPath, modelPath] { newFromKnot(knotPath, modelPath, true); }))
        return 0;
    RknotEncodeOptions o;
    o.knot_path = knotPath.toStdString();
    o.model_path = modelPath.toStdString();
    o.command = "gkq rknot encode --knot " + o.knot_path;
    if (!modelPath.isEmpty()) {
        o.command += " --model " + o.model_path;
        const QFileInfo model(modelPath);
        o.model_name = (model.isDir() ? model.fileName() : model.completeBaseName()).toStdString();
    }
    m_progress->setValue(0);
    setMessage(tr("Encoding the rknot of %1...").arg(knotPath));
    m_encodeJob = m_runner->run<Rknot>(
        kEncodeKey, tr("Encoding rknot"), [o](const ProgressFn& progress) { return encode_rknot(o, progress); },
        [this, knotPath](Rknot& r) {
            m_undo->clear();
            m_path.clear();
            m_tree->setRknot(r, std::nullopt, QString());
            m_view->expandToDepth(0);
            setMessage(tr("New rknot of %1: %n matrices (not saved yet)", nullptr, static_cast<int>(r.layers.size()))
                           .arg(knotPath));
            updateDiff();
        });
    updateState();
    return m_encodeJob;
}

quint64 RknotEditor::newFromOpenModel(bool discardEdits) {
    if (!m_model) {
        fail(tr("Open a model first: a new rknot describes a quantization of it"));
        return 0;
    }
    if (!discardEdits && !confirmDiscard(tr("make a new rknot"), [this] { newFromOpenModel(true); })) return 0;
    if (!m_openKnot.isEmpty()) return newFromKnot(m_openKnot, QString(), true);  // spectra of its decoded records
    const QString modelPath = text(m_model->label());
    if (!m_quantize->lastKnotPath().isEmpty()) return newFromKnot(m_quantize->lastKnotPath(), modelPath, true);
    // An rknot describes a knot: quantize with the Quantize view's settings first, then encode.
    const quint64 id = m_quantize->startQuantize();
    if (id == 0) {
        fail(tr("Could not start the quantization the new rknot needs: %1").arg(m_quantize->statusText()));
        return 0;
    }
    m_encodeAfterQuantize = true;
    setMessage(tr("Quantizing the model first (preset %1); the rknot follows").arg(m_quantize->preset()));
    updateState();
    return id;
}

void RknotEditor::askNewFromOpenModel() {
    if (!m_model || !m_openKnot.isEmpty() || !m_quantize->lastKnotPath().isEmpty()) {
        newFromOpenModel();
        return;
    }
    // No knot to describe yet: a new quantization (minutes on a large model) runs only when the user says so.
    if (m_quantizePrompt) m_quantizePrompt->close();
    auto* box = new QMessageBox(
        QMessageBox::Question, tr("New rknot"),
        tr("An rknot describes a knot, and the Quantize view has none of %1 yet. Quantize the model now with preset "
           "%2 (the Quantize view's settings), then make the rknot of that knot?")
            .arg(QFileInfo(text(m_model->label())).fileName(), m_quantize->preset()),
        QMessageBox::NoButton, this);
    box->setObjectName(QStringLiteral("quantizeFirstPrompt"));
    box->addButton(tr("Quantize, then make the rknot"), QMessageBox::AcceptRole)
        ->setObjectName(QStringLiteral("quantize"));
    box->addButton(QMessageBox::Cancel)->setObjectName(QStringLiteral("cancel"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    m_quantizePrompt = box;
    connect(box, &QMessageBox::finished, this, [this, box](int) {
        if (m_quantizePrompt == box) m_quantizePrompt = nullptr;
        const QAbstractButton* clicked = box->clickedButton();
        if (clicked && clicked->objectName() == QLatin1String("quantize"))
            newFromOpenModel();
        else
            setMessage(tr("No rknot made: quantize the model in the Quantize view first, or answer Quantize"));
    });
    setMessage(tr("New from model needs a knot of the model: quantize it first?"));
    box->open();  // window-modal, no nested event loop
}

void RknotEditor::cancel() {
    if (m_encodeJob) m_runner->cancel(m_encodeJob);
    if (m_encodeAfterQuantize) m_quantize->cancel();
}

void RknotEditor::onJobEnded(quint64 id, bool finished) {
    if (id == 0 || id != m_encodeJob) return;
    m_encodeJob = 0;
    if (finished) {
        m_progress->setValue(1000);
        emit encoded();
    } else {
        m_progress->setValue(0);
        if (m_message.startsWith(tr("Encoding"))) setMessage(tr("Encoding cancelled; no rknot was made"));
        emit encodeCancelled();
    }
    updateState();
}

// ---- tuning -------------------------------------------------------------------------------------------------------

quint64 RknotEditor::requantize() {
    if (!m_tree->hasRknot()) {
        fail(tr("No rknot open"));
        return 0;
    }
    if (!m_model) {
        fail(tr("Open a model first: the tuning re-quantizes it"));
        return 0;
    }
    if (!m_openKnot.isEmpty()) {
        fail(tr("The open model is the knot %1, not an original: open the model it was made from to re-quantize it")
                 .arg(m_openKnot));
        return 0;
    }
    const Rknot& r = m_tree->rknot();
    const std::string label = m_path.isEmpty() ? std::string("(new rknot)") : m_path.toStdString();
    // A tuning of another model would silently apply to whatever (layer, role) pairs match: refuse it.
    std::set<std::string> names;
    for (size_t i = 0; i < m_model->n_tensors(); ++i) names.insert(m_model->tensor_info(i).name);
    for (size_t i = 0; i < r.layers.size(); ++i)
        if (!names.count(r.layers[i].tensor)) {
            fail(tr("%1: folded_waves.layers[%2].tensor '%3' is not a tensor of the open model %4")
                     .arg(text(label))
                     .arg(i)
                     .arg(text(r.layers[i].tensor), text(m_model->label())));
            return 0;
        }
    auto overrides = rknot_layer_overrides(r, label);
    if (!overrides) {
        fail(text(overrides.message()));
        return 0;
    }
    const quint64 id = m_quantize->startQuantizeWithTuning(std::move(overrides).value(), text(label));
    if (id == 0) {
        fail(tr("The quantization did not start: %1").arg(m_quantize->statusText()));  // the panel's reason
        return 0;
    }
    setMessage(tr("Re-quantizing with the tuning of %1 (%n matrices)", nullptr, static_cast<int>(r.layers.size()))
                   .arg(text(label)));
    emit requantizeStarted(id);
    return id;
}

// ---- state --------------------------------------------------------------------------------------------------------

void RknotEditor::updateDiff() {
    m_diffView->clear();
    if (!m_tree->hasRknot()) {
        m_diffLabel->setText(tr("No rknot open."));
        return;
    }
    if (!m_tree->hasDiskVersion()) {
        m_diffLabel->setText(tr("Not saved yet: there is no file to compare with."));
        return;
    }
    const auto changes = m_tree->diff();
    m_diffLabel->setText(changes.empty() ? tr("No changes against %1.").arg(m_path)
                                         : tr("%1 against %2:").arg(fieldsChanged(changes.size()), m_path));
    for (const RknotTreeModel::Change& c : changes) new QTreeWidgetItem(m_diffView, {c.path, c.onDisk, c.edited});
    m_diffView->resizeColumnToContents(0);
}

void RknotEditor::updateState() {
    const bool has = m_tree->hasRknot();
    const bool busy = m_encodeJob != 0 || m_encodeAfterQuantize;
    m_newButton->setEnabled(m_model != nullptr && !busy);
    m_saveButton->setEnabled(has);
    m_saveAsButton->setEnabled(has);
    m_revertButton->setEnabled(has && !m_path.isEmpty());
    m_requantizeButton->setEnabled(has && m_model != nullptr && m_openKnot.isEmpty());
    m_cancelButton->setEnabled(busy);
    emit titleChanged(title());
}

}  // namespace gkq::ui
