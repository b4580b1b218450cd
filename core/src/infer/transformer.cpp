// The forward pass, block by block as in llama2.c's run.c forward(), generalised to a block of n tokens at
// consecutive positions. Elementwise steps repeat run.c's float expressions; the matrix products and the
// attention use the fixed-order kernels of kernels.h (attention sums in run.c's order, one (token, head) pair
// per thread), so a block gives the same bits as its tokens run one at a time.
#include "gkq/transformer.h"

#include "gkq/convert.h"

#include "infer/kernels.h"
#include "infer/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

// Every float expression rounds as written (run.c's), whatever -march allows: no contraction into fused
// multiply-adds, so logits do not change between builds for different CPUs.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace gkq {

// ----------------------------------------------------------------------------
// small math helpers (run.c's rmsnorm and SwiGLU; the attention's softmax is the sampler's)

namespace {

// one_plus: the weight is w of (1 + w) (Gemma's HF norms), 1 + w formed in float32 as llama.cpp's converter does.
void rmsnorm(float* o, const float* x, const float* weight, int64_t size, float eps, bool one_plus = false) {
    float ss = 0.0f;
    for (int64_t j = 0; j < size; j++) ss += x[j] * x[j];
    ss /= static_cast<float>(size);
    ss += eps;
    ss = 1.0f / std::sqrt(ss);
    if (one_plus)
        for (int64_t j = 0; j < size; j++) o[j] = (1.0f + weight[j]) * (ss * x[j]);
    else
        for (int64_t j = 0; j < size; j++) o[j] = weight[j] * (ss * x[j]);
}

// Adds `bias` (width) to each of n rows of x, `stride` floats apart.
void add_bias(float* x, const float* bias, int64_t n, int64_t width, int64_t stride) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < width; i++) x[t * stride + i] += bias[i];
}

// GELU with the tanh approximation (HF's gelu_pytorch_tanh) gating the up projection, hb = gelu(hb) * hb2, as
// llama.cpp's CPU backend computes it (ggml's geglu with GGML_GELU_FP16): the input rounded to half precision, the
// tanh expression of ggml_gelu_f32 on that, the result rounded to half precision; 0 at or below -10, the input
// itself at or above 10. The roundings move a tiny Gemma's logits by about 5e-4 relative from the unrounded
// function's, five times the tolerance of the llama.cpp fixtures; llama.cpp is the reference.
float gelu_tanh(float x) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    const float coef_a = 0.044715f;
    return 0.5f * x * (1.0f + std::tanh(sqrt_2_over_pi * x * (1.0f + coef_a * x * x)));
}

void geglu(float* hb, const float* hb2, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = hb[i];
        float gelu = x;
        if (x <= -10.0f)
            gelu = 0.0f;
        else if (x < 10.0f)
            gelu = f16_to_f32(f32_to_f16(gelu_tanh(f16_to_f32(f32_to_f16(x)))));
        hb[i] = gelu * hb2[i];
    }
}

// cap * tanh(v / cap) of each of n values, as llama.cpp scales, tanh's and scales back.
void softcap(float* v, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) v[i] = std::tanh(v[i] * inv) * cap;
}

void swiglu(float* hb, const float* hb2, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float val = hb[i];
        val *= (1.0f / (1.0f + std::exp(-val)));  // silu(x) = x * sigmoid(x)
        val *= hb2[i];
        hb[i] = val;
    }
}

}  // namespace

// ----------------------------------------------------------------------------
// the pieces of a block

int Transformer::n_threads() const {
    return m_pool ? m_pool->n_threads() : 1;
}

