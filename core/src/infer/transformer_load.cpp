// Loading a Transformer: config checks, weights from a WeightSource (dense or factored) or an open ModelFile,
// and the run state with its KV cache.
#include "gkq/transformer.h"

#include "common/byte_reader.h"
#include "gkq/arch.h"
#include "gkq/convert.h"
#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/naming.h"
#include "infer/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>
#include <thread>

namespace gkq {

namespace {

// KV cache positions when neither the caller nor a small model's own context limits them: a model that
// declares 128k positions would otherwise ask for tens of gigabytes before running one token.
constexpr int64_t kDefaultMaxContext = 4096;
// Sizes beyond this many floats in one buffer are refused rather than attempted.
constexpr uint64_t kMaxFloats = uint64_t{1} << 36;

std::string weight_label(TensorRole role, int32_t layer) {
    return gguf_name(role, layer);
}

// Llama-family models this forward pass computes exactly: no biases, no sliding window below 4096 positions.
Status check_architecture(const ModelConfig& c) {
    // The architectures of the table, whose blocks this forward pass computes (llama's: no biases, RMSNorm, SiLU).
    if (find_arch(c.architecture) == nullptr)
        return error(StatusCode::Unsupported, "transformer: architecture '" + c.architecture + "' is not supported (" +
                                                  arch_names_list() + " are)");
    return Status::ok();
}

// The sizes: the one model-consistency check (gkq/model_check.h), as every command runs it.
Status check_config(const ModelConfig& c) {
    if (Status s = check_architecture(c); !s) return s;
    const std::vector<std::string> problems = config_problems(c);
    if (!problems.empty()) return error(StatusCode::Unsupported, "transformer: " + problems.front());
    return Status::ok();
}

struct Required {
    TensorRole role;
    int32_t layer;
    int64_t rows;  // 1-D tensors: rows = n, cols = 0
    int64_t cols;
};

// Every role the architecture's row stores, with the shape the config implies, in the row's order with its block
// tensors repeated for each layer; the output projection only when the classifier is not shared.
std::vector<Required> required_weights(const ModelConfig& c) {
    const ArchSpec& arch = arch_or_default(c.architecture);
    std::vector<Required> r;
    auto add = [&](const TensorSpec& t, int32_t layer) {
        if (t.need == Need::Untied && c.shared_classifier) return;
        for (const RolePart& p : t.parts) r.push_back({p.role, layer, size_value(p.rows, c), size_value(t.cols, c)});
    };
    bool blocks_added = false;
    for (const TensorSpec& t : arch.tensors) {
        if (!t.per_layer()) {
            add(t, -1);
        } else if (!blocks_added) {
            blocks_added = true;
            for (int32_t l = 0; l < c.n_layers; ++l)
                for (const TensorSpec& b : arch.tensors)
                    if (b.per_layer()) add(b, l);
        }
    }
    return r;
}

std::vector<int64_t> shape_of(const Required& r) {
    return r.cols > 0 ? std::vector<int64_t>{r.rows, r.cols} : std::vector<int64_t>{r.rows};
}

// U diag(S) V^T multiplied out, each element summed over k in ascending order.
std::vector<float> expand_factors(const WeightData& w, int64_t rows, int64_t cols) {
    std::vector<float> dense(static_cast<size_t>(rows * cols));
    const int64_t k = w.rank;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            float sum = 0.0f;
            for (int64_t i = 0; i < k; ++i)
                sum += w.u[static_cast<size_t>(r * k + i)] * w.s[static_cast<size_t>(i)] *
                       w.v[static_cast<size_t>(c * k + i)];
            dense[static_cast<size_t>(r * cols + c)] = sum;
        }
    return dense;
}

// Checks what the source handed over against the expected size and stores it: dense, or factored when
// that is allowed and cheaper.
Status take_matrix(WeightData&& w, const Required& req, bool allow_factored, Matrix& out) {
    const std::string label = weight_label(req.role, req.layer);
    out.rows = req.rows;
    out.cols = req.cols;
    const uint64_t n = static_cast<uint64_t>(req.rows * req.cols);
    if (w.rank <= 0) {
        if (w.dense.size() != n)
            return error(StatusCode::Corrupt, "transformer: " + label + " has " + std::to_string(w.dense.size()) +
                                                  " values, expected " + shape_to_string(shape_of(req)) + " = " +
                                                  std::to_string(n));
        out.dense = std::move(w.dense);
        return Status::ok();
    }
    const uint64_t k = static_cast<uint64_t>(w.rank);
    if (k > static_cast<uint64_t>(std::min(req.rows, req.cols)) || w.u.size() != k * req.rows || w.s.size() != k ||
        w.v.size() != k * req.cols)
        return error(StatusCode::Corrupt, "transformer: " + label + " factors of rank " + std::to_string(k) +
                                              " have sizes U " + std::to_string(w.u.size()) + ", S " +
                                              std::to_string(w.s.size()) + ", V " + std::to_string(w.v.size()) +
                                              " that do not fit " + shape_to_string(shape_of(req)));
    const bool cheaper = static_cast<int64_t>(k) * (req.rows + req.cols) < req.rows * req.cols;
    if (!allow_factored || !cheaper || req.role == TensorRole::TokenEmbd) {
        out.dense = expand_factors(w, req.rows, req.cols);
        return Status::ok();
    }
    out.rank = w.rank;
    out.u = std::move(w.u);
    out.svt.resize(k * static_cast<uint64_t>(req.cols));
    for (uint64_t i = 0; i < k; ++i)
        for (int64_t c = 0; c < req.cols; ++c)
            out.svt[i * static_cast<uint64_t>(req.cols) + static_cast<uint64_t>(c)] =
                w.s[i] * w.v[static_cast<uint64_t>(c) * k + i];
    return Status::ok();
}

Status take_vector(WeightData&& w, const Required& req, std::vector<float>& out) {
    if (w.rank > 0 || w.dense.size() != static_cast<uint64_t>(req.rows))
        return error(StatusCode::Corrupt, "transformer: " + weight_label(req.role, req.layer) + " has " +
                                              std::to_string(w.dense.size()) + " values, expected " +
                                              std::to_string(req.rows));
    out = std::move(w.dense);
    return Status::ok();
}

Matrix* matrix_slot(TransformerWeights& tw, const Required& r) {
    if (r.role == TensorRole::Output) return &tw.classifier;
    if (r.layer < 0) return nullptr;
    LayerWeights& l = tw.layers[static_cast<size_t>(r.layer)];
    switch (r.role) {
        case TensorRole::AttnQ: return &l.wq;
        case TensorRole::AttnK: return &l.wk;
        case TensorRole::AttnV: return &l.wv;
        case TensorRole::AttnO: return &l.wo;
        case TensorRole::FfnGate: return &l.w1;
        case TensorRole::FfnDown: return &l.w2;
        case TensorRole::FfnUp: return &l.w3;
        default: return nullptr;
    }
}

std::vector<float>* vector_slot(TransformerWeights& tw, const Required& r) {
    switch (r.role) {
        case TensorRole::AttnNorm: return &tw.layers[static_cast<size_t>(r.layer)].rms_att;
        case TensorRole::FfnNorm: return &tw.layers[static_cast<size_t>(r.layer)].rms_ffn;
        case TensorRole::OutputNorm: return &tw.rms_final;
        default: return nullptr;
    }
}

}  // namespace

