// Loading a Transformer: config checks, weights from any Weights (dense or factored; loaded once, or lent per step
// by a WeightLender), and the run state with its KV cache.
#include "gkq/transformer.h"

#include "common/byte_reader.h"
#include "gkq/arch.h"
#include "gkq/model_check.h"
#include "gkq/naming.h"
#include "gkq/weights.h"
#include "infer/kernels.h"
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

// The architectures of the table whose block features this forward pass computes (every BlockFlags feature), with
// rope unscaled, linear or Llama 3: the one check, gkq/model_check.h.
Status check_architecture(const ModelConfig& c) {
    const std::string problem = architecture_problem(c);
    if (!problem.empty()) return error(StatusCode::Unsupported, "transformer: " + problem);
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
    bool optional;
};

// Every role the architecture's row stores (gkq/arch.h required_roles), with the rope frequency divisors left to
// load_from.
std::vector<Required> required_weights(const ModelConfig& c) {
    std::vector<Required> r;
    for (const RequiredRole& q : required_roles(arch_or_default(c.architecture), c, c.shared_classifier))
        if (q.role != TensorRole::RopeFreqs)
            r.push_back({q.role, q.layer, q.shape[0], q.shape.size() > 1 ? q.shape[1] : 0, q.optional});
    return r;
}

std::vector<int64_t> shape_of(const Required& r) {
    return r.cols > 0 ? std::vector<int64_t>{r.rows, r.cols} : std::vector<int64_t>{r.rows};
}

// U diag(S) V^T multiplied out, each element summed over k in ascending order.
std::vector<float> expand_factors(const StoredFactors& w, int64_t rows, int64_t cols) {
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

}  // namespace

namespace {

// Rows that are the transformer's own (a knot record inflated, a copy) in a type that regroups: copied once into
// groups of eight rows (kernels.h: group_rows), which the products read with one load per eight rows; the source
// (the record) is let go.
void regroup(LoadedTensor& t, int64_t rows, int64_t cols) {
    if (!stored_type_groups(t.stored_type) || rows < kRowGroup) return;
    auto grouped = std::make_shared<std::vector<uint8_t>>(t.stored.size());
    group_rows(t.stored_type, t.stored.data(), grouped->data(), rows, cols);
    t.stored = *grouped;
    t.keep = std::move(grouped);
    t.grouped = true;
}

// A matrix in a type the stored products run, kept as stored (mapped, inflated, or copied when there is no owner).
Result<LoadedTensor> load_stored(const Weights& weights, size_t index, const TensorInfo& info,
                                 const LoadTensorOptions& options) {
    const std::string label = weight_label(info.role, info.layer);
    auto st = weights.read_stored(index);
    if (!st) return st.status();
    const int64_t rows = info.shape[0];
    const int64_t cols = info.shape[1];
    const uint64_t expected = static_cast<uint64_t>(rows) * stored_row_bytes(info.dtype, cols);
    if (st->info.dtype != info.dtype || st->data.size() != expected)
        return error(StatusCode::Corrupt,
                     "transformer: " + label + " is stored as " + std::string(dtype_name(st->info.dtype)) + " in " +
                         std::to_string(st->data.size()) + " bytes, expected " + std::string(dtype_name(info.dtype)) +
                         " " + shape_to_string(info.shape) + " = " + std::to_string(expected));
    LoadedTensor out;
    out.stored_type = info.dtype;
    out.stored = st->data;
    if (options.owner && options.owner.get() == &weights && !st->record) {  // mapped while the owner lives
        out.keep = options.owner;
        out.mapped = &weights;
        return out;
    }
    out.keep = std::move(st->record);  // a knot record, inflated: its payload is the blocks
    const bool regroups = stored_type_groups(info.dtype) && rows >= kRowGroup;
    if (!out.keep && !regroups) {  // no owner to keep a mapping: a copy (regroup makes one)
        auto copy = std::make_shared<std::vector<uint8_t>>(st->data.begin(), st->data.end());
        out.stored = *copy;
        out.keep = std::move(copy);
    }
    regroup(out, rows, cols);
    return out;
}

}  // namespace