// y = W x for the rows of m (stored or dense), y = U (S V^T x) for its factors, and y = R x + U (S V^T x) for factors
// with a residual R: each product in matmul's fixed order, the two added element by element.
void Transformer::apply(const Matrix& m, const float* x, float* out, int64_t n) {
    if (m.factored()) {
        float* tmp = m_state.factor_tmp.data();
        float* low = m.with_residual ? m_state.factor_out.data() : out;
        matmul(tmp, x, m.svt(), n, m.rank, m.cols, m_pool.get());
        matmul(low, tmp, m.u(), n, m.rows, m.rank, m_pool.get());
        if (!m.with_residual) return;
    }
    if (m.stored()) {
        const LoadedTensor& v = *m.values;
        // float32 rows on a float boundary run as they lie; every other stored row is converted tile by tile
        if (v.stored_type == DType::F32 && reinterpret_cast<uintptr_t>(v.stored.data()) % alignof(float) == 0)
            matmul(out, x, reinterpret_cast<const float*>(v.stored.data()), n, m.rows, m.cols, m_pool.get());
        else if (m_q8_activations && stored_type_has_q8_dot(v.stored_type))
            matmul_stored_q8(out, x, stored_rows_of(v), n, m.rows, m.cols, m_pool.get());
        else
            matmul_stored(out, x, stored_rows_of(v), n, m.rows, m.cols, m_pool.get());
    } else {
        matmul(out, x, m.dense(), n, m.rows, m.cols, m_pool.get());
    }
    if (m.with_residual) {
        const float* low = m_state.factor_out.data();
        for (int64_t i = 0; i < n * m.rows; i++) out[i] += low[i];
    }
}

// Row `token` of the token embedding into out (dim): a stored row converted on its own; factors give the row
// sum over i ascending of U[token][i] * (S V^T)[i], added to the residual's row when there is one.
void Transformer::embedding_row(int32_t token, float* out) const {
    const Matrix& e = m_weights.token_embedding;
    const auto n = static_cast<size_t>(e.cols);
    if (e.factored()) {
        const float* u = e.u() + static_cast<int64_t>(token) * e.rank;
        const float* svt = e.svt();
        std::vector<float> low(n, 0.0f);
        for (int64_t i = 0; i < e.rank; i++)
            for (int64_t c = 0; c < e.cols; c++) low[static_cast<size_t>(c)] += u[i] * svt[i * e.cols + c];
        if (!e.with_residual) {
            std::memcpy(out, low.data(), n * sizeof(float));
            return;
        }
        if (e.stored())
            stored_row_to_f32(stored_rows_of(*e.values), e.rows, e.cols, token, out);
        else
            std::memcpy(out, e.dense() + static_cast<int64_t>(token) * e.cols, n * sizeof(float));
        for (size_t c = 0; c < n; c++) out[c] += low[c];
        return;
    }
    if (e.stored())
        stored_row_to_f32(stored_rows_of(*e.values), e.rows, e.cols, token, out);
    else
        std::memcpy(out, e.dense() + static_cast<int64_t>(token) * e.cols, n * sizeof(float));
}

// Rotates the pairs of every head of `vec` (n_heads_here heads of head_size) by the angles of `pos`.
// Interleaved pairs are (2i, 2i+1) as run.c rotates them; half-split pairs are (i, i + head_size/2) as HF
// transformers' rotate_half does. Pair i turns by pos * theta^(-2i/head_size) in both.
void Transformer::rope(float* vec, int64_t n_heads_here, int64_t pos, const std::vector<float>& inv_freq) {
    const int64_t hs = m_config.head_size();
    const int64_t half = hs / 2;
    const bool interleaved = m_config.rope_style == RopeStyle::Interleaved;
    for (int64_t i = 0; i < half; i++) {
        const float val = static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)];
        const float fcr = std::cos(val);
        const float fci = std::sin(val);
        for (int64_t h = 0; h < n_heads_here; h++) {
            float* head = vec + h * hs;
            float* a = interleaved ? head + 2 * i : head + i;
            float* b = interleaved ? head + 2 * i + 1 : head + i + half;
            const float v0 = *a;
            const float v1 = *b;
            *a = v0 * fcr - v1 * fci;
            *b = v0 * fci + v1 * fcr;
        }
    }
}

