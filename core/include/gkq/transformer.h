// Transformer: the forward pass of a LLaMA-family model on float32 weights, laid out as llama2.c's run.c
// (Config, TransformerWeights, RunState): RMSNorm, rotary embeddings (interleaved or half-split pairs, theta
// from the config, linear or Llama 3 scaling), grouped-query attention over a KV cache (optionally within a sliding
// window), SwiGLU feed-forward, tied or separate classifier; q/k/v biases (Qwen2) and per-head q/k RMSNorm (Qwen3)
// where the architecture's row has them; Gemma 2/3's blocks: (1 + w) norms, embeddings times sqrt(dim), norms after
// the attention and the FFN, a GELU-tanh gated FFN, query_pre_attn_scalar, soft-capped attention scores and logits,
// windowed and global blocks with their own rope theta.
//
// Contract: logits depend only on the weights and the tokens with their positions — not on the thread count,
// on whether tokens are run one by one or as a batch, nor on the CPU's vector width. Every output element is
// computed by exactly one thread in a fixed summation order (core/src/infer/kernels.h). A weight held in its stored
// type (F16, BF16, Q8_0, Q4_0, the k-quants, ...) is converted a few blocks at a time to exactly the float32 values
// its type's to_f32 gives and summed in the same order as a dense matrix, so its logits equal, bit for bit, those
// of the same weights converted to float32 at load (TransformerOptions::stored = false).
// Weights come from any Weights (weights.h: a model file, a knot): either loaded once and owned by the transformer,
// or lent per block by a WeightLender (the server's weight cache, which then owns them). A knot's low-rank record
// runs factored where that costs fewer multiply-adds, a low-rank + residual record as R x + U (S V^T x) with R in
// its blocks (each product in the fixed order, the two added per element): never densified, so its logits differ
// from the decoded matrix's by float rounding only (tests/core/test_transformer_lowrank.cpp measures how much).
#pragma once

#include "gkq/dtype.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <vector>

namespace gkq {

class Weights;

// One weight in the form the forward pass computes with: rows in their stored type (a model file's mapped tensor, a
// knot record's blocks), dense float32, the factors of W = U (S V^T), or factors plus a residual held in either
// row form, W = R + U (S V^T) (a knot's low-rank + residual record, R its blocks as stored).
struct LoadedTensor {
    std::vector<float> dense;  // (rows, cols) row-major, or (n) for a norm; empty when stored, or factored alone
    int64_t rank = 0;          // > 0: W = U (diag(S) V^T), plus the stored or dense rows when there are any
    std::vector<float> u;      // (rows, rank)
    std::vector<float> svt;    // (rank, cols): diag(S) V^T, folded once at load
    // Stored rows: (rows, cols) in stored_type (type_traits.h: F32, F16, BF16, Q8_0, Q4_0, the k-quants, ...), each
    // row whole blocks, row-major, never converted as a whole. `keep` owns the bytes: the Weights whose mapping they
    // lie in, the knot record they were inflated into, or a copy.
    DType stored_type = DType::Other;  // Other: not stored (dense or factored)
    std::span<const uint8_t> stored;   // (rows * row bytes)
    std::shared_ptr<const void> keep;
    const Weights* mapped = nullptr;  // the Weights whose file mapping `stored` lies in (owned by keep); else null
    // The rows regrouped eight at a time (core/src/infer/kernels.h: group_rows; the same bytes, another order) so
    // that the products read eight rows per load: rows that are the transformer's own copy (a knot record inflated)
    // in a type that regroups (Q4_0). Never a mapped file's rows.
    bool grouped = false;

