// The Quantize view's per-layer x role heat map, offscreen, through the real widgets: the tiny model quantized with
// q4_0 everywhere and q8_0 for layer 0's ffn_down (a per-layer override, as an rknot tuning gives) shows each
// (layer, role) cell with the report's method and bits per weight, empty cells where a row has no such role, the
// cell's values in its tooltip, the three measures (method with a legend, bits per weight and relative error on a
// colour bar, the error's log scale), and a click that selects the tensor in the result table. The knot written, once
// opened in the workbench, fills the same grid from its records (the error not measured: empty), and a click there
// selects the tensor in the model browser.
#include "charts/layer_role_heat_map.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/rknot.h"
#include "jobs/job_runner.h"
#include "models/display_format.h"
#include "models/layer_role_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/main_window.h"
#include "widgets/model_browser.h"
#include "widgets/quantize_panel.h"
#include "widgets/rknot_editor.h"

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QHelpEvent>
#include <QSet>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QToolTip>
#include <QtTest>
#include <algorithm>
#include <cmath>

using namespace gkq;
using ui::LayerRoleModel;

namespace {
int columnOf(TensorRole role) {
    const auto& roles = LayerRoleModel::columnRoles();
    return static_cast<int>(std::find(roles.begin(), roles.end(), role) - roles.begin());
}
}  // namespace