// Multi-head attention of tokens pos..pos+n-1 in `layer` over the cache (their own keys and values already
// written); writes the concatenated head outputs to xb.
void Transformer::attention(int64_t layer, int64_t n, int64_t pos) {
    const int64_t q_dim = m_config.q_dim();
    const int64_t kv_dim = m_config.kv_dim();
    const int64_t hs = m_config.head_size();
    const int64_t n_heads = m_config.n_heads;
    const int64_t window = m_config.layer_windowed(layer) ? m_config.sliding_window : 0;
    // the scores: q.k / sqrt(head_size), or (q * scale).k with q scaled in run_block (query_pre_attn_scalar)
    const float divisor = m_query_scale > 0.0f ? 1.0f : std::sqrt(static_cast<float>(hs));
    const float cap = static_cast<float>(m_config.attn_softcap);
    const int64_t kv_mul = n_heads / m_config.n_kv_heads;  // query heads sharing one key/value head
    const int64_t ctx = m_state.n_context;
    const float* key_layer = m_state.key_cache.data() + layer * ctx * kv_dim;
    const float* value_layer = m_state.value_cache.data() + layer * ctx * kv_dim;
    const bool interleaved = m_config.rope_style == RopeStyle::Interleaved;

    // Position pos + t attends to positions first..pos + t: all before it, or the window - 1 before it.
    auto one_head = [&](int64_t t, int64_t h) {
        const int64_t kv_offset = (h / kv_mul) * hs;
        const int64_t first = window > 0 ? std::max<int64_t>(0, pos + t + 1 - window) : 0;
        attend_head(m_state.q.data() + t * q_dim + h * hs, key_layer + first * kv_dim + kv_offset,
                    value_layer + first * kv_dim + kv_offset, kv_dim, pos + t + 1 - first, hs, interleaved, divisor,
                    cap, m_state.att.data() + (t * n_heads + h) * ctx, m_state.xb.data() + t * q_dim + h * hs);
    };

    const int64_t n_pairs = n * n_heads;
    const int64_t work = n_pairs * (pos + n) * hs * 2;
    m_pool->parallel_for(n_pairs, m_pool->chunk_for(n_pairs, 1), work >= min_parallel_macs(),
                         [&](int64_t begin, int64_t end) {
                             for (int64_t i = begin; i < end; i++) one_head(i / n_heads, i % n_heads);
                         });
}

// ----------------------------------------------------------------------------
// forward

