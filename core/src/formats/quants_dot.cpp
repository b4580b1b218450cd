// The scalar reference dot products (gkq/type_traits.h's dot_f32) of llama.cpp's other legacy blocks and the
// k-quants: each block dequantized exactly (to_f32), each value multiplied by its activation and summed in f32 in
// ascending order from 0. The oracle for SIMD kernels; built with -ffp-contract=off like the quantizers.
#include "convert_rows.h"
#include "quant_blocks.h"

namespace gkq::rows {

namespace {

template <void (*ToF32)(const void*, float*, int64_t), int64_t kBlock, int64_t kBytes>
float dot_by_blocks(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(row);
    float buf[kBlock];
    float s = 0.0f;
    for (int64_t i = 0; i < n; i += kBlock) {
        ToF32(p + (i / kBlock) * kBytes, buf, kBlock);
        for (int64_t j = 0; j < kBlock; ++j) s += buf[j] * x[i + j];
    }
    return s;
}

}  // namespace

#define GKQ_DOT_ROW(type, elements, bytes)                               \
    float type##_dot_f32(const void* row, const float* x, int64_t n) {   \
        return dot_by_blocks<type##_to_f32, elements, bytes>(row, x, n); \
    }

GKQ_DOT_ROW(q4_1, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q4_1_BLOCK_BYTES)
GKQ_DOT_ROW(q5_0, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q5_0_BLOCK_BYTES)
GKQ_DOT_ROW(q5_1, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q5_1_BLOCK_BYTES)
GKQ_DOT_ROW(iq4_nl, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_IQ4_NL_BLOCK_BYTES)
GKQ_DOT_ROW(q2_k, GKQ_QK_K, GKQ_Q2_K_BLOCK_BYTES)
GKQ_DOT_ROW(q3_k, GKQ_QK_K, GKQ_Q3_K_BLOCK_BYTES)
GKQ_DOT_ROW(q4_k, GKQ_QK_K, GKQ_Q4_K_BLOCK_BYTES)
GKQ_DOT_ROW(q5_k, GKQ_QK_K, GKQ_Q5_K_BLOCK_BYTES)
GKQ_DOT_ROW(q6_k, GKQ_QK_K, GKQ_Q6_K_BLOCK_BYTES)
GKQ_DOT_ROW(q8_k, GKQ_QK_K, GKQ_Q8_K_BLOCK_BYTES)

#undef GKQ_DOT_ROW

}  // namespace gkq::rows
