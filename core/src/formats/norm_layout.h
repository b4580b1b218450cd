// Norm weights between the two meanings a format gives them (NormStorage in model_config.h): Gemma's HF files
// store w of x / rms(x) * (1 + w); GGUF files hold what multiplies, 1 + w, as llama.cpp's converter adds it (in
// float32 for float32 weights). Writers turn a model's norms into the target format's meaning.
#pragma once

#include "gkq/model_config.h"
#include "gkq/tensor.h"

#include <cstdint>

namespace gkq {

// True when `role` is a norm weight and the stored meaning `from` differs from the target's `to`.
bool norm_shift_needed(TensorRole role, NormStorage from, NormStorage to);

// `values` (n) turned from `from` to `to` in place: 1 added (OffsetByOne to Multiplier) or subtracted, in float32.
void shift_norm(float* values, uint64_t n, NormStorage from, NormStorage to);

}  // namespace gkq
