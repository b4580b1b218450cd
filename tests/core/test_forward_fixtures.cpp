// The forward pass against llama.cpp: tiny random-weight models of each architecture row (built here from fixed
// seeds, written by gkq's own GGUF and safetensors writers) must give, in gkq, the logits llama.cpp computed for
// the same GGUF (tests/data/forward/NAME.logits, written by tests/fixtures-tools/dump_logits.c) within 1e-4
// relative, and the same 16-token greedy continuation; the HF copy must give bit-identical logits to the GGUF.
//
// Relative error, precisely: for each position p, max_i |gkq[p][i] - ref[p][i]| / max_i |ref[p][i]|; the test
// asserts the maximum of that over all positions is at most 1e-4.
//
// `test_forward_fixtures --write-models DIR` writes the GGUFs (DIR/NAME.gguf) and HF copies (DIR/NAME-hf/) for the
// fixture generator and the live llama.cpp test, and exits.
#include "test_support.h"
#include "tiny_model.h"

#include "gkq/arch.h"
#include "gkq/codec.h"
#include "gkq/evaluate.h"
#include "gkq/export.h"
#include "gkq/imatrix.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/spectrum.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"

#if defined(GKQ_TEST_SERVE)
#include "gkq/server.h"
#include "http_test_support.h"
#include "server_fixture.h"

#include <nlohmann/json.hpp>
#endif

#include <QtTest/QtTest>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace gkq;

namespace {

// The sequence dump_logits.c runs (keep the two equal).
const std::vector<int32_t> kTokens = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 200};
constexpr int kGenerated = 16;
constexpr double kTolerance = 1e-4;

// A feature of a fixture's config, switched off: the same weights then give logits far from llama.cpp's (the match
// shows the feature is computed, not bypassed).
struct Ablation {
    const char* what;
    void (*off)(ModelConfig&);
};

struct ForwardModel {
    const char* name;
    ModelConfig config;
    uint64_t seed;
    float qk_gain = 1.0f;  // q and k weights multiplied by it: attention scores of a size that soft-capping changes
    std::vector<Ablation> ablations = {};
};

// vocab 259 (<unk> <s> </s> and the 256 byte tokens), dim 64, FFN 128, 2 layers, 4 heads, 2 kv heads.
ModelConfig base_config(const char* arch) {
    ModelConfig c;
    c.architecture = arch;
    c.dim = 64;
    c.hidden_dim = 128;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.vocab_size = 259;
    c.context_length = 64;
    c.norm_eps = 1e-5;
    c.shared_classifier = false;
    c.rope_style = RopeStyle::Interleaved;
    return c;
}

std::vector<ForwardModel> forward_models() {
    std::vector<ForwardModel> m;
    m.push_back({"llama", base_config("llama"), 11});

    ModelConfig l3 = base_config("llama");
    l3.rope_theta = 10000.0;
    l3.rope_scaling = RopeScaling::Llama3;
    l3.rope_factor = 8.0;
    l3.rope_low_freq_factor = 1.0;
    l3.rope_high_freq_factor = 4.0;
    l3.rope_original_context = 16;  // wavelengths of 16-wide heads span all three cases
    m.push_back({"llama3-rope", l3, 12});

    ModelConfig lin = base_config("llama");
    lin.rope_scaling = RopeScaling::Linear;
    lin.rope_factor = 4.0;
    m.push_back({"llama-linear-rope", lin, 13});

    ModelConfig q2 = base_config("qwen2");
    q2.rope_theta = 1000000.0;
    q2.norm_eps = 1e-6;
    q2.shared_classifier = true;
    q2.rope_style = RopeStyle::HalfSplit;
    m.push_back({"qwen2", q2, 14});

    ModelConfig q3 = base_config("qwen3");
    q3.rope_theta = 1000000.0;
    q3.norm_eps = 1e-6;
    q3.head_dim = 32;  // n_heads * head_dim = 128, twice dim
    q3.rope_style = RopeStyle::HalfSplit;
    m.push_back({"qwen3", q3, 15});

    // Gemma 2: block 0 windowed (4 positions of the 16), block 1 global; soft-caps small enough to bite at this
    // scale; the scale query_pre_attn_scalar = head size is the one llama.cpp derives for a 2-block model.
    ModelConfig g2 = base_config("gemma2");
    g2.head_dim = 16;  // written out: HF's Gemma2Config would take 256
    g2.shared_classifier = true;
    g2.rope_style = RopeStyle::HalfSplit;
    g2.norm_eps = 1e-6;
    g2.sliding_window = 4;
    g2.sliding_window_pattern = 2;
    g2.attn_softcap = 1.0;
    g2.final_softcap = 0.5;
    g2.query_pre_attn_scalar = 16;
    m.push_back({"gemma2",
                 g2,
                 16,
                 4.0f,
                 {{"attention soft-cap", [](ModelConfig& c) { c.attn_softcap = 0; }},
                  {"final soft-cap", [](ModelConfig& c) { c.final_softcap = 0; }},
                  {"sliding window", [](ModelConfig& c) { c.sliding_window = 0; }}}});

    // Gemma 3: q/k norms, head_dim 32; block 0 windowed (window 4) rotating with the local theta 1e4 unscaled,
    // block 1 global with theta 1e6 and linear scaling 8.
    ModelConfig g3 = base_config("gemma3");
    g3.head_dim = 32;
    g3.shared_classifier = true;
    g3.rope_style = RopeStyle::HalfSplit;
    g3.norm_eps = 1e-6;
    g3.rope_theta = 1000000.0;
    g3.rope_local_theta = 10000.0;
    g3.rope_scaling = RopeScaling::Linear;
    g3.rope_factor = 8.0;
    g3.sliding_window = 4;
    g3.sliding_window_pattern = 2;
    g3.query_pre_attn_scalar = 32;
    m.push_back({"gemma3",
                 g3,
                 17,
                 1.0f,
                 {{"sliding window", [](ModelConfig& c) { c.sliding_window = 0; }},
                  {"local rope theta", [](ModelConfig& c) { c.rope_local_theta = c.rope_theta; }},
                  {"global blocks' rope scaling", [](ModelConfig& c) { c.rope_scaling = RopeScaling::None; }}}});

    // Phi-3: llama's blocks with q/k/v and gate/up each stored fused (HF qkv_proj / gate_up_proj, GGUF attn_qkv /
    // ffn_up), NEOX rope, untied output.
    ModelConfig p3 = base_config("phi3");
    p3.rope_style = RopeStyle::HalfSplit;
    m.push_back({"phi3", p3, 18});
    return m;
}