    bool is_stored() const { return stored_type != DType::Other; }
    // Factors plus rows (stored or dense) that are added to them.
    bool has_residual() const { return rank > 0 && (is_stored() || !dense.empty()); }
    uint64_t bytes() const { return (dense.size() + u.size() + svt.size()) * sizeof(float) + stored.size(); }
};

// How load_tensor keeps a tensor.
struct LoadTensorOptions {
    // A pure low-rank record stays factored where that is cheaper; a low-rank + residual record always does (its
    // residual in its blocks). False: both multiplied out into dense float32.
    bool allow_factored = true;
    bool stored = true;  // false: every tensor converted to dense float32 (Weights::read_f32)
    // The owner of the Weights: stored rows of a model file then point into its mapping and hold it; null: they are
    // copied (in their stored type), so the Weights may close after the load.
    std::shared_ptr<const Weights> owner;
};

// Tensor `index` of `weights` as the transformer runs it: a pure low-rank record (Weights::read_factors) stays
// factored when `allow_factored` and the factors cost fewer multiply-adds than the dense matrix (the token
// embedding's rows are then rebuilt one at a time from them); otherwise the factors are multiplied out, each element
// summed over k in ascending order. A low-rank + residual record stays factored with its residual's blocks as
// stored (rows = R + U (S V^T)) when `allow_factored` and `stored`, else it is Weights::read_f32 (decoded as the
// codec decodes it). A tensor stored in a type with a row conversion (a model's F32 / F16 / BF16 / quantized
// tensor, a knot's F32 / F16 / Q8_0 / Q4_0 record: Weights::read_stored) keeps its stored rows; every other tensor
// (Q8_G) is Weights::read_f32. Sizes are checked against the tensor's shape.
Result<LoadedTensor> load_tensor(const Weights& weights, size_t index, const LoadTensorOptions& options);
Result<LoadedTensor> load_tensor(const Weights& weights, size_t index, bool allow_factored);

// Lends a running transformer its weights: whoever implements it owns them (a weight cache), and the transformer
// holds each only while it computes with it. Thread-safe.
class WeightLender {
public:
    virtual ~WeightLender() = default;
    virtual const Weights& weights() const = 0;
    // Tensor `index` of weights(), as load_tensor makes it.
    virtual Result<std::shared_ptr<const LoadedTensor>> lend(size_t index) = 0;
};

// A weight applied as y = W x, W (rows, cols); a norm's weight vector is held as (n, 1). Refers to values it shares
// with their owner; `values` is null while a lent weight is not held.
struct Matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t rank = 0;            // > 0: run as y = U (S V^T x), plus R x when with_residual
    bool with_residual = false;  // factored plus rows R (stored or dense): y = R x + U (S V^T x)
    std::shared_ptr<const LoadedTensor> values;

    bool factored() const { return rank > 0; }
    bool stored() const { return values->is_stored(); }
    // weights read per x
    int64_t n_weights() const {
        return factored() ? rank * (rows + cols) + (with_residual ? rows * cols : 0) : rows * cols;
    }
    const float* dense() const { return values->dense.data(); }  // (rows, cols)
    const float* u() const { return values->u.data(); }          // (rows, rank)
    const float* svt() const { return values->svt.data(); }      // (rank, cols)
};

struct LayerWeights {
    Matrix rms_att;   // (dim)
    Matrix wq;        // (n_heads * head_size, dim)
    Matrix wk;        // (n_kv_heads * head_size, dim)
    Matrix wv;        // (n_kv_heads * head_size, dim)
    Matrix bq;        // (n_heads * head_size) q bias; empty (rows 0) when the architecture has none
    Matrix bk;        // (n_kv_heads * head_size) k bias; empty when none
    Matrix bv;        // (n_kv_heads * head_size) v bias; empty when none
    Matrix q_norm;    // (head_size) per-head RMSNorm weight of q before rope; empty when none
    Matrix k_norm;    // (head_size) per-head RMSNorm weight of k; empty when none
    Matrix wo;        // (dim, n_heads * head_size)
    Matrix post_att;  // (dim) RMSNorm of the attention output before the residual add; empty when none
    Matrix rms_ffn;   // (dim)
    Matrix w1;        // (hidden_dim, dim)  gate
    Matrix w2;        // (dim, hidden_dim)  down
    Matrix w3;        // (hidden_dim, dim)  up
    Matrix post_ffn;  // (dim) RMSNorm of the FFN output before the residual add; empty when none
};