// ----------------------------------------------------------------------------

Status Transformer::init_state(const TransformerOptions& options) {
    const ModelConfig& c = m_config;
    int64_t ctx = std::min(c.context_length, kDefaultMaxContext);
    if (options.max_context > 0) ctx = std::min(c.context_length, options.max_context);
    const int64_t batch = std::clamp<int64_t>(options.max_batch, 1, 1024);
    int64_t max_rank = 0;
    for (const LayerWeights& w : m_weights.layers)
        for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w1, &w.w2, &w.w3})
            max_rank = std::max(max_rank, m->rank);
    max_rank = std::max(max_rank, m_weights.classifier.rank);

    uint64_t cache = 0;
    uint64_t att = 0;
    if (!checked_mul(static_cast<uint64_t>(c.n_layers * ctx), static_cast<uint64_t>(c.kv_dim()), cache) ||
        cache > kMaxFloats || !checked_mul(static_cast<uint64_t>(batch * c.n_heads), static_cast<uint64_t>(ctx), att) ||
        att > kMaxFloats)
        return error(StatusCode::Unsupported, "transformer: a KV cache of " + std::to_string(ctx) +
                                                  " positions is too large; pass a smaller max_context");
    RunState& s = m_state;
    s.n_batch = batch;
    s.n_context = ctx;
    auto sz = [](int64_t a, int64_t b) { return static_cast<size_t>(a * b); };
    s.x.assign(sz(batch, c.dim), 0.0f);
    s.xb.assign(sz(batch, c.dim), 0.0f);
    s.xb2.assign(sz(batch, c.dim), 0.0f);
    s.q.assign(sz(batch, c.dim), 0.0f);
    s.hb.assign(sz(batch, c.hidden_dim), 0.0f);
    s.hb2.assign(sz(batch, c.hidden_dim), 0.0f);
    s.att.assign(att, 0.0f);
    s.factor_tmp.assign(sz(batch, std::max<int64_t>(max_rank, 1)), 0.0f);
    s.logits.assign(sz(batch, c.vocab_size), 0.0f);
    s.key_cache.assign(cache, 0.0f);
    s.value_cache.assign(cache, 0.0f);

    const int64_t half = c.head_size() / 2;
    const float theta = static_cast<float>(c.rope_theta);
    m_inv_freq.resize(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i)  // run.c: 1.0f / powf(10000.0f, head_dim / (float)head_size)
        m_inv_freq[static_cast<size_t>(i)] =
            1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(c.head_size()));

    int threads = options.n_threads;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    m_pool = std::make_unique<ThreadPool>(threads);
    return Status::ok();
}

