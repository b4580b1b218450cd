#include "tiny_model.h"

#include "gkq/arch.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/rknot.h"

#include "test_support.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gkq::test {

MemoryWeights::MemoryWeights(const TinyModel& m) : model_config(m.config), values(m.storage) {
    for (const WriteTensor& t : m.tensors) {
        TensorInfo info = t;
        if (t.role != TensorRole::Other) info.name = gguf_name(t.role, t.layer);
        infos.push_back(std::move(info));
    }
    factors.resize(infos.size());
}

size_t MemoryWeights::at(TensorRole role, int32_t layer) const {
    const int64_t i = index_of(role, layer);
    if (i < 0) {
        std::fprintf(stderr, "MemoryWeights: no %s\n", gguf_name(role, layer).c_str());
        std::abort();
    }
    return static_cast<size_t>(i);
}

Result<StoredTensor> MemoryWeights::read_stored(size_t i) const {
    StoredTensor s;
    s.info = infos[i];
    s.data = {reinterpret_cast<const uint8_t*>(values[i].data()), values[i].size() * sizeof(float)};
    return s;
}

ModelConfig tiny_config(bool shared_classifier) {
    ModelConfig c;
    c.dim = 64;
    c.hidden_dim = 96;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.vocab_size = 40;
    c.context_length = 32;
    c.shared_classifier = shared_classifier;
    return c;
}

TinyModel make_tiny_model(const ModelConfig& c, uint64_t seed) {
    TinyModel m;
    m.config = c;
    auto add = [&](TensorRole role, int32_t layer, std::vector<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        const bool norm = shape.size() == 1;
        auto v = random_floats(static_cast<size_t>(n), seed++, norm ? 0.1f : 0.05f);
        if (norm)
            for (float& x : v) x += 1.0f;  // norms sit near one, as trained ones do
        m.storage.push_back(std::move(v));
        WriteTensor w;
        w.role = role;
        w.layer = layer;
        w.shape = std::move(shape);
        m.tensors.push_back(std::move(w));
    };
    const int64_t kv = c.kv_dim();
    add(TensorRole::TokenEmbd, -1, {c.vocab_size, c.dim});
    for (int32_t l = 0; l < c.n_layers; ++l) {
        add(TensorRole::AttnNorm, l, {c.dim});
        add(TensorRole::AttnQ, l, {c.q_dim(), c.dim});
        add(TensorRole::AttnK, l, {kv, c.dim});
        add(TensorRole::AttnV, l, {kv, c.dim});
        add(TensorRole::AttnO, l, {c.dim, c.q_dim()});
        add(TensorRole::FfnNorm, l, {c.dim});
        add(TensorRole::FfnGate, l, {c.hidden_dim, c.dim});
        add(TensorRole::FfnDown, l, {c.dim, c.hidden_dim});
        add(TensorRole::FfnUp, l, {c.hidden_dim, c.dim});
    }
    add(TensorRole::OutputNorm, -1, {c.dim});
    if (!c.shared_classifier) add(TensorRole::Output, -1, {c.vocab_size, c.dim});
    // The architecture's other roles (q/k/v biases, q/k norms), after llama's so a llama model keeps its values.
    auto is_llama_role = [](TensorRole r) { return static_cast<size_t>(r) <= static_cast<size_t>(TensorRole::Other); };
    for (const RequiredRole& r : required_roles(arch_or_default(c.architecture), c, c.shared_classifier))
        if (!is_llama_role(r.role) && !r.optional) add(r.role, r.layer, r.shape);
    for (size_t i = 0; i < m.tensors.size(); ++i) m.tensors[i].data = m.storage[i].data();
    return m;
}

}  // namespace gkq::test