// Lent weights are borrowed step by step (embedding, each block, final norm and classifier) and given back after
// each: the values are the same, so the logits are too.
Status Transformer::run_block(const int32_t* tokens, int64_t n, int64_t pos, bool want_all_logits) {
    const ModelConfig& c = m_config;
    RunState& s = m_state;
    const int64_t dim = c.dim;
    const int64_t q_dim = c.q_dim();
    const int64_t kv_dim = c.kv_dim();
    const int64_t hs = c.head_size();
    const int64_t hidden = c.hidden_dim;
    const float eps = static_cast<float>(c.norm_eps);
    float* x = s.x.data();

    const bool one_plus = m_norm_one_plus;

    if (Status st = lend_step(-1); !st) return st;
    for (int64_t t = 0; t < n; t++) embedding_row(tokens[t], x + t * dim);
    release_step(-1);
    if (m_embd_scale > 0.0f)
        for (int64_t i = 0; i < n * dim; i++) x[i] *= m_embd_scale;

    for (int64_t l = 0; l < c.n_layers; l++) {
        if (Status st = lend_step(l); !st) return st;
        const LayerWeights& w = m_weights.layers[static_cast<size_t>(l)];

        // attention rmsnorm, then q, k, v (plus their biases); k and v go straight into the cache rows pos..pos+n-1
        for (int64_t t = 0; t < n; t++)
            rmsnorm(s.xb.data() + t * dim, x + t * dim, w.rms_att.dense(), dim, eps, one_plus);
        float* k = s.key_cache.data() + (l * s.n_context + pos) * kv_dim;
        float* v = s.value_cache.data() + (l * s.n_context + pos) * kv_dim;
        if (m_input_observer) {
            for (TensorRole role : {TensorRole::AttnQ, TensorRole::AttnK, TensorRole::AttnV})
                m_input_observer(role, static_cast<int32_t>(l), s.xb.data(), n, dim);
        }
        apply(w.wq, s.xb.data(), s.q.data(), n);
        apply(w.wk, s.xb.data(), k, n);
        apply(w.wv, s.xb.data(), v, n);
        if (w.bq.rows > 0) add_bias(s.q.data(), w.bq.dense(), n, q_dim, q_dim);
        if (w.bk.rows > 0) add_bias(k, w.bk.dense(), n, kv_dim, kv_dim);
        if (w.bv.rows > 0) add_bias(v, w.bv.dense(), n, kv_dim, kv_dim);

        // per-head RMSNorm of q and k (Qwen3, Gemma 3), in place
        if (w.q_norm.rows > 0)
            for (int64_t h = 0; h < n * c.n_heads; h++)
                rmsnorm(s.q.data() + h * hs, s.q.data() + h * hs, w.q_norm.dense(), hs, eps, one_plus);
        if (w.k_norm.rows > 0)
            for (int64_t h = 0; h < n * c.n_kv_heads; h++)
                rmsnorm(k + h * hs, k + h * hs, w.k_norm.dense(), hs, eps, one_plus);

        // rotary position embedding of q and k (a windowed block's own frequencies where it has them)
        const std::vector<float>& inv_freq =
            !m_inv_freq_local.empty() && c.layer_windowed(l) ? m_inv_freq_local : m_inv_freq;
        for (int64_t t = 0; t < n; t++) {
            rope(s.q.data() + t * q_dim, c.n_heads, pos + t, inv_freq);
            rope(k + t * kv_dim, c.n_kv_heads, pos + t, inv_freq);
        }
        // Gemma: q scaled by 1/sqrt(query_pre_attn_scalar) before the scores, as llama.cpp scales Qcur
        if (m_query_scale > 0.0f)
            for (int64_t i = 0; i < n * q_dim; i++) s.q[static_cast<size_t>(i)] *= m_query_scale;

        attention(l, n, pos);

        // output projection and residual
        if (m_input_observer) m_input_observer(TensorRole::AttnO, static_cast<int32_t>(l), s.xb.data(), n, w.wo.cols);
        apply(w.wo, s.xb.data(), s.xb2.data(), n);
        if (w.post_att.rows > 0)
            for (int64_t t = 0; t < n; t++)
                rmsnorm(s.xb2.data() + t * dim, s.xb2.data() + t * dim, w.post_att.dense(), dim, eps, one_plus);
        for (int64_t i = 0; i < n * dim; i++) x[i] += s.xb2[static_cast<size_t>(i)];

        // ffn rmsnorm, then w2(act(w1(x)) * w3(x)) (act SiLU, or GELU-tanh), its post-norm, and residual
        for (int64_t t = 0; t < n; t++)
            rmsnorm(s.xb.data() + t * dim, x + t * dim, w.rms_ffn.dense(), dim, eps, one_plus);
        auto gate = [&](float* hb, const float* hb2, int64_t count) {
            if (m_gelu)
                geglu(hb, hb2, count);
            else
                swiglu(hb, hb2, count);
        };
        if (!m_routed.empty()) {
            // routed: only the hot neurons' rows of w1, w3 and columns of w2 (no hot neuron: no FFN output)
            const RoutedFfn& r = m_routed[static_cast<size_t>(l)];
            if (r.n_hot == 0) {
                release_step(l);
                continue;
            }
            apply(r.w1, s.xb.data(), s.hb.data(), n);
            apply(r.w3, s.xb.data(), s.hb2.data(), n);
            gate(s.hb.data(), s.hb2.data(), n * r.n_hot);
            apply(r.w2, s.hb.data(), s.xb2.data(), n);
        } else {
            if (m_input_observer) {
                for (TensorRole role : {TensorRole::FfnGate, TensorRole::FfnUp})
                    m_input_observer(role, static_cast<int32_t>(l), s.xb.data(), n, dim);
            }
            apply(w.w1, s.xb.data(), s.hb.data(), n);
            apply(w.w3, s.xb.data(), s.hb2.data(), n);
            gate(s.hb.data(), s.hb2.data(), n * hidden);
            if (m_ffn_observer) m_ffn_observer(l, s.hb.data(), n);
            if (m_input_observer)
                m_input_observer(TensorRole::FfnDown, static_cast<int32_t>(l), s.hb.data(), n, hidden);
            apply(w.w2, s.hb.data(), s.xb2.data(), n);
        }
        if (w.post_ffn.rows > 0)
            for (int64_t t = 0; t < n; t++)
                rmsnorm(s.xb2.data() + t * dim, s.xb2.data() + t * dim, w.post_ffn.dense(), dim, eps, one_plus);
        for (int64_t i = 0; i < n * dim; i++) x[i] += s.xb2[static_cast<size_t>(i)];
        release_step(l);
    }

    // final rmsnorm and classifier, for every position or only the last
    const int64_t first = want_all_logits ? 0 : n - 1;
    if (Status st = lend_step(c.n_layers); !st) return st;
    for (int64_t t = first; t < n; t++)
        rmsnorm(x + t * dim, x + t * dim, m_weights.rms_final.dense(), dim, eps, one_plus);
    const float* xs = x + first * dim;
    if (m_input_observer)
        m_input_observer(m_weights.shared_classifier ? TensorRole::TokenEmbd : TensorRole::Output, -1, xs, n - first,
                         dim);
    if (m_weights.shared_classifier)
        apply(m_weights.token_embedding, xs, s.logits.data(), n - first);
    else
        apply(m_weights.classifier, xs, s.logits.data(), n - first);
    release_step(c.n_layers);
    if (c.final_softcap > 0.0)
        softcap(s.logits.data(), (n - first) * c.vocab_size, static_cast<float>(c.final_softcap));
    return Status::ok();
}

