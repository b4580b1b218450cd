// Evaluation: hand-computed statistics on a 3-token vocabulary, a model against itself (exactly zero KLD), a Q8_0
// knot (small positive KLD), identical reports across thread counts, saved base logits reused, corrupt and
// mismatched base-logits files; and a knot run directly (dense and factored) against its reconstruction.
#include "gkq/codec.h"
#include "gkq/evaluate.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

using namespace gkq;

namespace {

// The toy logits are floats (log(0.5f) carries a ~3e-8 relative rounding), the formulas here doubles.
constexpr double kHandTolerance = 1e-7;

Vocabulary tiny_vocab() {
    Vocabulary v;
    v.model = "llama";
    v.bos_id = 1;
    v.eos_id = 2;
    for (int i = 0; i < 40; ++i) {
        v.tokens.push_back(i == 0   ? "<unk>"
                           : i == 1 ? "<s>"
                           : i == 2 ? "</s>"
                                    : std::string(1, char('a' + i % 26)) + std::to_string(i));
        v.scores.push_back(0.0f);
        v.token_types.push_back(i < 3 ? 3 : 1);
    }
    return v;
}

std::string write_tiny(const test::TempDir& dir) {
    const std::string path = dir.file("tiny.gguf");
    auto m = test::make_tiny_model(test::tiny_config(true), 7);
    if (Status s = write_gguf(path, m.config, m.tensors, tiny_vocab()); !s) qFatal("%s", s.message().c_str());
    return path;
}

std::string quantize_to(const std::string& model_path, const std::string& out, const std::string& preset,
                        int32_t rank = 0) {
    auto model = ModelFile::open(model_path);
    if (!model) qFatal("%s", model.message().c_str());
    QuantizeOptions o;
    o.preset = preset;
    if (rank > 0) o.global.rank = rank;
    o.n_threads = 1;
    auto r = quantize_model(*model, o, out);
    if (!r) qFatal("%s", r.message().c_str());
    return out;
}

Transformer load_file(const std::string& path, int threads) {
    TransformerOptions o;
    o.n_threads = threads;
    auto w = open_weights(path);
    if (!w) qFatal("%s", w.message().c_str());
    auto m = Transformer::load(**w, o);
    if (!m) qFatal("%s", m.message().c_str());
    return std::move(*m);
}

EvalText random_text(int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    EvalText t;
    for (int i = 0; i < n; ++i) t.tokens.push_back(static_cast<int32_t>(3 + rng() % 37));
    t.bos_id = 1;
    t.n_bytes = static_cast<uint64_t>(3 * n);
    t.text_hash = fnv1a64(t.tokens.data(), t.tokens.size() * 4);
    return t;
}

bool same_report(const EvalReport& a, const EvalReport& b) {
    const CompareStats& x = a.compare;
    const CompareStats& y = b.compare;
    return a.n_tokens == b.n_tokens && a.n_windows == b.n_windows && x.mean_kld == y.mean_kld &&
           x.mean_kld_se == y.mean_kld_se && x.median_kld == y.median_kld && x.kld_p99 == y.kld_p99 &&
           x.kld_p999 == y.kld_p999 && x.max_kld == y.max_kld && x.same_top == y.same_top &&
           x.rms_delta_p == y.rms_delta_p && x.ln_ppl_ratio == y.ln_ppl_ratio && x.base.mean_nll == y.base.mean_nll &&
           x.candidate.mean_nll == y.candidate.mean_nll && x.base.bits_per_byte == y.base.bits_per_byte &&
           x.candidate.bits_per_byte == y.candidate.bits_per_byte;
}

EvalOptions small_windows() {
    EvalOptions o;
    o.n_ctx = 16;
    o.stride = 8;
    return o;
}

}  // namespace