struct TransformerWeights {
    Matrix token_embedding;  // (vocab_size, dim), dense, stored or factored (rows are looked up, one built at a time)
    std::vector<LayerWeights> layers;  // (n_layers)
    Matrix rms_final;                  // (dim)
    Matrix classifier;                 // (vocab_size, dim); empty (rows 0) when shared with token_embedding
    bool shared_classifier = true;
};

// Floats that start as zero pages the process has not touched (calloc of a large block maps fresh zero pages): they
// become resident as they are written. The KV cache is one, so its memory is that of the positions used, not of the
// whole context (4096 positions of an 8 B model's cache are 1 GiB in float32).
class LazyZeroFloats {
public:
    // n zeros, replacing what was held; throws std::bad_alloc as std::vector would.
    void assign(size_t n) {
        m_data.reset(static_cast<float*>(std::calloc(n > 0 ? n : 1, sizeof(float))));
        if (!m_data) throw std::bad_alloc();
        m_size = n;
    }
    float* data() { return m_data.get(); }
    const float* data() const { return m_data.get(); }
    size_t size() const { return m_size; }

private:
    struct Free {
        void operator()(float* p) const { std::free(p); }
    };
    std::unique_ptr<float[], Free> m_data;
    size_t m_size = 0;
};

// Activations and the KV cache. Buffers hold up to n_batch tokens at once (the prompt block).
struct RunState {
    int64_t n_batch = 0;
    int64_t n_context = 0;          // positions the cache holds
    std::vector<float> x;           // (n_batch, dim) residual stream
    std::vector<float> xb;          // (n_batch, max(dim, q_dim)) normed input of a block; attention output
    std::vector<float> xb2;         // (n_batch, dim) a block's output before the residual add
    std::vector<float> q;           // (n_batch, q_dim) queries
    std::vector<float> hb;          // (n_batch, hidden_dim) gate activations
    std::vector<float> hb2;         // (n_batch, hidden_dim) up activations
    std::vector<float> att;         // (n_batch, n_heads, n_context) attention weights
    std::vector<float> factor_tmp;  // (n_batch, largest rank) S V^T x of a factored matrix
    std::vector<float> factor_out;  // (n_batch, most rows of a factored matrix with a residual) its U (S V^T x)
    std::vector<float> logits;      // (n_batch, vocab_size)
    LazyZeroFloats key_cache;       // (n_layers, n_context, kv_dim)
    LazyZeroFloats value_cache;     // (n_layers, n_context, kv_dim)
};

struct TransformerOptions {
    int n_threads = 0;           // participants in each product, the caller included; 0: all hardware threads
    int64_t max_context = 0;     // positions the KV cache holds, at most the model's context_length; 0: that,
                                 // capped at 4096 (a 128k-position model would ask for gigabytes of cache)
    int64_t max_batch = 32;      // tokens per block in forward_batch
    bool allow_factored = true;  // false: multiply low-rank factors (and residuals) out into dense matrices at load
    bool stored = true;          // false: convert every weight to dense float32 at load (for comparisons)
    // Q4_0 and Q8_0 rows multiply activations quantized to Q8_0 blocks, as llama.cpp runs them (its
    // vec_dot_type; integer block sums, several times faster); false: float32 activations, so stored logits equal
    // the dense float32 model's bit for bit (measurements: eval, logits). The fixed summation order holds either way.
    bool q8_activations = false;
    // After each step of a forward pass (the embedding, each block, the classifier) the mapped weights it read
    // leave the resident set (Weights::drop_resident): a model file larger than the memory budget runs in about one
    // block's pages, read again from the page cache on the next pass. For passes over many tokens at once (eval,
    // imatrix); token-by-token decoding would fault the whole file in again for every token.
    bool release_mapped = false;
};

class ThreadPool;

// Called after the SwiGLU of every block with that block's FFN hidden activations silu(w1 x) * w3 x,
// act (n_tokens, hidden_dim) row-major, valid during the call only. Only while no FFN routing is set.
using FfnObserver = std::function<void(int64_t layer, const float* act, int64_t n_tokens)>;