Result<const float*> Transformer::forward(int32_t token, int64_t pos) {
    return forward_batch(&token, 1, pos);
}

Result<const float*> Transformer::forward_batch(const int32_t* tokens, int64_t n, int64_t pos, float* all_logits) {
    if (n <= 0) return error(StatusCode::InvalidArgument, "forward: no tokens to run");
    if (pos < 0 || pos > m_state.n_context || n > m_state.n_context - pos)
        return error(StatusCode::InvalidArgument, "forward: positions " + std::to_string(pos) + ".." +
                                                      std::to_string(pos + n - 1) + " are outside the context of " +
                                                      std::to_string(m_state.n_context) + " positions");
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m_config.vocab_size)
            return error(StatusCode::InvalidArgument, "forward: token " + std::to_string(tokens[i]) + " at position " +
                                                          std::to_string(pos + i) + " is outside the vocabulary of " +
                                                          std::to_string(m_config.vocab_size));
    const int64_t vocab = m_config.vocab_size;
    const float* last = nullptr;
    for (int64_t done = 0; done < n;) {
        const int64_t block = std::min(m_state.n_batch, n - done);
        const bool want_all = all_logits != nullptr;
        if (Status st = run_block(tokens + done, block, pos + done, want_all); !st) return st;
        if (want_all) {
            std::memcpy(all_logits + done * vocab, m_state.logits.data(),
                        static_cast<size_t>(block * vocab) * sizeof(float));
            last = m_state.logits.data() + (block - 1) * vocab;
        } else {
            last = m_state.logits.data();
        }
        done += block;
    }
    return last;
}

// ----------------------------------------------------------------------------
// FFN routing

