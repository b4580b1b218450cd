// The workbench's remaining desktop-tool habits (issue #19), driven offscreen in the real widgets on the tiny test
// model: File > Export (through the real save dialogs, which propose "<model>-<preset>.<suffix>" beside the model)
// and File > Close (asking first when something would be lost); Open Recent lists the knots and models exported;
// every spin box, combo box, check box and line edit of the views says what it means (a tooltip, or a placeholder
// for a line edit); the spectrum legend names every overlay in full and the saturation histogram shows every bin
// label in full, and every Compare point its preset's name; the Undo button and the spectrum metrics column keep their
// size while their text changes; the layers x roles heat map of a 32-layer model has every cell, each big enough to
// point at and click.
#include "charts/layer_role_heat_map.h"
#include "charts/pareto_chart.h"
#include "charts/saturation_histogram.h"
#include "charts/spectrum_chart.h"
#include "charts/spectrum_heat_map.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/rknot.h"
#include "jobs/job_runner.h"
#include "models/layer_role_model.h"
#include "models/model_tree_model.h"
#include "models/quant_result_model.h"
#include "models/rknot_tree_model.h"
#include "models/tensor_table_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/compare_panel.h"
#include "widgets/main_window.h"
#include "widgets/model_browser.h"
#include "widgets/quantize_panel.h"
#include "widgets/rknot_editor.h"
#include "widgets/saturation_panel.h"
#include "widgets/spectrum_panel.h"

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QGraphicsScene>
#include <QGraphicsTextItem>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QScatterSeries>
#include <QSettings>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QToolButton>
#include <QtTest>
#include <functional>

using namespace gkq;
using ui::LayerRoleModel;
using ui::MainWindow;

namespace {
QAction* findAction(const QWidget& window, const QString& text) {
    for (QAction* a : window.findChildren<QAction*>())
        if (a->text().remove(QLatin1Char('&')) == text) return a;
    return nullptr;
}

QAbstractButton* buttonOf(QMessageBox* box, const QString& name) {
    return box ? box->findChild<QAbstractButton*>(name) : nullptr;
}

// Runs `trigger`, which opens a modal save dialog under `parent`; answers it with `answer` (given the path the dialog
// proposes, returns the file to accept, or empty to reject). Returns the path the dialog proposed on opening.
QString answerSaveDialog(QWidget& parent, const std::function<void()>& trigger,
                         const std::function<QString(const QString&)>& answer) {
    QString proposed;
    QTimer poll;
    poll.setInterval(20);
    QObject::connect(&poll, &QTimer::timeout, &parent, [&] {
        for (QFileDialog* d : parent.findChildren<QFileDialog*>()) {
            if (!d->isVisible()) continue;
            poll.stop();
            proposed = d->selectedFiles().value(0);
            const QString file = answer(proposed);
            if (file.isEmpty()) {
                d->reject();
            } else {
                // typed into the name field, as a user would (selectFile() leaves a name the filter hides alone)
                if (auto* name = d->findChild<QLineEdit*>(QStringLiteral("fileNameEdit")))
                    name->setText(file);
                else
                    d->selectFile(file);
                static_cast<QDialog*>(d)->accept();  // QFileDialog's own accept() is protected
            }
            return;
        }
    });
    poll.start();
    trigger();  // returns once the dialog is answered
    return proposed;
}
QString answerSaveDialog(QWidget& parent, QAction* action, const std::function<QString(const QString&)>& answer) {
    return answerSaveDialog(
        parent, [action] { action->trigger(); }, answer);
}
// The path the save dialog that clicking `button` opens proposes (the dialog is then cancelled).
QString proposedBy(QPushButton* button) {
    if (!button) return QStringLiteral("(no such button)");
    return answerSaveDialog(
        *button->parentWidget(), [button] { button->click(); }, [](const QString&) { return QString(); });
}
QPushButton* buttonNamed(const QWidget& parent, const QString& text) {
    for (QPushButton* b : parent.findChildren<QPushButton*>())
        if (b->text() == text) return b;
    return nullptr;
}

// What a chart draws as text (legend entries, axis labels, title), as shown: an elided label shows elided here.
QStringList drawnTexts(QGraphicsView& view) {
    QStringList out;
    for (QGraphicsItem* item : view.scene()->items())
        if (auto* text = qgraphicsitem_cast<QGraphicsTextItem*>(item); text && text->isVisible())
            out << text->toPlainText();
    return out;
}

// A control of a view, not a part of another control (a spin box's line edit, a combo box's).
bool isPartOfAnother(const QWidget* w) {
    for (const QWidget* p = w->parentWidget(); p; p = p->parentWidget())
        if (qobject_cast<const QAbstractSpinBox*>(p) || qobject_cast<const QComboBox*>(p) ||
            qobject_cast<const QFileDialog*>(p))
            return true;
    return false;
}
}  // namespace