Result<LoadedTensor> load_tensor(const Weights& weights, size_t index, bool allow_factored) {
    LoadTensorOptions options;
    options.allow_factored = allow_factored;
    return load_tensor(weights, index, options);
}

Result<LoadedTensor> load_tensor(const Weights& weights, size_t index, const LoadTensorOptions& options) {
    const bool allow_factored = options.allow_factored;
    if (index >= weights.n_tensors())
        return error(StatusCode::InvalidArgument, weights.label() + ": no tensor " + std::to_string(index));
    const TensorInfo& info = weights.tensor_info(index);
    const std::string label = weight_label(info.role, info.layer);
    const bool matrix = info.shape.size() == 2;
    const int64_t rows = matrix ? info.shape[0] : info.n_elements();
    const int64_t cols = matrix ? info.shape[1] : 0;
    LoadedTensor out;
    auto factors = weights.read_factors(index);
    if (!factors) return factors.status();
    if (!factors->has_value()) {
        // matrices stay in their stored type; norms (and types without a row conversion) become float32
        if (options.stored && matrix && stored_type_runs(info.dtype) && rows > 0 &&
            cols % dtype_block_elements(info.dtype) == 0)
            return load_stored(weights, index, info, options);
        auto values = weights.read_f32(index);
        if (!values) return values.status();
        const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(info.n_elements(), 0));
        if (values->size() != n)
            return error(StatusCode::Corrupt,
                         "transformer: " + label + " has " + std::to_string(values->size()) + " values, expected " +
                             (matrix ? shape_to_string(info.shape) + " = " : std::string()) + std::to_string(n));
        out.dense = std::move(*values);
        return out;
    }
    StoredFactors& w = **factors;
    const uint64_t k = static_cast<uint64_t>(w.rank);
    if (!matrix || w.rank <= 0 || k > static_cast<uint64_t>(std::min(rows, cols)) || w.u.size() != k * rows ||
        w.s.size() != k || w.v.size() != k * cols)
        return error(StatusCode::Corrupt, "transformer: " + label + " factors of rank " + std::to_string(w.rank) +
                                              " have sizes U " + std::to_string(w.u.size()) + ", S " +
                                              std::to_string(w.s.size()) + ", V " + std::to_string(w.v.size()) +
                                              " that do not fit " + shape_to_string(info.shape));
    if (w.has_residual()) {
        // R x + U (S V^T x): the residual's blocks as stored; multiplied out only when asked (the codec's decode)
        if (!allow_factored || !options.stored) {
            auto values = weights.read_f32(index);
            if (!values) return values.status();
            if (values->size() != static_cast<uint64_t>(rows * cols))
                return error(StatusCode::Corrupt, "transformer: " + label + " has " + std::to_string(values->size()) +
                                                      " values, expected " + shape_to_string(info.shape));
            out.dense = std::move(*values);
            return out;
        }
        if (!stored_type_runs(w.residual_type) || cols % dtype_block_elements(w.residual_type) != 0 ||
            w.residual.size() != static_cast<uint64_t>(rows) * stored_row_bytes(w.residual_type, cols))
            return error(StatusCode::Corrupt, "transformer: " + label + " residual is " +
                                                  std::to_string(w.residual.size()) + " bytes of " +
                                                  std::string(dtype_name(w.residual_type)) + ", which do not fit " +
                                                  shape_to_string(info.shape));
        out.stored_type = w.residual_type;
        out.stored = w.residual;
        out.keep = std::move(w.keep);
        regroup(out, rows, cols);
    } else {
        const bool cheaper = static_cast<int64_t>(k) * (rows + cols) < rows * cols;
        if (!allow_factored || !cheaper) {
            out.dense = expand_factors(w, rows, cols);
            return out;
        }
    }
    out.rank = w.rank;
    out.u = std::move(w.u);
    out.svt.resize(k * static_cast<uint64_t>(cols));
    for (uint64_t i = 0; i < k; ++i)
        for (int64_t c = 0; c < cols; ++c)
            out.svt[i * static_cast<uint64_t>(cols) + static_cast<uint64_t>(c)] =
                w.s[i] * w.v[static_cast<uint64_t>(c) * k + i];
    return out;
}