namespace gkq::test {

Vocabulary tiny_vocabulary(const std::vector<std::string>& merges) {
    Vocabulary v;
    v.model = "llama";
    v.bos_id = 1;
    v.eos_id = 2;
    auto add = [&](const std::string& piece, float score, int32_t type) {
        v.tokens.push_back(piece);
        v.scores.push_back(score);
        v.token_types.push_back(type);
    };
    add("<unk>", 0, 2);
    add("<s>", 0, 3);
    add("</s>", 0, 3);
    add("\xE2\x96\x81", -1, 1);
    for (char c = 'a'; c <= 'z'; ++c) add(std::string(1, c), -2, 1);
    for (const std::string& m : merges) add(m, -3, 1);
    return v;
}

Vocabulary tiny_vocabulary() {
    const std::string space = "\xE2\x96\x81";
    return tiny_vocabulary({space + "a", "ab", "ba", space + "ab", "cd", "de", "ef", "fg", "gh", "hi"});
}

std::string write_tiny_gguf(const std::string& path, bool shared_classifier, uint64_t seed, const Vocabulary& vocab) {
    const TinyModel m = make_tiny_model(tiny_config(shared_classifier), seed);
    if (Status s = write_gguf(path, m.config, m.tensors, vocab); !s) {
        std::fprintf(stderr, "write_tiny_gguf: %s\n", s.message().c_str());
        std::abort();
    }
    return path;
}

Result<QuantizeReport> quantize_file(const std::string& model_path, const std::string& preset,
                                     const std::string& knot_path) {
    auto model = ModelFile::open(model_path);
    if (!model) return model.status();
    QuantizeOptions qo;
    qo.preset = preset;
    qo.n_threads = 1;
    return quantize_model(*model, qo, knot_path);
}

Result<QuantizeReport> write_tiny_knot(const std::string& path, const ModelConfig& config, const std::string& preset,
                                       const std::string& knot_path) {
    const TinyModel m = make_tiny_model(config);
    if (Status s = write_safetensors(path, m.config, m.tensors); !s) return s;
    return quantize_file(path, preset, knot_path);
}

Status write_knot_and_rknot(const std::string& model_path, const std::string& preset, const std::string& knot_path,
                            const std::string& rknot_path, const std::string& model_name) {
    if (auto q = quantize_file(model_path, preset, knot_path); !q) return q.status();
    RknotEncodeOptions eo;
    eo.knot_path = knot_path;
    eo.model_path = model_path;
    eo.model_name = model_name;
    auto r = encode_rknot(eo);
    if (!r) return r.status();
    return write_rknot(rknot_path, *r);
}

SaturationProfile small_saturation_profile() {
    SaturationProfile p;
    p.model = "m";
    p.text = "t";
    p.command = "c";
    p.n_tokens = 4;
    p.threshold = 1.0;
    LayerSaturation l;
    l.neuron_count = 3;
    l.counts = {0, 2, 4};
    l.hot = {0, 1, 1};
    l.histogram.assign(kSaturationHistogramBins, 0);
    p.layers.push_back(l);
    return p;
}

std::vector<int32_t> cycle_tokens(int64_t vocab, size_t n) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(vocab)));
    return t;
}

std::vector<float> all_logits(Transformer& t, const std::vector<int32_t>& tokens, bool batch) {
    const auto vocab = static_cast<size_t>(t.config().vocab_size);
    std::vector<float> all(tokens.size() * vocab);
    auto fail = [](const Status& s) {
        std::fprintf(stderr, "all_logits: %s\n", s.message().c_str());
        std::abort();
    };
    if (batch) {
        auto r = t.forward_batch(tokens.data(), static_cast<int64_t>(tokens.size()), 0, all.data());
        if (!r) fail(r.status());
        return all;
    }
    for (size_t i = 0; i < tokens.size(); ++i) {
        auto r = t.forward(tokens[i], static_cast<int64_t>(i));
        if (!r) fail(r.status());
        std::memcpy(all.data() + i * vocab, *r, vocab * sizeof(float));
    }
    return all;
}

Vocabulary byte_vocabulary() {
    Vocabulary v;
    v.model = "llama";
    v.bos_id = 1;
    v.eos_id = 2;
    auto add = [&](const std::string& piece, int32_t type) {
        v.tokens.push_back(piece);
        v.scores.push_back(0.0f);
        v.token_types.push_back(type);
    };
    add("<unk>", 2);
    add("<s>", 3);
    add("</s>", 3);
    for (int b = 0; b < 256; ++b) {
        char piece[8];
        std::snprintf(piece, sizeof piece, "<0x%02X>", b);
        add(piece, 6);
    }
    return v;
}

}  // namespace gkq::test
