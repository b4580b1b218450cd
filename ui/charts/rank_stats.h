// What truncating a matrix to rank k costs, computed exactly from its complete spectrum:
//   relative error  sqrt(sum_{i>k} s_i^2 / sum s_i^2)   (Eckart-Young; 0 at k = n)
//   energy kept     sum_{i<=k} s_i^2 / sum s_i^2
//   bits per weight k * (rows + cols + 1) * b / (rows * cols): U (rows x k), V (cols x k) and the k singular
//                   values all stored as b-bit floats (b = 32 for f32, 16 for f16), no headers, no scales.
#pragma once

#include "gkq/spectrum.h"

#include <cstdint>

namespace gkq::ui {

struct RankStats {
    int64_t rank = 0;
    double relError = 0.0;
    double energyKept = 0.0;
    double bpwF32 = 0.0;
    double bpwF16 = 0.0;
};

double lowRankBitsPerWeight(int64_t rows, int64_t cols, int64_t k, int bits);
// k is clamped to [0, n]; needs the complete singular values (empty spectrum: all zero).
RankStats rankStats(const TensorSpectrum& spectrum, int64_t k);

}  // namespace gkq::ui