class TestLayerRoleHeatMap : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_knot;  // the mixed knot the first test writes (copied out of the panel's scratch folder)
    std::string m_model;

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_layer_role_heat_map"));
        QSettings().clear();
    }

    void everyMethodHasItsOwnColour() {
        QSet<QRgb> colours;
        for (Method m : all_methods()) {
            QVERIFY(!ui::methodText(m).isEmpty());
            colours.insert(LayerRoleModel::methodColor(m).rgb());
        }
        QCOMPARE(colours.size(), static_cast<qsizetype>(all_methods().size()));
    }

    void mixedQuantizationFillsTheGrid() {
        const std::string path = test::write_tiny_gguf(m_dir.file("tiny.gguf"), false, 7, test::tiny_vocabulary());
        m_model = path;
        auto file = ModelFile::open(path);
        QVERIFY(file);
        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.resize(1000, 800);
        panel.show();
        panel.setModel(std::make_shared<const ModelFile>(std::move(*file)));
        panel.setPreset(QStringLiteral("q4_0"));
        QVERIFY(panel.setOverride(QStringLiteral("method"), QStringLiteral("q4_0")));
        LayerOverride down0;
        down0.layer = 0;
        down0.role = TensorRole::FfnDown;
        down0.params.method = Method::Q8_0;
        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        QVERIFY(panel.startQuantizeWithTuning({down0}, QStringLiteral("test")) != 0);
        QVERIFY(quantized.wait(120000));
        const QuantizeReport& report = *panel.lastReport();
        LayerRoleModel* grid = panel.layerRoleModel();
        QAbstractItemModelTester tester(grid, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(grid->source(), QStringLiteral("quantization"));
        QCOMPARE(grid->rowCount(), 3);  // layers 0, 1 and the row outside the blocks
        QCOMPARE(grid->columnCount(), 9);
        QCOMPARE(grid->headerData(2, Qt::Vertical).toString(), QStringLiteral("outside blocks"));
        QCOMPARE(grid->headerData(columnOf(TensorRole::FfnDown), Qt::Horizontal).toString(),
                 QStringLiteral("ffn_down"));

        // Every matrix of the report in its cell, with the report's method and bits per weight.
        int matrices = 0;
        for (const QuantizedTensor& q : report.tensors) {
            if (q.codec.n_dims() != 2) continue;
            ++matrices;
            const QString name = QString::fromStdString(q.codec.name);
            const QModelIndex cell = grid->indexOfTensor(name);
            QVERIFY2(cell.isValid(), qPrintable(name));
            const bool outside = q.codec.role == TensorRole::TokenEmbd || q.codec.role == TensorRole::Output;
            QCOMPARE(cell.row(), outside ? 2 : q.codec.layer);
            QCOMPARE(cell.column(), columnOf(q.codec.role));
            const Method expected =
                q.codec.layer == 0 && q.codec.role == TensorRole::FfnDown ? Method::Q8_0 : Method::Q4_0;
            QVERIFY(q.codec.method == expected);
            QCOMPARE(cell.data(LayerRoleModel::MethodRole).toString(), ui::methodText(expected));
            QCOMPARE(cell.data(Qt::DisplayRole).toString(), ui::methodText(expected));
            QCOMPARE(cell.data(LayerRoleModel::BpwRole).toDouble(), q.bits_per_weight());
            QCOMPARE(cell.data(LayerRoleModel::RelErrorRole).toDouble(), q.codec.rel_error);
            QCOMPARE(cell.data(Qt::BackgroundRole).value<QBrush>().color(), LayerRoleModel::methodColor(expected));
            // The tooltip: every value of the cell.
            const QString tip = cell.data(Qt::ToolTipRole).toString();
            QVERIFY2(tip.contains(name), qPrintable(tip));
            QVERIFY2(tip.contains(QStringLiteral("method ") + ui::methodText(expected)), qPrintable(tip));
            QVERIFY2(tip.contains(ui::formatNumber(q.bits_per_weight()) + QStringLiteral(" bits per weight")),
                     qPrintable(tip));
            QVERIFY2(tip.contains(QStringLiteral("rel_error ") + ui::formatNumber(q.codec.rel_error)), qPrintable(tip));
            QVERIFY2(tip.contains(QStringLiteral("max_abs ") + ui::formatNumber(q.codec.max_abs_error)),
                     qPrintable(tip));
        }
        QCOMPARE(matrices, 2 * 7 + 2);  // seven block matrices a layer, token_embd and output
        // Empty cells: no block role outside the blocks, no token_embd inside one; nothing drawn as a zero.
        for (const QModelIndex& empty :
             {grid->index(2, columnOf(TensorRole::AttnQ)), grid->index(0, columnOf(TensorRole::TokenEmbd))}) {
            QVERIFY(!empty.data(Qt::DisplayRole).isValid());
            QVERIFY(!empty.data(Qt::BackgroundRole).isValid());
            QVERIFY(!empty.data(LayerRoleModel::BpwRole).isValid());
            QVERIFY(!empty.data(Qt::ToolTipRole).isValid());
        }
        QVERIFY(grid->methodsPresent() == (std::vector<Method>{Method::Q8_0, Method::Q4_0}));

        // The widget: the legend names the methods, and a cell's tooltip is the model's.
        panel.resultTabs()->setCurrentIndex(1);
        ui::LayerRoleHeatMap* map = panel.heatMap();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QVERIFY(map->isVisible());
        QCOMPARE(map->legendText(), QStringLiteral("q8_0, q4_0"));
        const QModelIndex down0Cell = grid->index(0, columnOf(TensorRole::FfnDown));
        const QModelIndex down1Cell = grid->index(1, columnOf(TensorRole::FfnDown));
        const QRect down0Rect = map->cellRect(0, columnOf(TensorRole::FfnDown));
        QVERIFY(!down0Rect.isEmpty());
        QVERIFY(map->cellAt(down0Rect.center()) == std::make_pair(0, columnOf(TensorRole::FfnDown)));
        QHelpEvent help(QEvent::ToolTip, down0Rect.center(), map->mapToGlobal(down0Rect.center()));
        QApplication::sendEvent(map, &help);
        QTRY_VERIFY(QToolTip::isVisible());
        QCOMPARE(QToolTip::text(), down0Cell.data(Qt::ToolTipRole).toString());
        QToolTip::hideText();

        // Bits per weight: the q8_0 cell higher on the scale than the q4_0 one, the colour bar's ends the extremes.
        QSignalSpy changed(grid, &QAbstractItemModel::dataChanged);
        panel.measureCombo()->setCurrentIndex(1);
        QCOMPARE(grid->measure(), LayerRoleModel::Measure::BitsPerWeight);
        QVERIFY(!changed.isEmpty());
        QVERIFY(!panel.logScaleCheck()->isEnabled());
        QCOMPARE(down0Cell.data(Qt::DisplayRole).toString(),
                 ui::formatNumber(down0Cell.data(LayerRoleModel::BpwRole).toDouble(), 3));
        QVERIFY(down0Cell.data(LayerRoleModel::ScaleRole).toDouble() >
                down1Cell.data(LayerRoleModel::ScaleRole).toDouble());
        QVERIFY(down0Cell.data(Qt::BackgroundRole).value<QBrush>().color() !=
                down1Cell.data(Qt::BackgroundRole).value<QBrush>().color());
        double lo = 1e300, hi = -1e300, errLo = 1e300, errHi = -1e300;
        for (const QuantizedTensor& q : report.tensors)
            if (q.codec.n_dims() == 2) {
                lo = std::min(lo, q.bits_per_weight());
                hi = std::max(hi, q.bits_per_weight());
                errLo = std::min(errLo, q.codec.rel_error);
                errHi = std::max(errHi, q.codec.rel_error);
            }
        QCOMPARE(grid->scaleRange()->first, lo);
        QCOMPARE(grid->scaleRange()->second, hi);
        QCOMPARE(map->legendText(),
                 QStringLiteral("%1 .. %2 bits per weight").arg(ui::formatNumber(lo), ui::formatNumber(hi)));

        // Relative error: q8_0's below q4_0's; the log scale takes log10 of the range.
        panel.measureCombo()->setCurrentIndex(2);
        QCOMPARE(grid->measure(), LayerRoleModel::Measure::RelError);
        QVERIFY(panel.logScaleCheck()->isEnabled());
        QVERIFY(down0Cell.data(LayerRoleModel::ScaleRole).toDouble() <
                down1Cell.data(LayerRoleModel::ScaleRole).toDouble());
        QCOMPARE(grid->scaleRange()->second, errHi);
        panel.logScaleCheck()->setChecked(true);
        QVERIFY(grid->logScale());
        QVERIFY(errLo > 0.0);
        QCOMPARE(grid->scaleRange()->first, std::log10(errLo));
        QCOMPARE(grid->scaleRange()->second, std::log10(errHi));
        QVERIFY(map->legendText().endsWith(QStringLiteral("log10 relative error")));
        map->grab();  // paints every measure without trouble
        panel.measureCombo()->setCurrentIndex(0);
        map->grab();

        // A click selects the tensor in the result table.
        QSignalSpy selected(&panel, &ui::QuantizePanel::tensorSelected);
        const QString down0Name = down0Cell.data(LayerRoleModel::NameRole).toString();
        QVERIFY(down0Name.contains(QStringLiteral("ffn_down")));
        QTest::mouseClick(map, Qt::LeftButton, {}, down0Rect.center());
        QCOMPARE(selected.count(), 1);
        QCOMPARE(selected.at(0).at(0).toString(), down0Name);
        QCOMPARE(panel.selectedTensor(), down0Name);
        // An empty cell selects nothing.
        QTest::mouseClick(map, Qt::LeftButton, {}, map->cellRect(2, columnOf(TensorRole::AttnQ)).center());
        QCOMPARE(selected.count(), 1);

        QVERIFY(QFile::copy(panel.lastKnotPath(), QString::fromStdString(m_dir.file("mixed.knot"))));
        m_knot = QString::fromStdString(m_dir.file("mixed.knot"));
    }

    void openedKnotFillsTheGridFromItsRecords() {
        QVERIFY(!m_knot.isEmpty());
        auto knot = KnotFile::open(m_knot.toStdString());
        QVERIFY(knot);
        ui::MainWindow w;
        w.resize(1400, 900);
        w.show();
        QSignalSpy loaded(&w, &ui::MainWindow::modelLoaded);
        w.openModel(m_knot);
        QVERIFY(loaded.wait(120000));
        ui::QuantizePanel* panel = w.quantizePanel();
        LayerRoleModel* grid = panel->layerRoleModel();
        QCOMPARE(grid->source(), QStringLiteral("knot records"));
        QCOMPARE(grid->rowCount(), 3);
        int matrices = 0;
        for (const KnotEntry& e : knot->entries()) {
            if (e.n_dims() != 2) continue;
            ++matrices;
            const QModelIndex cell = grid->indexOfTensor(QString::fromStdString(e.name));
            QVERIFY(cell.isValid());
            const Method expected = e.layer == 0 && e.role == TensorRole::FfnDown ? Method::Q8_0 : Method::Q4_0;
            QVERIFY(e.method == expected);
            QCOMPARE(cell.data(LayerRoleModel::MethodRole).toString(), ui::methodText(expected));
            QCOMPARE(cell.data(LayerRoleModel::BpwRole).toDouble(),
                     8.0 * static_cast<double>(e.record_bytes) / static_cast<double>(e.n_elements()));
            QVERIFY(!cell.data(LayerRoleModel::RelErrorRole).isValid());  // a knot holds no original
            QVERIFY(cell.data(Qt::ToolTipRole).toString().contains(QStringLiteral("error not measured")));
        }
        QCOMPARE(matrices, 16);
        // Error measure: every cell empty (not measured), and the legend says so.
        panel->measureCombo()->setCurrentIndex(2);
        const QModelIndex down0Cell = grid->index(0, columnOf(TensorRole::FfnDown));
        QVERIFY(!down0Cell.data(Qt::BackgroundRole).isValid());
        QCOMPARE(down0Cell.data(Qt::DisplayRole).toString(), QString());
        QVERIFY(!grid->scaleRange());
        QCOMPARE(panel->heatMap()->legendText(), QStringLiteral("no cell has a measured value"));
        panel->measureCombo()->setCurrentIndex(0);

        // A click selects the tensor in the model browser (the result table has no rows before a run).
        w.tabs()->setCurrentWidget(panel);
        panel->resultTabs()->setCurrentIndex(1);
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ui::LayerRoleHeatMap* map = panel->heatMap();
        const QString up1 = grid->index(1, columnOf(TensorRole::FfnUp)).data(LayerRoleModel::NameRole).toString();
        QVERIFY(!up1.isEmpty());
        QTest::mouseClick(map, Qt::LeftButton, {}, map->cellRect(1, columnOf(TensorRole::FfnUp)).center());
        QCOMPARE(w.browser()->selectedTensor(), up1);

        // An rknot made with the source model measured each record's error: opened in the Tuning view, the knot's
        // heat map shows it.
        RknotEncodeOptions encode;
        encode.knot_path = m_knot.toStdString();
        encode.model_path = m_model;
        auto rknot = encode_rknot(encode);
        QVERIFY2(rknot, rknot.status().message().c_str());
        const std::string rknotPath = m_dir.file("mixed.rknot");
        QVERIFY(write_rknot(rknotPath, *rknot));
        QVERIFY(w.rknotEditor()->openFile(QString::fromStdString(rknotPath)));
        int measured = 0;
        for (const RknotLayer& l : rknot->layers) {
            const QModelIndex cell = grid->indexOfTensor(QString::fromStdString(l.tensor));
            if (!cell.isValid()) continue;
            QVERIFY(l.rel_error.has_value());
            QCOMPARE(cell.data(LayerRoleModel::RelErrorRole).toDouble(), *l.rel_error);
            QVERIFY(cell.data(Qt::ToolTipRole)
                        .toString()
                        .contains(QStringLiteral("rel_error %1 (measured by the rknot mixed.rknot)")
                                      .arg(ui::formatNumber(*l.rel_error))));
            ++measured;
        }
        QCOMPARE(measured, 16);
        panel->measureCombo()->setCurrentIndex(2);
        QVERIFY(grid->scaleRange().has_value());
        QVERIFY(down0Cell.data(LayerRoleModel::ScaleRole).toDouble() <
                grid->index(1, columnOf(TensorRole::FfnDown)).data(LayerRoleModel::ScaleRole).toDouble());
        w.runner()->cancelAll();
        w.runner()->waitForAll();
    }
};

QTEST_MAIN(TestLayerRoleHeatMap)
#include "test_layer_role_heat_map.moc"
