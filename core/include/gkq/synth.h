// Synthetic checkpoints: random weights with the exact tensor shapes and parameter counts of published models
// (`gkq synth`), for trying the pipeline and for scale tests and benchmarks on model-shaped files.
//
// Matrices have trained-like spectra, built without any SVD: W = U S V^T with S the prescribed singular values
// s_i = c * i^(-beta), i = 1..min(rows, cols), beta = 1 / (2 (alpha - 1)), so the eigenvalues s_i^2 of W^T W
// follow a power law of density exponent alpha (WeightWatcher's alpha; trained LLM layers measure about 2..6),
// and c makes ||W||_F = element_std * sqrt(rows * cols). U and V are exactly orthogonal: products of
// `kSynthRounds` rounds, each a random permutation followed by a block-diagonal matrix of random orthogonal
// kSynthTile x kSynthTile blocks (Gram-Schmidt of Gaussian blocks). Applying them to S costs
// 2 * kSynthRounds * kSynthTile * (min(rows, cols) + rows) * cols flops and one matrix of memory; the singular
// values of the result are the prescribed ones up to float32 rounding (then the storage type's rounding).
// Norm weights are 1; biases are Gaussian with element_std. Deterministic: same row, options and seed, same bytes.
#pragma once

#include "gkq/dtype.h"
#include "gkq/progress.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

constexpr int kSynthRounds = 3;
constexpr int64_t kSynthTile = 32;

// A published model's hyperparameters (its config.json values) and its parameter count.
struct SynthModel {
    std::string_view name;          // --like NAME
    std::string_view hf_id;         // where the config.json values come from
    std::string_view hf_class;      // config.json "architectures"
    std::string_view model_type;    // config.json "model_type"
    std::string_view architecture;  // the ArchSpec row gkq runs it with; empty: none (written, listed, not run)
    int64_t dim = 0;                // hidden_size
    int64_t hidden_dim = 0;         // intermediate_size
    int64_t n_layers = 0;           // num_hidden_layers
    int64_t n_heads = 0;            // num_attention_heads
    int64_t n_kv_heads = 0;         // num_key_value_heads
    int64_t vocab_size = 0;
    int64_t context_length = 0;  // max_position_embeddings
    double rope_theta = 10000.0;
    double norm_eps = 1e-5;  // rms_norm_eps
    bool tied = false;       // tie_word_embeddings
    bool qkv_bias = false;   // q/k/v projections carry biases (qwen2)
    int64_t params = 0;      // the published count, all layers (checked against the shapes by the tests)
};

// The rows, in listing order.
const std::vector<SynthModel>& synth_models();
// The row named `name`, or null.
const SynthModel* find_synth_model(std::string_view name);
// "tinyllama-1.1b, llama-3.2-1b, ..."
std::string synth_model_names();

// One tensor a synthetic checkpoint holds, in HF naming.
struct SynthTensor {
    std::string name;
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;
    std::vector<int64_t> shape;  // row-major: (rows, cols) or (n)
};

// The tensors of `m` cut to its first n_layers layers (<= 0: all), in HF's order.
std::vector<SynthTensor> synth_tensors(const SynthModel& m, int64_t n_layers);
// Their element count.
int64_t synth_param_count(const SynthModel& m, int64_t n_layers);

struct SynthMatrixOptions {
    double alpha = 3.5;         // power-law exponent of the eigenvalue density (> 1)
    double element_std = 0.02;  // RMS of the entries: ||W||_F = element_std * sqrt(rows * cols)
    uint64_t seed = 0x5eedULL;  // the permutations and blocks
};

// The prescribed singular values (descending, min(rows, cols) of them) of synth_matrix.
std::vector<double> synth_singular_values(int64_t rows, int64_t cols, const SynthMatrixOptions& options);

// Writes the row-major (rows, cols) matrix W = U S V^T described above into `out` (rows * cols floats).
// Working memory besides `out`: two (max(rows, cols), kSynthTile) blocks.
Status synth_matrix(float* out, int64_t rows, int64_t cols, const SynthMatrixOptions& options);

enum class SynthFormat : uint8_t { Hf, Gguf };

struct SynthOptions {
    int64_t n_layers = 0;  // <= 0: all of the model's layers
    DType dtype = DType::BF16;
    SynthFormat format = SynthFormat::Hf;
    uint64_t seed = 0;
    double alpha = 3.5;
    double element_std = 0.02;
    uint64_t max_shard_bytes = 5000000000ULL;  // HF's save_pretrained default, max_shard_size="5GB"
};

struct SynthReport {
    std::vector<std::string> files;  // written, config.json and the index included
    int64_t n_tensors = 0;
    int64_t n_params = 0;
    int64_t n_layers = 0;
    uint64_t bytes = 0;  // of the tensor files
};

// Writes the checkpoint into the folder `dir` (created if missing): HF layout (config.json, model.safetensors or
// model-0000i-of-0000N.safetensors + model.safetensors.index.json above max_shard_bytes) or model.gguf
// (only for rows with an architecture). Tensor by tensor: memory holds one tensor in float32 plus the writer's
// chunk buffer. Every file is written under a temporary name and renamed into place when all are complete.
Result<SynthReport> synth_model(const SynthModel& m, const std::string& dir, const SynthOptions& options,
                                const ProgressFn& progress = {});

}  // namespace gkq
