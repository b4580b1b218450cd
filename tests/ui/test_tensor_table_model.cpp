// The tensor table model (checked by QAbstractItemModelTester) and the main window's open path, offscreen.
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "models/tensor_table_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/main_window.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QSignalSpy>
#include <QtTest>

using namespace gkq;

class TestTensorTableModel : public QObject {
    Q_OBJECT
private slots:
    void modelHoldsEveryTensor() {
        test::TempDir dir;
        auto file = ModelFile::open(test::write_tiny_gguf(dir.file("tiny.gguf")));
        QVERIFY2(file.is_ok(), file.message().c_str());

        ui::TensorTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setWeights(*file);
        QCOMPARE(model.rowCount(), 20);
        QCOMPARE(model.columnCount(), int(ui::TensorTableModel::ColumnCount));
        const QModelIndex name = model.index(2, ui::TensorTableModel::Name);
        QCOMPARE(name.data().toString(), QStringLiteral("blk.0.attn_q.weight"));
        QCOMPARE(model.index(2, ui::TensorTableModel::Role).data().toString(), QStringLiteral("attn_q"));
        QCOMPARE(model.index(2, ui::TensorTableModel::Shape).data().toString(), QStringLiteral("64 x 64"));
        QCOMPARE(model.index(2, ui::TensorTableModel::Params).data(Qt::UserRole).toLongLong(), 4096);
        QCOMPARE(model.index(2, ui::TensorTableModel::Bytes).data(Qt::UserRole).toULongLong(), 16384ull);
        QCOMPARE(model.index(0, ui::TensorTableModel::Layer).data().toString(), QStringLiteral("-"));
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void aMatrixStoredWiderForItsRowLengthIsAFallback() {
        // FFN width 100: ffn_down's rows of 100 values do not split into q8_0's blocks of 32, so the knot keeps them
        // in f16; the Overview's table marks exactly those rows, orange, with the reason in the tooltip.
        test::TempDir dir;
        ModelConfig config = test::tiny_config(true);
        config.hidden_dim = 100;
        auto report = test::write_tiny_knot(dir.file("odd.safetensors"), config, "q8_0", dir.file("odd.knot"));
        QVERIFY2(report.is_ok(), report.message().c_str());
        auto knot = KnotFile::open(dir.file("odd.knot"));
        QVERIFY2(knot.is_ok(), knot.message().c_str());

        ui::TensorTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setWeights(*knot);
        int fallbacks = 0;
        for (int r = 0; r < model.rowCount(); ++r) {
            const bool down = model.index(r, ui::TensorTableModel::Role).data().toString() == QLatin1String("ffn_down");
            QCOMPARE(model.isFallback(r), down);
            if (!down) continue;
            ++fallbacks;
            const QModelIndex cell = model.index(r, ui::TensorTableModel::Type);
            QVERIFY(cell.data(Qt::BackgroundRole).isValid());
            QVERIFY2(cell.data(Qt::ToolTipRole).toString().contains(QStringLiteral("row length 100")),
                     qPrintable(cell.data(Qt::ToolTipRole).toString()));
        }
        QCOMPARE(fallbacks, int(config.n_layers));
    }

    void windowShowsErrorsWithoutDying() {
        // Opening runs as a job: wait for modelLoaded / loadFailed.
        ui::MainWindow w;
        QSignalSpy loaded(&w, &ui::MainWindow::modelLoaded);
        QSignalSpy failed(&w, &ui::MainWindow::loadFailed);
        w.openModel(QStringLiteral("/nonexistent/x.gguf"));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        QVERIFY(w.lastError().contains(QStringLiteral("/nonexistent/x.gguf")));
        test::TempDir dir;
        const std::string path = test::write_tiny_gguf(dir.file("tiny.gguf"), false);
        w.openModel(QString::fromStdString(path));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 30000);
        QCOMPARE(w.tensorModel()->rowCount(), 21);
        QVERIFY(w.windowTitle().startsWith(QStringLiteral("tiny.gguf")));
        // a failed open keeps the model that was open
        w.openModel(QString::fromStdString(dir.file("missing.bin")));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 30000);
        QVERIFY(w.lastError().contains(QString::fromStdString(dir.file("missing.bin"))));
        QCOMPARE(w.tensorModel()->rowCount(), 21);
    }
};

QTEST_MAIN(TestTensorTableModel)
#include "test_tensor_table_model.moc"
