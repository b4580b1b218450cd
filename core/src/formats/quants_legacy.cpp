// Rows of the type table for llama.cpp's other legacy blocks (besides Q8_0 / Q4_0): Q4_1, Q5_0, Q5_1 (linear codes with
// a scale, and a minimum for the _1 types) and IQ4_NL (4-bit indices into a fixed non-linear table). The
// quantizers are ggml's reference ones (quantize_row_*_ref); see quant_blocks.h for the bit-exactness contract.
#include "convert_rows.h"
#include "quant_blocks.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace gkq::rows {

using namespace gkq::quant;

namespace {

constexpr int kHalf = kLegacy / 2;

// The fifth bit of value j of a block, from its qh word (bit j).
inline int fifth_bit(uint32_t qh, int j) {
    return static_cast<int>((qh >> j) & 1u) << 4;
}

inline uint32_t load_qh(const uint8_t* qh) {
    uint32_t v;
    std::memcpy(&v, qh, sizeof(v));
    return v;
}

// The smallest and largest value of a block (the _1 types' range).
void block_range(const float* x, float& lo, float& hi) {
    lo = FLT_MAX;
    hi = -FLT_MAX;
    for (int j = 0; j < kLegacy; ++j) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
}

// The value of largest magnitude, with its sign (the first of equal magnitudes).
float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

// ggml truncates to int8 before clamping; inputs here stay within int8's range.
inline int trunc_i8(float v) {
    return static_cast<int8_t>(static_cast<int>(v));
}

}  // namespace

// ---- Q4_1: value = nibble * d + m ----

void q4_1_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const auto bq = load_block<BlockQ4_1>(src, b);
        const float d = half(bq.d), m = half(bq.m);
        float* y = dst + b * kLegacy;
        for (int j = 0; j < kHalf; ++j) {
            y[j] = static_cast<float>(bq.qs[j] & 0x0F) * d + m;
            y[j + kHalf] = static_cast<float>(bq.qs[j] >> 4) * d + m;
        }
    }
}

void q4_1_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const float* x = src + b * kLegacy;
        float lo, hi;
        block_range(x, lo, hi);
        const float d = (hi - lo) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ4_1 bq{};
        bq.d = to_half(d);
        bq.m = to_half(lo);
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = std::min(15, trunc_i8((x[j] - lo) * id + 0.5f));
            const int q1 = std::min(15, trunc_i8((x[j + kHalf] - lo) * id + 0.5f));
            bq.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
        store_block(dst, b, bq);
    }
}

// ---- Q5_0: value = (5-bit code - 16) * d ----

void q5_0_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const auto bq = load_block<BlockQ5_0>(src, b);
        const float d = half(bq.d);
        const uint32_t qh = load_qh(bq.qh);
        float* y = dst + b * kLegacy;
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = ((bq.qs[j] & 0x0F) | fifth_bit(qh, j)) - 16;
            const int q1 = ((bq.qs[j] >> 4) | fifth_bit(qh, j + kHalf)) - 16;
            y[j] = static_cast<float>(q0) * d;
            y[j + kHalf] = static_cast<float>(q1) * d;
        }
    }
}

void q5_0_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const float* x = src + b * kLegacy;
        const float d = signed_absmax(x, kLegacy) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ5_0 bq{};
        bq.d = to_half(d);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            const auto q0 = static_cast<uint32_t>(std::min(31, trunc_i8(x[j] * id + 16.5f)));
            const auto q1 = static_cast<uint32_t>(std::min(31, trunc_i8(x[j + kHalf] * id + 16.5f)));
            bq.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 >> 4) & 1u) << j;
            qh |= ((q1 >> 4) & 1u) << (j + kHalf);
        }
        std::memcpy(bq.qh, &qh, sizeof(qh));
        store_block(dst, b, bq);
    }
}

// ---- Q5_1: value = 5-bit code * d + m ----

void q5_1_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const auto bq = load_block<BlockQ5_1>(src, b);
        const float d = half(bq.d), m = half(bq.m);
        const uint32_t qh = load_qh(bq.qh);
        float* y = dst + b * kLegacy;
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = (bq.qs[j] & 0x0F) | fifth_bit(qh, j);
            const int q1 = (bq.qs[j] >> 4) | fifth_bit(qh, j + kHalf);
            y[j] = static_cast<float>(q0) * d + m;
            y[j + kHalf] = static_cast<float>(q1) * d + m;
        }
    }
}

void q5_1_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const float* x = src + b * kLegacy;
        float lo, hi;
        block_range(x, lo, hi);
        const float d = (hi - lo) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ5_1 bq{};
        bq.d = to_half(d);
        bq.m = to_half(lo);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            // no clamp, as ggml: (x - min) * id stays within [0, 31] up to rounding
            const auto q0 = static_cast<uint32_t>(static_cast<uint8_t>((x[j] - lo) * id + 0.5f));
            const auto q1 = static_cast<uint32_t>(static_cast<uint8_t>((x[j + kHalf] - lo) * id + 0.5f));
            bq.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 >> 4) & 1u) << j;
            qh |= ((q1 >> 4) & 1u) << (j + kHalf);
        }
        std::memcpy(bq.qh, &qh, sizeof(qh));
        store_block(dst, b, bq);
    }
}

// ---- IQ4_NL: value = kNonLinearCodes[index] * d ----

void iq4_nl_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const auto bq = load_block<BlockIQ4_NL>(src, b);
        const float d = half(bq.d);
        float* y = dst + b * kLegacy;
        for (int j = 0; j < kHalf; ++j) {
            y[j] = d * static_cast<float>(kNonLinearCodes[bq.qs[j] & 0x0F]);
            y[j + kHalf] = d * static_cast<float>(kNonLinearCodes[bq.qs[j] >> 4]);
        }
    }
}

// ggml's reference IQ4_NL quantizer: the scale that maps the largest-magnitude value onto the code book's first
// entry, each value's nearest code, then the least-squares scale for those codes weighted by x^2 (no search).
// An all-zero block (max |x| < kGroupMaxEps) keeps the previous block's indices, with d = 0, as ggml's does; the
// first block of a call starts from index 0.
void iq4_nl_from_f32(const float* src, void* dst, int64_t n) {
    uint8_t codes[kLegacy] = {};  // carried from block to block, as ggml's scratch array is
    for (int64_t b = 0; b < n / kLegacy; ++b) {
        const float* x = src + b * kLegacy;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kLegacy; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        float d = 0.0f;
        if (!(amax < kGroupMaxEps)) {
            const float id = 1 / (max / kNonLinearCodes[0]);
            float sumqx = 0, sumq2 = 0;
            for (int j = 0; j < kLegacy; ++j) {
                const int l = nearest_code(id * x[j]);
                codes[j] = static_cast<uint8_t>(l);
                const float q = kNonLinearCodes[l];
                const float w = x[j] * x[j];
                sumqx += w * q * x[j];
                sumq2 += w * q * q;
            }
            d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        }
        BlockIQ4_NL bq{};
        bq.d = to_half(d);
        for (int j = 0; j < kHalf; ++j) bq.qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + kHalf] << 4));
        store_block(dst, b, bq);
    }
}

}  // namespace gkq::rows
