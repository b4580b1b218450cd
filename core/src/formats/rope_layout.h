// Reordering of q/k rows between the two rotary layouts (see RopeStyle in model_config.h).
// Within each head of `head_size` rows, interleaved row 2i + j is half-split row j * head_size/2 + i: the
// permutation HF's convert_llama_weights_to_hf and llama.cpp's converter apply (in opposite directions).
#pragma once

#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq {

// True when `role` is q or k and the stored layout `from` differs from the layout the target format uses.
bool rope_reorder_needed(TensorRole role, RopeStyle from, RopeStyle to);

// InvalidArgument (naming `where`) unless a (rows, cols) q/k matrix of `config` can be reordered: an even
// head size, dim divisible by n_heads, and rows a whole number of heads.
Status check_rope_reorderable(const ModelConfig& config, const std::vector<int64_t>& shape, const std::string& where);

// The reordered copy of a (rows, cols) row-major matrix.
std::vector<float> rope_reorder(const float* src, int64_t rows, int64_t cols, int64_t head_size, RopeStyle from,
                                RopeStyle to);

}  // namespace gkq
