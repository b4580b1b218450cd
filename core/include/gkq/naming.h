// Tensor naming conventions: HF Llama-family safetensors ("model.layers.3.self_attn.q_proj.weight") and GGUF
// llama ("blk.3.attn_q.weight"), to and from (role, layer). llama2.c files carry no names; their tensors are
// given the GGUF names.
#pragma once

#include "gkq/tensor.h"

#include <string>
#include <string_view>

namespace gkq {

struct RoleAndLayer {
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;
};

RoleAndLayer parse_hf_name(std::string_view name);
RoleAndLayer parse_gguf_name(std::string_view name);

// Empty string for Other.
std::string hf_name(TensorRole role, int32_t layer);
std::string gguf_name(TensorRole role, int32_t layer);

}  // namespace gkq
