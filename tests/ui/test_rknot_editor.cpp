// The Tuning view: the rknot tree model (under QAbstractItemModelTester) over an rknot the core wrote for the tiny
// model quantized with the paper preset; edits validated by the core (exact values, messages naming the JSON path
// and the allowed values), undo/redo exact round trips, the diff against the file, saving (read back by the core),
// unsaved-edit warnings, a new rknot encoded as a job (and cancelled), and re-quantizing with an edited tuning:
// exactly the edited matrix's record changes.
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/rknot.h"
#include "jobs/job_runner.h"
#include "models/rknot_tree_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/main_window.h"
#include "widgets/quantize_panel.h"
#include "widgets/rknot_editor.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTreeWidget>
#include <QUndoStack>
#include <QtTest>
#include <cstdlib>

using namespace gkq;
using ui::RknotEditor;
using ui::RknotTreeModel;

namespace {
// An editor with the panel and runner it works with (destroyed in reverse order).
struct Rig {
    ui::JobRunner runner;
    ui::QuantizePanel quantize{&runner};
    RknotEditor editor{&runner, &quantize};
};
}  // namespace

#define VERIFY_CONTAINS(haystack, needle)        \
    QVERIFY2(QString(haystack).contains(needle), \
             qPrintable(QString(haystack) + QStringLiteral("  [expected: ") + (needle) + "]"))