class TestEvaluate : public QObject {
    Q_OBJECT
private slots:
    void handComputedThreeTokenVocabulary() {
        // Token 1: base p = (1/2, 1/4, 1/4), candidate q = (1/4, 1/2, 1/4), correct token 0.
        // Token 2: both softmax(1, 2, 3), correct token 2.
        const float b1[3] = {std::log(0.5f), std::log(0.25f), std::log(0.25f)};
        const float q1[3] = {std::log(0.25f), std::log(0.5f), std::log(0.25f)};
        const float same[3] = {1.0f, 2.0f, 3.0f};
        EvalAccumulator acc(true);
        acc.add_pair(b1, q1, 3, 0);
        acc.add_pair(same, same, 3, 2);
        const CompareStats c = acc.compare(4);

        const double ln2 = std::log(2.0);
        const double kld1 = 0.5 * std::log(0.5 / 0.25) + 0.25 * std::log(0.25 / 0.5);  // = ln2 / 4
        const double nll_same = -(3.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
        QVERIFY(std::abs(c.mean_kld - kld1 / 2) < kHandTolerance);
        QVERIFY(std::abs(c.mean_kld_se - kld1 / 2) < kHandTolerance);  // sqrt((k^2/2 - k^2/4) / 1)
        QVERIFY(std::abs(c.max_kld - kld1) < 1e-7);                    // per-token values are kept as float
        QVERIFY(std::abs(c.median_kld - kld1 / 2) < 1e-7);
        QVERIFY(std::abs(c.kld_p99 - 0.99 * kld1) < 1e-7);
        QCOMPARE(c.same_top, 0.5);
        QVERIFY(std::abs(c.same_top_se - 0.5) < kHandTolerance);
        QVERIFY(std::abs(c.rms_delta_p - 0.25 / std::sqrt(2.0)) < kHandTolerance);
        QVERIFY(std::abs(c.base.mean_nll - (ln2 + nll_same) / 2) < kHandTolerance);
        QVERIFY(std::abs(c.candidate.mean_nll - (2 * ln2 + nll_same) / 2) < kHandTolerance);
        QVERIFY(std::abs(c.base.perplexity - std::exp((ln2 + nll_same) / 2)) < kHandTolerance);
        QVERIFY(std::abs(c.ln_ppl_ratio - ln2 / 2) < kHandTolerance);
        QVERIFY(std::abs(c.ppl_ratio - std::sqrt(2.0)) < kHandTolerance);
        QVERIFY(std::abs(c.base.bits_per_byte - (ln2 + nll_same) / ln2 / 4) < kHandTolerance);
        QVERIFY(std::abs(c.candidate.bits_per_byte - (2 * ln2 + nll_same) / ln2 / 4) < kHandTolerance);
    }

    void modelAgainstItselfIsExactlyZero() {
        test::TempDir dir;
        const std::string path = write_tiny(dir);
        Transformer a = load_file(path, 1);
        Transformer b = load_file(path, 2);
        const EvalText text = random_text(100, 3);
        auto r = evaluate_compare(a, b, text, small_windows());
        QVERIFY2(r, r.message().c_str());
        QCOMPARE(r->n_tokens, int64_t{100});
        QCOMPARE(r->n_windows, int64_t{12});  // starts 0, 8, ..., 88: the last one reaches token 100
        QCOMPARE(r->compare.mean_kld, 0.0);
        QCOMPARE(r->compare.max_kld, 0.0);
        QCOMPARE(r->compare.same_top, 1.0);
        QCOMPARE(r->compare.ppl_ratio, 1.0);
        QCOMPARE(r->compare.rms_delta_p, 0.0);
        QCOMPARE(r->compare.base.perplexity, r->compare.candidate.perplexity);

        // Perplexity alone agrees with the comparison's base side.
        auto single = evaluate_perplexity(a, text, small_windows());
        QVERIFY2(single, single.message().c_str());
        QCOMPARE(single->single.mean_nll, r->compare.base.mean_nll);
        QCOMPARE(single->single.bits_per_byte, r->compare.base.bits_per_byte);
    }

    void q8KnotHasSmallPositiveKldAndThreadIndependentReport() {
        test::TempDir dir;
        const std::string path = write_tiny(dir);
        const std::string knot = quantize_to(path, dir.file("tiny-q8.knot"), "q8_0");
        const EvalText text = random_text(120, 5);
        EvalReport reports[2];
        const int threads[2] = {1, 3};
        for (int i = 0; i < 2; ++i) {
            Transformer base = load_file(path, threads[i]);
            Transformer cand = load_file(knot, threads[i]);
            auto r = evaluate_compare(base, cand, text, small_windows());
            QVERIFY2(r, r.message().c_str());
            reports[i] = *r;
        }
        const CompareStats& c = reports[0].compare;
        QVERIFY2(c.mean_kld > 0.0 && c.mean_kld < 1e-3, qPrintable(QString::number(c.mean_kld)));
        QVERIFY(c.same_top > 0.9);
        QVERIFY(std::abs(c.ppl_ratio - 1.0) < 0.01);
        QVERIFY(same_report(reports[0], reports[1]));
    }

    void savedBaseLogitsGiveTheSameReport() {
        test::TempDir dir;
        const std::string path = write_tiny(dir);
        const std::string knot = quantize_to(path, dir.file("tiny-q4.knot"), "q4_0");
        const EvalText text = random_text(70, 9);
        Transformer base = load_file(path, 1);
        Transformer cand = load_file(knot, 1);
        BaseLogits saved;
        auto direct = evaluate_compare(base, cand, text, small_windows(), {}, &saved);
        QVERIFY2(direct, direct.message().c_str());
        const std::string file = dir.file("base.logits");
        QVERIFY(save_base_logits(file, saved));
        auto loaded = load_base_logits(file, text, 40, small_windows());
        QVERIFY2(loaded, loaded.message().c_str());
        auto reused = evaluate_compare_saved(*loaded, cand);
        QVERIFY2(reused, reused.message().c_str());
        QVERIFY(same_report(*direct, *reused));

        // Mismatched runs name the file and what differs.
        EvalText other = text;
        other.text_hash ^= 1;
        auto bad_text = load_base_logits(file, other, 40, small_windows());
        QVERIFY(!bad_text);
        QVERIFY2(bad_text.message() ==
                     file + ": saved for a different run: the text differs (hash or size of its 210 bytes)",
                 bad_text.message().c_str());
        EvalOptions wider = small_windows();
        wider.stride = 4;
        auto bad_windows = load_base_logits(file, text, 40, wider);
        QVERIFY(!bad_windows);
        QVERIFY2(
            bad_windows.message() == file + ": saved for a different run: context 16 / stride 8, this run uses 16 / 4",
            bad_windows.message().c_str());
        auto bad_vocab = load_base_logits(file, text, 41, small_windows());
        QVERIFY(!bad_vocab);
        QVERIFY(bad_vocab.message().starts_with(file + ": saved for a different run: logits over 40 tokens"));

        // Corrupt files: truncated, bad magic, a flipped token (hash check), missing.
        std::ifstream in(file, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const std::string cut = dir.file("cut.logits");
        test::write_file(cut, bytes.substr(0, bytes.size() - 4));
        auto truncated = load_base_logits(cut, text, 40, small_windows());
        QVERIFY(!truncated);
        QCOMPARE(truncated.status().code(), StatusCode::Corrupt);
        QVERIFY2(truncated.message().starts_with(cut + ": not a usable base logits file: the header's 70 tokens x 40"),
                 truncated.message().c_str());
        std::string magic = bytes;
        magic[0] = 'X';
        const std::string bad_magic = dir.file("magic.logits");
        test::write_file(bad_magic, magic);
        auto m = load_base_logits(bad_magic, text, 40, small_windows());
        QVERIFY(!m);
        QCOMPARE(m.message(), bad_magic + ": not a usable base logits file: bad magic at offset 0 (expected GKQBASE)");
        std::string flipped = bytes;
        flipped[72] ^= 1;  // first token (after the header and top_k)
        const std::string bad_token = dir.file("token.logits");
        test::write_file(bad_token, flipped);
        auto t = load_base_logits(bad_token, text, 40, small_windows());
        QVERIFY(!t);
        QCOMPARE(t.message(),
                 bad_token + ": not a usable base logits file: the tokens do not match their hash in the header");
        auto missing = load_base_logits(dir.file("none.logits"), text, 40, small_windows());
        QVERIFY(!missing);
        QVERIFY(missing.message().find(dir.file("none.logits")) != std::string::npos);
    }

    void cancelStopsTheRun() {
        test::TempDir dir;
        Transformer a = load_file(write_tiny(dir), 1);
        int calls = 0;
        auto r = evaluate_perplexity(a, random_text(60, 1), small_windows(),
                                     [&](double, std::string_view) { return ++calls < 3; });
        QVERIFY(!r);
        QCOMPARE(r.status().code(), StatusCode::Cancelled);
        QCOMPARE(calls, 3);
    }

    void optionErrors() {
        test::TempDir dir;
        Transformer a = load_file(write_tiny(dir), 1);
        EvalOptions o;
        o.n_ctx = 64;
        auto r = evaluate_perplexity(a, random_text(10, 1), o);
        QVERIFY(!r);
        QCOMPARE(r.message(), std::string("eval: context 64 is outside 2..32 (the model's context length)"));
        EvalText bad = random_text(10, 1);
        bad.tokens[4] = 40;
        auto t = evaluate_perplexity(a, bad, small_windows());
        QVERIFY(!t);
        QCOMPARE(t.message(), std::string("eval: token 4 of the text has id 40, outside the model's vocabulary of 40"));
    }

    // ---- a knot as a model ----

    void q8KnotRunsLikeItsReconstruction() {
        test::TempDir dir;
        const std::string path = write_tiny(dir);
        const std::string knot = quantize_to(path, dir.file("tiny-q8.knot"), "q8_0");
        auto rec = reconstruct(knot, dir.file("rec.gguf"), 1);
        QVERIFY2(rec, rec.message().c_str());
        Transformer direct = load_file(knot, 2);
        Transformer rebuilt = load_file(dir.file("rec.gguf"), 2);
        QCOMPARE(direct.n_factored_matrices(), 0);
        // Greedy generation from BOS, 24 tokens: identical logits at every step.
        int32_t tok_a = 1, tok_b = 1;
        for (int64_t pos = 0; pos < 24; ++pos) {
            auto la = direct.forward(tok_a, pos);
            auto lb = rebuilt.forward(tok_b, pos);
            QVERIFY(la && lb);
            QVERIFY(std::memcmp(*la, *lb, 40 * sizeof(float)) == 0);
            tok_a = static_cast<int32_t>(std::max_element(*la, *la + 40) - *la);
            tok_b = static_cast<int32_t>(std::max_element(*lb, *lb + 40) - *lb);
            QCOMPARE(tok_a, tok_b);
        }
    }

    void lowRankKnotRunsFactored() {
        test::TempDir dir;
        const std::string path = write_tiny(dir);
        const std::string knot = quantize_to(path, dir.file("tiny-r4.knot"), "svd-energy", 4);
        Transformer factored = load_file(knot, 1);
        // Every block matrix of the 2 layers is rank 4 < 64 * 96 / (64 + 96): all 14 run factored.
        QCOMPARE(factored.n_factored_matrices(), 14);
        // The same records multiplied out: the outputs agree to float rounding.
        auto kf = KnotFile::open(knot);
        QVERIFY(kf);
        TransformerOptions dense_opts;
        dense_opts.n_threads = 1;
        dense_opts.allow_factored = false;
        auto dense = Transformer::load(*kf, dense_opts);
        QVERIFY2(dense, dense.message().c_str());
        QCOMPARE(dense->n_factored_matrices(), 0);
        auto a = factored.forward(1, 0);
        auto b = dense->forward(1, 0);
        QVERIFY(a && b);
        for (int i = 0; i < 40; ++i) QVERIFY2(std::abs((*a)[i] - (*b)[i]) < 1e-4f, qPrintable(QString::number(i)));
    }

    void decodeLowRankFactorsMatchesDecode() {
        std::vector<float> w = test::random_floats(48 * 64, 11);
        TensorInput in;
        in.name = "m";
        in.role = TensorRole::FfnUp;
        in.shape = {48, 64};
        in.data = w.data();
        CodecParams p;
        p.method = Method::LowRank;
        p.rank = 5;
        auto enc = encode_tensor(in, p);
        QVERIFY(enc);
        auto f = decode_lowrank_factors(*enc);
        QVERIFY2(f, f.message().c_str());
        QCOMPARE(f->rows, int64_t{48});
        QCOMPARE(f->cols, int64_t{64});
        QCOMPARE(f->rank, int64_t{5});
        QVERIFY(f->residual.empty());
        auto dense = decode_tensor(*enc);
        QVERIFY(dense);
        // decode's reference order: sum over r of (s_r * u[i, r]) * v[j, r] — reproduced bit for bit.
        for (int64_t i = 0; i < 48; ++i)
            for (int64_t j = 0; j < 64; ++j) {
                float acc = 0.0f;
                for (int64_t r = 0; r < 5; ++r) acc += (f->s[r] * f->u[i * 5 + r]) * f->v[j * 5 + r];
                QCOMPARE(acc, (*dense)[static_cast<size_t>(i * 64 + j)]);
            }
        CodecParams q8;
        q8.method = Method::Q8_0;
        auto plain = encode_tensor(in, q8);
        QVERIFY(plain);
        auto not_lr = decode_lowrank_factors(*plain);
        QVERIFY(!not_lr);
        QCOMPARE(not_lr.message(), std::string("tensor 'm' (q8_0): not a low-rank tensor"));
    }
};

QTEST_APPLESS_MAIN(TestEvaluate)
#include "test_evaluate.moc"
