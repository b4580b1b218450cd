// The transformer on a knot's low-rank records, never densified: a `lowrank+residual` record (preset lowrank-q4) runs
// as R x + U (S V^T x) with R in its Q4_0 blocks (lowrank-q4k: its Q4_K blocks) and U, S V^T in float32 (k (rows +
// cols) floats), a pure `lowrank` record (svd-energy) as U (S V^T x), the token embedding's rows rebuilt from its
// factors one at a time. The factor path sums in a different order from the decoded matrix (decode_tensor's W = U S V^T
// + R, element by element), so its logits are not bit-identical to the densified path's
// (TransformerOptions::allow_factored = false): they agree within kMaxRelativeDiff, measured as max |a - b| / max |b|
// over every logit of a run, and greedy continuations are identical, on the tiny model, the shared checkpoints and the
// demo. The factor path keeps the determinism contract: the same bits for 1 and 3 threads, generic and AVX2 kernels, a
// batch and tokens one by one.
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/transformer.h"
#include "gkq/type_traits.h"
#include "gkq/weights.h"
#include "infer/kernels.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace gkq;

namespace {

// max |factored - dense| / max |dense| measured by the runs below: 1.0e-7 / 2.1e-7 (tiny tied / untied, lowrank-q4),
// 4.1e-7 (dim 256, lowrank-q4k), 1.6e-7 (tiny, rank 4), 5.0e-7 (llama2xs-279K), 2.6e-7 (babyllama-tok105), 9.8e-7
// (demo); 1e-5 leaves an order of magnitude for other CPUs and seeds.
constexpr double kMaxRelativeDiff = 1e-5;

// Greedy continuation of `prompt` for n tokens.
std::vector<int32_t> greedy(Transformer& t, const std::vector<int32_t>& prompt, int n) {
    std::vector<int32_t> out;
    auto r = t.forward_batch(prompt.data(), static_cast<int64_t>(prompt.size()), 0);
    if (!r) qFatal("%s", r.message().c_str());
    int64_t pos = static_cast<int64_t>(prompt.size());
    const int64_t vocab = t.config().vocab_size;
    for (int i = 0; i < n && pos < t.n_context(); ++i, ++pos) {
        const auto next = static_cast<int32_t>(std::max_element(*r, *r + vocab) - *r);
        out.push_back(next);
        r = t.forward(next, pos);
        if (!r) qFatal("%s", r.message().c_str());
    }
    return out;
}

double max_relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    }
    return scale > 0.0 ? diff / scale : diff;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::shared_ptr<const Weights> open_or_die(const std::string& path) {
    auto w = open_weights(path);
    if (!w) qFatal("%s", w.message().c_str());
    return std::shared_ptr<const Weights>(std::move(*w));
}

Transformer load_or_die(const std::shared_ptr<const Weights>& w, bool factored, int threads = 1) {
    TransformerOptions o;
    o.n_threads = threads;
    o.max_batch = 5;  // a batch crosses block boundaries
    o.allow_factored = factored;
    auto t = Transformer::load(w, o);
    if (!t) qFatal("%s", t.message().c_str());
    return std::move(*t);
}

// `model` quantized with `preset` into dir/name.
std::string quantize_or_die(const std::string& model, const std::string& preset, const std::string& out) {
    auto w = open_weights(model);
    if (!w) qFatal("%s", w.message().c_str());
    QuantizeOptions o;
    o.preset = preset;
    o.n_threads = 1;
    auto q = quantize_model(**w, o, out);
    if (!q) qFatal("%s", q.message().c_str());
    return out;
}

// Factored against densified on the knot at `path`: the measured difference (printed) under the tolerance, and
// `n_greedy` greedy tokens identical.
void check_factored_against_dense(const std::string& what, const std::string& path, int n_greedy) {
    const std::shared_ptr<const Weights> w = open_or_die(path);
    Transformer factored = load_or_die(w, true);
    Transformer dense = load_or_die(w, false);
    QVERIFY(factored.n_factored_matrices() > 0);
    QCOMPARE(dense.n_factored_matrices(), 0);
    const std::vector<int32_t> tokens = test::cycle_tokens(w->config().vocab_size, 16);
    const double rel =
        max_relative_diff(test::all_logits(factored, tokens, true), test::all_logits(dense, tokens, true));
    qInfo("%s: max |factored - dense| / max |dense| over %zu positions = %.3g", what.c_str(), tokens.size(), rel);
    QVERIFY2(rel < kMaxRelativeDiff, qPrintable(QString("%1: %2").arg(what.c_str()).arg(rel)));
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 4);
    const std::vector<int32_t> a = greedy(factored, prompt, n_greedy);
    const std::vector<int32_t> b = greedy(dense, prompt, n_greedy);
    QVERIFY(!a.empty());
    QCOMPARE(a, b);
    // the factors and the residual's blocks take less memory than the float32 matrices they stand for
    QVERIFY(factored.loaded_weight_bytes() < dense.loaded_weight_bytes());
}