namespace {

// The rows `keep` of a row-major float matrix of `width` columns.
std::vector<float> float_rows(const std::vector<float>& src, int64_t width, const std::vector<int64_t>& keep) {
    std::vector<float> dst(keep.size() * static_cast<size_t>(width));
    for (size_t i = 0; i < keep.size(); ++i)
        std::memcpy(dst.data() + i * static_cast<size_t>(width), src.data() + keep[i] * width,
                    static_cast<size_t>(width) * sizeof(float));
    return dst;
}

// The columns `keep` of a row-major float matrix (height, width).
std::vector<float> float_cols(const std::vector<float>& src, int64_t height, int64_t width,
                              const std::vector<int64_t>& keep) {
    std::vector<float> dst(static_cast<size_t>(height) * keep.size());
    for (int64_t r = 0; r < height; ++r)
        for (size_t i = 0; i < keep.size(); ++i)
            dst[static_cast<size_t>(r) * keep.size() + i] = src[static_cast<size_t>(r * width + keep[i])];
    return dst;
}

// The rows `keep` of m (rows, cols): of its stored rows (staying in their type) or dense rows, and of U when
// factored, S V^T copied.
Matrix select_rows(const Matrix& m, const std::vector<int64_t>& keep) {
    Matrix o;
    o.rows = static_cast<int64_t>(keep.size());
    o.cols = m.cols;
    o.rank = m.rank;
    o.with_residual = m.with_residual;
    auto values = std::make_shared<LoadedTensor>();
    if (m.stored()) {
        const uint64_t row_bytes = stored_row_bytes(m.values->stored_type, m.cols);
        auto bytes = std::make_shared<std::vector<uint8_t>>(keep.size() * row_bytes);
        for (size_t i = 0; i < keep.size(); ++i)
            stored_row_blocks(stored_rows_of(*m.values), m.rows, m.cols, keep[i], bytes->data() + i * row_bytes);
        values->stored_type = m.values->stored_type;
        values->stored = *bytes;
        values->keep = std::move(bytes);
    } else if (!m.values->dense.empty()) {
        values->dense = float_rows(m.values->dense, m.cols, keep);
    }
    if (m.factored()) {
        values->rank = m.rank;
        values->u = float_rows(m.values->u, m.rank, keep);
        values->svt = m.values->svt;
    }
    o.values = std::move(values);
    return o;
}

// The columns `keep` of m (rows, cols): of its rows, and of S V^T when factored, U copied. Stored rows are
// converted to float32 (a block holds columns together), each row on its own; the values, and so the sums, are the
// same.
Matrix select_cols(const Matrix& m, const std::vector<int64_t>& keep) {
    Matrix o;
    o.rows = m.rows;
    o.cols = static_cast<int64_t>(keep.size());
    o.rank = m.rank;
    o.with_residual = m.with_residual;
    auto values = std::make_shared<LoadedTensor>();
    if (m.stored()) {
        std::vector<float> row(static_cast<size_t>(m.cols));
        values->dense.resize(static_cast<size_t>(m.rows) * keep.size());
        for (int64_t r = 0; r < m.rows; ++r) {
            stored_row_to_f32(stored_rows_of(*m.values), m.rows, m.cols, r, row.data());
            for (size_t i = 0; i < keep.size(); ++i)
                values->dense[static_cast<size_t>(r) * keep.size() + i] = row[static_cast<size_t>(keep[i])];
        }
    } else if (!m.values->dense.empty()) {
        values->dense = float_cols(m.values->dense, m.rows, m.cols, keep);
    }
    if (m.factored()) {
        values->rank = m.rank;
        values->svt = float_cols(m.values->svt, m.rank, m.cols, keep);
        values->u = m.values->u;
    }
    o.values = std::move(values);
    return o;
}

}  // namespace

