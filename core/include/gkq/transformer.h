// Transformer: the forward pass of a LLaMA-family model on float32 weights, laid out as llama2.c's run.c
// (Config, TransformerWeights, RunState): RMSNorm, rotary embeddings (interleaved or half-split pairs, theta
// from the config), grouped-query attention over a KV cache, SwiGLU feed-forward, tied or separate classifier.
//
// Contract: logits depend only on the weights and the tokens with their positions — not on the thread count,
// on whether tokens are run one by one or as a batch, nor on the CPU's vector width. Every output element is
// computed by exactly one thread in a fixed summation order (core/src/infer/kernels.h).
// Weights come from an open ModelFile or from any WeightSource (the seam a knot reader plugs into); a source
// may hand a matrix over as low-rank factors, which then run factored where that costs fewer multiply-adds.
#pragma once

#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace gkq {

class ModelFile;

// One weight as a source hands it over: dense values, or the factors of W = U diag(S) V^T.
struct WeightData {
    std::vector<float> dense;  // (rows, cols) row-major, or (n) for a norm; empty when factored
    int64_t rank = 0;          // k > 0 when factored
    std::vector<float> u;      // (rows, k)
    std::vector<float> s;      // (k)
    std::vector<float> v;      // (cols, k)
};

// Returns the tensor of `role` in block `layer` (-1 for token_embd, output_norm, output). Asked for every
// role of every block, token_embd, output_norm, and output when the config's classifier is not shared.
using WeightSource = std::function<Result<WeightData>(TensorRole role, int32_t layer)>;

// A weight matrix applied as y = W x, W (rows, cols).
struct Matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<float> dense;  // (rows, cols); empty when factored
    int64_t rank = 0;          // > 0: run as y = U (S V^T x)
    std::vector<float> u;      // (rows, rank)
    std::vector<float> svt;    // (rank, cols): diag(S) V^T, folded once at load

    bool factored() const { return rank > 0; }
    int64_t n_weights() const { return factored() ? rank * (rows + cols) : rows * cols; }  // floats read per x
};

struct LayerWeights {
    std::vector<float> rms_att;  // (dim)
    Matrix wq;                   // (n_heads * head_size, dim)
    Matrix wk;                   // (n_kv_heads * head_size, dim)
    Matrix wv;                   // (n_kv_heads * head_size, dim)
    Matrix wo;                   // (dim, n_heads * head_size)
    std::vector<float> rms_ffn;  // (dim)
    Matrix w1;                   // (hidden_dim, dim)  gate
    Matrix w2;                   // (dim, hidden_dim)  down
    Matrix w3;                   // (hidden_dim, dim)  up
};

struct TransformerWeights {
    std::vector<float> token_embedding;  // (vocab_size, dim), always dense (rows are looked up)
    std::vector<LayerWeights> layers;    // (n_layers)
    std::vector<float> rms_final;        // (dim)
    Matrix classifier;                   // (vocab_size, dim); empty (rows 0) when shared with token_embedding
    bool shared_classifier = true;
};

// Activations and the KV cache. Buffers hold up to n_batch tokens at once (the prompt block).
struct RunState {
    int64_t n_batch = 0;
    int64_t n_context = 0;           // positions the cache holds
    std::vector<float> x;            // (n_batch, dim) residual stream
    std::vector<float> xb;           // (n_batch, dim) normed input of a block; attention output
    std::vector<float> xb2;          // (n_batch, dim) a block's output before the residual add
    std::vector<float> q;            // (n_batch, dim) queries
    std::vector<float> hb;           // (n_batch, hidden_dim) gate activations
    std::vector<float> hb2;          // (n_batch, hidden_dim) up activations
    std::vector<float> att;          // (n_batch, n_heads, n_context) attention weights
    std::vector<float> factor_tmp;   // (n_batch, largest rank) S V^T x of a factored matrix
    std::vector<float> logits;       // (n_batch, vocab_size)
    std::vector<float> key_cache;    // (n_layers, n_context, kv_dim)
    std::vector<float> value_cache;  // (n_layers, n_context, kv_dim)
};

struct TransformerOptions {
    int n_threads = 0;           // participants in each product, the caller included; 0: all hardware threads
    int64_t max_context = 0;     // positions the KV cache holds, at most the model's context_length; 0: that,
                                 // capped at 4096 (a 128k-position model would ask for gigabytes of cache)
    int64_t max_batch = 32;      // tokens per block in forward_batch
    bool allow_factored = true;  // false: multiply low-rank factors out into dense matrices at load
};

class ThreadPool;

// Called after the SwiGLU of every block with that block's FFN hidden activations silu(w1 x) * w3 x,
// act (n_tokens, hidden_dim) row-major, valid during the call only. Only while no FFN routing is set.
using FfnObserver = std::function<void(int64_t layer, const float* act, int64_t n_tokens)>;

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
    static Result<Transformer> load(const ModelFile& file, const TransformerOptions& options = {});
    static Result<Transformer> load(const ModelConfig& config, const WeightSource& source,
                                    const TransformerOptions& options = {});

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

    // Float32 bytes of weights one forward() reads: every block, the final norm, the classifier and one
    // embedding row.
    uint64_t weight_bytes_per_token() const;
    // Multiply-adds of the matrix products of one forward() (attention over the cache not included).
    uint64_t matrix_macs_per_token() const;
    int n_factored_matrices() const;

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

private:
    Transformer() = default;
    Status init_state(const TransformerOptions& options);
    void run_block(const int32_t* tokens, int64_t n, int64_t pos, bool want_all_logits);
    void apply(const Matrix& m, const float* x, float* out, int64_t n);
    void rope(float* vec, int64_t n_heads_here, int64_t pos);
    void attention(int64_t layer, int64_t n, int64_t pos);

    ModelConfig m_config;
    TransformerWeights m_weights;
    RunState m_state;
    std::vector<float> m_inv_freq;  // (head_size / 2) rotary frequency of each pair
    std::unique_ptr<ThreadPool> m_pool;
    std::vector<RoutedFfn> m_routed;  // (n_layers) when routing is set, else empty
    FfnObserver m_ffn_observer;
};

}  // namespace gkq