namespace {

// Weights loaded by the transformer itself: a lender that lends each tensor once, to be kept.
class LoadOnce final : public WeightLender {
public:
    LoadOnce(const Weights& w, const TransformerOptions& o, std::shared_ptr<const Weights> owner = nullptr)
        : m_weights(w) {
        m_options.allow_factored = o.allow_factored;
        m_options.stored = o.stored;
        m_options.owner = std::move(owner);
    }
    const Weights& weights() const override { return m_weights; }
    Result<std::shared_ptr<const LoadedTensor>> lend(size_t index) override {
        auto t = load_tensor(m_weights, index, m_options);
        if (!t) return t.status();
        return std::shared_ptr<const LoadedTensor>(std::make_shared<LoadedTensor>(std::move(*t)));
    }

private:
    const Weights& m_weights;
    LoadTensorOptions m_options;
};

}  // namespace

// ----------------------------------------------------------------------------

Status Transformer::init_state(const TransformerOptions& options) {
    const ModelConfig& c = m_config;
    m_q8_activations = options.q8_activations;
    m_release_mapped = options.release_mapped;
    int64_t ctx = std::min(c.context_length, kDefaultMaxContext);
    if (options.max_context > 0) ctx = std::min(c.context_length, options.max_context);
    const int64_t batch = std::clamp<int64_t>(options.max_batch, 1, 1024);
    int64_t max_rank = 0;
    int64_t max_residual_rows = 0;
    auto note = [&](const Matrix& m) {
        max_rank = std::max(max_rank, m.rank);
        if (m.with_residual) max_residual_rows = std::max(max_residual_rows, m.rows);
    };
    for (const LayerWeights& w : m_weights.layers)
        for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w1, &w.w2, &w.w3}) note(*m);
    note(m_weights.classifier);
    note(m_weights.token_embedding);  // the classifier when it is shared

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
    s.xb.assign(sz(batch, std::max(c.dim, c.q_dim())), 0.0f);
    s.xb2.assign(sz(batch, c.dim), 0.0f);
    s.q.assign(sz(batch, c.q_dim()), 0.0f);
    s.hb.assign(sz(batch, c.hidden_dim), 0.0f);
    s.hb2.assign(sz(batch, c.hidden_dim), 0.0f);
    s.att.assign(att, 0.0f);
    s.factor_tmp.assign(sz(batch, std::max<int64_t>(max_rank, 1)), 0.0f);
    s.factor_out.assign(sz(batch, max_residual_rows), 0.0f);
    s.logits.assign(sz(batch, c.vocab_size), 0.0f);
    s.key_cache.assign(cache);  // zero pages, resident only as positions are written
    s.value_cache.assign(cache);

    // Pair i turns by pos * theta^(-2i/head_size), divided by the linear factor or by its Llama 3 divisor (as
    // llama.cpp's rope: theta / freq_factor[i] * freq_scale).
    const int64_t half = c.head_size() / 2;
    const float theta = static_cast<float>(c.rope_theta);
    const float scale = c.rope_scaling == RopeScaling::Linear ? 1.0f / static_cast<float>(c.rope_factor) : 1.0f;
    if (m_rope_divisors.empty()) m_rope_divisors = llama3_rope_divisors(c);
    if (!m_rope_divisors.empty() && static_cast<int64_t>(m_rope_divisors.size()) != half)
        return error(StatusCode::Corrupt, "transformer: " + std::to_string(m_rope_divisors.size()) +
                                              " rope frequency divisors for " + std::to_string(half) + " pairs");
    auto frequencies = [&](float base, bool scaled) {
        std::vector<float> inv(static_cast<size_t>(half));
        for (int64_t i = 0; i < half; ++i) {  // run.c: 1.0f / powf(10000.0f, head_dim / (float)head_size)
            float f = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(c.head_size()));
            if (scaled && !m_rope_divisors.empty()) f /= m_rope_divisors[static_cast<size_t>(i)];
            inv[static_cast<size_t>(i)] = scaled ? f * scale : f;
        }
        return inv;
    };
    m_inv_freq = frequencies(theta, true);
    // Windowed blocks with a theta of their own (llama.cpp's freq_base_swa), unscaled where the row says (Gemma 3)
    const ArchSpec& arch = arch_or_default(c.architecture);
    m_inv_freq_local.clear();
    if (c.sliding_window > 0 && (c.rope_local_theta > 0.0 || arch.block.local_rope_unscaled))
        m_inv_freq_local = frequencies(static_cast<float>(c.rope_local_theta > 0.0 ? c.rope_local_theta : c.rope_theta),
                                       !arch.block.local_rope_unscaled);

    // The rest of the row's block features
    m_gelu = arch.block.activation == Activation::GeluTanh;
    m_norm_one_plus = c.norm_storage == NormStorage::OffsetByOne;
    m_embd_scale = arch.block.embd_scale == EmbdScale::SqrtDim ? std::sqrt(static_cast<float>(c.dim)) : 0.0f;
    m_query_scale = c.query_pre_attn_scalar > 0 ? 1.0f / std::sqrt(static_cast<float>(c.query_pre_attn_scalar)) : 0.0f;

    int threads = options.n_threads;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    m_pool = std::make_unique<ThreadPool>(threads);
    return Status::ok();
}