class TestWorkbenchHelpful : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_model;  // tiny.safetensors
    QString m_rknot;  // an rknot of the tiny model

    static bool open(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        if (w.openModel(path) == 0) return false;
        return loaded.wait(60000);
    }

    static bool quantize(ui::QuantizePanel& panel, const QString& preset) {
        panel.setPreset(preset);
        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        return panel.startQuantize() != 0 && quantized.wait(120000);
    }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_workbench_helpful"));
        QSettings().clear();
        const std::string path = m_dir.file("tiny.safetensors");
        auto m = test::make_tiny_model(test::tiny_config(true));
        QVERIFY(write_safetensors(path, m.config, m.tensors).is_ok());
        m_model = QString::fromStdString(path);

        m_rknot = QString::fromStdString(m_dir.file("tiny.rknot"));
        const Status files =
            test::write_knot_and_rknot(path, "q8_0", m_dir.file("for-rknot.knot"), m_rknot.toStdString());
        QVERIFY2(files.is_ok(), files.message().c_str());
    }

    void fileMenuExportsAndOpenRecentListsTheExports() {
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QAction* exportKnot = findAction(w, QStringLiteral("Knot..."));
        QAction* exportModel = findAction(w, QStringLiteral("Reconstructed model..."));
        QVERIFY(exportKnot && exportModel);

        // Nothing to export yet: the status bar says how to get a knot, and the Quantize view comes up.
        exportKnot->trigger();
        QVERIFY2(w.statusBar()->currentMessage().contains(QStringLiteral("No knot to export yet")),
                 qPrintable(w.statusBar()->currentMessage()));
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::QuantizeTab));
        QVERIFY(w.findChildren<QFileDialog*>().isEmpty());

        QVERIFY(open(w, m_model));
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("q8_0")));
        const QString folder = QFileInfo(m_model).absolutePath();

        // File > Export > Knot: the dialog proposes tiny-q8_0.knot beside the model; accepted, the knot is written
        // and Open Recent lists it first.
        QSignalSpy exported(q, &ui::QuantizePanel::exported);
        const QString knot = folder + QStringLiteral("/tiny-q8_0.knot");
        QCOMPARE(answerSaveDialog(*q, exportKnot, [](const QString& p) { return p; }), knot);
        QVERIFY(exported.wait(60000));
        QVERIFY(QFileInfo::exists(knot));
        QCOMPARE(w.recentFiles().value(0), knot);
        QCOMPARE(w.recentFiles().value(1), QFileInfo(m_model).absoluteFilePath());

        // File > Export > Reconstructed model: tiny-q8_0.safetensors proposed; the user picks a GGUF name instead.
        const QString gguf = folder + QStringLiteral("/tiny-q8_0-mine.gguf");
        QCOMPARE(answerSaveDialog(*q, exportModel, [&](const QString&) { return gguf; }),
                 folder + QStringLiteral("/tiny-q8_0.safetensors"));
        QVERIFY(exported.wait(60000));
        QCOMPARE(exported.last().at(0).toString(), gguf);
        QVERIFY(QFileInfo::exists(gguf));
        QCOMPARE(w.recentFiles().mid(0, 3), (QStringList{gguf, knot, QFileInfo(m_model).absoluteFilePath()}));
        QStringList menu;
        for (QAction* a : w.recentMenu()->actions()) menu << a->text();
        QCOMPARE(menu.mid(0, 3), w.recentFiles().mid(0, 3));

        // A rejected dialog writes nothing.
        const int before = exported.count();
        answerSaveDialog(*q, exportKnot, [](const QString&) { return QString(); });
        QTest::qWait(50);
        QCOMPARE(exported.count(), before);

        // The exported knot opens again from Open Recent.
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.recentMenu()->actions().at(1)->trigger();
        QVERIFY(loaded.wait(60000));
        QCOMPARE(QFileInfo(w.modelPath()).absoluteFilePath(), knot);
        QVERIFY(w.knot().has_value());
    }

    // Every save dialog of the views proposes a name from the open model, beside it.
    void everySaveDialogProposesAName() {
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QVERIFY(open(w, m_model));
        const QString base = QFileInfo(m_model).absolutePath() + QStringLiteral("/tiny-");
        ui::ComparePanel* compare = w.comparePanel();
        QCOMPARE(proposedBy(buttonNamed(*compare, QStringLiteral("Export CSV..."))),
                 base + QStringLiteral("compare.csv"));
        QCOMPARE(proposedBy(buttonNamed(*compare, QStringLiteral("Export PNG..."))),
                 base + QStringLiteral("compare.png"));
        QCOMPARE(proposedBy(buttonNamed(*compare, QStringLiteral("Export SVG..."))),
                 base + QStringLiteral("compare.svg"));
        QCOMPARE(proposedBy(buttonNamed(*w.spectrumPanel(), QStringLiteral("Export SVG..."))),
                 base + QStringLiteral("spectrum.svg"));
        const std::string masks = m_dir.file("masks/loaded-masks.json");  // saving needs a profile
        QVERIFY(QDir().mkpath(QFileInfo(QString::fromStdString(masks)).absolutePath()));
        QVERIFY(write_saturation_profile(masks, test::small_saturation_profile()).is_ok());
        QVERIFY2(w.saturationPanel()->loadMasks(QString::fromStdString(masks)),
                 qPrintable(w.saturationPanel()->errorText()));
        QCOMPARE(proposedBy(buttonNamed(*w.saturationPanel(), QStringLiteral("Save masks..."))),
                 base + QStringLiteral("masks.json"));
        // A new rknot (of the Quantize view's knot, never saved) proposes "<model>-<preset>.rknot".
        QVERIFY(quantize(*w.quantizePanel(), QStringLiteral("q4_0")));
        ui::RknotEditor* tuning = w.rknotEditor();
        QSignalSpy encoded(tuning, &ui::RknotEditor::encoded);
        QVERIFY(tuning->newFromOpenModel() != 0);
        QVERIFY(encoded.wait(60000));
        QVERIFY(tuning->filePath().isEmpty());
        QCOMPARE(proposedBy(buttonNamed(*tuning, QStringLiteral("Save as..."))), base + QStringLiteral("q4_0.rknot"));
        QVERIFY(tuning->openFile(m_rknot, true));  // a file of its own: Save as starts from it
        QCOMPARE(proposedBy(buttonNamed(*tuning, QStringLiteral("Save as..."))), m_rknot);
        QVERIFY(w.findChildren<QFileDialog*>().isEmpty() || !w.findChildren<QFileDialog*>().first()->isVisible());
    }

    void fileCloseClosesTheModelAndAsksFirst() {
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QAction* close = findAction(w, QStringLiteral("Close"));
        QVERIFY(close);
        QCOMPARE(close->shortcut(), QKeySequence(QKeySequence::Close));
        close->trigger();  // nothing open
        QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("No model open"));

        QVERIFY(open(w, m_model));
        QVERIFY(quantize(*w.quantizePanel(), QStringLiteral("q8_0")));
        QVERIFY(w.tensorModel()->rowCount() > 0);
        close->trigger();  // nothing to lose: closes at once
        QVERIFY(w.switchPrompt() == nullptr);
        QVERIFY(!w.model());
        QVERIFY(w.modelPath().isEmpty());
        QCOMPARE(w.tensorModel()->rowCount(), 0);
        QCOMPARE(w.browser()->treeModel()->rowCount(), 0);
        QCOMPARE(w.quantizePanel()->resultModel()->rowCount(), 0);
        QVERIFY(w.quantizePanel()->lastKnotPath().isEmpty());
        QCOMPARE(w.windowTitle(), QStringLiteral("GKQ Workbench"));
        w.tabs()->setCurrentIndex(MainWindow::SpectrumTab);
        QVERIFY2(w.viewNotice().startsWith(QStringLiteral("No model open")), qPrintable(w.viewNotice()));
        QVERIFY(w.quantizePanel()->exportUnavailableReason().contains(QStringLiteral("open a model")));

        // Unsaved tuning: Close asks; Cancel keeps the model, Discard closes it and the tuning goes back to its file.
        QVERIFY(open(w, m_model));
        ui::RknotEditor* tuning = w.rknotEditor();
        QVERIFY(tuning->openFile(m_rknot));
        QVERIFY(tuning->treeModel()->setData(
            tuning->treeModel()->indexOfPath(QStringLiteral("model_name"), ui::RknotTreeModel::Value),
            QStringLiteral("edited")));
        QVERIFY(tuning->isModified());
        close->trigger();
        QMessageBox* box = w.switchPrompt();
        QVERIFY(box != nullptr);
        QCOMPARE(box->text(), QStringLiteral("Close tiny.safetensors?"));
        QVERIFY2(box->informativeText().contains(QStringLiteral("The tuning %1 has unsaved edits").arg(m_rknot)),
                 qPrintable(box->informativeText()));
        QCOMPARE(buttonOf(box, QStringLiteral("discard"))->text(), QStringLiteral("Discard tuning and close"));
        buttonOf(box, QStringLiteral("cancel"))->click();
        QVERIFY(w.switchPrompt() == nullptr);
        QCOMPARE(w.modelPath(), m_model);
        QVERIFY(tuning->isModified());
        close->trigger();
        buttonOf(w.switchPrompt(), QStringLiteral("discard"))->click();
        QVERIFY(!w.model());
        QVERIFY(!tuning->isModified());
    }

    void everyControlSaysWhatItMeans() {
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QVERIFY(open(w, m_model));
        QStringList missing;
        for (int t = 0; t < w.tabs()->count(); ++t) {
            QWidget* view = w.tabs()->widget(t);
            const QString tab = w.tabs()->tabText(t);
            const auto check = [&](QWidget* c, const QString& kind) {
                if (isPartOfAnother(c) || !c->toolTip().isEmpty()) return;
                if (auto* edit = qobject_cast<QLineEdit*>(c); edit && !edit->placeholderText().isEmpty()) return;
                QString what = c->objectName();
                if (auto* box = qobject_cast<QCheckBox*>(c)) what = box->text();
                if (auto* combo = qobject_cast<QComboBox*>(c)) what = combo->currentText();
                if (auto* spin = qobject_cast<QAbstractSpinBox*>(c)) what = spin->text();
                missing << QStringLiteral("%1: %2 '%3'").arg(tab, kind, what);
            };
            for (QAbstractSpinBox* c : view->findChildren<QAbstractSpinBox*>()) check(c, QStringLiteral("spin box"));
            for (QComboBox* c : view->findChildren<QComboBox*>()) check(c, QStringLiteral("combo box"));
            for (QCheckBox* c : view->findChildren<QCheckBox*>()) check(c, QStringLiteral("check box"));
            for (QLineEdit* c : view->findChildren<QLineEdit*>()) check(c, QStringLiteral("line edit"));
        }
        QVERIFY2(missing.isEmpty(), qPrintable(missing.join(QLatin1Char('\n'))));
    }

    // On a 1024 px window (the dock beside the views), as the user sees them.
    void legendNamesEveryOverlayInFull() {
        QSettings().clear();
        MainWindow w;
        w.resize(1024, 700);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.tabs()->setCurrentWidget(w.spectrumPanel());
        auto* chart = w.spectrumPanel()->findChild<ui::SpectrumChart*>();
        QVERIFY(chart);
        std::vector<ui::SpectrumChart::Curve> curves;
        const QStringList names = {QStringLiteral("layer 0 attn_q"), QStringLiteral("layer 0 attn_k"),
                                   QStringLiteral("layer 0 attn_v"), QStringLiteral("layer 17 attn_output"),
                                   QStringLiteral("layer 31 ffn_gate")};
        for (const QString& n : names) curves.push_back({n, {8.0, 4.0, 2.0, 1.0, 0.5, 0.25}});
        chart->setCurves(curves);
        QApplication::processEvents();
        const QStringList drawn = drawnTexts(*chart);
        const QStringList entries = names + QStringList{QStringLiteral("cumulative energy"), QStringLiteral("rank k")};
        for (const QString& n : entries)
            QVERIFY2(drawn.contains(n),
                     qPrintable(n + QStringLiteral(" not in: ") + drawn.join(QStringLiteral(" | "))));
        for (const QString& text : drawn)  // titles and tick labels too
            QVERIFY2(!text.endsWith(QStringLiteral("...")), qPrintable(text));
    }

    // The Spectrum view's heat map of a 32-layer model in a short view: every k-th layer labelled so no two labels
    // overlap; every layer where the rows are tall enough.
    void spectrumHeatMapLabelsNeverOverlap() {
        ui::SpectrumHeatMap map;
        QStringList labels;
        std::vector<std::vector<double>> spectra;
        for (int l = 0; l < 32; ++l) {
            labels << QStringLiteral("layer %1").arg(l);
            spectra.push_back({4.0, 2.0, 1.0, 0.5});
        }
        map.setSpectra(QStringLiteral("ffn_up"), labels, spectra);
        const int line = map.fontMetrics().height();
        map.resize(600, 220);
        (void)map.grab();
        QVERIFY2(map.labelStride() > 1, qPrintable(QString::number(map.labelStride())));
        const int plotHeight = 220 - (line + 6) - (line * 2 + 26);  // the widget's title and colour-bar margins
        QVERIFY(map.labelStride() * (double(plotHeight) / 32) >= line);
        map.resize(600, 40 * line + 3 * line + 32);
        (void)map.grab();
        QCOMPARE(map.labelStride(), 1);
    }

    // Compare's points: q8_0 and q8_0-lqer land on the same spot; each point carries its preset's name.
    void paretoPointsAreLabelled() {
        ui::ParetoChart pareto;
        std::vector<ui::ComparePoint> points;
        const QStringList names = {QStringLiteral("q8_0"), QStringLiteral("q8_0-lqer"), QStringLiteral("q4_0")};
        for (int i = 0; i < names.size(); ++i) {
            ui::ComparePoint p;
            p.preset = names[i];
            p.bitsPerWeight = i < 2 ? 8.5 : 4.5;
            p.meanKld = i < 2 ? 0.0012 : 0.02;
            points.push_back(p);
        }
        pareto.setPoints(points);
        // q8_0 and q8_0-lqer sit on one spot: one label names both, the other point has none.
        QStringList labelled;
        int shown = 0;
        for (QAbstractSeries* s : pareto.chart()->series())
            if (auto* scatter = qobject_cast<QScatterSeries*>(s)) {
                QVERIFY(!scatter->pointLabelsClipping());
                labelled << scatter->pointLabelsFormat();
                shown += scatter->pointLabelsVisible() ? 1 : 0;
            }
        QCOMPARE(labelled, (QStringList{QStringLiteral("q8_0, q8_0-lqer"), QString(), QStringLiteral("q4_0")}));
        QCOMPARE(shown, 2);

        // Apart by more than a label: each its own.
        points[1].bitsPerWeight = 6.5;
        points[1].meanKld = 0.004;
        const std::vector<QString> apart = ui::ParetoChart::pointLabels(points);
        QCOMPARE(QStringList(apart.begin(), apart.end()), names);
        // No KLD, no label (a log axis cannot show it); the '@' a label format would expand is replaced.
        points[0].meanKld = 0.0;
        points[2].preset = QStringLiteral("q4@0");
        const std::vector<QString> some = ui::ParetoChart::pointLabels(points);
        QCOMPARE(QStringList(some.begin(), some.end()),
                 (QStringList{QString(), QStringLiteral("q8_0-lqer"), QStringLiteral("q4_0")}));
    }

    void histogramShowsEveryBinLabel() {
        QSettings().clear();
        MainWindow w;
        w.resize(1024, 700);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.tabs()->setCurrentWidget(w.saturationPanel());
        ui::SaturationHistogram* histogram = w.saturationPanel()->histogram();
        histogram->setCounts({120, 3, 7, 40, 1000, 52, 9, 2}, QStringLiteral("all layers"));
        QApplication::processEvents();
        const QStringList drawn = drawnTexts(*histogram);
        for (const QString& label : ui::SaturationHistogram::binLabels())
            QVERIFY2(drawn.contains(label),
                     qPrintable(label + QStringLiteral(" not in: ") + drawn.join(QStringLiteral(" | "))));
        for (const QString& text : drawn)  // titles and tick labels too
            QVERIFY2(!text.endsWith(QStringLiteral("...")), qPrintable(text));
    }

    void undoButtonKeepsItsSizeAsTheEditChanges() {
        QSettings().clear();
        ui::JobRunner runner;
        ui::QuantizePanel quantize(&runner);
        ui::RknotEditor editor(&runner, &quantize);
        editor.resize(1000, 600);
        editor.show();
        QVERIFY(QTest::qWaitForWindowExposed(&editor));
        QVERIFY(editor.openFile(m_rknot));
        QToolButton* undo = nullptr;
        for (QToolButton* b : editor.findChildren<QToolButton*>())
            if (b->defaultAction() && b->defaultAction()->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_Z)) undo = b;
        QVERIFY(undo);
        QApplication::processEvents();
        const QSize hint = undo->sizeHint();
        const int width = undo->width();
        QVERIFY(!undo->isEnabled());
        QVERIFY(!undo->toolTip().isEmpty());

        QVERIFY(editor.treeModel()->setData(
            editor.treeModel()->indexOfPath(QStringLiteral("model_name"), ui::RknotTreeModel::Value),
            QStringLiteral("a much longer model name than the one it had, to make the command's text grow")));
        QApplication::processEvents();
        QVERIFY(undo->isEnabled());
        QCOMPARE(undo->text(), QStringLiteral("Undo"));
        QVERIFY2(undo->toolTip().contains(QStringLiteral("model_name")), qPrintable(undo->toolTip()));
        QCOMPARE(undo->sizeHint(), hint);
        QCOMPARE(undo->width(), width);
        undo->click();
        QVERIFY(!editor.isModified());
        QCOMPARE(undo->sizeHint(), hint);
    }

    void spectrumMetricsColumnKeepsItsWidth() {
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QSignalSpy analyzed(w.spectrumPanel(), &ui::SpectrumPanel::analyzed);
        QVERIFY(open(w, m_model));
        QVERIFY(analyzed.count() > 0 || analyzed.wait(120000));
        w.tabs()->setCurrentWidget(w.spectrumPanel());
        auto* metrics = w.spectrumPanel()->findChild<QLabel*>(QStringLiteral("spectrumMetrics"));
        QVERIFY(metrics);
        QVERIFY(w.browser()->selectTensor(QStringLiteral("model.layers.0.self_attn.q_proj.weight")));
        QApplication::processEvents();
        const int width = metrics->width();
        const QString first = w.spectrumPanel()->metricsText();
        for (const char* name : {"model.layers.0.self_attn.k_proj.weight", "model.layers.1.mlp.down_proj.weight",
                                 "model.embed_tokens.weight"}) {
            w.spectrumPanel()->pinCurrent();
            QVERIFY(w.browser()->selectTensor(QString::fromLatin1(name)));
            QApplication::processEvents();
            QCOMPARE(metrics->width(), width);
        }
        QVERIFY(w.spectrumPanel()->metricsText() != first);
    }

    void heatMapOfA32LayerModelHasEveryCell() {
        test::TempDir dir;
        const std::string path = dir.file("deep.safetensors");
        ModelConfig config = test::tiny_config(true);
        config.n_layers = 32;
        auto m = test::make_tiny_model(config);
        QVERIFY(write_safetensors(path, m.config, m.tensors).is_ok());
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(open(w, QString::fromStdString(path)));
        ui::QuantizePanel* q = w.quantizePanel();
        w.tabs()->setCurrentWidget(q);
        QVERIFY(quantize(*q, QStringLiteral("q8_0")));
        q->resultTabs()->setCurrentIndex(1);
        QApplication::processEvents();
        const LayerRoleModel* grid = q->layerRoleModel();
        ui::LayerRoleHeatMap* map = q->heatMap();
        QVERIFY(map->isVisible());
        QCOMPARE(grid->rowCount(), 32 + 1);
        const auto& roles = LayerRoleModel::columnRoles();
        const int minCell = map->fontMetrics().height() / 2;  // a row label fits beside it, a pointer hits it
        int filled = 0;
        for (int r = 0; r < grid->rowCount(); ++r) {
            for (int c = 0; c < grid->columnCount(); ++c) {
                const QModelIndex cell = grid->index(r, c);
                const QString name = cell.data(LayerRoleModel::NameRole).toString();
                const TensorRole role = roles[static_cast<size_t>(c)];
                const bool inBlock = role != TensorRole::TokenEmbd && role != TensorRole::Output;
                // Every block matrix in its layer's row; token_embd outside (the classifier is shared: no output).
                const bool expected = r < 32 ? inBlock : role == TensorRole::TokenEmbd;
                QCOMPARE(!name.isEmpty(), expected);
                if (!expected) continue;
                ++filled;
                const QRect rect = map->cellRect(r, c);
                QVERIFY2(
                    rect.height() >= minCell && rect.width() >= minCell,
                    qPrintable(
                        QStringLiteral("cell %1,%2 is %3x%4 px").arg(r).arg(c).arg(rect.width()).arg(rect.height())));
                QVERIFY(map->rect().contains(rect));
                QCOMPARE(map->cellAt(rect.center()), std::make_pair(r, c));
            }
        }
        QCOMPARE(filled, 32 * 7 + 1);
        // A click on layer 31's ffn_down selects it.
        const int down = static_cast<int>(std::find(roles.begin(), roles.end(), TensorRole::FfnDown) - roles.begin());
        QSignalSpy clicked(map, &ui::LayerRoleHeatMap::tensorClicked);
        QTest::mouseClick(map, Qt::LeftButton, {}, map->cellRect(31, down).center());
        QCOMPARE(clicked.count(), 1);
        QCOMPARE(clicked.at(0).at(0).toString(), QStringLiteral("model.layers.31.mlp.down_proj.weight"));
        QCOMPARE(q->selectedTensor(), QStringLiteral("model.layers.31.mlp.down_proj.weight"));
    }
};

QTEST_MAIN(TestWorkbenchHelpful)
#include "test_workbench_helpful.moc"
