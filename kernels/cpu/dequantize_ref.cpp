// Scalar oracles of the dequantization kernels: the arithmetic of docs/codec.md written out plainly, in the same f32
// operations as the codec (core/src/codec/factor_quant.h, core/src/formats/convert.cpp), so they agree bit for bit.
#include "cpu/cpu_kernels.h"

#include "gkq/block_layout.h"
#include "gkq/convert.h"

#include <cstring>

namespace gkq::kernels::cpu {

namespace {

uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

}  // namespace

void dequantize_factors_ref(const uint8_t* codes, int bits, bool packed, uint64_t first, int64_t n_vectors, int64_t len,
                            bool delta, const float* scales, float* out) {
    const int top = (1 << bits) - 1;  // L - 1
    const auto mask = static_cast<unsigned>(top);
    for (int64_t v = 0; v < n_vectors; ++v) {
        const float step = scales[v] / static_cast<float>(top);  // code_step()
        const uint64_t start = first + static_cast<uint64_t>(v) * static_cast<uint64_t>(len);
        unsigned c = 0;
        for (int64_t i = 0; i < len; ++i) {
            const uint64_t at = start + static_cast<uint64_t>(i);
            const unsigned s = packed ? packed_code(codes, at, bits) : codes[at];
            c = delta ? (c + s) & mask : s;
            out[v * len + i] = static_cast<float>(2 * static_cast<int>(c) - top) * step;  // dequantize_code()
        }
    }
}

void expand_heads_ref(const float* base, int64_t k, int64_t len, const float* head_scales, int64_t n_heads,
                      float* out) {
    for (int64_t r = 0; r < k; ++r)
        for (int64_t g = 0; g < n_heads; ++g)
            for (int64_t i = 0; i < len; ++i) out[(r * n_heads + g) * len + i] = base[r * len + i] * head_scales[g];
}

void dequantize_f16_ref(const uint8_t* src, uint64_t n, float* out) {
    for (uint64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(src + 2 * i));
}

void dequantize_q8_0_ref(const uint8_t* src, uint64_t n, float* out) {
    constexpr BlockLayout Q8 = kQ8_0Block;
    for (uint64_t b = 0; b < n / Q8.elements; ++b) {
        const uint8_t* blk = src + b * Q8.bytes;
        const float d = f16_to_f32(load_u16(blk));
        for (int j = 0; j < Q8.elements; ++j)
            out[b * Q8.elements + j] = static_cast<float>(static_cast<int8_t>(blk[Q8.codes_offset + j])) * d;
    }
}

void dequantize_q4_0_ref(const uint8_t* src, uint64_t n, float* out) {
    constexpr BlockLayout Q4 = kQ4_0Block;
    constexpr int half = Q4.elements / 2;
    for (uint64_t b = 0; b < n / Q4.elements; ++b) {
        const uint8_t* blk = src + b * Q4.bytes;
        const float d = f16_to_f32(load_u16(blk));
        for (int j = 0; j < half; ++j) {
            out[b * Q4.elements + j] = static_cast<float>((blk[Q4.codes_offset + j] & 0x0F) - 8) * d;
            out[b * Q4.elements + j + half] = static_cast<float>((blk[Q4.codes_offset + j] >> 4) - 8) * d;
        }
    }
}

}  // namespace gkq::kernels::cpu