Matrix& Transformer::slot_matrix(const Slot& slot) {
    TransformerWeights& tw = m_weights;
    if (slot.layer < 0) {
        switch (slot.role) {
            case TensorRole::TokenEmbd: return tw.token_embedding;
            case TensorRole::OutputNorm: return tw.rms_final;
            default: return tw.classifier;
        }
    }
    LayerWeights& l = tw.layers[static_cast<size_t>(slot.layer)];
    switch (slot.role) {
        case TensorRole::AttnNorm: return l.rms_att;
        case TensorRole::AttnQ: return l.wq;
        case TensorRole::AttnK: return l.wk;
        case TensorRole::AttnV: return l.wv;
        case TensorRole::AttnQBias: return l.bq;
        case TensorRole::AttnKBias: return l.bk;
        case TensorRole::AttnVBias: return l.bv;
        case TensorRole::AttnQNorm: return l.q_norm;
        case TensorRole::AttnKNorm: return l.k_norm;
        case TensorRole::AttnO: return l.wo;
        case TensorRole::FfnNorm: return l.rms_ffn;
        case TensorRole::FfnGate: return l.w1;
        case TensorRole::FfnDown: return l.w2;
        case TensorRole::AttnPostNorm: return l.post_att;
        case TensorRole::FfnPostNorm: return l.post_ffn;
        default: return l.w3;
    }
}

Status Transformer::take(const Slot& slot, std::shared_ptr<const LoadedTensor> values) {
    const LoadedTensor& v = *values;
    const uint64_t n = static_cast<uint64_t>(slot.rows * slot.cols);
    const uint64_t k = static_cast<uint64_t>(v.rank);
    // rows: stored in a type the products run, or dense; none at all only under factors
    const bool rows_fit = v.is_stored() ? v.dense.empty() && stored_type_runs(v.stored_type) &&
                                              slot.cols % dtype_block_elements(v.stored_type) == 0 &&
                                              v.stored.size() == static_cast<uint64_t>(slot.rows) *
                                                                     stored_row_bytes(v.stored_type, slot.cols)
                                        : v.dense.size() == n || (v.rank > 0 && v.dense.empty());
    const bool factors_fit = v.rank <= 0 || (v.u.size() == k * static_cast<uint64_t>(slot.rows) &&
                                             v.svt.size() == k * static_cast<uint64_t>(slot.cols));
    const bool fits = rows_fit && factors_fit;
    if (!fits)
        return error(StatusCode::Corrupt, "transformer: " + weight_label(slot.role, slot.layer) +
                                              " was lent with sizes that do not fit " + std::to_string(slot.rows) +
                                              " x " + std::to_string(slot.cols));
    Matrix& m = slot_matrix(slot);
    m.rows = slot.rows;
    m.cols = slot.cols;
    m.rank = v.rank;
    m.with_residual = v.has_residual();
    m.values = std::move(values);
    return Status::ok();
}

namespace {

// The step of a forward pass that reads `role` of `layer`: -1 the embedding rows, a block, n_layers the final norm
// and the classifier (the token embedding again when it is shared).
bool in_step(TensorRole role, int32_t layer, int64_t step, int64_t n_layers, bool shared_classifier) {
    if (step < 0) return role == TensorRole::TokenEmbd;
    if (step < n_layers) return layer == step;
    return role == TensorRole::OutputNorm || role == TensorRole::Output ||
           (shared_classifier && role == TensorRole::TokenEmbd);
}

}  // namespace

