// The workbench's item models (each under QAbstractItemModelTester), the spectrum store and the exact rank
// arithmetic the spectrum view shows.
#include "charts/rank_stats.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "models/model_tree_model.h"
#include "models/quant_result_model.h"
#include "models/spectrum_store.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <map>

using namespace gkq;

namespace {
TensorSpectrum makeSpectrum(const std::string& name, TensorRole role, int layer, std::vector<double> s) {
    TensorSpectrum t;
    t.name = name;
    t.role = role;
    t.layer = layer;
    t.rows = 4;
    t.cols = 5;
    t.singular_values = std::move(s);
    return t;
}
}  // namespace

class TestUiModels : public QObject {
    Q_OBJECT
private slots:
    void treeGroupsTensorsByLayer() {
        test::TempDir dir;
        auto file = ModelFile::open(test::write_tiny_gguf(dir.file("tiny.gguf")));
        QVERIFY2(file.is_ok(), file.message().c_str());

        ui::ModelTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setWeights(*file);
        QCOMPARE(model.rowCount(), 3);  // model-wide, layer 0, layer 1
        QCOMPARE(model.index(0, 0).data().toString(), QStringLiteral("model-wide"));
        QCOMPARE(model.index(1, 0).data().toString(), QStringLiteral("layer 0"));
        QCOMPARE(model.index(2, 0).data().toString(), QStringLiteral("layer 1"));
        int tensors = 0;
        qint64 params = 0;
        for (int g = 0; g < model.rowCount(); ++g) {
            const QModelIndex group = model.index(g, 0);
            tensors += model.rowCount(group);
            params += model.index(g, ui::ModelTreeModel::Params).data(ui::ModelTreeModel::RawRole).toLongLong();
            QVERIFY(group.data(ui::ModelTreeModel::NameRole).toString().isEmpty());
        }
        QCOMPARE(tensors, 20);
        QCOMPARE(params, file->n_params());

        const QModelIndex q = model.indexOfTensor(QStringLiteral("blk.0.attn_q.weight"));
        QVERIFY(q.isValid());
        QCOMPARE(q.parent().data().toString(), QStringLiteral("layer 0"));
        const auto cell = [&](int column, int role = Qt::DisplayRole) { return q.siblingAtColumn(column).data(role); };
        QCOMPARE(cell(ui::ModelTreeModel::Role).toString(), QStringLiteral("attn_q"));
        QCOMPARE(cell(ui::ModelTreeModel::Shape).toString(), QStringLiteral("64 x 64"));
        QCOMPARE(cell(ui::ModelTreeModel::Type).toString(), QStringLiteral("F32"));
        QCOMPARE(cell(ui::ModelTreeModel::Params, ui::ModelTreeModel::RawRole).toLongLong(), 4096);
        QCOMPARE(cell(ui::ModelTreeModel::Bytes, ui::ModelTreeModel::RawRole).toULongLong(), 16384ull);
        QCOMPARE(cell(ui::ModelTreeModel::Name, ui::ModelTreeModel::NameRole).toString(),
                 QStringLiteral("blk.0.attn_q.weight"));
        QVERIFY(!model.indexOfTensor(QStringLiteral("nope")).isValid());

        // Filtering keeps a matching tensor's layer (recursive filtering, as the browser uses it).
        QSortFilterProxyModel proxy;
        QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        proxy.setSourceModel(&model);
        proxy.setRecursiveFilteringEnabled(true);
        proxy.setFilterKeyColumn(-1);
        proxy.setFilterFixedString(QStringLiteral("blk.1.ffn_down"));
        QCOMPARE(proxy.rowCount(), 1);
        QCOMPARE(proxy.index(0, 0).data().toString(), QStringLiteral("layer 1"));
        QCOMPARE(proxy.rowCount(proxy.index(0, 0)), 1);

        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void quantResultsAreTheCoresReport() {
        test::TempDir dir;
        auto report = test::write_tiny_knot(dir.file("tiny.safetensors"), test::tiny_config(true), "lowrank-q4",
                                            dir.file("tiny.knot"));
        QVERIFY2(report.is_ok(), report.message().c_str());

        ui::QuantResultModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setReport(*report);
        QCOMPARE(model.rowCount(), static_cast<int>(report->tensors.size()));
        QCOMPARE(model.columnCount(), int(ui::QuantResultModel::ColumnCount));
        for (int r = 0; r < model.rowCount(); ++r) {
            const QuantizedTensor& q = report->tensors[static_cast<size_t>(r)];
            const auto raw = [&](int c) { return model.index(r, c).data(ui::QuantResultModel::RawRole); };
            QCOMPARE(raw(ui::QuantResultModel::Name).toString(), QString::fromStdString(q.codec.name));
            QCOMPARE(raw(ui::QuantResultModel::Method).toString(),
                     QString::fromLatin1(method_name(q.codec.method).data()));
            QCOMPARE(raw(ui::QuantResultModel::Rank).toInt(), q.codec.rank);
            QCOMPARE(raw(ui::QuantResultModel::Bytes).toULongLong(), q.bytes_on_disk());
            QCOMPARE(raw(ui::QuantResultModel::Bpw).toDouble(), q.bits_per_weight());
            QCOMPARE(raw(ui::QuantResultModel::RelError).toDouble(), q.codec.rel_error);
        }
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void quantResultsGroupByLayerAndRole() {
        test::TempDir dir;
        auto report =
            test::write_tiny_knot(dir.file("tiny.safetensors"), test::tiny_config(true), "q4_0", dir.file("tiny.knot"));
        QVERIFY2(report.is_ok(), report.message().c_str());

        ui::QuantResultModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setReport(*report);
        using Group = ui::QuantResultModel::GroupBy;
        // What each grouping must add up to, from the core's report.
        std::map<int, quint64> layerBytes;
        std::map<int, double> layerMaxError;
        std::map<QString, int> roleTensors;
        quint64 allBytes = 0;
        for (const QuantizedTensor& q : report->tensors) {
            layerBytes[q.codec.layer] += q.bytes_on_disk();
            layerMaxError[q.codec.layer] = std::max(layerMaxError[q.codec.layer], q.codec.rel_error);
            roleTensors[QString::fromLatin1(role_name(q.codec.role).data())] += 1;
            allBytes += q.bytes_on_disk();
        }
        const auto raw = [&](int r, int c, int role = ui::QuantResultModel::RawRole) {
            return model.index(r, c).data(role);
        };

        model.setGroupBy(Group::Layer);
        QCOMPARE(model.rowCount(), static_cast<int>(layerBytes.size()));  // layers 0, 1 and "not in a layer"
        QCOMPARE(model.headerData(ui::QuantResultModel::Name, Qt::Horizontal).toString(), QStringLiteral("Layer"));
        quint64 shownBytes = 0;
        int shownTensors = 0;
        for (int r = 0; r < model.rowCount(); ++r) {
            const int layer = raw(r, ui::QuantResultModel::Name).toInt();
            QVERIFY(layerBytes.count(layer));
            QCOMPARE(raw(r, ui::QuantResultModel::Bytes).toULongLong(), layerBytes[layer]);
            QCOMPARE(raw(r, ui::QuantResultModel::RelError).toDouble(), layerMaxError[layer]);
            const double elements = raw(r, 0, ui::QuantResultModel::ElementsRole).toDouble();
            QCOMPARE(raw(r, ui::QuantResultModel::Bpw).toDouble(), 8.0 * double(layerBytes[layer]) / elements);
            shownBytes += raw(r, ui::QuantResultModel::Bytes).toULongLong();
            shownTensors += raw(r, 0, ui::QuantResultModel::TensorsRole).toInt();
        }
        QCOMPARE(shownBytes, allBytes);
        QCOMPARE(shownTensors, static_cast<int>(report->tensors.size()));

        model.setGroupBy(Group::Role);
        QCOMPARE(model.rowCount(), static_cast<int>(roleTensors.size()));
        for (int r = 0; r < model.rowCount(); ++r) {
            const QString role = raw(r, ui::QuantResultModel::Name).toString();
            QCOMPARE(raw(r, 0, ui::QuantResultModel::TensorsRole).toInt(), roleTensors[role]);
            QVERIFY(model.index(r, 0).data().toString().startsWith(role + QStringLiteral(" (")));
        }
        QCOMPARE(raw(0, ui::QuantResultModel::Method).toString(), QStringLiteral("q4_0"));

        model.setGroupBy(Group::Tensor);
        QCOMPARE(model.rowCount(), static_cast<int>(report->tensors.size()));
        QCOMPARE(raw(0, ui::QuantResultModel::Name).toString(), QString::fromStdString(report->tensors[0].codec.name));
    }

    void rankStatsAreExact() {
        // s = 4, 3, 2, 1: energy 30; rank 2 keeps 25/30, error sqrt(5/30); a (4 x 5) matrix at rank 2 stores
        // 2 * (4 + 5 + 1) = 20 floats for 20 weights: 32 bits per weight in f32, 16 in f16.
        const TensorSpectrum s = makeSpectrum("w", TensorRole::AttnQ, 0, {4, 3, 2, 1});
        const ui::RankStats r = ui::rankStats(s, 2);
        QCOMPARE(r.rank, int64_t{2});
        QCOMPARE(r.energyKept, 25.0 / 30.0);
        QVERIFY(std::abs(r.relError - std::sqrt(5.0 / 30.0)) < 1e-15);
        QCOMPARE(r.bpwF32, 32.0);
        QCOMPARE(r.bpwF16, 16.0);
        const ui::RankStats full = ui::rankStats(s, 99);  // clamped to n
        QCOMPARE(full.rank, int64_t{4});
        QCOMPARE(full.relError, 0.0);
        QCOMPARE(full.energyKept, 1.0);
        const ui::RankStats none = ui::rankStats(s, 0);
        QCOMPARE(none.relError, 1.0);
        QCOMPARE(none.bpwF32, 0.0);
        QCOMPARE(ui::lowRankBitsPerWeight(512, 192, 8, 16), 8.0 * (512 + 192 + 1) * 16 / (512.0 * 192.0));
    }

    void storeCachesAnalyzedSpectraByName() {
        ui::SpectrumStore store;
        QSignalSpy changed(&store, &ui::SpectrumStore::changed);
        std::vector<TensorSpectrum> spectra;
        spectra.push_back(makeSpectrum("blk.1.ffn_up.weight", TensorRole::FfnUp, 1, {2, 1}));
        spectra.push_back(makeSpectrum("blk.0.ffn_up.weight", TensorRole::FfnUp, 0, {3, 1}));
        spectra.push_back(makeSpectrum("token_embd.weight", TensorRole::TokenEmbd, -1, {5, 1}));
        TensorSpectrum skipped = makeSpectrum("blk.0.attn_q.weight", TensorRole::AttnQ, 0, {});
        skipped.skipped = "type Q4_K has no float32 conversion";
        spectra.push_back(skipped);
        store.setSpectra(std::move(spectra));
        QCOMPARE(changed.count(), 1);
        QCOMPARE(store.size(), 3);
        QVERIFY(store.find(QStringLiteral("blk.0.attn_q.weight")) == nullptr);
        QCOMPARE(store.find(QStringLiteral("token_embd.weight"))->singular_values.front(), 5.0);
        const auto up = store.byRole(TensorRole::FfnUp);
        QCOMPARE(up.size(), size_t{2});
        QCOMPARE(up[0]->layer, 0);  // layer order
        QCOMPARE(up[1]->layer, 1);
        QCOMPARE(store.roles(), (std::vector<TensorRole>{TensorRole::TokenEmbd, TensorRole::FfnUp}));
        store.clear();
        QVERIFY(store.isEmpty());
        QCOMPARE(changed.count(), 2);
    }
};

QTEST_GUILESS_MAIN(TestUiModels)
#include "test_ui_models.moc"