Result<Transformer> Transformer::load(const ModelConfig& config, const WeightSource& source,
                                      const TransformerOptions& options) {
    if (Status s = check_config(config); !s) return s;
    try {
        Transformer t;
        t.m_config = config;
        TransformerWeights& tw = t.m_weights;
        tw.layers.resize(static_cast<size_t>(config.n_layers));
        tw.shared_classifier = config.shared_classifier;
        for (const Required& req : required_weights(config)) {
            auto got = source(req.role, req.layer);
            if (!got) return got.status();
            Status s;
            if (req.role == TensorRole::TokenEmbd) {
                Matrix m;
                s = take_matrix(std::move(*got), req, false, m);
                tw.token_embedding = std::move(m.dense);
            } else if (Matrix* m = matrix_slot(tw, req)) {
                s = take_matrix(std::move(*got), req, options.allow_factored, *m);
            } else if (std::vector<float>* v = vector_slot(tw, req)) {
                s = take_vector(std::move(*got), req, *v);
            }
            if (!s) return s;
        }
        if (Status s = t.init_state(options); !s) return s;
        return t;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "transformer: out of memory loading a model of dim " +
                                                  std::to_string(config.dim) + ", " + std::to_string(config.n_layers) +
                                                  " layers");
    }
}

Result<Transformer> Transformer::load(const ModelFile& file, const TransformerOptions& options) {
    ModelConfig config = file.config();
    // A file with its own classifier uses it whatever the config says (readers derive the flag from it).
    config.shared_classifier = file.find(TensorRole::Output, -1) == nullptr;
    if (Status s = check_architecture(config); !s) return s.with_context(file.path());
    if (Status s = check_model(file.path(), config, file.tensors()); !s) return s;
    WeightSource source = [&](TensorRole role, int32_t layer) -> Result<WeightData> {
        auto values = tensor_to_f32(*file.find(role, layer));
        if (!values) return values.status().with_context(file.path());
        WeightData w;
        w.dense = std::move(*values);
        return w;
    };
    return load(config, source, options);
}

Transformer::Transformer(Transformer&&) noexcept = default;
Transformer& Transformer::operator=(Transformer&&) noexcept = default;
Transformer::~Transformer() = default;

}  // namespace gkq