Status Transformer::lend_step(int64_t step) {
    if (m_lender == nullptr || m_held) return Status::ok();
    for (const Slot& slot : m_slots) {
        if (!in_step(slot.role, slot.layer, step, m_config.n_layers, m_weights.shared_classifier)) continue;
        auto got = m_lender->lend(slot.index);
        if (!got) return got.status();
        if (Status s = take(slot, std::move(*got)); !s) return s;
    }
    return Status::ok();
}

void Transformer::release_step(int64_t step) {
    const bool lent = m_lender != nullptr && !m_held;
    if (!lent && !m_release_mapped) return;
    for (const Slot& slot : m_slots) {
        if (!in_step(slot.role, slot.layer, step, m_config.n_layers, m_weights.shared_classifier)) continue;
        std::shared_ptr<const LoadedTensor>& v = slot_matrix(slot).values;
        if (m_release_mapped && v && v->mapped != nullptr) v->mapped->drop_resident(slot.index);
        if (lent) v.reset();
    }
}

Status Transformer::hold_weights() {
    if (m_lender == nullptr || m_held) return Status::ok();
    for (const Slot& slot : m_slots) {
        auto got = m_lender->lend(slot.index);
        Status s = got ? take(slot, std::move(*got)) : got.status();
        if (!s) {
            release_weights();
            return s;
        }
    }
    m_held = true;
    return Status::ok();
}

void Transformer::release_weights() {
    if (m_lender == nullptr) return;
    m_held = false;
    for (const Slot& slot : m_slots) slot_matrix(slot).values.reset();
}

Result<Transformer> Transformer::load_from(const ModelConfig& config, WeightLender& lender, bool lent,
                                           const TransformerOptions& options) {
    const Weights& weights = lender.weights();
    if (Status s = weights.whole(); !s) return s;
    try {
        Transformer t;
        t.m_config = config;
        TransformerWeights& tw = t.m_weights;
        tw.layers.resize(static_cast<size_t>(config.n_layers));
        tw.shared_classifier = config.shared_classifier;
        for (const Required& req : required_weights(config)) {
            const int64_t i = weights.index_of(req.role, req.layer);
            if (i < 0 && req.optional) continue;
            if (i < 0)
                return error(StatusCode::NotFound, weights.label() + ": no tensor " +
                                                       weight_label(req.role, req.layer) + " (role " +
                                                       std::string(role_name(req.role)) + ")");
            const TensorInfo& info = weights.tensor_info(static_cast<size_t>(i));
            if (info.shape != shape_of(req))
                return error(StatusCode::Corrupt, weights.label() + ": tensor " + info.name + " has shape " +
                                                      shape_to_string(info.shape) + ", the config needs " +
                                                      shape_to_string(shape_of(req)));
            t.m_slots.push_back(
                {static_cast<size_t>(i), req.role, req.layer, req.rows, std::max<int64_t>(req.cols, 1)});
        }
        // Every weight lent once: checked here, not on the first token. A lent transformer gives each back at once.
        std::vector<uint64_t> step_bytes(static_cast<size_t>(config.n_layers) + 2, 0);
        for (const Slot& slot : t.m_slots) {
            auto got = lender.lend(slot.index);
            if (!got) return got.status();
            const uint64_t bytes = (*got)->bytes();
            t.m_loaded_bytes += bytes;
            for (int64_t step = -1; step <= config.n_layers; ++step)
                if (in_step(slot.role, slot.layer, step, config.n_layers, config.shared_classifier))
                    step_bytes[static_cast<size_t>(step + 1)] += bytes;
            if (Status s = t.take(slot, std::move(*got)); !s) return s;
            if (lent) t.slot_matrix(slot).values.reset();
        }
        for (uint64_t b : step_bytes) t.m_largest_step_bytes = std::max(t.m_largest_step_bytes, b);
        // Llama 3 rope scaling stored as a tensor (GGUF's rope_freqs): read once, used by every block.
        if (const int64_t i = weights.index_of(TensorRole::RopeFreqs, -1); i >= 0) {
            const TensorInfo& info = weights.tensor_info(static_cast<size_t>(i));
            const std::vector<int64_t> want{config.head_size() / 2};
            if (info.shape != want)
                return error(StatusCode::Corrupt, weights.label() + ": tensor " + info.name + " has shape " +
                                                      shape_to_string(info.shape) + ", the config needs " +
                                                      shape_to_string(want));
            auto got = lender.lend(static_cast<size_t>(i));
            if (!got) return got.status();
            t.m_rope_divisors = (*got)->dense;
            if (t.m_rope_divisors.size() != static_cast<size_t>(want[0]))
                return error(StatusCode::Corrupt, weights.label() + ": tensor " + info.name + " is not dense");
        }
        if (lent) t.m_lender = &lender;
        if (Status s = t.init_state(options); !s) return s;
        return t;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "transformer: out of memory loading a model of dim " +
                                                  std::to_string(config.dim) + ", " + std::to_string(config.n_layers) +
                                                  " layers");
    }
}