// Called before each matrix product of the forward pass with its input x (n_tokens, cols) row-major, valid during the
// call only: the block matrices (role AttnQ, AttnK, AttnV, AttnO, FfnGate, FfnUp, FfnDown; `layer` the block) and the
// classifier (role Output, or TokenEmbd when it is tied to the embedding; layer -1; the positions whose logits are
// computed). The FFN matrices only while no FFN routing is set. Observing changes no logit.
using MatrixInputObserver =
    std::function<void(TensorRole role, int32_t layer, const float* x, int64_t n_tokens, int64_t cols)>;

// One block's feed-forward restricted to its hot hidden neurons (routing by a saturation mask): the rows of
// w1 and w3 and the columns of w2 of the hot neurons, in ascending neuron order.
struct RoutedFfn {
    int64_t n_hot = 0;
    Matrix w1;  // (n_hot, dim)
    Matrix w3;  // (n_hot, dim)
    Matrix w2;  // (dim, n_hot)
};

class Transformer {
public:
    // Every weight loaded now (load_tensor) and owned by the transformer; `weights` may close afterwards (a model
    // file's stored rows are copied, in their stored type). The config is weights.config() with the classifier
    // shared exactly when there is no output tensor.
    static Result<Transformer> load(const Weights& weights, const TransformerOptions& options = {});
    // The same, a model file's weights left in its mapping: the transformer holds `weights` while it lives.
    static Result<Transformer> load(std::shared_ptr<const Weights> weights, const TransformerOptions& options = {});
    // The same with `config` instead of the weights' own.
    static Result<Transformer> load(const ModelConfig& config, const Weights& weights,
                                    const TransformerOptions& options = {});
    // Weights lent by `lender` (which must outlive the transformer): each is lent once now to check it, then per
    // step of a forward pass (the embedding rows, each block, the final norm with the classifier) and given back
    // after that step, unless hold_weights() holds them all. FFN routing needs loaded weights.
    static Result<Transformer> load(WeightLender& lender, const TransformerOptions& options = {});
    // Another transformer over the very same weights (shared, not copied) with its own run state and threads. Lent
    // weights are borrowed through `lender` (another lender of the same Weights) or, when null, the same lender.
    Result<Transformer> share(const TransformerOptions& options = {}, WeightLender* lender = nullptr) const;

    Transformer(Transformer&&) noexcept;
    Transformer& operator=(Transformer&&) noexcept;
    ~Transformer();

    const ModelConfig& config() const { return m_config; }
    const TransformerWeights& weights() const { return m_weights; }
    int64_t n_context() const { return m_state.n_context; }
    int n_threads() const;

    // Runs `token` at position `pos`; the cache must hold positions 0..pos-1 of the same sequence (or pos is 0).
    // Returns the vocab_size logits, valid until the next call.
    Result<const float*> forward(int32_t token, int64_t pos);

    // Runs tokens[0..n) at positions pos..pos+n-1, max_batch at a time; bit-identical to n forward() calls.
    // When `all_logits` is given it receives (n, vocab_size) logits; returns the last position's logits.
    Result<const float*> forward_batch(const int32_t* tokens, int64_t n, int64_t pos, float* all_logits = nullptr);

    // Bytes of weights one forward() reads, as they are held (stored rows in their type, float32 otherwise): every
    // block, the final norm, the classifier and one embedding row.
    uint64_t weight_bytes_per_token() const;
    // Multiply-adds of the matrix products of one forward() (attention over the cache not included).
    uint64_t matrix_macs_per_token() const;
    int n_factored_matrices() const;
    // Bytes of the loaded weights (LoadedTensor::bytes) of every tensor the transformer runs, and of the largest
    // step a lent transformer holds at once.
    uint64_t loaded_weight_bytes() const { return m_loaded_bytes; }
    uint64_t largest_step_bytes() const { return m_largest_step_bytes; }

    // Lent weights: borrows every weight until release_weights() (one lend each) instead of one step at a time.
    // No-ops for loaded weights.
    Status hold_weights();
    void release_weights();

