// TensorInfo: one tensor's description (name, role in a LLaMA-family transformer, block, shape, stored type), shared
// by every struct that describes a tensor; Tensor: a non-owning view of one stored tensor inside an open ModelFile
// (valid while the file is open).
// Shapes are row-major, outermost dimension first, as PyTorch writes them: a linear layer's weight is
// (out_features, in_features) in every format; GGUF's reversed `ne` order is turned around on reading.
#pragma once

#include "gkq/dtype.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

enum class TensorRole : uint8_t {
    TokenEmbd,   // (vocab, dim)
    AttnQ,       // (n_heads * head_size, dim)
    AttnK,       // (n_kv_heads * head_size, dim)
    AttnV,       // (n_kv_heads * head_size, dim)
    AttnO,       // (dim, n_heads * head_size)
    FfnGate,     // (hidden_dim, dim)     llama2.c w1
    FfnUp,       // (hidden_dim, dim)     llama2.c w3
    FfnDown,     // (dim, hidden_dim)     llama2.c w2
    AttnNorm,    // (dim)
    FfnNorm,     // (dim)
    OutputNorm,  // (dim)
    Output,      // (vocab, dim)          absent when the classifier shares token_embd
    Other,       // anything else (listed, never computed with)
    // Roles added after Other keep the numbers knot files store for the ones above.
    AttnQBias,     // (n_heads * head_size)
    AttnKBias,     // (n_kv_heads * head_size)
    AttnVBias,     // (n_kv_heads * head_size)
    AttnQNorm,     // (head_size)            per-head RMSNorm of q (Qwen3)
    AttnKNorm,     // (head_size)            per-head RMSNorm of k
    RopeFreqs,     // (head_size / 2)        rotary frequency divisors (GGUF's Llama 3 rope scaling)
    AttnPostNorm,  // (dim)                  RMSNorm of the attention output before the residual add (Gemma)
    FfnPostNorm,   // (dim)                  RMSNorm of the FFN output before the residual add
};
constexpr size_t kTensorRoleCount = static_cast<size_t>(TensorRole::FfnPostNorm) + 1;
// True for the RMSNorm weight vectors (attn/ffn/output norms, q/k norms, post norms).
bool role_is_norm(TensorRole r);

// "token_embd", "attn_q", ... , "output", "other", "attn_q_bias", ... , "rope_freqs", "attn_post_norm", ...
std::string_view role_name(TensorRole r);
// Inverse of role_name; Other for unknown names.
TensorRole role_from_name(std::string_view name);
// True for roles of 2-D matrices that a transformer multiplies with (embeddings and projections).
bool role_is_matrix(TensorRole r);

// TensorInfo: what every part of gkq says about one tensor, wherever it lives (a model file, a knot record, the
// codec's input and output, a weight cache entry): its name, the role it plays, its block, its shape and how its
// data is stored. The structs that carry a tensor's data or encoding add their own fields on top of this one.
struct TensorInfo {
    std::string name;  // as stored (llama2.c tensors get GGUF-style names)
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;          // transformer block index; -1 for non-block tensors
    std::vector<int64_t> shape;  // row-major, outermost first
    // How the data is stored: the file's type for a model tensor; for a knot record the layout of its payload
    // (F32, F16, Q8_0, Q4_0), or Other for a low-rank record (its Method says more).
    DType dtype = DType::F32;

    int64_t n_elements() const;  // -1 when a dimension is negative or the product overflows
    int64_t rows() const;        // product of all but the last dimension; 1 for 1-D
    int64_t cols() const;        // last dimension
    int n_dims() const { return static_cast<int>(shape.size()); }
};

// A tensor inside an open ModelFile: its description and where its bytes are mapped.
struct Tensor : TensorInfo {
    std::string type_name;     // the type as the file names it ("F32", "BF16", "Q4_K", "q8_g64")
    uint64_t file_offset = 0;  // of the first data byte in its file
    uint64_t n_bytes = 0;      // of the data (codes only for Q8_G)
    const uint8_t* data = nullptr;

    // Q8_G only (llama2.c v2): one f32 scale per group of `group_size` consecutive elements.
    const uint8_t* scales = nullptr;
    uint64_t n_scale_bytes = 0;
    int32_t group_size = 0;
};

// "64 x 512" style.
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace gkq