namespace {

// The config a model runs with: a model with its own classifier uses it whatever its config says.
ModelConfig runnable_config(const Weights& weights) {
    ModelConfig config = weights.config();
    config.shared_classifier = weights.index_of(TensorRole::Output, -1) < 0;
    return config;
}

// The architecture, then the one model-consistency check (gkq/model_check.h) over the config and every tensor.
Status check_weights(const ModelConfig& config, const Weights& weights) {
    if (Status s = check_architecture(config); !s) return s.with_context(weights.label());
    std::vector<TensorInfo> tensors;
    tensors.reserve(weights.n_tensors());
    for (size_t i = 0; i < weights.n_tensors(); ++i) tensors.push_back(weights.tensor_info(i));
    return check_model(weights.label(), config, tensors);
}

}  // namespace

Result<Transformer> Transformer::load(const Weights& weights, const TransformerOptions& options) {
    const ModelConfig config = runnable_config(weights);
    if (Status s = check_weights(config, weights); !s) return s;
    if (Status s = check_config(config); !s) return s.with_context(weights.label());
    LoadOnce once(weights, options);
    return load_from(config, once, false, options);
}

Result<Transformer> Transformer::load(std::shared_ptr<const Weights> weights, const TransformerOptions& options) {
    if (!weights) return error(StatusCode::InvalidArgument, "transformer: no weights to load");
    const ModelConfig config = runnable_config(*weights);
    if (Status s = check_weights(config, *weights); !s) return s;
    if (Status s = check_config(config); !s) return s.with_context(weights->label());
    LoadOnce once(*weights, options, weights);
    return load_from(config, once, false, options);
}

Result<Transformer> Transformer::load(const ModelConfig& config, const Weights& weights,
                                      const TransformerOptions& options) {
    if (Status s = check_config(config); !s) return s;
    LoadOnce once(weights, options);
    return load_from(config, once, false, options);
}

Result<Transformer> Transformer::load(WeightLender& lender, const TransformerOptions& options) {
    const ModelConfig config = runnable_config(lender.weights());
    if (Status s = check_weights(config, lender.weights()); !s) return s;
    if (Status s = check_config(config); !s) return s.with_context(lender.weights().label());
    return load_from(config, lender, true, options);
}

Result<Transformer> Transformer::share(const TransformerOptions& options, WeightLender* lender) const {
    Transformer t;
    t.m_config = m_config;
    t.m_weights = m_weights;
    t.m_slots = m_slots;
    t.m_lender = m_lender != nullptr && lender != nullptr ? lender : m_lender;
    t.m_loaded_bytes = m_loaded_bytes;
    t.m_largest_step_bytes = m_largest_step_bytes;
    t.m_routed = m_routed;
    t.m_rope_divisors = m_rope_divisors;
    if (m_lender != nullptr)
        for (const Slot& slot : t.m_slots) t.slot_matrix(slot).values.reset();
    if (Status s = t.init_state(options); !s) return s;
    return t;
}

Transformer::Transformer(Transformer&&) noexcept = default;
Transformer& Transformer::operator=(Transformer&&) noexcept = default;
Transformer::~Transformer() = default;

}  // namespace gkq