class TestRknotEditor : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    std::shared_ptr<const ModelFile> m_model;
    std::string m_knot;   // the paper-preset knot of the tiny model
    std::string m_rknot;  // its rknot, written by the core
    Rknot m_original;
    size_t m_target = 0;  // a low-rank matrix of block 1 with factor bits
    int m_newBits = 0;

    QString bitsPath() const { return QStringLiteral("folded_waves.layers[%1].bit_width").arg(m_target); }

    static std::string json(const Rknot& r) { return rknot_to_json(r); }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_rknot_editor"));
        QSettings().clear();
        const std::string modelPath = m_dir.file("tiny.gguf");
        auto m = test::make_tiny_model(test::tiny_config(false), 2);
        QVERIFY(write_gguf(modelPath, m.config, m.tensors).is_ok());
        auto opened = ModelFile::open(modelPath);
        QVERIFY2(opened.is_ok(), opened.message().c_str());
        m_model = std::make_shared<ModelFile>(std::move(opened).value());
        QuantizeOptions qo;
        qo.preset = "paper";
        qo.n_threads = 2;
        m_knot = m_dir.file("a.knot");
        QVERIFY(quantize_model(*m_model, qo, m_knot).is_ok());
        RknotEncodeOptions eo;
        eo.knot_path = m_knot;
        eo.model_path = modelPath;
        eo.model_name = "tiny";
        auto r = encode_rknot(eo);
        QVERIFY2(r.is_ok(), r.message().c_str());
        m_original = *r;
        m_rknot = m_dir.file("base.rknot");
        QVERIFY(write_rknot(m_rknot, m_original).is_ok());
        m_target = m_original.layers.size();
        for (size_t i = 0; i < m_original.layers.size(); ++i)
            if (m_original.layers[i].bit_width && m_original.layers[i].layer_id == 1) {
                m_target = i;
                break;
            }
        QVERIFY(m_target < m_original.layers.size());
        m_newBits = *m_original.layers[m_target].bit_width == 2 ? 4 : 2;
    }

    void treeShowsEveryFieldUnderTheTester() {
        RknotTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setRknot(m_original, m_original, QString::fromStdString(m_rknot));
        QCOMPARE(model.columnCount(), int(RknotTreeModel::ColumnCount));
        // Top level in the documented order.
        QStringList top;
        for (int i = 0; i < model.rowCount(); ++i) top << model.index(i, 0).data().toString();
        QCOMPARE(top, (QStringList{"model_name", "version", "compression", "folded_waves", "saturation_maps",
                                   "quality_metrics", "resonance_tuning", "measured"}));
        // Every matrix, every field of it.
        const QModelIndex layers = model.indexOfPath(QStringLiteral("folded_waves.layers"));
        QCOMPARE(model.rowCount(layers), static_cast<int>(m_original.layers.size()));
        const QModelIndex entry = model.index(int(m_target), 0, layers);
        QCOMPARE(model.rowCount(entry), 14);
        QCOMPARE(model.index(int(m_target), RknotTreeModel::Value, layers)
                     .data()
                     .toString()
                     .left(int(m_original.layers[m_target].tensor.size())),
                 QString::fromStdString(m_original.layers[m_target].tensor));
        const QModelIndex bits = model.indexOfPath(bitsPath(), RknotTreeModel::Value);
        QCOMPARE(bits.data().toString(), QString::number(*m_original.layers[m_target].bit_width));
        QCOMPARE(bits.siblingAtColumn(RknotTreeModel::Type).data().toString(), QStringLiteral("integer or null"));
        QCOMPARE(bits.siblingAtColumn(RknotTreeModel::Allowed).data().toString(), QStringLiteral("one of 2, 4, 8"));
        QVERIFY(model.flags(bits) & Qt::ItemIsEditable);
        // Measured values are read-only and say so.
        const QModelIndex params = model.indexOfPath(QStringLiteral("measured.n_params"), RknotTreeModel::Value);
        QCOMPARE(params.data().toString(), QString::number(m_original.measured.n_params));
        QVERIFY(!(model.flags(params) & Qt::ItemIsEditable));
        VERIFY_CONTAINS(params.siblingAtColumn(RknotTreeModel::Note).data().toString(), QStringLiteral("read-only"));
        // A null quality field: empty, with the reason.
        const QModelIndex gnosis =
            model.indexOfPath(QStringLiteral("quality_metrics.gnosis_efficiency"), RknotTreeModel::Value);
        QCOMPARE(gnosis.data().toString(), QString());
        QCOMPARE(gnosis.data(RknotTreeModel::LiteralRole).toString(), QStringLiteral("null"));
        QCOMPARE(gnosis.siblingAtColumn(RknotTreeModel::Note).data().toString(),
                 QStringLiteral("null: no definition over measured values (docs/rknot-format.md)"));
        QCOMPARE(model.indexOfPath(QStringLiteral("saturation_maps"), RknotTreeModel::Note).data().toString(),
                 QStringLiteral("null: encoded without a saturation profile (--profile)"));
        // Exact values: the leaf literal is the core's JSON of the value.
        QCOMPARE(model.literal(QStringLiteral("folded_waves.layers[0].base_singular_values[0]")).toStdString(),
                 coreNumberText(m_original.layers[0].base_singular_values[0]));
        QVERIFY(!model.isModified());
        QVERIFY(model.diff().empty());
        // Edits while the tester watches (dataChanged in place).
        QVERIFY(model.setData(bits, QString::number(m_newBits)));
        QCOMPARE(model.rknot().layers[m_target].bit_width, std::optional<int>(m_newBits));
        QVERIFY(model.isModified());
    }

    void editsAreExactAndUndoRestoresThem() {
        Rig rig;
        RknotEditor& editor = rig.editor;
        QVERIFY(editor.openFile(QString::fromStdString(m_rknot)));
        RknotTreeModel* model = editor.treeModel();
        QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QUndoStack* undo = editor.undoStack();

        QVERIFY(model->setData(model->indexOfPath(bitsPath(), RknotTreeModel::Value), QString::number(m_newBits)));
        QCOMPARE(model->rknot().layers[m_target].bit_width, std::optional<int>(m_newBits));
        QCOMPARE(model->literal(bitsPath()), QString::number(m_newBits));
        // A number with more digits than a double holds: stored as the double the text parses to, exactly.
        const QString lossPath = QStringLiteral("folded_waves.layers[%1].expected_accuracy_loss").arg(m_target);
        QVERIFY(model->setData(model->indexOfPath(lossPath, RknotTreeModel::Value),
                               QStringLiteral("0.12345678901234567890")));
        QCOMPARE(*model->rknot().layers[m_target].expected_accuracy_loss,
                 std::strtod("0.12345678901234567890", nullptr));
        QVERIFY(model->setData(model->indexOfPath(lossPath, RknotTreeModel::Value), QStringLiteral("0.7")));
        QVERIFY(model->setData(model->indexOfPath(QStringLiteral("resonance_tuning.l2_lambda"), RknotTreeModel::Value),
                               QStringLiteral("0.001")));
        QCOMPARE(*model->rknot().resonance_tuning.l2_lambda, 0.001);
        QCOMPARE(undo->count(), 4);  // one command per edit

        undo->undo();  // l2_lambda back to null
        QVERIFY(!model->rknot().resonance_tuning.l2_lambda.has_value());
        undo->undo();  // back to the long number, bit for bit
        QCOMPARE(*model->rknot().layers[m_target].expected_accuracy_loss,
                 std::strtod("0.12345678901234567890", nullptr));
        undo->undo();
        undo->undo();
        QCOMPARE(json(model->rknot()), json(m_original));  // the exact document that was read
        QVERIFY(!model->isModified());
        QVERIFY(!editor.title().endsWith(QStringLiteral(" *")));
        undo->redo();
        QCOMPARE(model->rknot().layers[m_target].bit_width, std::optional<int>(m_newBits));
        QVERIFY(editor.title().endsWith(QStringLiteral(" *")));
        // Ctrl+Shift+Z / Ctrl+Z are the view's redo / undo.
        QAction* undoAction = nullptr;
        QAction* redoAction = nullptr;
        for (QAction* a : editor.actions()) {
            if (a->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_Z)) undoAction = a;
            if (a->shortcut() == QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z)) redoAction = a;
        }
        QVERIFY(undoAction && redoAction);
        redoAction->trigger();
        redoAction->trigger();
        redoAction->trigger();
        QCOMPARE(*model->rknot().layers[m_target].expected_accuracy_loss, 0.7);
        undoAction->trigger();
        QVERIFY(!model->rknot().resonance_tuning.l2_lambda.has_value());
        undo->redo();
        QCOMPARE(*model->rknot().resonance_tuning.l2_lambda, 0.001);
    }

    void invalidValuesAreRejectedNamingThePath() {
        Rig rig;
        RknotEditor& editor = rig.editor;
        QVERIFY(editor.openFile(QString::fromStdString(m_rknot)));
        RknotTreeModel* model = editor.treeModel();
        QSignalSpy rejected(model, &RknotTreeModel::editRejected);
        QSignalSpy errors(&editor, &RknotEditor::errorOccurred);
        const QString file = QString::fromStdString(m_rknot);
        const QString before = model->literal(bitsPath());

        QVERIFY(!model->setData(model->indexOfPath(bitsPath(), RknotTreeModel::Value), QStringLiteral("7")));
        QCOMPARE(model->lastError(),
                 QStringLiteral("%1: %2: 7 is not one of 2, 4, 8 (allowed: integer or null, one of 2, 4, 8)")
                     .arg(file, bitsPath()));
        QCOMPARE(model->literal(bitsPath()), before);
        QCOMPARE(rejected.count(), 1);
        QCOMPARE(errors.count(), 1);
        QCOMPARE(editor.lastMessage(), model->lastError());

        const QString rank = QStringLiteral("folded_waves.layers[%1].rank").arg(m_target);
        QVERIFY(!model->setData(model->indexOfPath(rank, RknotTreeModel::Value), QStringLiteral("four")));
        QCOMPARE(model->lastError(), QStringLiteral("%1: %2: expected an integer, got string (allowed: integer, "
                                                    "[0, 1073741824])")
                                         .arg(file, rank));
        QVERIFY(!model->setData(
            model->indexOfPath(QStringLiteral("resonance_tuning.optimal_learning_rate"), RknotTreeModel::Value),
            QStringLiteral("2")));
        VERIFY_CONTAINS(
            model->lastError(),
            file + QStringLiteral(": resonance_tuning.optimal_learning_rate: 2 is out of range (0.0, 1.0]"));
        const QString method = QStringLiteral("folded_waves.layers[%1].method").arg(m_target);
        QVERIFY(!model->setData(model->indexOfPath(method, RknotTreeModel::Value), QStringLiteral("q7_k")));
        VERIFY_CONTAINS(model->lastError(), method + QStringLiteral(": 'q7_k' is not one of f32, f16, q8_0, q4_0"));
        // Read-only: refused with the path, nothing changes.
        QVERIFY(!model->setData(model->indexOfPath(QStringLiteral("measured.n_params"), RknotTreeModel::Value),
                                QStringLiteral("5")));
        VERIFY_CONTAINS(model->lastError(), file + QStringLiteral(": measured.n_params: read-only"));
        QVERIFY(!model->setValue(QStringLiteral("quality_metrics.gnosis_efficiency"), QStringLiteral("0.5")).is_ok());
        QCOMPARE(editor.undoStack()->count(), 0);
        QCOMPARE(json(model->rknot()), json(m_original));
        QVERIFY(!model->isModified());
    }

    void diffListsExactlyTheChangedPaths() {
        Rig rig;
        RknotEditor& editor = rig.editor;
        QSignalSpy titles(&editor, &RknotEditor::titleChanged);
        QVERIFY(editor.openFile(QString::fromStdString(m_rknot)));
        QCOMPARE(editor.title(), QStringLiteral("Tuning — base.rknot"));
        RknotTreeModel* model = editor.treeModel();
        const QString oldBits = model->literal(bitsPath());
        QVERIFY(model->setData(model->indexOfPath(bitsPath(), RknotTreeModel::Value), QString::number(m_newBits)));
        QVERIFY(model->setData(
            model->indexOfPath(QStringLiteral("resonance_tuning.spectral_lambda"), RknotTreeModel::Value),
            QStringLiteral("0.25")));
        QVERIFY(model->setData(model->indexOfPath(QStringLiteral("model_name"), RknotTreeModel::Value),
                               QStringLiteral("tiny tuned")));
        const auto changes = model->diff();
        QCOMPARE(changes.size(), size_t{3});
        QCOMPARE(changes[0].path, QStringLiteral("model_name"));
        QCOMPARE(changes[0].onDisk, QStringLiteral("\"tiny\""));
        QCOMPARE(changes[0].edited, QStringLiteral("\"tiny tuned\""));
        QCOMPARE(changes[1].path, bitsPath());
        QCOMPARE(changes[1].onDisk, oldBits);
        QCOMPARE(changes[1].edited, QString::number(m_newBits));
        QCOMPARE(changes[2].path, QStringLiteral("resonance_tuning.spectral_lambda"));
        QCOMPARE(changes[2].onDisk, QStringLiteral("null"));
        QCOMPARE(changes[2].edited, QStringLiteral("0.25"));
        QCOMPARE(editor.diffView()->topLevelItemCount(), 3);
        QCOMPARE(editor.diffView()->topLevelItem(1)->text(0), bitsPath());
        QCOMPARE(editor.title(), QStringLiteral("Tuning — base.rknot *"));
        QCOMPARE(titles.last().at(0).toString(), editor.title());
        // Setting a value back to the file's value takes it off the list.
        QVERIFY(model->setData(model->indexOfPath(bitsPath(), RknotTreeModel::Value), oldBits));
        QCOMPARE(model->diff().size(), size_t{2});
        QCOMPARE(editor.diffView()->topLevelItemCount(), 2);
    }

    void saveWritesTheEditsAndNothingElse() {
        Rig rig;
        RknotEditor& editor = rig.editor;
        const std::string copy = m_dir.file("saved.rknot");
        QVERIFY(write_rknot(copy, m_original).is_ok());
        QVERIFY(editor.openFile(QString::fromStdString(copy)));
        RknotTreeModel* model = editor.treeModel();
        QVERIFY(model->setData(model->indexOfPath(bitsPath(), RknotTreeModel::Value), QString::number(m_newBits)));
        QVERIFY(model->setData(model->indexOfPath(QStringLiteral("resonance_tuning.expected_cliff_emergence_epoch"),
                                                  RknotTreeModel::Value),
                               QStringLiteral("1200")));
        QSignalSpy saved(&editor, &RknotEditor::saved);
        QVERIFY(editor.save());
        QCOMPARE(saved.count(), 1);
        QVERIFY(!editor.isModified());
        QVERIFY(model->diff().empty());
        QCOMPARE(editor.title(), QStringLiteral("Tuning — saved.rknot"));

        auto back = read_rknot(copy);
        QVERIFY2(back.is_ok(), back.message().c_str());
        QCOMPARE(back->layers[m_target].bit_width, std::optional<int>(m_newBits));
        QCOMPARE(back->resonance_tuning.expected_cliff_emergence_epoch, std::optional<int64_t>(1200));
        // Everything else as it was: the file is byte for byte the core's write of the same two edits.
        Rknot expected = m_original;
        QVERIFY(rknot_set(expected,
                          {bitsPath().toStdString() + "=" + std::to_string(m_newBits),
                           "resonance_tuning.expected_cliff_emergence_epoch=1200"},
                          copy)
                    .is_ok());
        QCOMPARE(json(*back), json(expected));
        const std::string reference = m_dir.file("reference.rknot");
        QVERIFY(write_rknot(reference, expected).is_ok());
        QVERIFY(test::read_file(copy) == test::read_file(reference));
    }

    void unsavedEditsAreNotDroppedSilently() {
        Rig rig;
        RknotEditor& editor = rig.editor;
        const QString file = QString::fromStdString(m_rknot);
        const std::string other = m_dir.file("other.rknot");
        Rknot renamed = m_original;
        renamed.model_name = "other";
        QVERIFY(write_rknot(other, renamed).is_ok());
        QVERIFY(editor.openFile(file));
        QVERIFY(editor.treeModel()->setData(editor.treeModel()->indexOfPath(bitsPath(), RknotTreeModel::Value),
                                            QString::number(m_newBits)));
        QSignalSpy warned(&editor, &RknotEditor::unsavedEditsWarning);
        QVERIFY(!editor.openFile(QString::fromStdString(other)));  // offscreen: refused, with the reason
        QCOMPARE(warned.count(), 1);
        QCOMPARE(editor.lastMessage(),
                 QStringLiteral("%1 has unsaved edits (1 field changed): save it (Ctrl+S) or revert it before you "
                                "open %2.")
                     .arg(file, QString::fromStdString(other)));
        QCOMPARE(editor.filePath(), file);
        QCOMPARE(editor.treeModel()->rknot().layers[m_target].bit_width, std::optional<int>(m_newBits));
        QVERIFY(editor.openFile(QString::fromStdString(other), true));  // discarding on purpose
        QCOMPARE(editor.treeModel()->rknot().model_name, std::string("other"));
        QCOMPARE(editor.undoStack()->count(), 0);
        // A file the core rejects: the core's message, and the open file stays.
        const std::string bad = m_dir.file("bad.rknot");
        test::write_file(bad, std::string_view("not gzip"));
        QVERIFY(!editor.openFile(QString::fromStdString(bad)));
        VERIFY_CONTAINS(editor.lastMessage(), QString::fromStdString(bad) + QStringLiteral(": not a gzip file"));
        QCOMPARE(editor.filePath(), QString::fromStdString(other));
    }

    void newRknotIsAJobThatCancels() {
        ui::JobRunner runner;
        ui::QuantizePanel quantize(&runner);
        RknotEditor editor(&runner, &quantize);
        quantize.setModel(m_model);
        editor.setModel(m_model);
        // Cancel right after the start: the job ends cancelled and leaves no rknot.
        QSignalSpy cancelled(&editor, &RknotEditor::encodeCancelled);
        QVERIFY(editor.newFromKnot(QString::fromStdString(m_knot), QString::fromStdString(m_model->path())) != 0);
        QVERIFY(editor.cancelButton()->isEnabled());
        editor.cancelButton()->click();
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
        QVERIFY(!editor.treeModel()->hasRknot());
        QVERIFY(!editor.cancelButton()->isEnabled());

        // From the open model: no knot yet, so it quantizes (paper) first, then encodes with the model's spectra.
        quantize.setPreset(QStringLiteral("paper"));
        QSignalSpy encoded(&editor, &RknotEditor::encoded);
        QVERIFY(editor.newFromOpenModel() != 0);
        QTRY_COMPARE_WITH_TIMEOUT(encoded.count(), 1, 120000);
        QCOMPARE(editor.progressBar()->value(), 1000);
        QVERIFY(editor.treeModel()->hasRknot());
        const Rknot& r = editor.treeModel()->rknot();
        QCOMPARE(r.measured.knot, quantize.lastKnotPath().toStdString());
        QCOMPARE(r.measured.spectrum_source, std::string("model"));
        QCOMPARE(r.model_name, std::string("tiny"));
        QCOMPARE(r.layers.size(), m_original.layers.size());
        for (size_t i = 0; i < r.layers.size(); ++i) {  // same quantization, same matrices, same measurements
            QCOMPARE(r.layers[i].tensor, m_original.layers[i].tensor);
            QCOMPARE(r.layers[i].bit_width, m_original.layers[i].bit_width);
            QCOMPARE(r.layers[i].base_singular_values, m_original.layers[i].base_singular_values);
            QCOMPARE(r.layers[i].rel_error, m_original.layers[i].rel_error);
        }
        QVERIFY(editor.isModified());  // never saved
        QCOMPARE(editor.title(), QStringLiteral("Tuning — new rknot *"));
        QVERIFY(!editor.save());
        const QString out = QString::fromStdString(m_dir.file("new.rknot"));
        QVERIFY(editor.saveAs(out));
        QVERIFY(read_rknot(out.toStdString()).is_ok());
        QCOMPARE(editor.title(), QStringLiteral("Tuning — new.rknot"));
    }

    void requantizeChangesExactlyTheEditedMatrix() {
        ui::JobRunner runner;
        ui::QuantizePanel quantize(&runner);
        RknotEditor editor(&runner, &quantize);
        quantize.setModel(m_model);
        editor.setModel(m_model);
        quantize.setPreset(QStringLiteral("paper"));
        QSignalSpy quantized(&quantize, &ui::QuantizePanel::quantized);

        // A run without a tuning, then one with the unedited rknot, then one with one bit width changed.
        QVERIFY(quantize.startQuantize() != 0);
        QTRY_COMPARE_WITH_TIMEOUT(quantized.count(), 1, 120000);
        const std::string plain = quantize.lastKnotPath().toStdString();
        QVERIFY(quantize.lastReport()->command.find("; layer") == std::string::npos);
        QVERIFY(editor.openFile(QString::fromStdString(m_rknot)));
        QSignalSpy started(&editor, &RknotEditor::requantizeStarted);
        QVERIFY(editor.requantize() != 0);
        QCOMPARE(started.count(), 1);
        QTRY_COMPARE_WITH_TIMEOUT(quantized.count(), 2, 120000);
        const std::string same = quantize.lastKnotPath().toStdString();
        QVERIFY(editor.treeModel()->setData(editor.treeModel()->indexOfPath(bitsPath(), RknotTreeModel::Value),
                                            QString::number(m_newBits)));
        QVERIFY(editor.requantize() != 0);
        QTRY_COMPARE_WITH_TIMEOUT(quantized.count(), 3, 120000);
        const std::string tuned = quantize.lastKnotPath().toStdString();
        QVERIFY(quantize.lastReport()->command.find("; layer 1 ") != std::string::npos);
        // The tuning was for those runs only.
        QVERIFY(quantize.options().per_layer.empty());

        auto a = KnotFile::open(plain);
        auto b = KnotFile::open(same);
        auto c = KnotFile::open(tuned);
        QVERIFY(a.is_ok() && b.is_ok() && c.is_ok());
        QCOMPARE(a->n_records(), c->n_records());
        QCOMPARE(a->n_records(), b->n_records());
        int nDiffSame = 0, nDiffTuned = 0;
        for (size_t i = 0; i < a->n_records(); ++i) {
            auto ra = a->read_raw(i), rb = b->read_raw(i), rc = c->read_raw(i);
            QVERIFY(ra.is_ok() && rb.is_ok() && rc.is_ok());
            if (ra->bytes != rb->bytes) nDiffSame++;
            if (ra->bytes != rc->bytes) {
                nDiffTuned++;
                QCOMPARE(a->entries()[i].name, m_original.layers[m_target].tensor);
                QCOMPARE(int(c->entries()[i].factor_bits), m_newBits);
            }
        }
        QCOMPARE(nDiffSame, 0);
        QCOMPARE(nDiffTuned, 1);

        // A tuning of another model is refused, naming the tensor.
        Rknot foreign = m_original;
        foreign.layers[0].tensor = "no.such.tensor";
        const std::string foreignPath = m_dir.file("foreign.rknot");
        QVERIFY(write_rknot(foreignPath, foreign).is_ok());
        QVERIFY(editor.openFile(QString::fromStdString(foreignPath), true));
        QCOMPARE(editor.requantize(), quint64{0});
        VERIFY_CONTAINS(editor.lastMessage(), QStringLiteral("folded_waves.layers[0].tensor 'no.such.tensor' is not a "
                                                             "tensor of the open model"));
    }

    void mainWindowHasATuningTab() {
        ui::MainWindow w;
        RknotEditor* editor = w.rknotEditor();
        QCOMPARE(w.tabs()->widget(ui::MainWindow::TuningTab), static_cast<QWidget*>(editor));
        QCOMPARE(w.tabs()->tabText(ui::MainWindow::TuningTab), QStringLiteral("Tuning"));
        QAction* view = nullptr;  // View > Tuning, Ctrl+6
        for (QAction* a : w.menuBar()->findChildren<QAction*>())
            if (a->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_6)) view = a;
        QVERIFY(view);
        QCOMPARE(view->text(), QStringLiteral("&Tuning"));
        view->trigger();
        QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(editor));
        QVERIFY(editor->openFile(QString::fromStdString(m_rknot)));
        QCOMPARE(w.tabs()->tabText(ui::MainWindow::TuningTab), QStringLiteral("Tuning — base.rknot"));
        QVERIFY(editor->treeModel()->setData(editor->treeModel()->indexOfPath(bitsPath(), RknotTreeModel::Value),
                                             QString::number(m_newBits)));
        QCOMPARE(w.tabs()->tabText(ui::MainWindow::TuningTab), QStringLiteral("Tuning — base.rknot *"));
        // Closing with unsaved edits is refused offscreen (no modal box), with the reason; after a revert it closes.
        w.show();
        QVERIFY(!w.close());
        VERIFY_CONTAINS(editor->lastMessage(), QStringLiteral("has unsaved edits (1 field changed)"));
        QVERIFY(editor->revert());
        QCOMPARE(w.tabs()->tabText(ui::MainWindow::TuningTab), QStringLiteral("Tuning — base.rknot"));
        QVERIFY(w.close());
    }

private:
    // A number as the core's JSON writes it (shortest round-trip form), taken from the core's JSON of an rknot.
    static std::string coreNumberText(double v) {
        Rknot r;
        r.model_name = "x";
        r.measured.spectrum_source = "knot";
        r.measured.bits_per_weight = v;
        const std::string j = rknot_to_json(r, -1);
        const std::string key = "\"bits_per_weight\":";
        const size_t at = j.find(key) + key.size();
        return j.substr(at, j.find_first_of(",}", at) - at);
    }
};

QTEST_MAIN(TestRknotEditor)
#include "test_rknot_editor.moc"