// The fixture's weights: the tiny model of its config and seed, q and k scaled by its gain.
test::TinyModel tiny(const ForwardModel& fm) {
    test::TinyModel m = test::make_tiny_model(fm.config, fm.seed);
    for (size_t i = 0; i < m.tensors.size(); ++i)
        if (m.tensors[i].role == TensorRole::AttnQ || m.tensors[i].role == TensorRole::AttnK)
            for (float& v : m.storage[i]) v *= fm.qk_gain;
    return m;
}

// max over positions of max_i |got - ref| / max_i |ref| (the test's relative error), and where it is largest.
double max_relative(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab, int64_t* where) {
    double worst = 0.0;
    const size_t n_pos = ref.size() / static_cast<size_t>(vocab);
    for (size_t p = 0; p < n_pos; ++p) {
        double diff = 0.0, scale = 0.0;
        for (int64_t i = 0; i < vocab; ++i) {
            const size_t k = p * static_cast<size_t>(vocab) + static_cast<size_t>(i);
            diff = std::max(diff, std::fabs(static_cast<double>(got[k]) - ref[k]));
            scale = std::max(scale, std::fabs(static_cast<double>(ref[k])));
        }
        const double rel = scale > 0 ? diff / scale : diff;
        if (rel > worst) {
            worst = rel;
            if (where != nullptr) *where = static_cast<int64_t>(p);
        }
    }
    return worst;
}

// A sentencepiece vocabulary llama.cpp loads: <unk>, <s>, </s>, then the 256 byte tokens <0x00>..<0xFF>.
// The byte vocabulary as a llama2.c tokenizer.bin (int32 max piece length; per token f32 score, int32 length,
// bytes), so an HF copy carries a vocabulary `gkq export` can put in a GGUF.
bool write_tokenizer_bin(const std::string& path, std::string& why) {
    const Vocabulary v = test::byte_vocabulary();
    std::ofstream out(path, std::ios::binary);
    int32_t longest = 0;
    for (const std::string& t : v.tokens) longest = std::max(longest, static_cast<int32_t>(t.size()));
    out.write(reinterpret_cast<const char*>(&longest), 4);
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        const auto n = static_cast<int32_t>(v.tokens[i].size());
        out.write(reinterpret_cast<const char*>(&v.scores[i]), 4);
        out.write(reinterpret_cast<const char*>(&n), 4);
        out.write(v.tokens[i].data(), n);
    }
    if (!out.flush()) why = path + ": write failed";
    return static_cast<bool>(out);
}

bool write_model(const ForwardModel& fm, const std::string& gguf, const std::string& hf_dir, std::string& why) {
    test::TinyModel m = tiny(fm);
    if (Status s = write_gguf(gguf, m.config, m.tensors, test::byte_vocabulary()); !s) {
        why = s.message();
        return false;
    }
    if (hf_dir.empty()) return true;
    if (Status s = write_safetensors(hf_dir + "/model.safetensors", m.config, m.tensors); !s) {
        why = s.message();
        return false;
    }
    return true;
}

struct Expected {
    std::vector<int32_t> tokens;
    int64_t n_vocab = 0;
    std::vector<float> logits;  // (tokens, n_vocab)
    std::vector<int32_t> generated;
};

bool read_expected(const std::string& path, Expected& e, std::string& why) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        why = path + ": cannot open";
        return false;
    }
    char magic[4];
    uint32_t version = 0, n_tokens = 0, n_vocab = 0, n_gen = 0;
    in.read(magic, 4);
    in.read(reinterpret_cast<char*>(&version), 4);
    in.read(reinterpret_cast<char*>(&n_tokens), 4);
    in.read(reinterpret_cast<char*>(&n_vocab), 4);
    in.read(reinterpret_cast<char*>(&n_gen), 4);
    if (!in || std::memcmp(magic, "GKQL", 4) != 0 || version != 1 || n_tokens > 4096 || n_vocab > 1000000 ||
        n_gen > 4096) {
        why = path + ": not a version 1 GKQL logits file";
        return false;
    }
    e.n_vocab = n_vocab;
    e.tokens.resize(n_tokens);
    e.logits.resize(static_cast<size_t>(n_tokens) * n_vocab);
    e.generated.resize(n_gen);
    in.read(reinterpret_cast<char*>(e.tokens.data()), static_cast<std::streamsize>(n_tokens * 4));
    in.read(reinterpret_cast<char*>(e.logits.data()), static_cast<std::streamsize>(e.logits.size() * 4));
    in.read(reinterpret_cast<char*>(e.generated.data()), static_cast<std::streamsize>(n_gen * 4));
    if (!in || in.peek() != std::char_traits<char>::eof()) {
        why = path + ": size does not match its header";
        return false;
    }
    return true;
}

int32_t argmax(const float* v, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (v[i] > v[best]) best = i;
    return static_cast<int32_t>(best);
}

struct Run {
    std::vector<float> logits;  // (tokens, vocab)
    std::vector<int32_t> generated;
};

Run run(const std::string& path) {
    Run r;
    auto w = open_weights(path);
    if (!w) {
        qWarning("%s", w.message().c_str());
        return r;
    }
    TransformerOptions o;
    o.n_threads = 1;
    auto t = Transformer::load(**w, o);
    if (!t) {
        qWarning("%s", t.message().c_str());
        return r;
    }
    const int64_t vocab = t->config().vocab_size;
    const auto n = static_cast<int64_t>(kTokens.size());
    r.logits.resize(static_cast<size_t>(n * vocab));
    auto last = t->forward_batch(kTokens.data(), n, 0, r.logits.data());
    if (!last) {
        qWarning("%s", last.message().c_str());
        r.logits.clear();
        return r;
    }
    int32_t next = argmax(*last, vocab);
    for (int g = 0; g < kGenerated; ++g) {
        r.generated.push_back(next);
        auto out = t->forward(next, n + g);
        if (!out) {
            qWarning("%s", out.message().c_str());
            r.generated.clear();
            return r;
        }
        next = argmax(*out, vocab);
    }
    return r;
}

}  // namespace

class TestForwardFixtures : public QObject {
    Q_OBJECT

private slots:
    void matches_llama_cpp_data() {
        QTest::addColumn<int>("index");
        const auto models = forward_models();
        for (size_t i = 0; i < models.size(); ++i) QTest::newRow(models[i].name) << static_cast<int>(i);
    }