Status Transformer::set_ffn_routing(const std::vector<std::vector<uint8_t>>& hot) {
    if (hot.empty()) {
        m_routed.clear();
        return Status::ok();
    }
    if (m_lender != nullptr)
        return error(StatusCode::Unsupported, "ffn routing: the weights are lent block by block; load them instead");
    const int64_t hidden = m_config.hidden_dim;
    if (static_cast<int64_t>(hot.size()) != m_config.n_layers)
        return error(StatusCode::InvalidArgument, "ffn routing: the mask has " + std::to_string(hot.size()) +
                                                      " blocks, the model " + std::to_string(m_config.n_layers));
    for (size_t l = 0; l < hot.size(); ++l)
        if (static_cast<int64_t>(hot[l].size()) != hidden)
            return error(StatusCode::InvalidArgument, "ffn routing: block " + std::to_string(l) + " of the mask has " +
                                                          std::to_string(hot[l].size()) + " neurons, the model " +
                                                          std::to_string(hidden));
    std::vector<RoutedFfn> routed(hot.size());
    for (size_t l = 0; l < hot.size(); ++l) {
        std::vector<int64_t> keep;
        for (int64_t j = 0; j < hidden; ++j)
            if (hot[l][static_cast<size_t>(j)]) keep.push_back(j);
        const LayerWeights& w = m_weights.layers[l];
        routed[l].n_hot = static_cast<int64_t>(keep.size());
        routed[l].w1 = select_rows(w.w1, keep);
        routed[l].w3 = select_rows(w.w3, keep);
        routed[l].w2 = select_cols(w.w2, keep);
    }
    m_routed = std::move(routed);
    return Status::ok();
}

int64_t Transformer::n_active_ffn_neurons() const {
    if (m_routed.empty()) return m_config.n_layers * m_config.hidden_dim;
    int64_t n = 0;
    for (const RoutedFfn& r : m_routed) n += r.n_hot;
    return n;
}

// ----------------------------------------------------------------------------
// accounting

namespace {

// Bytes of m one product reads: its stored rows and factors as held, else its floats.
uint64_t read_bytes(const Matrix& m) {
    if (m.values) return m.values->bytes();
    return static_cast<uint64_t>(m.n_weights()) * sizeof(float);
}

// Bytes one embedding row reads: a row of what m holds, and S V^T whole when factored.
uint64_t row_bytes(const Matrix& m) {
    if (m.rows <= 0) return 0;
    const auto rows = static_cast<uint64_t>(m.rows);
    if (!m.values) return read_bytes(m) / rows;
    const LoadedTensor& v = *m.values;
    return (v.stored.size() + (v.dense.size() + v.u.size()) * sizeof(float)) / rows + v.svt.size() * sizeof(float);
}

}  // namespace

uint64_t Transformer::weight_bytes_per_token() const {
    const Matrix& e = m_weights.token_embedding;
    uint64_t bytes = row_bytes(e);  // one embedding row
    for (const LayerWeights& w : m_weights.layers) {
        bytes += read_bytes(w.rms_att) + read_bytes(w.rms_ffn);
        for (const Matrix* m : {&w.bq, &w.bk, &w.bv, &w.q_norm, &w.k_norm, &w.post_att, &w.post_ffn})
            bytes += read_bytes(*m);
        for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w1, &w.w2, &w.w3}) bytes += read_bytes(*m);
    }
    bytes += read_bytes(m_weights.rms_final);
    bytes += read_bytes(m_weights.shared_classifier ? e : m_weights.classifier);
    return bytes;
}

uint64_t Transformer::matrix_macs_per_token() const {
    uint64_t macs = 0;
    for (const LayerWeights& w : m_weights.layers)
        for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w1, &w.w2, &w.w3})
            macs += static_cast<uint64_t>(m->n_weights());
    macs += static_cast<uint64_t>(
        (m_weights.shared_classifier ? m_weights.token_embedding : m_weights.classifier).n_weights());
    return macs;
}

int Transformer::n_factored_matrices() const {
    int n = m_weights.classifier.factored() ? 1 : 0;
    for (const LayerWeights& w : m_weights.layers)
        for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w1, &w.w2, &w.w3}) n += m->factored() ? 1 : 0;
    return n;
}

}  // namespace gkq
