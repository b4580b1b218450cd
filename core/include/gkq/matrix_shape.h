// Shape checks shared by the codec's encoder and decoder and the kernels: element counts without overflow, under a
// sanity cap, and the (rows, cols) matrix view of a tensor (rows = n / last dimension, cols = last dimension).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace gkq::codec {

// 2^36 elements (256 GiB of f32): larger shapes are refused as corrupt rather than allocated.
inline constexpr int64_t kMaxElements = int64_t{1} << 36;

struct MatrixShape {
    int64_t n = 0;     // all elements
    int64_t rows = 0;  // 1 for 1-D tensors
    int64_t cols = 0;  // the last dimension (n for 1-D; 1 for 0-D)
};

// nullopt when a dimension is negative or the product overflows or exceeds kMaxElements.
inline std::optional<MatrixShape> matrix_shape(const std::vector<int64_t>& shape) {
    MatrixShape m;
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) return std::nullopt;
        if (d != 0 && n > kMaxElements / d) return std::nullopt;
        n *= d;
    }
    m.n = n;
    m.cols = shape.empty() ? 1 : shape.back();
    m.rows = m.cols > 0 ? n / m.cols : 0;
    return m;
}

}  // namespace gkq::codec
