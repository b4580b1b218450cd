// Transformer forward pass and generation: llama2.c run.c's greedy reference outputs on the shared real
// checkpoints, bit-identical logits across thread counts, batch sizes, kernel widths and file formats,
// half-split RoPE against interleaved, factored weights against dense, an independent scalar oracle, errors.
#include "gkq/convert.h"
#include "gkq/generate.h"
#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"
#include "gkq/sampler.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "infer/kernels.h"
#include "infer/thread_pool.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace gkq;

namespace {

// The reference outputs of llama2.c's run.c (-t 0 -n 64, no prompt) from ../shared/models/README.md.
const char* const kRef279K =
    "Once upon a time, there was a little girl named Lily. She loved to play outside and came to play with her "
    "friends. One day, she went to the park to play with her toys. She was very happy. He wanted to";
const char* const kRefTok105 = "Once upon a time, there was a little girl named Lily. She loved";

test::MemoryWeights source_of(const test::TinyModel& m) {
    return test::MemoryWeights(m);
}

// Runs positions 0..n-1 of a fixed token sequence one at a time; all logits concatenated.
std::vector<float> run_sequence(Transformer& t, const std::vector<int32_t>& tokens) {
    const auto vocab = static_cast<size_t>(t.config().vocab_size);
    std::vector<float> all;
    for (size_t i = 0; i < tokens.size(); ++i) {
        auto logits = t.forward(tokens[i], static_cast<int64_t>(i));
        if (!logits) {
            qWarning("%s", logits.message().c_str());
            return {};
        }
        all.insert(all.end(), *logits, *logits + vocab);
    }
    return all;
}

std::vector<int32_t> token_sequence(int32_t vocab, size_t n) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(vocab)));
    return t;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || a.empty()) return INFINITY;
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    return m;
}

const std::vector<float>& weight(const test::TinyModel& m, TensorRole role, int32_t layer) {
    for (size_t i = 0; i < m.tensors.size(); ++i)
        if (m.tensors[i].role == role && m.tensors[i].layer == layer) return m.storage[i];
    static const std::vector<float> none;
    return none;
}

// An independent scalar forward pass, written from the math rather than from the engine: plain row-by-row
// sums, double-precision accumulation, interleaved RoPE with freshly computed angles.
std::vector<float> oracle_sequence(const test::TinyModel& m, const std::vector<int32_t>& tokens) {
    const ModelConfig& c = m.config;
    const int64_t dim = c.dim, hs = c.head_size(), kv = c.kv_dim(), hid = c.hidden_dim;
    auto matvec = [](const std::vector<float>& w, const std::vector<double>& x, int64_t rows) {
        std::vector<double> y(static_cast<size_t>(rows));
        const auto cols = static_cast<int64_t>(x.size());
        for (int64_t r = 0; r < rows; ++r) {
            double s = 0;
            for (int64_t j = 0; j < cols; ++j)
                s += static_cast<double>(w[static_cast<size_t>(r * cols + j)]) * x[static_cast<size_t>(j)];
            y[static_cast<size_t>(r)] = s;
        }
        return y;
    };
    auto norm = [&](const std::vector<double>& x, const std::vector<float>& g) {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c.norm_eps);
        std::vector<double> o(x.size());
        for (size_t i = 0; i < x.size(); ++i) o[i] = g[i] * x[i] * inv;
        return o;
    };
    auto rope = [&](std::vector<double>& v, int64_t pos) {
        for (size_t i = 0; i < v.size(); i += 2) {
            const double angle =
                static_cast<double>(pos) *
                std::pow(c.rope_theta, -static_cast<double>(static_cast<int64_t>(i) % hs) / static_cast<double>(hs));
            const double a = v[i], b = v[i + 1];
            v[i] = a * std::cos(angle) - b * std::sin(angle);
            v[i + 1] = a * std::sin(angle) + b * std::cos(angle);
        }
    };
    std::vector<std::vector<std::vector<double>>> keys(static_cast<size_t>(c.n_layers)),
        values(static_cast<size_t>(c.n_layers));
    const std::vector<float>& emb = weight(m, TensorRole::TokenEmbd, -1);
    const std::vector<float>& cls = c.shared_classifier ? emb : weight(m, TensorRole::Output, -1);
    std::vector<float> out;
    for (size_t p = 0; p < tokens.size(); ++p) {
        std::vector<double> x(emb.begin() + tokens[p] * dim, emb.begin() + (tokens[p] + 1) * dim);
        for (int32_t l = 0; l < c.n_layers; ++l) {
            auto xn = norm(x, weight(m, TensorRole::AttnNorm, l));
            auto q = matvec(weight(m, TensorRole::AttnQ, l), xn, dim);
            auto k = matvec(weight(m, TensorRole::AttnK, l), xn, kv);
            auto v = matvec(weight(m, TensorRole::AttnV, l), xn, kv);
            rope(q, static_cast<int64_t>(p));
            rope(k, static_cast<int64_t>(p));
            keys[static_cast<size_t>(l)].push_back(k);
            values[static_cast<size_t>(l)].push_back(v);
            std::vector<double> att_out(static_cast<size_t>(dim), 0.0);
            for (int64_t h = 0; h < c.n_heads; ++h) {
                const int64_t kh = h / (c.n_heads / c.n_kv_heads);
                std::vector<double> sc(p + 1);
                double mx = -INFINITY;
                for (size_t s = 0; s <= p; ++s) {
                    double d = 0;
                    for (int64_t i = 0; i < hs; ++i)
                        d += q[static_cast<size_t>(h * hs + i)] *
                             keys[static_cast<size_t>(l)][s][static_cast<size_t>(kh * hs + i)];
                    sc[s] = d / std::sqrt(static_cast<double>(hs));
                    mx = std::max(mx, sc[s]);
                }
                double sum = 0;
                for (double& s : sc) sum += (s = std::exp(s - mx));
                for (size_t s = 0; s <= p; ++s)
                    for (int64_t i = 0; i < hs; ++i)
                        att_out[static_cast<size_t>(h * hs + i)] +=
                            sc[s] / sum * values[static_cast<size_t>(l)][s][static_cast<size_t>(kh * hs + i)];
            }
            auto o = matvec(weight(m, TensorRole::AttnO, l), att_out, dim);
            for (int64_t i = 0; i < dim; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
            xn = norm(x, weight(m, TensorRole::FfnNorm, l));
            auto g = matvec(weight(m, TensorRole::FfnGate, l), xn, hid);
            auto u = matvec(weight(m, TensorRole::FfnUp, l), xn, hid);
            for (int64_t i = 0; i < hid; ++i) {
                const double a = g[static_cast<size_t>(i)];
                g[static_cast<size_t>(i)] = a / (1.0 + std::exp(-a)) * u[static_cast<size_t>(i)];
            }
            auto d = matvec(weight(m, TensorRole::FfnDown, l), g, dim);
            for (int64_t i = 0; i < dim; ++i) x[static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
        }
        auto logits = matvec(cls, norm(x, weight(m, TensorRole::OutputNorm, -1)), c.vocab_size);
        for (double v : logits) out.push_back(static_cast<float>(v));
    }
    return out;
}

// HF's layout of the same q/k weights: within each head, rows (2i, 2i+1) move to (i, i + head_size/2).
std::vector<float> to_half_split(const std::vector<float>& w, int64_t n_heads, int64_t head_size, int64_t cols) {
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < head_size / 2; ++i)
            for (int64_t part = 0; part < 2; ++part) {
                const int64_t from = h * head_size + 2 * i + part;
                const int64_t to = h * head_size + i + part * (head_size / 2);
                std::memcpy(&out[static_cast<size_t>(to * cols)], &w[static_cast<size_t>(from * cols)],
                            static_cast<size_t>(cols) * sizeof(float));
            }
    return out;
}