    // FFN routing: hot[l][j] != 0 keeps hidden neuron j of block l; a cold neuron's rows of w1 and w3 and
    // column of w2 are skipped (its activation taken as 0). An all-hot mask gives bit-identical logits (the
    // kept rows are the same dot products in the same order). One entry per block, hidden_dim values each;
    // InvalidArgument naming the block otherwise. An empty vector turns routing off.
    Status set_ffn_routing(const std::vector<std::vector<uint8_t>>& hot);
    bool ffn_routing() const { return !m_routed.empty(); }
    // Hidden neurons that run per token over all blocks (n_layers * hidden_dim without routing).
    int64_t n_active_ffn_neurons() const;
    // Observes the FFN hidden activations (see FfnObserver); an empty function removes it.
    void set_ffn_observer(FfnObserver observer) { m_ffn_observer = std::move(observer); }
    // Observes the input of every matrix product (see MatrixInputObserver); an empty function removes it.
    void set_matrix_input_observer(MatrixInputObserver observer) { m_input_observer = std::move(observer); }

private:
    // One weight the forward pass reads: its tensor in the Weights and its place and size here.
    struct Slot {
        size_t index = 0;
        TensorRole role = TensorRole::Other;
        int32_t layer = -1;  // -1: token_embd, output_norm, output
        int64_t rows = 0;    // a norm: (n, 1)
        int64_t cols = 0;
    };

    Transformer() = default;
    static Result<Transformer> load_from(const ModelConfig& config, WeightLender& lender, bool lent,
                                         const TransformerOptions& options);
    Status init_state(const TransformerOptions& options);
    Status take(const Slot& slot, std::shared_ptr<const LoadedTensor> values);
    Matrix& slot_matrix(const Slot& slot);
    // Lent weights: borrows (or gives back) those of step `step`: -1 the embedding, 0..n_layers-1 a block, n_layers
    // the final norm and classifier. No-ops for loaded or held weights.
    Status lend_step(int64_t step);
    void release_step(int64_t step);
    Status run_block(const int32_t* tokens, int64_t n, int64_t pos, bool want_all_logits);
    void apply(const Matrix& m, const float* x, float* out, int64_t n);
    void embedding_row(int32_t token, float* out) const;
    void rope(float* vec, int64_t n_heads_here, int64_t pos, const std::vector<float>& inv_freq);
    void attention(int64_t layer, int64_t n, int64_t pos);

    ModelConfig m_config;
    TransformerWeights m_weights;
    std::vector<Slot> m_slots;         // every weight the forward pass reads, in load order
    WeightLender* m_lender = nullptr;  // lent weights; null when loaded
    bool m_held = false;
    uint64_t m_loaded_bytes = 0;
    uint64_t m_largest_step_bytes = 0;
    RunState m_state;
    std::vector<float> m_inv_freq;       // (head_size / 2) rotary frequency of each pair, scaled
    std::vector<float> m_rope_divisors;  // (head_size / 2) Llama 3 frequency divisors; empty: none
    std::vector<float>
        m_inv_freq_local;  // (head_size / 2) of the windowed blocks when they rotate otherwise; else empty
    // The block features of the architecture's row (gkq/arch.h BlockFlags), as the forward pass uses them.
    bool m_gelu = false;            // GELU-tanh gated FFN instead of SwiGLU
    bool m_norm_one_plus = false;   // norm weights are w of (1 + w) (config norm_storage)
    float m_embd_scale = 0.0f;      // > 0: token embeddings multiplied by it (sqrt(dim))
    float m_query_scale = 0.0f;     // > 0: q multiplied by it before the scores (which are then not divided)
    bool m_q8_activations = false;  // TransformerOptions::q8_activations
    bool m_release_mapped = false;  // TransformerOptions::release_mapped
    std::unique_ptr<ThreadPool> m_pool;
    std::vector<RoutedFfn> m_routed;  // (n_layers) when routing is set, else empty
    FfnObserver m_ffn_observer;
    MatrixInputObserver m_input_observer;
};

}  // namespace gkq
