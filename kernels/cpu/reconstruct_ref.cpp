// Scalar oracle of the reconstruction: docs/codec.md's reference, in the codec's own f32 operations and order
// (core/src/codec/lowrank_payload.cpp reconstruct_lowrank, then decode.cpp's residual add), so it agrees with
// gkq::decode_tensor bit for bit.
#include "cpu/cpu_kernels.h"

#include "gkq/block_layout.h"

#include <cstddef>
#include <vector>

namespace gkq::kernels::cpu {

void reconstruct_ref(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                     const uint8_t* residual, int residual_bits, float* out) {
    std::vector<float> us(static_cast<size_t>(k));
    std::vector<float> res(residual_bits ? static_cast<size_t>(cols) : 0);
    const BlockLayout& block = residual_block(residual_bits);
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t r = 0; r < k; ++r) us[static_cast<size_t>(r)] = sigma[r] * ut[r * rows + i];
        float* row = out + i * cols;
        for (int64_t j = 0; j < cols; ++j) {
            float acc = 0.0f;
            for (int64_t r = 0; r < k; ++r) acc += us[static_cast<size_t>(r)] * vt[r * cols + j];
            row[j] = acc;
        }
        if (residual_bits == 0) continue;
        const uint8_t* blocks = residual + static_cast<uint64_t>(i * cols / block.elements) * block.bytes;
        if (residual_bits == 4)
            dequantize_q4_0_ref(blocks, static_cast<uint64_t>(cols), res.data());
        else
            dequantize_q8_0_ref(blocks, static_cast<uint64_t>(cols), res.data());
        for (int64_t j = 0; j < cols; ++j) row[j] += res[static_cast<size_t>(j)];
    }
}

}  // namespace gkq::kernels::cpu
