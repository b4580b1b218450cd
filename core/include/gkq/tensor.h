// Tensor: a non-owning view of one stored tensor inside an open ModelFile (valid while the file is open),
// with the role it plays in a LLaMA-family transformer.
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
};

// "token_embd", "attn_q", ... , "output", "other".
std::string_view role_name(TensorRole r);
// Inverse of role_name; Other for unknown names.
TensorRole role_from_name(std::string_view name);
// True for roles of 2-D matrices that a transformer multiplies with (embeddings and projections).
bool role_is_matrix(TensorRole r);

struct Tensor {
    std::string name;  // as stored in the file (llama2.c tensors get GGUF-style names)
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;          // transformer block index; -1 for non-block tensors
    std::vector<int64_t> shape;  // row-major, outermost first
    DType dtype = DType::F32;
    std::string type_name;     // the type as the file names it ("F32", "BF16", "Q4_K", "q8_g64")
    uint64_t file_offset = 0;  // of the first data byte in its file
    uint64_t n_bytes = 0;      // of the data (codes only for Q8_G)
    const uint8_t* data = nullptr;

    // Q8_G only (llama2.c v2): one f32 scale per group of `group_size` consecutive elements.
    const uint8_t* scales = nullptr;
    uint64_t n_scale_bytes = 0;
    int32_t group_size = 0;

    int64_t n_elements() const;
    int64_t rows() const;  // shape[0] for 2-D, 1 for 1-D
    int64_t cols() const;  // last dimension
    int n_dims() const { return static_cast<int>(shape.size()); }
};

// "64 x 512" style.
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace gkq
