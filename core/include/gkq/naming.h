// Tensor names to and from (role, layer), in the HF safetensors and GGUF conventions of an architecture's row
// (gkq/arch.h). The one-argument forms use default_arch() (llama), whose names every llama-family file has.
// llama2.c files carry no names; their tensors are given the GGUF names.
#pragma once

#include "gkq/arch.h"
#include "gkq/tensor.h"

#include <string>
#include <string_view>

namespace gkq {

struct RoleAndLayer {
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;  // also set for an unknown tensor inside a block
};

RoleAndLayer parse_tensor_name(const ArchSpec& arch, NameFormat format, std::string_view name);
RoleAndLayer parse_hf_name(std::string_view name);
RoleAndLayer parse_gguf_name(std::string_view name);

// Empty string for Other.
std::string hf_name(TensorRole role, int32_t layer);
std::string gguf_name(TensorRole role, int32_t layer);

}  // namespace gkq