    void matches_llama_cpp() {
        QFETCH(int, index);
        const ForwardModel fm = forward_models()[static_cast<size_t>(index)];
        test::TempDir dir;
        const std::string gguf = dir.file("model.gguf");
        std::string why;
        QVERIFY2(write_model(fm, gguf, dir.path(), why), why.c_str());

        Expected e;
        const std::string fixture = std::string(GKQ_TEST_DATA_DIR) + "/forward/" + fm.name + ".logits";
        QVERIFY2(read_expected(fixture, e, why), why.c_str());
        QCOMPARE(e.tokens, kTokens);
        QCOMPARE(e.n_vocab, fm.config.vocab_size);

        const Run from_gguf = run(gguf);
        const Run from_hf = run(dir.path());
        QVERIFY(!from_gguf.logits.empty() && !from_hf.logits.empty());

        // HF and GGUF copies: the same bits
        QCOMPARE(from_hf.logits.size(), from_gguf.logits.size());
        QVERIFY2(std::memcmp(from_hf.logits.data(), from_gguf.logits.data(), from_hf.logits.size() * 4) == 0,
                 "the HF and GGUF copies give different logits");
        QCOMPARE(from_hf.generated, from_gguf.generated);

        // llama.cpp: within kTolerance relative (see the file comment), and the same greedy continuation
        const int64_t vocab = e.n_vocab;
        int64_t worst_pos = -1;
        const double worst = max_relative(from_gguf.logits, e.logits, vocab, &worst_pos);
        qInfo("%s: max relative logit difference %.3g (position %lld)", fm.name, worst,
              static_cast<long long>(worst_pos));
        QVERIFY2(
            worst <= kTolerance,
            qPrintable(
                QString("relative difference %1 at position %2 exceeds %3").arg(worst).arg(worst_pos).arg(kTolerance)));
        QCOMPARE(from_gguf.generated, e.generated);

        // The scaling is what matched: the same weights without it are far from llama.cpp's logits.
        if (fm.config.rope_scaling != RopeScaling::None) {
            test::TinyModel m = tiny(fm);
            m.config.rope_scaling = RopeScaling::None;
            test::MemoryWeights w(m);
            TransformerOptions o;
            o.n_threads = 1;
            auto t = Transformer::load(w, o);
            QVERIFY2(t.is_ok(), t.message().c_str());
            std::vector<float> plain(e.logits.size());
            QVERIFY(t->forward_batch(kTokens.data(), static_cast<int64_t>(kTokens.size()), 0, plain.data()).is_ok());
            double far = 0.0;
            for (size_t k = 0; k < plain.size(); ++k)
                far = std::max(far, std::fabs(static_cast<double>(plain[k]) - e.logits[k]));
            QVERIFY2(far > 1e-2, qPrintable(QString("unscaled rope differs by only %1").arg(far)));
        }

        // Each feature of the row switched off moves the logits by far more than the tolerance.
        for (const Ablation& a : fm.ablations) {
            test::TinyModel m = tiny(fm);
            a.off(m.config);
            test::MemoryWeights w(m);
            TransformerOptions o;
            o.n_threads = 1;
            auto t = Transformer::load(w, o);
            QVERIFY2(t.is_ok(), t.message().c_str());
            std::vector<float> without(e.logits.size());
            QVERIFY(t->forward_batch(kTokens.data(), static_cast<int64_t>(kTokens.size()), 0, without.data()).is_ok());
            const double off = max_relative(without, e.logits, vocab, nullptr);
            qInfo("%s without its %s: relative difference %.3g", fm.name, a.what, off);
            QVERIFY2(off > 10 * kTolerance,
                     qPrintable(QString("%1 without its %2 differs by only %3").arg(fm.name, a.what).arg(off)));
        }
    }

    // Gemma's norms as each format stores them: HF the w of (1 + w), GGUF 1 + w (llama.cpp's converter adds the
    // 1), both read back to the same multipliers; the config keys that only Gemma has, in both formats.
    void gemma_norms_and_keys_data() {
        QTest::addColumn<int>("index");
        const auto models = forward_models();
        for (size_t i = 0; i < models.size(); ++i)
            if (std::string(models[i].name).rfind("gemma", 0) == 0)
                QTest::newRow(models[i].name) << static_cast<int>(i);
    }

    void gemma_norms_and_keys() {
        QFETCH(int, index);
        const ForwardModel fm = forward_models()[static_cast<size_t>(index)];
        test::TempDir dir;
        std::string why;
        QVERIFY2(write_model(fm, dir.file("model.gguf"), dir.path(), why), why.c_str());
        const test::TinyModel m = tiny(fm);
        auto gguf = ModelFile::open(dir.file("model.gguf"));
        auto hf = ModelFile::open(dir.path());
        QVERIFY2(gguf.is_ok(), gguf.message().c_str());
        QVERIFY2(hf.is_ok(), hf.message().c_str());
        QCOMPARE(gguf->config().norm_storage, NormStorage::Multiplier);
        QCOMPARE(hf->config().norm_storage, NormStorage::OffsetByOne);
        for (size_t i = 0; i < m.tensors.size(); ++i) {
            if (!role_is_norm(m.tensors[i].role)) continue;
            const std::vector<float>& want = m.storage[i];
            auto g = gguf->read_f32(static_cast<size_t>(gguf->index_of(m.tensors[i].role, m.tensors[i].layer)));
            auto h = hf->read_f32(static_cast<size_t>(hf->index_of(m.tensors[i].role, m.tensors[i].layer)));
            QVERIFY(g.is_ok() && h.is_ok());
            QCOMPARE(*g, want);
            for (size_t j = 0; j < want.size(); ++j) QCOMPARE((*h)[j], want[j] - 1.0f);
        }
        for (const ModelConfig* c : {&gguf->config(), &hf->config()}) {
            QCOMPARE(c->architecture, fm.config.architecture);
            QCOMPARE(c->sliding_window, fm.config.sliding_window);
            QCOMPARE(c->sliding_window_pattern, fm.config.sliding_window_pattern);
            QCOMPARE(c->attn_softcap, fm.config.attn_softcap);
            QCOMPARE(c->final_softcap, fm.config.final_softcap);
            QCOMPARE(c->query_pre_attn_scalar, fm.config.query_pre_attn_scalar);
            QCOMPARE(c->rope_local_theta, fm.config.rope_local_theta);
            QCOMPARE(c->rope_scaling, fm.config.rope_scaling);
        }
        std::vector<uint8_t> text = test::read_file(dir.file("config.json"));
        const std::string json(text.begin(), text.end());
        const bool g3 = fm.config.architecture == "gemma3";
        QVERIFY2(json.find(g3 ? R"("model_type": "gemma3_text")" : R"("model_type": "gemma2")") != std::string::npos,
                 json.c_str());
        QVERIFY2(json.find(R"("hidden_act": "gelu_pytorch_tanh")") != std::string::npos, json.c_str());
        QVERIFY2(json.find(R"("query_pre_attn_scalar": )") != std::string::npos, json.c_str());
    }