// The bytes a factored transformer holds for the knot `w` whose low-rank records all have `residual` blocks (checked):
// each record's residual as stored plus its float32 factors, and the f32 records (norms) whole; `n_factored` counts
// the low-rank records.
void expected_factored_bytes(const Weights& w, DType residual, uint64_t* bytes, size_t* n_factored) {
    *bytes = 0;
    *n_factored = 0;
    for (size_t i = 0; i < w.n_tensors(); ++i) {
        const TensorInfo& info = w.tensor_info(i);
        auto f = w.read_factors(i);
        QVERIFY2(f, f.message().c_str());
        if (!f->has_value()) {
            *bytes += static_cast<uint64_t>(info.n_elements()) * 4;  // the norms, f32 records
            continue;
        }
        const StoredFactors& sf = **f;
        QCOMPARE(sf.residual_type, residual);
        QCOMPARE(static_cast<uint64_t>(sf.residual.size()),
                 *dtype_storage_bytes(residual, static_cast<uint64_t>(info.n_elements())));
        *bytes += sf.residual.size() + static_cast<uint64_t>(sf.rank * (info.shape[0] + info.shape[1])) * 4;
        ++*n_factored;
    }
}

}  // namespace

class TestTransformerLowrank : public QObject {
    Q_OBJECT

private slots:
    // lowrank-q4 on the tiny model (tied and untied): every matrix is factored with its residual's Q4_0 blocks as
    // stored; what the transformer holds is those blocks, the float32 factors and the norms, exactly.
    void residualRecordsRunFactored_data() {
        QTest::addColumn<bool>("shared");
        QTest::newRow("tied") << true;
        QTest::newRow("untied") << false;
    }
    void residualRecordsRunFactored() {
        QFETCH(bool, shared);
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("tiny.gguf"), shared, 4);
        const std::string knot = quantize_or_die(model, "lowrank-q4", dir.file("tiny-lrq4.knot"));
        const std::shared_ptr<const Weights> w = open_or_die(knot);
        Transformer t = load_or_die(w, true);
        uint64_t expected = 0;
        size_t n_factored = 0;
        expected_factored_bytes(*w, DType::Q4_0, &expected, &n_factored);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(t.loaded_weight_bytes(), expected);
        for (const Matrix* m : {&t.weights().layers[1].wq, &t.weights().layers[0].w2, &t.weights().token_embedding}) {
            QVERIFY(m->factored());
            QVERIFY(m->with_residual);
            QVERIFY(m->values->dense.empty());
            QCOMPARE(m->values->stored_type, DType::Q4_0);
        }
        check_factored_against_dense(shared ? "tiny tied, lowrank-q4" : "tiny untied, lowrank-q4", knot, 24);
    }

    // lowrank-q4k on a model whose rows are whole Q4_K blocks (dim 256, FFN 512): every matrix runs factored with its
    // residual's Q4_K blocks as stored (the stored products of the type table's Q4_K row, never densified), and its
    // logits are those of the model its records decode to (the densified path) within the same tolerance.
    void kquantResidualRecordsRunFactored() {
        test::TempDir dir;
        ModelConfig c = test::tiny_config(false);
        c.dim = 256;
        c.hidden_dim = 512;
        const test::TinyModel m = test::make_tiny_model(c, 5);
        const std::string model = dir.file("k256.gguf");
        QVERIFY(write_gguf(model, m.config, m.tensors, {}));
        const std::string knot = quantize_or_die(model, "lowrank-q4k", dir.file("k256-lrq4k.knot"));
        const std::shared_ptr<const Weights> w = open_or_die(knot);
        uint64_t expected = 0;
        size_t n_factored = 0;
        expected_factored_bytes(*w, DType::Q4_K, &expected, &n_factored);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(n_factored, size_t{2 * 7 + 2});  // every projection, token_embd and output
        Transformer t = load_or_die(w, true);
        QCOMPARE(t.loaded_weight_bytes(), expected);
        for (const Matrix* mat : {&t.weights().layers[1].wq, &t.weights().layers[0].w2, &t.weights().token_embedding,
                                  &t.weights().classifier}) {
            QVERIFY(mat->factored());
            QVERIFY(mat->with_residual);
            QVERIFY(mat->values->dense.empty());
            QCOMPARE(mat->values->stored_type, DType::Q4_K);
        }
        check_factored_against_dense("dim 256 untied, lowrank-q4k", knot, 24);
    }

    // The factor path's own bits: 1 and 3 threads (every product split across the pool), both kernel sets, a batch
    // and tokens one by one, and an all-hot FFN routing (the kept rows are the same products).
    void factoredLogitsAreDeterministic() {
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("tiny.gguf"), false, 6);
        const std::string knot = quantize_or_die(model, "lowrank-q4", dir.file("tiny.knot"));
        const std::shared_ptr<const Weights> w = open_or_die(knot);
        const std::vector<int32_t> tokens = test::cycle_tokens(w->config().vocab_size, 12);
        const KernelIsa was = active_kernel_isa();
        const int64_t was_macs = min_parallel_macs();
        set_min_parallel_macs(0);
        set_kernel_isa(KernelIsa::Generic);
        Transformer ref = load_or_die(w, true, 1);
        const std::vector<float> want = test::all_logits(ref, tokens, false);
        for (KernelIsa isa : {KernelIsa::Generic, KernelIsa::Avx2}) {
            const KernelIsa in_use = set_kernel_isa(isa);
            for (int threads : {1, 3}) {
                Transformer t = load_or_die(w, true, threads);
                for (bool batch : {false, true})
                    QVERIFY2(same_bits(test::all_logits(t, tokens, batch), want),
                             qPrintable(QString("%1, %2 threads, %3")
                                            .arg(kernel_isa_name(in_use))
                                            .arg(threads)
                                            .arg(batch ? "batch" : "single")));
            }
        }
        Transformer routed = load_or_die(w, true, 3);
        const ModelConfig& c = w->config();
        std::vector<std::vector<uint8_t>> hot(static_cast<size_t>(c.n_layers),
                                              std::vector<uint8_t>(static_cast<size_t>(c.hidden_dim), 1));
        QVERIFY(routed.set_ffn_routing(hot));
        QVERIFY(same_bits(test::all_logits(routed, tokens, true), want));
        set_kernel_isa(was);
        set_min_parallel_macs(was_macs);
    }

    // A pure low-rank knot (rank 4 for every matrix): its embedding too runs from its factors (rows rebuilt one at a
    // time, and as the tied classifier).
    void pureLowRankEmbeddingRunsFactored() {
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("tiny.gguf"), true, 3);
        auto w = open_weights(model);
        QVERIFY(w);
        QuantizeOptions o;
        o.preset = "svd-energy";
        o.global.method = Method::LowRank;  // the embedding too (the preset stores it as Q8_0)
        o.global.rank = 4;
        o.n_threads = 1;
        const std::string knot = dir.file("tiny-r4.knot");
        auto q = quantize_model(**w, o, knot);
        QVERIFY2(q, q.message().c_str());
        const std::shared_ptr<const Weights> k = open_or_die(knot);
        Transformer t = load_or_die(k, true);
        const Matrix& e = t.weights().token_embedding;
        QCOMPARE(e.rank, int64_t{4});
        QVERIFY(!e.with_residual);
        QVERIFY(e.values->dense.empty());
        check_factored_against_dense("tiny tied, lowrank rank 4", knot, 24);
    }

    // A residual whose blocks do not fill the matrix is refused, naming the tensor.
    void residualOfTheWrongSizeIsCorrupt() {
        auto m = test::make_tiny_model(test::tiny_config(false), 2);
        test::MemoryWeights source(m);
        const size_t i = source.at(TensorRole::FfnUp, 1);
        const int64_t rows = source.infos[i].shape[0], cols = source.infos[i].shape[1], k = 2;
        StoredFactors f;
        f.rank = k;
        f.u = test::random_floats(static_cast<size_t>(rows * k), 1);
        f.s = {1.0f, 0.5f};
        f.v = test::random_floats(static_cast<size_t>(cols * k), 2);
        auto bytes = std::make_shared<std::vector<uint8_t>>(*dtype_storage_bytes(DType::Q4_0, rows * cols) - 1);
        f.residual_type = DType::Q4_0;
        f.residual = *bytes;
        f.keep = bytes;
        source.factors[i] = std::move(f);
        auto t = Transformer::load(source);
        QVERIFY(!t);
        QVERIFY2(t.message().find("blk.1.ffn_up") != std::string::npos, t.message().c_str());
        QVERIFY2(t.message().find("residual") != std::string::npos, t.message().c_str());
    }

    // The shared real checkpoints and the demo model, quantized with lowrank-q4: factored and densified agree.
    void sharedCheckpointsAndDemo_data() {
        QTest::addColumn<QString>("model");
        QTest::newRow("llama2xs-279K") << "llama2xs-279K/model.bin";
        QTest::newRow("babyllama-tok105") << "babyllama-tok105/model5000.bin";
        QTest::newRow("demo") << "demo";
    }
    void sharedCheckpointsAndDemo() {
        QFETCH(QString, model);
        std::string path;
        if (model == "demo") {
            path = GKQ_DEMO_MODEL_DIR;
        } else {
            const auto shared = test::shared_model(model.toStdString());
            if (!shared) QSKIP(test::shared_models_skip_reason(model.toStdString()).c_str());
            path = *shared;
        }
        test::TempDir dir;
        const std::string knot = quantize_or_die(path, "lowrank-q4", dir.file("m.knot"));
        check_factored_against_dense(model.toStdString() + ", lowrank-q4", knot, 32);
    }
};

QTEST_GUILESS_MAIN(TestTransformerLowrank)
#include "test_transformer_lowrank.moc"