struct SharedModel {
    std::string model;
    std::string tokenizer;
};

}  // namespace

class TestTransformer : public QObject {
    Q_OBJECT
private slots:
    void cleanup() {
        set_min_parallel_macs(64 * 1024);
        set_kernel_isa(KernelIsa::Avx2);
    }

    // ---- the reference outputs of llama2.c ----

    void greedyReproducesRunC_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("tokenizer");
        QTest::addColumn<QString>("expected");
        QTest::addColumn<int>("threads");
        for (int threads : {1, 2}) {
            const QByteArray suffix = " threads " + QByteArray::number(threads);
            QTest::newRow("llama2xs-279K" + suffix) << "llama2xs-279K/model.bin"
                                                    << "llama2xs-279K/tok512.bin" << kRef279K << threads;
            QTest::newRow("babyllama-tok105" + suffix) << "babyllama-tok105/model5000.bin"
                                                       << "babyllama-tok105/tok105.bin" << kRefTok105 << threads;
        }
    }
    void greedyReproducesRunC() {
        QFETCH(QString, model);
        QFETCH(QString, tokenizer);
        QFETCH(QString, expected);
        QFETCH(int, threads);
        auto model_path = test::shared_model(model.toStdString());
        auto tok_path = test::shared_model(tokenizer.toStdString());
        if (!model_path || !tok_path) QSKIP(test::shared_models_skip_reason(model.toStdString()).c_str());
        auto file = ModelFile::open(*model_path);
        QVERIFY2(file, file.message().c_str());
        TransformerOptions opt;
        opt.n_threads = threads;
        auto t = Transformer::load(*file, opt);
        QVERIFY2(t, t.message().c_str());
        auto tok = Tokenizer::load_llama2c(*tok_path, file->config().vocab_size);
        QVERIFY2(tok, tok.message().c_str());
        Sampler sampler(static_cast<int32_t>(file->config().vocab_size), {0.0f, 0.9f, 1});
        std::string text;
        GenerateOptions g;
        g.steps = 64;
        auto stats = generate(*t, *tok, sampler, "", g, [&](std::string_view piece) {
            text += piece;
            return true;
        });
        QVERIFY2(stats, stats.message().c_str());
        QCOMPARE(QString::fromStdString(text), expected);
        // run.c: position 0 holds BOS; positions 0..63 each yield one printed token.
        QCOMPARE(stats->n_prompt_tokens, int64_t{1});
        QCOMPARE(stats->n_sampled, int64_t{64});
        QCOMPARE(stats->n_generate_forwards, int64_t{63});
        QVERIFY(!stats->stopped);
    }

    void promptIsPrintedThenContinued() {
        auto model_path = test::shared_model("llama2xs-279K/model.bin");
        auto tok_path = test::shared_model("llama2xs-279K/tok512.bin");
        if (!model_path || !tok_path) QSKIP(test::shared_models_skip_reason("llama2xs-279K").c_str());
        auto file = ModelFile::open(*model_path);
        QVERIFY2(file, file.message().c_str());
        auto t = Transformer::load(*file);
        QVERIFY2(t, t.message().c_str());
        auto tok = Tokenizer::load_llama2c(*tok_path, 512);
        QVERIFY2(tok, tok.message().c_str());
        Sampler sampler(512, {0.0f, 0.9f, 1});
        std::string text;
        GenerateOptions g;
        g.steps = 64;
        auto stats = generate(*t, *tok, sampler, "Once upon a time", g, [&](std::string_view piece) {
            text += piece;
            return true;
        });
        QVERIFY2(stats, stats.message().c_str());
        // BOS + " Once" " upon" " a" " time": 5 prompt positions, then 64 - 5 + 1 sampled tokens. Greedy from
        // BOS alone picks exactly these four tokens first, so forcing them leaves the same state: same text.
        QCOMPARE(stats->n_prompt_tokens, int64_t{5});
        QCOMPARE(stats->n_sampled, int64_t{60});
        QCOMPARE(QString::fromStdString(text), QString(kRef279K));

        // steps shorter than the prompt: run.c prints the prompt pieces it reached and samples nothing
        text.clear();
        g.steps = 3;
        stats = generate(*t, *tok, sampler, "Once upon a time", g, [&](std::string_view piece) {
            text += piece;
            return true;
        });
        QVERIFY2(stats, stats.message().c_str());
        QCOMPARE(QString::fromStdString(text), QString("Once upon a"));
        QCOMPARE(stats->n_sampled, int64_t{0});
    }

    // ---- determinism ----

    void logitsBitIdenticalAcrossThreadCounts() {
        set_min_parallel_macs(0);  // split every product, however small
        auto m = test::make_tiny_model(test::tiny_config(false), 11);
        const auto tokens = token_sequence(40, 20);
        std::vector<float> first;
        for (int threads : {1, 2, 3, 4, 7}) {
            TransformerOptions opt;
            opt.n_threads = threads;
            auto t = Transformer::load(m.config, source_of(m), opt);
            QVERIFY2(t, t.message().c_str());
            QCOMPARE(t->n_threads(), threads);
            auto logits = run_sequence(*t, tokens);
            if (first.empty()) first = logits;
            QVERIFY2(bit_equal(first, logits), qPrintable(QString("threads %1").arg(threads)));
        }
    }

    void threadPoolRunsEveryIndexOnce() {
        for (int threads : {1, 2, 3, 8}) {
            ThreadPool pool(threads);
            std::vector<std::atomic<int>> hits(1000);
            std::atomic<int> bad_chunks{0};
            int64_t expected_total = 0;
            for (int job = 0; job < 3000; ++job) {
                const int64_t n = 1 + (job * 37) % 1000;
                const int64_t chunk = 1 + job % 9;
                pool.parallel_for(n, chunk, true, [&](int64_t begin, int64_t end) {
                    if (!(begin < end && end <= n && begin % chunk == 0)) bad_chunks.fetch_add(1);
                    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
                });
                expected_total += n;
            }
            QCOMPARE(bad_chunks.load(), 0);
            int64_t total = 0;
            for (auto& h : hits) total += h.load();
            QCOMPARE(total, expected_total);
            // index i was in every job with n > i
            int64_t in_jobs_for_7 = 0;
            for (int job = 0; job < 3000; ++job) in_jobs_for_7 += (1 + (job * 37) % 1000) > 7 ? 1 : 0;
            QCOMPARE(int64_t{hits[7].load()}, in_jobs_for_7);
        }
    }

    void sharedModelBitIdenticalAcrossThreadCounts() {
        auto model_path = test::shared_model("babyllama-tok105/model5000.bin");
        if (!model_path) QSKIP(test::shared_models_skip_reason("babyllama-tok105/model5000.bin").c_str());
        auto file = ModelFile::open(*model_path);
        QVERIFY2(file, file.message().c_str());
        set_min_parallel_macs(0);
        const auto tokens = token_sequence(105, 40);
        std::vector<float> first;
        for (int threads : {1, 2, 4}) {
            TransformerOptions opt;
            opt.n_threads = threads;
            auto t = Transformer::load(*file, opt);
            QVERIFY2(t, t.message().c_str());
            auto logits = run_sequence(*t, tokens);
            if (first.empty()) first = logits;
            QVERIFY2(bit_equal(first, logits), qPrintable(QString("threads %1").arg(threads)));
        }
    }

    void batchBitIdenticalToOneByOne_data() {
        QTest::addColumn<int>("max_batch");
        QTest::addColumn<int>("threads");
        QTest::newRow("batch 1") << 1 << 1;
        QTest::newRow("batch 5 (blocks cross)") << 5 << 2;
        QTest::newRow("batch 32") << 32 << 3;
    }
    void batchBitIdenticalToOneByOne() {
        QFETCH(int, max_batch);
        QFETCH(int, threads);
        set_min_parallel_macs(0);
        auto m = test::make_tiny_model(test::tiny_config(true), 5);
        const auto tokens = token_sequence(40, 23);
        auto one = Transformer::load(m.config, source_of(m));
        QVERIFY2(one, one.message().c_str());
        const auto expected = run_sequence(*one, tokens);

        TransformerOptions opt;
        opt.max_batch = max_batch;
        opt.n_threads = threads;
        auto t = Transformer::load(m.config, source_of(m), opt);
        QVERIFY2(t, t.message().c_str());
        std::vector<float> all(expected.size());
        auto last = t->forward_batch(tokens.data(), static_cast<int64_t>(tokens.size()), 0, all.data());
        QVERIFY2(last, last.message().c_str());
        QVERIFY(bit_equal(expected, all));
        QVERIFY(std::memcmp(*last, expected.data() + expected.size() - 40, 40 * sizeof(float)) == 0);

        // the prompt in two batches, without all_logits, then one more token: still the same bits
        auto t2 = Transformer::load(m.config, source_of(m), opt);
        QVERIFY2(t2, t2.message().c_str());
        QVERIFY(t2->forward_batch(tokens.data(), 9, 0));
        auto mid = t2->forward_batch(tokens.data() + 9, 13, 9);
        QVERIFY2(mid, mid.message().c_str());
        QVERIFY(std::memcmp(*mid, expected.data() + 21 * 40, 40 * sizeof(float)) == 0);
        auto next = t2->forward(tokens[22], 22);
        QVERIFY2(next, next.message().c_str());
        QVERIFY(std::memcmp(*next, expected.data() + 22 * 40, 40 * sizeof(float)) == 0);
    }

    void kernelWidthsBitIdentical() {
        if (set_kernel_isa(KernelIsa::Avx2) != KernelIsa::Avx2) QSKIP("this CPU has no AVX2");
        // dim 72 leaves a tail of 0 and hidden 100 a tail of 4 past the 8-lane blocks
        ModelConfig c = test::tiny_config(false);
        c.dim = 72;
        c.n_heads = 6;
        c.n_kv_heads = 3;
        c.hidden_dim = 100;
        auto m = test::make_tiny_model(c, 9);
        const auto tokens = token_sequence(40, 12);
        auto t = Transformer::load(m.config, source_of(m));
        QVERIFY2(t, t.message().c_str());
        const auto wide = run_sequence(*t, tokens);
        QCOMPARE(set_kernel_isa(KernelIsa::Generic), KernelIsa::Generic);
        auto t2 = Transformer::load(m.config, source_of(m));
        QVERIFY2(t2, t2.message().c_str());
        QVERIFY(bit_equal(wide, run_sequence(*t2, tokens)));
        QVERIFY(max_abs_diff(wide, oracle_sequence(m, tokens)) < 1e-4);
    }

    // ---- correctness against an oracle and across formats ----

    void matchesScalarOracle_data() {
        QTest::addColumn<bool>("shared");
        QTest::newRow("shared classifier") << true;
        QTest::newRow("separate classifier") << false;
    }
    void matchesScalarOracle() {
        QFETCH(bool, shared);
        auto m = test::make_tiny_model(test::tiny_config(shared), 21);
        const auto tokens = token_sequence(40, 32);  // the whole context
        auto t = Transformer::load(m.config, source_of(m));
        QVERIFY2(t, t.message().c_str());
        const auto got = run_sequence(*t, tokens);
        const double diff = max_abs_diff(got, oracle_sequence(m, tokens));
        QVERIFY2(diff < 1e-4, qPrintable(QString("max |diff| %1").arg(diff)));
    }

    void llama2cGgufSafetensorsGiveIdenticalLogits_data() {
        QTest::addColumn<bool>("shared");
        QTest::newRow("shared classifier") << true;
        QTest::newRow("separate classifier") << false;
    }
    void llama2cGgufSafetensorsGiveIdenticalLogits() {
        QFETCH(bool, shared);
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(shared), 3);
        QVERIFY(write_llama2c(dir.file("m.bin"), m.config, m.tensors));
        QVERIFY(write_gguf(dir.file("m.gguf"), m.config, m.tensors));
        // safetensors holds q/k in HF's half-split order (the writer permutes, the reader says HalfSplit)
        QVERIFY(write_safetensors(dir.file("m.safetensors"), m.config, m.tensors));
        const auto tokens = token_sequence(40, 16);
        std::vector<std::vector<float>> results;
        for (const char* name : {"m.bin", "m.gguf", "m.safetensors"}) {
            auto file = ModelFile::open(dir.file(name));
            QVERIFY2(file, file.message().c_str());
            auto t = Transformer::load(*file);
            QVERIFY2(t, t.message().c_str());
            QCOMPARE(t->weights().shared_classifier, shared);
            results.push_back(run_sequence(*t, tokens));
        }
        auto direct = Transformer::load(m.config, source_of(m));
        QVERIFY2(direct, direct.message().c_str());
        QVERIFY(bit_equal(results[0], results[1]));
        QVERIFY(bit_equal(results[0], results[2]));
        QVERIFY(bit_equal(results[0], run_sequence(*direct, tokens)));
    }

    void sharedCheckpointExportsGiveIdenticalLogits() {
        auto path = test::shared_model("llama2xs-279K/model.bin");
        if (!path) QSKIP(test::shared_models_skip_reason("llama2xs-279K/model.bin").c_str());
        auto file = ModelFile::open(*path);
        QVERIFY2(file, file.message().c_str());
        std::vector<std::vector<float>> storage;
        std::vector<WriteTensor> tensors;
        for (const Tensor& t : file->tensors()) {
            auto values = tensor_to_f32(t);
            QVERIFY2(values, values.message().c_str());
            storage.push_back(std::move(*values));
            tensors.push_back({{t.name, t.role, t.layer, t.shape, DType::F32}, storage.back().data(), {}});
        }
        test::TempDir dir;
        QVERIFY(write_gguf(dir.file("m.gguf"), file->config(), tensors));
        QVERIFY(write_safetensors(dir.file("m.safetensors"), file->config(), tensors));
        const auto tokens = token_sequence(512, 64);
        auto original = Transformer::load(*file);
        QVERIFY2(original, original.message().c_str());
        const auto expected = run_sequence(*original, tokens);
        for (const char* name : {"m.gguf", "m.safetensors"}) {
            auto exported = ModelFile::open(dir.file(name));
            QVERIFY2(exported, exported.message().c_str());
            auto t = Transformer::load(*exported);
            QVERIFY2(t, t.message().c_str());
            QVERIFY2(bit_equal(expected, run_sequence(*t, tokens)), name);
        }
    }

    void halfSplitRopeGivesIdenticalLogits() {
        auto m = test::make_tiny_model(test::tiny_config(true), 8);
        const ModelConfig& c = m.config;
        auto hf = m;
        for (size_t i = 0; i < hf.tensors.size(); ++i) {
            const TensorRole r = hf.tensors[i].role;
            if (r == TensorRole::AttnQ) hf.storage[i] = to_half_split(m.storage[i], c.n_heads, c.head_size(), c.dim);
            if (r == TensorRole::AttnK) hf.storage[i] = to_half_split(m.storage[i], c.n_kv_heads, c.head_size(), c.dim);
            hf.tensors[i].data = hf.storage[i].data();
        }
        hf.config.rope_style = RopeStyle::HalfSplit;
        const auto tokens = token_sequence(40, 32);
        auto a = Transformer::load(m.config, source_of(m));
        auto b = Transformer::load(hf.config, source_of(hf));
        QVERIFY2(a && b, "load");
        const auto la = run_sequence(*a, tokens);
        // attention sums the half-split pairs in the interleaved order: the very same bits
        QVERIFY(bit_equal(la, run_sequence(*b, tokens)));
        // the permuted weights with the wrong pairing are a different model
        auto wrong_config = hf.config;
        wrong_config.rope_style = RopeStyle::Interleaved;
        auto w = Transformer::load(wrong_config, source_of(hf));
        QVERIFY2(w, w.message().c_str());
        QVERIFY(max_abs_diff(la, run_sequence(*w, tokens)) > 1e-3);
    }

    void factoredWeightsMatchDense() {
        auto m = test::make_tiny_model(test::tiny_config(false), 4);
        const ModelConfig& c = m.config;
        const int64_t k = 6;
        // Every matrix replaced by a random rank-6 product, handed over as factors.
        test::MemoryWeights source(m);
        for (size_t i = 0; i < source.n_tensors(); ++i) {
            const TensorInfo& t = source.infos[i];
            if (!role_is_matrix(t.role) || t.role == TensorRole::TokenEmbd) continue;
            const int64_t rows = t.shape[0], cols = t.shape[1];
            StoredFactors w;
            w.rank = k;
            const uint64_t seed = static_cast<uint64_t>(t.role) * 100 + static_cast<uint64_t>(t.layer + 1);
            w.u = test::random_floats(static_cast<size_t>(rows * k), seed, 0.3f);
            w.s = test::random_floats(static_cast<size_t>(k), seed + 1, 1.0f);
            w.v = test::random_floats(static_cast<size_t>(cols * k), seed + 2, 0.3f);
            source.factors[i] = std::move(w);
        }
        TransformerOptions factored;
        TransformerOptions dense;
        dense.allow_factored = false;
        auto a = Transformer::load(c, source, factored);
        auto b = Transformer::load(c, source, dense);
        QVERIFY2(a, a.message().c_str());
        QVERIFY2(b, b.message().c_str());
        // 7 per layer and the classifier: each rank 6 costs 6 * (rows + cols) < rows * cols
        QCOMPARE(a->n_factored_matrices(), 7 * 2 + 1);
        QCOMPARE(b->n_factored_matrices(), 0);
        QVERIFY(a->matrix_macs_per_token() < b->matrix_macs_per_token());
        const auto tokens = token_sequence(40, 20);
        const double diff = max_abs_diff(run_sequence(*a, tokens), run_sequence(*b, tokens));
        QVERIFY2(diff < 1e-4, qPrintable(QString("max |diff| %1").arg(diff)));
    }

    void accountsWeightBytes() {
        auto m = test::make_tiny_model(test::tiny_config(true), 2);
        auto t = Transformer::load(m.config, source_of(m));
        QVERIFY2(t, t.message().c_str());
        // per layer: 2 norms of 64, q/o 64x64, k/v 32x64, gate/up/down 96x64; final norm; classifier 40x64;
        // one embedding row
        const uint64_t per_layer = 2 * 64 + 2 * 4096 + 2 * 2048 + 3 * 6144;
        QCOMPARE(t->weight_bytes_per_token(), 4 * (2 * per_layer + 64 + 40 * 64 + 64));
        QCOMPARE(t->matrix_macs_per_token(), uint64_t{2 * (2 * 4096 + 2 * 2048 + 3 * 6144) + 40 * 64});
    }

    // ---- sampling ----

    void samplerGeneratorIsRunCs() {
        // run.c's xorshift from state 42, computed by hand from its three shifts and multiplier
        Sampler s(4, {1.0f, 0.9f, 42});
        QCOMPARE(s.random_u32(), 1456360119u);
        QCOMPARE(s.random_u32(), 3359763283u);
        QCOMPARE(s.random_u32(), 3393612768u);
        Sampler f(4, {1.0f, 0.9f, 42});
        QCOMPARE(f.random_f32(), 0.3390852212905884f);  // (1456360119 >> 8) / 2^24
    }

    void samplerIsDeterministicForASeed() {
        const auto logits = test::random_floats(50, 99, 3.0f);
        auto draws = [&](uint64_t seed, float temperature, float top_p) {
            Sampler s(50, {temperature, top_p, seed});
            std::vector<int32_t> out;
            for (int i = 0; i < 200; ++i) out.push_back(s.sample(logits.data()));
            return out;
        };
        QCOMPARE(draws(7, 1.0f, 0.9f), draws(7, 1.0f, 0.9f));
        QCOMPARE(draws(7, 0.8f, 0.0f), draws(7, 0.8f, 0.0f));
        QVERIFY(draws(7, 1.0f, 0.9f) != draws(8, 1.0f, 0.9f));
        // greedy ignores the seed and picks the largest logit
        const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        QCOMPARE(draws(1, 0.0f, 0.9f), std::vector<int32_t>(200, best));
        // equal maxima: the lowest id, as run.c's strict '>' keeps the first
        const float tied[4] = {0.1f, 0.7f, 0.7f, 0.2f};
        QCOMPARE(Sampler::sample_argmax(tied, 4), 1);
    }

    void topPSamplesOnlyTheNucleus() {
        const float probs[4] = {0.05f, 0.3f, 0.5f, 0.15f};
        // top_p 0.7: 0.5 then 0.3 reaches 0.8 > 0.7, so the nucleus is {2, 1}; the coin scales by 0.8
        QCOMPARE(Sampler::sample_topp(probs, 4, 0.7f, 0.0f), 2);
        QCOMPARE(Sampler::sample_topp(probs, 4, 0.7f, 0.62f), 2);  // 0.496 < 0.5
        QCOMPARE(Sampler::sample_topp(probs, 4, 0.7f, 0.63f), 1);  // 0.504
        QCOMPARE(Sampler::sample_topp(probs, 4, 0.7f, 0.999f), 1);
        // top_p 0.9: 0.8 is not above 0.9, so token 3 (0.15) joins; token 0 never does
        // (the coin scales by 0.95; cumulative 0.5, 0.8, 0.95)
        QCOMPARE(Sampler::sample_topp(probs, 4, 0.9f, 0.99f), 3);  // 0.9405 in [0.8, 0.95)
        QCOMPARE(Sampler::sample_topp(probs, 4, 0.9f, 0.84f), 1);  // 0.798 in [0.5, 0.8)
        QCOMPARE(Sampler::sample_topp(probs, 4, 0.9f, 0.5f), 2);   // 0.475 < 0.5
        // without top-p the same coin walks the unsorted distribution
        QCOMPARE(Sampler::sample_mult(probs, 4, 0.04f), 0);
        QCOMPARE(Sampler::sample_mult(probs, 4, 0.99f), 3);
        // equal probabilities are ordered by id
        const float flat[4] = {0.25f, 0.25f, 0.25f, 0.25f};
        QCOMPARE(Sampler::sample_topp(flat, 4, 0.3f, 0.49f), 0);  // nucleus {0, 1}, 0.245 < 0.25
        QCOMPARE(Sampler::sample_topp(flat, 4, 0.3f, 0.51f), 1);
    }

    void temperatureSamplingFollowsTheSoftmax() {
        const float logits[3] = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
        for (float temperature : {1.0f, 0.5f}) {
            Sampler s(3, {temperature, 0.0f, 3});
            int counts[3] = {0, 0, 0};
            const int n = 20000;
            for (int i = 0; i < n; ++i) counts[s.sample(logits)]++;
            // at T = 0.5 the probabilities are squared and renormalised: 0.36, 0.09, 0.01 over 0.46
            const double expected[3] = {temperature == 1.0f ? 0.6 : 0.36 / 0.46,
                                        temperature == 1.0f ? 0.3 : 0.09 / 0.46,
                                        temperature == 1.0f ? 0.1 : 0.01 / 0.46};
            for (int k = 0; k < 3; ++k)
                QVERIFY2(std::fabs(counts[k] / double(n) - expected[k]) < 0.015,
                         qPrintable(QString("T %1 token %2: %3").arg(temperature).arg(k).arg(counts[k] / double(n))));
        }
    }

    // ---- errors ----

    // Generation ends at an end-of-turn token as at EOS (llama.cpp's llama_vocab_is_eog): in a vocabulary where the
    // second distinct token the model samples is "<|im_end|>" greedy generation ends there, the same vocabulary without
    // it runs on, and stop_at_eog off runs past it. (Seed 16's greedy run from BOS: 31 nine times, then 11.)
    void generateStopsAtEndOfTurn() {
        auto m = test::make_tiny_model(test::tiny_config(true), 16);
        auto t = Transformer::load(m.config, source_of(m));
        QVERIFY2(t, t.message().c_str());
        auto run = [&](const Vocabulary& v, bool stop, bool* stopped) {
            auto tok = Tokenizer::from_vocabulary(v, "tiny");
            std::vector<int32_t> ids;
            if (!tok) {
                qWarning("%s", tok.message().c_str());
                return ids;
            }
            Sampler greedy(40, {0.0f, 0.9f, 1});
            GenerateOptions g;
            g.steps = 16;
            g.stop_at_eog = stop;
            auto stats =
                generate(*t, *tok, greedy, std::vector<int32_t>{1}, g, {}, [&](int32_t id) { ids.push_back(id); });
            if (!stats) qWarning("%s", stats.message().c_str());
            *stopped = stats && stats->stopped;
            return ids;
        };
        const Vocabulary plain = test::tiny_vocabulary();
        bool stopped = false;
        const std::vector<int32_t> all = run(plain, false, &stopped);  // on past EOS (2); BOS (1) still ends it
        const auto second = std::find_if(all.begin(), all.end(), [&](int32_t id) { return id != all.front(); });
        QVERIFY2(second != all.end() && *second > 2, "the tiny model's greedy run holds no second text token");
        const int32_t eot = *second;
        const auto n_before = static_cast<size_t>(second - all.begin());
        auto until = [&](std::initializer_list<int32_t> ends) {
            std::vector<int32_t> out;
            for (int32_t id : all) {
                if (std::find(ends.begin(), ends.end(), id) != ends.end()) break;
                out.push_back(id);
            }
            return out;
        };
        QCOMPARE(run(plain, true, &stopped), until({2}));
        Vocabulary chat = plain;
        chat.tokens[static_cast<size_t>(eot)] = "<|im_end|>";
        auto tok = Tokenizer::from_vocabulary(chat, "tiny");
        QVERIFY2(tok, tok.message().c_str());
        QCOMPARE(tok->eot_id(), eot);
        QVERIFY(tok->is_eog(eot) && tok->is_eog(2) && !tok->is_eog(1));
        const std::vector<int32_t> to_eot = run(chat, true, &stopped);
        QVERIFY(stopped);
        QCOMPARE(to_eot, until({2, eot}));
        QCOMPARE(to_eot.size(), n_before);
        QCOMPARE(run(chat, false, &stopped), all);
        QVERIFY(!stopped);
    }

    void rejectsBadCallsAndWeights() {
        auto m = test::make_tiny_model(test::tiny_config(true), 2);
        TransformerOptions opt;
        opt.max_context = 8;
        auto t = Transformer::load(m.config, source_of(m), opt);
        QVERIFY2(t, t.message().c_str());
        QCOMPARE(t->n_context(), int64_t{8});
        auto bad_token = t->forward(40, 0);
        QVERIFY(!bad_token);
        QCOMPARE(QString::fromStdString(bad_token.message()),
                 QString("forward: token 40 at position 0 is outside the vocabulary of 40"));
        auto bad_pos = t->forward(1, 8);
        QVERIFY(!bad_pos);
        QCOMPARE(QString::fromStdString(bad_pos.message()),
                 QString("forward: positions 8..8 are outside the context of 8 positions"));
        const int32_t toks[3] = {1, 2, 3};
        auto too_long = t->forward_batch(toks, 3, 6);
        QVERIFY(!too_long);
        QVERIFY(too_long.message().find("positions 6..8") != std::string::npos);

        auto short_q = source_of(m);
        short_q.values[short_q.at(TensorRole::AttnQ, 1)].resize(10);
        auto bad = Transformer::load(m.config, short_q);
        QVERIFY(!bad);
        QCOMPARE(
            QString::fromStdString(bad.message()),
            QString("transformer: blk.1.attn_q.weight is stored as f32 in 40 bytes, expected f32 64 x 64 = 16384"));

        ModelConfig odd = m.config;
        odd.n_heads = 5;
        auto bad_config = Transformer::load(odd, source_of(m));
        QVERIFY(!bad_config);
        QCOMPARE(QString::fromStdString(bad_config.message()),
                 QString("transformer: dim 64 is not a multiple of n_heads 5"));
        // refused as unsupported, with exactly this message
        auto refused = [&](const ModelConfig& c, const QString& message) {
            auto r = Transformer::load(c, source_of(m));
            QVERIFY(!r);
            QCOMPARE(r.status().code(), StatusCode::Unsupported);
            QCOMPARE(QString::fromStdString(r.message()), message);
        };
        ModelConfig unknown = m.config;
        unknown.architecture = "foo";
        refused(unknown,
                "transformer: architecture 'foo' is not supported (llama, mistral, qwen2, qwen3, gemma2, "
                "gemma3 and phi3 are)");
        // an architecture llama.cpp runs and gkq does not: named with what it lacks
        ModelConfig mixtral = m.config;
        mixtral.architecture = "mixtral";
        refused(mixtral,
                "transformer: architecture 'mixtral' needs a mixture-of-experts feed-forward (a router and "
                "experts), which gkq does not run (llama, mistral, qwen2, qwen3, gemma2, gemma3 and phi3 "
                "run)");
        ModelConfig experts = m.config;  // Mixtral's GGUF: architecture llama with llama.expert_count
        experts.n_experts = 8;
        auto llama_moe = Transformer::load(experts, source_of(m));
        QVERIFY(!llama_moe);
        QCOMPARE(QString::fromStdString(llama_moe.message()),
                 QString("transformer: architecture 'llama' needs a mixture-of-experts feed-forward (8 experts), "
                         "which gkq does not run"));
        ModelConfig phi = m.config;
        phi.architecture = "phi2";
        QCOMPARE(QString::fromStdString(architecture_problem(phi)),
                 QString("architecture 'phi2' needs LayerNorm, parallel attention and feed-forward, and partial "
                         "rotary embeddings, which gkq does not run (llama, mistral, qwen2, qwen3, gemma2, gemma3 "
                         "and phi3 run)"));
        QCOMPARE(architecture_problem(m.config), std::string());
        ModelConfig yarn = m.config;
        yarn.rope_scaling = RopeScaling::Unsupported;
        auto bad_rope = Transformer::load(yarn, source_of(m));
        QVERIFY(!bad_rope);
        QCOMPARE(bad_rope.status().code(), StatusCode::Unsupported);
        QVERIFY2(bad_rope.message().find("'llama' needs its rope scaling type") != std::string::npos,
                 bad_rope.message().c_str());
        // phi3 is llama's blocks stored fused (q/k/v, gate/up): given the same roles it computes llama's logits
        ModelConfig phi3 = m.config;
        phi3.architecture = "phi3";
        auto as_phi3 = Transformer::load(phi3, source_of(m));
        QVERIFY2(as_phi3, as_phi3.message().c_str());
        auto as_llama = Transformer::load(m.config, source_of(m));
        QVERIFY2(as_llama, as_llama.message().c_str());
        auto phi3_out = as_phi3->forward(1, 0);
        QVERIFY(phi3_out.is_ok());
        const std::vector<float> phi3_logits(*phi3_out, *phi3_out + m.config.vocab_size);
        auto llama_out = as_llama->forward(1, 0);
        QVERIFY(llama_out.is_ok());
        QVERIFY(std::equal(phi3_logits.begin(), phi3_logits.end(), *llama_out));
        // qwen2 without its biases: the missing tensor is named
        ModelConfig qwen = m.config;
        qwen.architecture = "qwen2";
        auto no_bias = Transformer::load(qwen, source_of(m));
        QVERIFY(!no_bias);
        QVERIFY2(no_bias.message().find("blk.0.attn_q.bias (role attn_q_bias)") != std::string::npos,
                 no_bias.message().c_str());
    }

    void missingTensorNamesFile() {
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 2);
        std::vector<WriteTensor> without_up;
        for (const auto& t : m.tensors)
            if (!(t.role == TensorRole::FfnUp && t.layer == 1)) without_up.push_back(t);
        const std::string path = dir.file("partial.gguf");
        QVERIFY(write_gguf(path, m.config, without_up));
        auto file = ModelFile::open(path);
        QVERIFY2(file, file.message().c_str());
        auto t = Transformer::load(*file);
        QVERIFY(!t);
        QCOMPARE(QString::fromStdString(t.message()),
                 QString::fromStdString(path + ": no tensor blk.1.ffn_up.weight (role ffn_up)"));
    }

    // The one consistency check: every problem listed in a fixed order, the first one refusing the load.
    void consistencyCheckListsEveryProblem() {
        auto m = test::make_tiny_model(test::tiny_config(true), 2);
        std::vector<TensorInfo> tensors;
        for (const auto& t : m.tensors)
            if (!(t.role == TensorRole::AttnK && t.layer == 0))
                tensors.push_back({gguf_name(t.role, t.layer), t.role, t.layer, t.shape, DType::F32});
        tensors.push_back({"blk.5.attn_q.weight", TensorRole::AttnQ, 5, {64, 64}, DType::F32});
        tensors[0].shape = {40, 32};
        const std::vector<std::string> p = model_problems(m.config, tensors);
        QCOMPARE(p.size(), size_t(3));
        QCOMPARE(p[0], std::string("tensor token_embd.weight has shape 40 x 32, the config needs 40 x 64"));
        QCOMPARE(p[1], std::string("no tensor blk.0.attn_k.weight (role attn_k)"));
        QCOMPARE(p[2], std::string("tensor blk.5.attn_q.weight is in block 5 but the config has 2 blocks"));
        Status s = check_model("m.gguf", m.config, tensors);
        QCOMPARE(s.code(), StatusCode::Corrupt);
        QCOMPARE(
            s.message(),
            std::string("m.gguf: tensor token_embd.weight has shape 40 x 32, the config needs 40 x 64 (and 2 more)"));
        ModelConfig bad = m.config;
        bad.n_kv_heads = 3;
        QCOMPARE(config_problems(bad), std::vector<std::string>{"n_heads 4 is not a multiple of n_kv_heads 3"});
        QCOMPARE(check_model("m", bad, tensors).code(), StatusCode::Unsupported);
        QVERIFY(model_problems(m.config, std::vector<Tensor>{}).size() > 1);
    }
};

QTEST_APPLESS_MAIN(TestTransformer)
#include "test_transformer.moc"