    // Phi-3's fused tensors: each format stores q/k/v in one tensor and gate/up in one, under its own names (GGUF's
    // ffn_up holding both) with the parts' rows in the row's order; reading gives one view per role holding the
    // values written for it. Parts in different stored types are refused rather than fused. A longrope model (HF
    // rope_scaling type longrope or su; GGUF's rope_factors_long/short tensors) opens, and the transformer refuses
    // it, naming phi3 and what it lacks.
    void phi3_fused_tensors() {
        const auto models = forward_models();
        const auto fm = std::find_if(models.begin(), models.end(),
                                     [](const ForwardModel& f) { return std::string(f.name) == "phi3"; });
        QVERIFY(fm != models.end());
        test::TempDir dir;
        std::string why;
        QVERIFY2(write_model(*fm, dir.file("model.gguf"), dir.path(), why), why.c_str());
        const test::TinyModel m = tiny(*fm);
        for (const bool gguf : {true, false}) {
            auto f = ModelFile::open(gguf ? dir.file("model.gguf") : dir.path());
            QVERIFY2(f.is_ok(), f.message().c_str());
            const std::string qkv = gguf ? "blk.1.attn_qkv.weight" : "model.layers.1.self_attn.qkv_proj.weight";
            const std::string gate_up = gguf ? "blk.1.ffn_up.weight" : "model.layers.1.mlp.gate_up_proj.weight";
            const std::pair<TensorRole, std::string> views[] = {
                {TensorRole::AttnQ, qkv + "[attn_q]"},     {TensorRole::AttnK, qkv + "[attn_k]"},
                {TensorRole::AttnV, qkv + "[attn_v]"},     {TensorRole::FfnGate, gate_up + "[ffn_gate]"},
                {TensorRole::FfnUp, gate_up + "[ffn_up]"},
            };
            const Tensor* prev = nullptr;
            for (const auto& [role, name] : views) {
                const Tensor* t = f->find(name);
                QVERIFY2(t != nullptr, name.c_str());
                QCOMPARE(t->role, role);
                QCOMPARE(t->layer, 1);
                // the parts follow each other inside the one stored tensor
                if (prev != nullptr && role != TensorRole::FfnGate) QVERIFY(t->data == prev->data + prev->n_bytes);
                prev = t;
                size_t k = 0;
                while (!(m.tensors[k].role == role && m.tensors[k].layer == 1)) ++k;
                auto v = f->read_f32(static_cast<size_t>(t - f->tensors().data()));
                QVERIFY2(v.is_ok(), v.message().c_str());
                QCOMPARE(*v, m.storage[k]);
            }
            QVERIFY(f->find(gguf ? "blk.1.attn_q.weight" : "model.layers.1.self_attn.q_proj.weight") == nullptr);
            QCOMPARE(f->config().architecture, std::string("phi3"));
            QCOMPARE(f->config().rope_style, RopeStyle::HalfSplit);
        }

        // llama.cpp reads the fused halves in the order written: gate and up swapped, its logits are far away
        test::TinyModel swapped = tiny(*fm);
        for (size_t i = 0; i < swapped.tensors.size(); ++i)
            if (swapped.tensors[i].role == TensorRole::FfnGate)
                for (size_t k = 0; k < swapped.tensors.size(); ++k)
                    if (swapped.tensors[k].role == TensorRole::FfnUp &&
                        swapped.tensors[k].layer == swapped.tensors[i].layer)
                        std::swap(swapped.storage[i], swapped.storage[k]);
        for (size_t i = 0; i < swapped.tensors.size(); ++i) swapped.tensors[i].data = swapped.storage[i].data();
        QVERIFY2(write_gguf(dir.file("swapped.gguf"), swapped.config, swapped.tensors, test::byte_vocabulary()).is_ok(),
                 "swapped.gguf");
        Expected e;
        QVERIFY2(read_expected(std::string(GKQ_TEST_DATA_DIR) + "/forward/phi3.logits", e, why), why.c_str());
        const Run from_swapped = run(dir.file("swapped.gguf"));
        QCOMPARE(from_swapped.logits.size(), e.logits.size());
        const double off = max_relative(from_swapped.logits, e.logits, e.n_vocab, nullptr);
        qInfo("phi3 with gate and up swapped: relative difference %.3g", off);
        QVERIFY(off > 10 * kTolerance);

        // a part missing: the writer names the fused tensor and the part
        test::TinyModel partial = tiny(*fm);
        partial.tensors.erase(std::find_if(partial.tensors.begin(), partial.tensors.end(), [](const WriteTensor& w) {
            return w.role == TensorRole::FfnUp && w.layer == 1;
        }));
        const Status missing =
            write_gguf(dir.file("partial.gguf"), partial.config, partial.tensors, test::byte_vocabulary());
        QVERIFY(!missing);
        QVERIFY2(missing.message().find("tensor 'blk.1.ffn_up.weight' holds ffn_gate and ffn_up; ffn_up of block 1 is "
                                        "not given") != std::string::npos,
                 missing.message().c_str());

        // llama-quantize's mixtures type a fused tensor as one, by the rules of its name (attn_qkv: attn_v's, which
        // give the last block of two q6_k under q4_k_m; rows of 64 fall back to q5_0 and q8_0)
        {
            auto model = ModelFile::open(dir.file("model.gguf"));
            QVERIFY2(model.is_ok(), model.message().c_str());
            QuantizeOptions qo;
            qo.preset = "q8_0";
            qo.n_threads = 1;
            QVERIFY(quantize_model(*model, qo, dir.file("m.knot")).is_ok());
            ExportOptions eo;
            eo.type = "q4_k_m";
            auto ex = export_gguf(dir.file("m.knot"), dir.file("mix.gguf"), eo);
            QVERIFY2(ex.is_ok(), ex.message().c_str());
            std::map<std::string, std::set<DType>> fused_types;
            for (const ExportedTensor& t : ex->tensors)
                if (const size_t b = t.name.find('['); b != std::string::npos)
                    fused_types[t.name.substr(0, b)].insert(t.written);
            QCOMPARE(fused_types.size(), size_t{4});
            for (const auto& [name, types] : fused_types) QVERIFY2(types.size() == 1, name.c_str());
            QCOMPARE(*fused_types["blk.0.attn_qkv.weight"].begin(), DType::Q5_0);
            QCOMPARE(*fused_types["blk.1.attn_qkv.weight"].begin(), DType::Q8_0);
            QCOMPARE(*fused_types["blk.1.ffn_up.weight"].begin(), DType::Q5_0);
            QCOMPARE(run(dir.file("mix.gguf")).generated.size(), size_t{kGenerated});
            // 21 views, 15 tensors written: token_embd, 6 per block (attn_qkv and ffn_up each one), output_norm, output
            QCOMPARE(ex->tensors.size(), size_t{21});
            QCOMPARE(ex->n_file_tensors, size_t{15});
            auto rec = reconstruct(dir.file("m.knot"), dir.file("r.gguf"), 1);
            QVERIFY2(rec.is_ok(), rec.message().c_str());
            QCOMPARE(rec->n_tensors, size_t{15});
        }

        // separate q/k/v in GGUF, which llama.cpp's loader also takes: read as their roles, the fused file's logits
        test::TinyModel separate = tiny(*fm);
        for (WriteTensor& w : separate.tensors) {
            const char* part = w.role == TensorRole::AttnQ   ? "attn_q"
                               : w.role == TensorRole::AttnK ? "attn_k"
                               : w.role == TensorRole::AttnV ? "attn_v"
                                                             : nullptr;
            if (part == nullptr) continue;
            w.name = "blk." + std::to_string(w.layer) + "." + part + ".weight";
            w.role = TensorRole::Other;  // written under the name given
        }
        QVERIFY(
            write_gguf(dir.file("separate.gguf"), separate.config, separate.tensors, test::byte_vocabulary()).is_ok());
        const Run from_separate = run(dir.file("separate.gguf"));
        QVERIFY(!from_separate.logits.empty());
        QVERIFY(from_separate.logits == run(dir.file("model.gguf")).logits);

        // llama-imatrix's entries for Phi-3: one per fused product (attn_qkv, ffn_up), each token counted once
        {
            auto w = open_weights(dir.file("model.gguf"));
            QVERIFY2(w.is_ok(), w.message().c_str());
            TransformerOptions o;
            o.n_threads = 1;
            auto t = Transformer::load(**w, o);
            QVERIFY2(t.is_ok(), t.message().c_str());
            std::vector<int32_t> calib = kTokens;
            calib.insert(calib.end(), kTokens.begin(), kTokens.end());
            ImatrixOptions io;
            io.n_ctx = 16;
            auto im = compute_imatrix(*t, calib, 1, io, {});
            QVERIFY2(im.is_ok(), im.message().c_str());
            std::set<std::string> names;
            for (const ImatrixEntry& e : im->entries) names.insert(e.name);
            QCOMPARE(names,
                     (std::set<std::string>{"blk.0.attn_output.weight", "blk.0.attn_qkv.weight",
                                            "blk.0.ffn_down.weight", "blk.0.ffn_up.weight", "blk.1.attn_output.weight",
                                            "blk.1.attn_qkv.weight", "blk.1.ffn_down.weight", "blk.1.ffn_up.weight"}));
            QCOMPARE(im->find("blk.1.attn_qkv.weight")->counts, im->find("blk.1.attn_output.weight")->counts);
        }

        test::TinyModel mixed = tiny(*fm);
        for (WriteTensor& w : mixed.tensors)
            if (w.role == TensorRole::AttnV) w.store_as = DType::Q8_0;
        const Status refused = write_gguf(dir.file("mixed.gguf"), mixed.config, mixed.tensors, test::byte_vocabulary());
        QVERIFY(!refused);
        QVERIFY2(refused.message().find("tensor 'blk.0.attn_qkv.weight' holds attn_q, attn_k and attn_v in one type") !=
                     std::string::npos,
                 refused.message().c_str());

        const std::vector<uint8_t> text = test::read_file(dir.file("config.json"));
        const std::string json(text.begin(), text.end());
        QVERIFY2(json.find("\"Phi3ForCausalLM\"") != std::string::npos, json.c_str());
        QVERIFY2(json.find(R"("model_type": "phi3")") != std::string::npos, json.c_str());
        auto refuses_longrope = [](const Weights& w) {
            QCOMPARE(w.config().rope_scaling, RopeScaling::Unsupported);
            auto t = Transformer::load(w);
            QVERIFY(!t);
            QCOMPARE(t.status().code(), StatusCode::Unsupported);
            QVERIFY2(t.message().find("architecture 'phi3' needs its rope scaling type") != std::string::npos,
                     t.message().c_str());
        };
        for (const char* type : {"longrope", "su"}) {
            const size_t end = json.rfind('}');
            test::write_file(dir.file("config.json"),
                             std::string_view(json.substr(0, end) + R"(, "rope_scaling": {"type": ")" + type +
                                              R"(", "long_factor": [1.0], "short_factor": [1.0]}})"));
            auto f = ModelFile::open(dir.path());
            QVERIFY2(f.is_ok(), f.message().c_str());
            refuses_longrope(*f);
        }
        test::TinyModel longrope = tiny(*fm);
        const std::vector<float> factors(static_cast<size_t>(longrope.config.head_size() / 2), 1.0f);
        for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
            WriteTensor w;
            w.name = name;
            w.shape = {static_cast<int64_t>(factors.size())};
            w.data = factors.data();
            longrope.tensors.push_back(std::move(w));
        }
        QVERIFY(
            write_gguf(dir.file("longrope.gguf"), longrope.config, longrope.tensors, test::byte_vocabulary()).is_ok());
        auto g = ModelFile::open(dir.file("longrope.gguf"));
        QVERIFY2(g.is_ok(), g.message().c_str());
        refuses_longrope(*g);
    }

    // Biases, q/k norms and rope scaling go through the whole pipeline: quantize keeps the vectors as f32 records
    // with their roles, the knot runs with them, and reconstruct writes them back under each format's names, config
    // included, so that each reconstruction gives the knot's own logits bit for bit. Llama 3 scaling read from GGUF
    // is the rope_freqs tensor (GGUF keeps no parameters): kept as a record, written back to GGUF, refused for HF.
    void pipeline_keeps_biases_norms_and_rope_scaling_data() {
        QTest::addColumn<int>("index");
        const auto models = forward_models();
        for (size_t i = 0; i < models.size(); ++i)
            if (std::string(models[i].name) != "llama") QTest::newRow(models[i].name) << static_cast<int>(i);
    }

    void pipeline_keeps_biases_norms_and_rope_scaling() {
        QFETCH(int, index);
        const ForwardModel fm = forward_models()[static_cast<size_t>(index)];
        test::TempDir dir;
        std::string why;
        QVERIFY2(write_model(fm, dir.file("model.gguf"), dir.path(), why), why.c_str());
        for (const std::string& source : {dir.file("model.gguf"), dir.path()}) {
            auto model = ModelFile::open(source);
            QVERIFY2(model.is_ok(), model.message().c_str());
            QuantizeOptions qo;
            qo.preset = "q8_0";
            qo.n_threads = 1;
            const std::string knot = dir.file("m.knot");
            auto q = quantize_model(*model, qo, knot);
            QVERIFY2(q.is_ok(), q.message().c_str());
            auto kw = open_weights(knot);
            QVERIFY2(kw.is_ok(), kw.message().c_str());
            const ModelConfig& kc = (*kw)->config();
            const bool freqs_tensor = fm.config.rope_scaling == RopeScaling::Llama3 && source != dir.path();
            const RopeScaling scaling = freqs_tensor ? RopeScaling::None : fm.config.rope_scaling;
            QCOMPARE(kc.architecture, fm.config.architecture);
            QCOMPARE(kc.head_dim, fm.config.head_dim);
            // Gemma's window, pattern, soft-caps, attention scalar and local theta, and the norms' meaning
            QCOMPARE(kc.sliding_window, fm.config.sliding_window);
            QCOMPARE(kc.sliding_window_pattern, fm.config.sliding_window_pattern);
            QCOMPARE(kc.attn_softcap, fm.config.attn_softcap);
            QCOMPARE(kc.final_softcap, fm.config.final_softcap);
            QCOMPARE(kc.query_pre_attn_scalar, fm.config.query_pre_attn_scalar);
            QCOMPARE(kc.rope_local_theta, fm.config.rope_local_theta);
            QCOMPARE(kc.norm_storage, model->config().norm_storage);
            QCOMPARE(kc.rope_scaling, scaling);
            if (!freqs_tensor) QCOMPARE(kc.rope_factor, fm.config.rope_factor);
            QCOMPARE((*kw)->index_of(TensorRole::RopeFreqs, -1) >= 0, freqs_tensor);
            // every role of the row is a record of its own, none a stray "other"
            for (size_t i = 0; i < (*kw)->n_tensors(); ++i)
                QVERIFY2((*kw)->tensor_info(i).role != TensorRole::Other, (*kw)->tensor_info(i).name.c_str());
            for (const RequiredRole& r : required_roles(*find_arch(fm.config.architecture), fm.config, false)) {
                if (r.optional || r.role == TensorRole::Output) continue;
                const int64_t i = (*kw)->index_of(r.role, r.layer);
                QVERIFY2(i >= 0, std::string(role_name(r.role)).c_str());
                if (r.shape.size() == 1) QCOMPARE((*kw)->tensor_info(static_cast<size_t>(i)).dtype, DType::F32);
            }
            const Run from_knot = run(knot);
            QCOMPARE(from_knot.generated.size(), size_t{kGenerated});
            for (const char* ext : {"r.gguf", "r/model.safetensors"}) {
                const std::string out = dir.file(ext);
                if (std::string(ext).find('/') != std::string::npos) std::filesystem::create_directories(dir.file("r"));
                auto rec = reconstruct(knot, out, 1);
                if (freqs_tensor && std::string(ext) != "r.gguf") {
                    QVERIFY(!rec.is_ok());
                    QVERIFY2(rec.message().find("rope_freqs") != std::string::npos, rec.message().c_str());
                    continue;
                }
                QVERIFY2(rec.is_ok(), rec.message().c_str());
                const std::string back = std::string(ext) == "r.gguf" ? out : dir.file("r");
                const Run again = run(back);
                QVERIFY2(again.logits == from_knot.logits, ext);  // the knot's values, written back exactly
                auto reread = ModelFile::open(back);
                QVERIFY2(reread.is_ok(), reread.message().c_str());
                QCOMPARE(reread->config().architecture, fm.config.architecture);
                // Llama 3 scaling in GGUF is the rope_freqs tensor
                const bool freqs_back = fm.config.rope_scaling == RopeScaling::Llama3 && back != dir.file("r");
                QCOMPARE(reread->config().rope_scaling, freqs_back ? RopeScaling::None : scaling);
                QCOMPARE(reread->index_of(TensorRole::RopeFreqs, -1) >= 0, freqs_back);
                for (const Tensor& t : reread->tensors()) QVERIFY2(t.role != TensorRole::Other, t.name.c_str());
            }
        }
    }

    // Gemma 2 and 3 from each format through every step: open, analyze every matrix, quantize with every preset
    // (those without a Gram file), generate from the knot, evaluate the knot against the model (KL divergence over a
    // byte text), export the knot as GGUF and generate from that.
    void gemma_every_step_data() { gemma_norms_and_keys_data(); }

    void gemma_every_step() {
        QFETCH(int, index);
        const ForwardModel fm = forward_models()[static_cast<size_t>(index)];
        test::TempDir dir;
        std::string why;
        QVERIFY2(write_model(fm, dir.file("model.gguf"), dir.path(), why), why.c_str());
        EvalText text;  // the byte vocabulary: byte b is token 3 + b
        for (unsigned char ch : std::string("Gemma reads bytes here; the window is four positions wide. "))
            text.tokens.push_back(3 + ch);
        text.n_bytes = text.tokens.size();
        EvalOptions eo;
        eo.n_ctx = 32;
        eo.stride = 16;
        TransformerOptions o;
        o.n_threads = 1;
        for (const std::string& source : {dir.file("model.gguf"), dir.path()}) {
            auto model = ModelFile::open(source);
            QVERIFY2(model.is_ok(), model.message().c_str());
            AnalyzeOptions ao;
            ao.n_threads = 1;
            auto spectra = analyze_model(*model, ao);
            QVERIFY2(spectra.is_ok(), spectra.message().c_str());
            size_t n_matrices = 0;
            for (const Tensor& t : model->tensors()) n_matrices += t.shape.size() == 2 ? 1 : 0;
            QCOMPARE(spectra->size(), n_matrices);
            for (const TensorSpectrum& sp : *spectra) {
                QVERIFY2(sp.skipped.empty() && !sp.singular_values.empty(), sp.name.c_str());
                QVERIFY(sp.role != TensorRole::Other);
            }
            auto base = Transformer::load(*model, o);
            QVERIFY2(base.is_ok(), base.message().c_str());
            for (const std::string& preset : preset_names()) {
                if (preset_needs_gram(*find_preset(preset))) continue;  // test_cli_imatrix runs those
                const std::string knot = dir.file(preset + ".knot");
                QuantizeOptions qo;
                qo.preset = preset;
                qo.n_threads = 1;
                auto q = quantize_model(*model, qo, knot);
                QVERIFY2(q.is_ok(), (preset + ": " + q.message()).c_str());
                QCOMPARE(run(knot).generated.size(), size_t{kGenerated});
                auto kw = open_weights(knot);
                QVERIFY2(kw.is_ok(), kw.message().c_str());
                auto cand = Transformer::load(**kw, o);
                QVERIFY2(cand.is_ok(), cand.message().c_str());
                auto report = evaluate_compare(*base, *cand, text, eo);
                QVERIFY2(report.is_ok(), (preset + ": " + report.message()).c_str());
                QVERIFY(report->n_tokens > 0);
                QVERIFY2(std::isfinite(report->compare.mean_kld) && report->compare.mean_kld >= 0.0, preset.c_str());
                if (preset == "q8_0") QVERIFY2(report->compare.mean_kld < 1e-3, preset.c_str());
                const std::string exported = dir.file(preset + ".gguf");
                auto ex = export_gguf(knot, exported);
                QVERIFY2(ex.is_ok(), (preset + ": " + ex.message()).c_str());
                const Run again = run(exported);
                QCOMPARE(again.generated.size(), size_t{kGenerated});
            }
        }
    }

    // Every architecture row, from GGUF and from HF: analyze gives a spectrum for every matrix; every preset
    // quantizes (the whitened ones with Gram matrices collected on the model itself); each knot runs (finite logits
    // at every position) and evaluates against the model (a finite, non-negative mean KLD).
    void every_stage_from_both_formats_data() {
        QTest::addColumn<int>("index");
        const auto models = forward_models();
        for (size_t i = 0; i < models.size(); ++i) QTest::newRow(models[i].name) << static_cast<int>(i);
    }

    void every_stage_from_both_formats() {
        QFETCH(int, index);
        const ForwardModel fm = forward_models()[static_cast<size_t>(index)];
        test::TempDir dir;
        std::string why;
        const std::string hf = dir.file("hf");
        std::filesystem::create_directories(hf);
        QVERIFY2(write_model(fm, dir.file("model.gguf"), hf, why), why.c_str());
        QVERIFY2(write_tokenizer_bin(hf + "/tokenizer.bin", why), why.c_str());
        // a calibration and evaluation text: 64 byte tokens from a fixed seed
        EvalText text;
        uint64_t state = 0x9e3779b97f4a7c15ull + fm.seed;
        for (int i = 0; i < 64; ++i) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            text.tokens.push_back(static_cast<int32_t>(3 + (state >> 33) % 256));
        }
        text.n_bytes = text.tokens.size();
        EvalOptions eo;
        eo.n_ctx = 16;
        for (const std::string& source : {dir.file("model.gguf"), hf}) {
            const std::string from = source == hf ? "HF" : "GGUF";
            auto model = open_weights(source);
            QVERIFY2(model.is_ok(), model.message().c_str());
            const Weights& w = **model;
            size_t n_matrices = 0;
            for (size_t i = 0; i < w.n_tensors(); ++i) n_matrices += w.tensor_info(i).shape.size() == 2 ? 1 : 0;
            AnalyzeOptions ao;
            auto spectra = analyze_model(w, ao);
            QVERIFY2(spectra.is_ok(), spectra.message().c_str());
            QCOMPARE(spectra->size(), n_matrices);

            TransformerOptions o;
            o.n_threads = 1;
            auto base = Transformer::load(w, o);
            QVERIFY2(base.is_ok(), base.message().c_str());
            std::vector<int32_t> calib = {1};
            calib.insert(calib.end(), text.tokens.begin(), text.tokens.end());
            ImatrixOptions io;
            io.n_ctx = 16;
            GramSet gram;
            auto imatrix = compute_imatrix(*base, calib, 1, io, {}, &gram);
            QVERIFY2(imatrix.is_ok(), imatrix.message().c_str());
            QVERIFY2(write_gram(gram, dir.file("model.gram")).is_ok(), "write_gram");
            auto model_gram = load_model_gram(dir.file("model.gram"), w);
            QVERIFY2(model_gram.is_ok(), model_gram.message().c_str());

            for (const std::string& preset : preset_names()) {
                const std::string what = from + " " + preset;
                QuantizeOptions qo;
                qo.preset = preset;
                qo.n_threads = 1;
                if (preset_needs_gram(*find_preset(preset))) {
                    qo.gram = model_gram->by_tensor;
                    qo.gram_command = model_gram->command;
                }
                const std::string knot = dir.file(preset + ".knot");
                auto q = quantize_model(w, qo, knot);
                QVERIFY2(q.is_ok(), qPrintable(QString::fromStdString(what + ": " + q.message())));
                auto kw = open_weights(knot);
                QVERIFY2(kw.is_ok(), qPrintable(QString::fromStdString(what + ": " + kw.message())));
                auto cand = Transformer::load(**kw, o);
                QVERIFY2(cand.is_ok(), qPrintable(QString::fromStdString(what + ": " + cand.message())));
                std::vector<float> logits(kTokens.size() * static_cast<size_t>(fm.config.vocab_size));
                QVERIFY(cand->forward_batch(kTokens.data(), static_cast<int64_t>(kTokens.size()), 0, logits.data())
                            .is_ok());
                for (float v : logits) QVERIFY2(std::isfinite(v), qPrintable(QString::fromStdString(what)));
                auto report = evaluate_compare(*base, *cand, text, eo);
                QVERIFY2(report.is_ok(), qPrintable(QString::fromStdString(what + ": " + report.message())));
                QVERIFY2(std::isfinite(report->compare.mean_kld) && report->compare.mean_kld >= 0.0,
                         qPrintable(QString::fromStdString(what)));
            }
#if defined(GKQ_TEST_SERVE)
            // served over HTTP: the greedy completion generate gives on the same weights, compared as token ids (the
            // prompt as the server's tokenizer encoded it, and the ids generated), so a tokenizer difference cannot
            // hide behind equal text
            ServerConfig sc = test::loopback_config("epoll");
            sc.weights_path = source;
            sc.n_workers = 1;
            sc.n_threads = 1;
            auto server = Server::start(sc);
            QVERIFY2(server.is_ok(), qPrintable(QString::fromStdString(from + " serve: " + server.message())));
            QVERIFY2((*server)->wait_loaded(60000) && (*server)->load_status().is_ok(),
                     qPrintable(QString::fromStdString(from + " serve: " + (*server)->load_status().message())));
            auto answer =
                test::http_request((*server)->port(), "POST", "/infer",
                                   R"({"prompt": "Hello", "max_tokens": 8, "temperature": 0, "return_tokens": true})");
            QVERIFY2(answer && answer->status == 200,
                     qPrintable(QString::fromStdString(from + " serve: " + (answer ? answer->body : "no answer"))));
            const test::ReferenceRun ref = test::reference_run(source, "Hello", 8);
            const nlohmann::json got = nlohmann::json::parse(answer->body);
            auto ids_text = [](const std::vector<int32_t>& ids) {
                std::string s;
                for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
                return s;
            };
            const std::vector<int32_t> prompt_ids = got.at("prompt_ids").get<std::vector<int32_t>>();
            const std::vector<int32_t> ids = got.at("tokens").get<std::vector<int32_t>>();
            QVERIFY2(prompt_ids == ref.prompt_ids,
                     qPrintable(QString::fromStdString(from + " serve: prompt " + ids_text(prompt_ids) +
                                                       ", the tokenizer's " + ids_text(ref.prompt_ids))));
            QVERIFY2(ids == ref.ids, qPrintable(QString::fromStdString(from + " serve: " + ids_text(ids) +
                                                                       ", generate " + ids_text(ref.ids))));
            QVERIFY(!ref.ids.empty());
            const std::string want = nlohmann::json::parse(
                nlohmann::json(ref.text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            QCOMPARE(got.at("text").get<std::string>(), want);
#endif
        }
    }

    // config.json: Mistral's window and head_dim are written and read back; a rope scaling gkq does not compute
    // (yarn) is read as such and refused by the transformer with a message naming it; the pre-4.45 "type" key.
    void hf_config_keys() {
        test::TempDir dir;
        ModelConfig c = base_config("mistral");
        c.sliding_window = 8;
        c.head_dim = 16;
        c.rope_style = RopeStyle::HalfSplit;
        test::TinyModel m = test::make_tiny_model(c, 31);
        QVERIFY(write_safetensors(dir.file("model.safetensors"), m.config, m.tensors).is_ok());
        auto back = ModelFile::open(dir.path());
        QVERIFY2(back.is_ok(), back.message().c_str());
        QCOMPARE(back->config().architecture, std::string("mistral"));
        QCOMPARE(back->config().sliding_window, int64_t{8});
        QCOMPARE(back->config().head_dim, int64_t{16});
        QCOMPARE(back->config().rope_scaling, RopeScaling::None);
        std::vector<uint8_t> text = test::read_file(dir.file("config.json"));
        std::string json(text.begin(), text.end());
        QVERIFY(json.find("rope_scaling") == std::string::npos);  // nothing to say: not written
        const size_t end = json.rfind('}');
        auto with = [&](const std::string& extra) {
            test::write_file(dir.file("config.json"), std::string_view(json.substr(0, end) + ", " + extra + "}"));
            return ModelFile::open(dir.path());
        };
        auto linear = with(R"("rope_scaling": {"type": "linear", "factor": 2.0})");
        QVERIFY2(linear.is_ok(), linear.message().c_str());
        QCOMPARE(linear->config().rope_scaling, RopeScaling::Linear);
        QCOMPARE(linear->config().rope_factor, 2.0);
        auto yarn = with(R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})");
        QVERIFY2(yarn.is_ok(), yarn.message().c_str());
        QCOMPARE(yarn->config().rope_scaling, RopeScaling::Unsupported);
        auto t = Transformer::load(*yarn);
        QVERIFY(!t);
        QCOMPARE(t.status().code(), StatusCode::Unsupported);
        QVERIFY2(t.message().find("'mistral' needs its rope scaling type") != std::string::npos, t.message().c_str());
        auto bad = with(R"("rope_scaling": {"rope_type": 3})");
        QVERIFY(!bad);
        QVERIFY2(bad.message().find("rope_scaling.rope_type") != std::string::npos, bad.message().c_str());

        // partial rotary embeddings (Phi-4-mini's 0.75) are not computed: every command that runs or encodes the
        // model refuses it, naming the field, rather than compute another model; 1.0 is the whole head
        auto whole = with(R"("partial_rotary_factor": 1.0)");
        QVERIFY2(whole.is_ok() && Transformer::load(*whole).is_ok(), whole.message().c_str());
        auto partial = with(R"("partial_rotary_factor": 0.75)");
        QVERIFY2(partial.is_ok(), partial.message().c_str());
        auto tp = Transformer::load(*partial);
        QVERIFY(!tp);
        QCOMPARE(tp.status().code(), StatusCode::Unsupported);
        QVERIFY2(tp.message().find("partial_rotary_factor 0.75") != std::string::npos, tp.message().c_str());
        QuantizeOptions qo;
        qo.preset = "q8_0";
        auto q = quantize_model(*partial, qo, dir.file("partial.knot"));
        QVERIFY(!q);
        QVERIFY2(q.message().find("partial rotary") != std::string::npos, q.message().c_str());
        QVERIFY(!std::filesystem::exists(dir.file("partial.knot")));
    }

    // The window only matters beyond it: a window as long as the sequence changes nothing; a shorter one changes
    // the logits of the positions past it, and only those.
    void sliding_window() {
        ModelConfig c = base_config("mistral");
        test::TinyModel m = test::make_tiny_model(c, 21);
        auto logits_with = [&](int64_t window) {
            test::TinyModel copy = m;
            copy.config.sliding_window = window;
            test::MemoryWeights w(copy);
            TransformerOptions o;
            o.n_threads = 1;
            auto t = Transformer::load(w, o);
            if (!t) qFatal("%s", t.message().c_str());
            std::vector<float> out(kTokens.size() * static_cast<size_t>(c.vocab_size));
            if (!t->forward_batch(kTokens.data(), static_cast<int64_t>(kTokens.size()), 0, out.data()))
                qFatal("forward failed");
            return out;
        };
        const std::vector<float> full = logits_with(0);
        QCOMPARE(logits_with(static_cast<int64_t>(kTokens.size())), full);
        const int64_t window = 4;
        const std::vector<float> windowed = logits_with(window);
        const size_t row = static_cast<size_t>(c.vocab_size);
        for (size_t p = 0; p < kTokens.size(); ++p) {
            const bool same = std::memcmp(full.data() + p * row, windowed.data() + p * row, row * 4) == 0;
            QCOMPARE(same, static_cast<int64_t>(p) < window);
        }
    }
};

int main(int argc, char** argv) {
    // --write-models DIR: DIR/NAME.gguf and an HF copy DIR/NAME-hf/ (safetensors, config.json, tokenizer.bin) of
    // every fixture model, for dump_logits.c and the live llama.cpp test (tests/peer/llama_cpp_peer.sh).
    if (argc == 3 && std::string(argv[1]) == "--write-models") {
        for (const ForwardModel& fm : forward_models()) {
            const std::string path = std::string(argv[2]) + "/" + fm.name + ".gguf";
            const std::string hf = std::string(argv[2]) + "/" + fm.name + "-hf";
            std::error_code ec;
            std::filesystem::create_directories(hf, ec);
            std::string why;
            if (ec) why = hf + ": " + ec.message();
            if (ec || !write_model(fm, path, hf, why) || !write_tokenizer_bin(hf + "/tokenizer.bin", why)) {
                std::fprintf(stderr, "%s: %s\n", path.c_str(), why.c_str());
                return 1;
            }
            std::printf("%s\n", path.c_str());
        }
        return 0;
    }
    TestForwardFixtures t;
    return QTest::qExec(&t, argc, argv);
}

#include "test_forward_fixtures.moc"
