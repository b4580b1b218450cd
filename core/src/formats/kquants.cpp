// Rows of the type table for llama.cpp's k-quants: super-blocks of 16 sub-blocks (Q2_K, Q3_K, Q6_K) or 8 (Q4_K,
// Q5_K), each sub-block with its own scale (and minimum, for Q2_K / Q4_K / Q5_K) stored as a small integer times the
// super-block's f16 d (and dmin). The quantizers are ggml's reference ones (quantize_row_q*_K_ref): fit each
// sub-block, quantize the sub-block scales against their maximum, then requantize the values with the scales as
// stored. See quant_blocks.h for the bit-exactness contract.
#include "convert_rows.h"
#include "quant_blocks.h"

#include <algorithm>
#include <cmath>

namespace gkq::quant {

// One Q6_K super-block of x; the sub-block fits weigh value i by qw[i] (x^2 without qw).
BlockQ6_K quantize_q6_k_block(const float* x, const float* qw) {
    int8_t codes[kSuper];
    float scales[kSuper / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int s = 0; s < kSuper / 16; ++s) {
        scales[s] = fit_symmetric(16, 32, x + 16 * s, codes + 16 * s, qw != nullptr ? qw + 16 * s : nullptr);
        if (std::fabs(scales[s]) > max_abs_scale) {
            max_abs_scale = std::fabs(scales[s]);
            max_scale = scales[s];
        }
    }
    BlockQ6_K bq{};
    if (max_abs_scale < kGroupMaxEps) return bq;  // all zeros: an all-zero block
    const float iscale = -128.f / max_scale;
    bq.d = to_half(1 / iscale);
    for (int s = 0; s < kSuper / 16; ++s)
        bq.scales[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[s])));
    for (int s = 0; s < kSuper / 16; ++s) {
        const float d = half(bq.d) * bq.scales[s];
        if (d == 0) continue;
        for (int i = 0; i < 16; ++i)
            codes[16 * s + i] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * s + i] / d), -32, 31) + 32);
    }
    for (int h = 0; h < kSuper / 128; ++h) {
        const int8_t* c = codes + 128 * h;
        for (int l = 0; l < 32; ++l) {
            bq.ql[64 * h + l] = static_cast<uint8_t>((c[l] & 0xF) | ((c[l + 64] & 0xF) << 4));
            bq.ql[64 * h + l + 32] = static_cast<uint8_t>((c[l + 32] & 0xF) | ((c[l + 96] & 0xF) << 4));
            bq.qh[32 * h + l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) | ((c[l + 64] >> 4) << 4) |
                                                     ((c[l + 96] >> 4) << 6));
        }
    }
    return bq;
}

}  // namespace gkq::quant

namespace gkq::rows {

using namespace gkq::quant;

namespace {

// Per-sub-block affine fits of Q4_K / Q5_K, quantized to 6 bits against their maxima and packed; d and dmin get
// the maxima / 63. Fills codes with the requantized values (0..nmax).
void fit_k_scales(const float* x, int nmax, float rmin, int nstep, uint16_t& d_out, uint16_t& dmin_out, uint8_t* packed,
                  uint8_t* codes) {
    constexpr int kSub = 32;
    float scales[kSuper / kSub], mins[kSuper / kSub];
    float weights[kSub];
    uint8_t trial[kSub];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kSuper / kSub; ++j) {
        const float* xs = x + kSub * j;
        float sum_x2 = 0;
        for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / kSub);
        for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(xs[l]);
        scales[j] = fit_affine(kSub, nmax, xs, weights, codes + kSub * j, &mins[j], trial, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::fill(packed, packed + GKQ_K_SCALE_BYTES, uint8_t{0});
    for (int j = 0; j < kSuper / kSub; ++j) {
        const auto ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
        const auto lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
        pack_scale_min(j, ls, lm, packed);
    }
    d_out = to_half(max_scale / 63.f);
    dmin_out = to_half(max_min / 63.f);
    for (int j = 0; j < kSuper / kSub; ++j) {
        uint8_t sc, m;
        unpack_scale_min(j, packed, sc, m);
        const float d = half(d_out) * sc;
        if (d == 0) continue;
        const float dm = half(dmin_out) * m;
        for (int i = 0; i < kSub; ++i)
            codes[kSub * j + i] = static_cast<uint8_t>(clamp_int(nearest_int((x[kSub * j + i] + dm) / d), 0, nmax));
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Q2_K: value = d * scale - dmin * min per 16 values, 2-bit codes

void q2_k_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const auto bq = load_block<BlockQ2_K>(src, b);
        const float d = half(bq.d), dmin = half(bq.dmin);
        float* y = dst + b * kSuper;
        for (int s = 0; s < kSuper / 16; ++s) {
            const float dl = d * (bq.scales[s] & 0xF);
            const float ml = dmin * (bq.scales[s] >> 4);
            for (int i = 0; i < 16; ++i) y[16 * s + i] = dl * two_bit(bq.qs, 16 * s + i) - ml;
        }
    }
}

void q2_k_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const float* x = src + b * kSuper;
        uint8_t codes[kSuper], trial[16];
        float weights[16], scales[kSuper / 16], mins[kSuper / 16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < kSuper / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = fit_affine(16, 3, x + 16 * j, weights, codes + 16 * j, &mins[j], trial, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        BlockQ2_K bq{};
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int j = 0; j < kSuper / 16; ++j) bq.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
            bq.d = to_half(max_scale / 15.f);
        } else {
            bq.d = to_half(0.f);
        }
        if (max_min > 0) {
            const float iscale = 15.f / max_min;
            for (int j = 0; j < kSuper / 16; ++j)
                bq.scales[j] = static_cast<uint8_t>(bq.scales[j] | (nearest_int(iscale * mins[j]) << 4));
            bq.dmin = to_half(max_min / 15.f);
        } else {
            bq.dmin = to_half(0.f);
        }
        for (int j = 0; j < kSuper / 16; ++j) {
            const float d = half(bq.d) * (bq.scales[j] & 0xF);
            if (d == 0) continue;
            const float dm = half(bq.dmin) * (bq.scales[j] >> 4);
            for (int i = 0; i < 16; ++i)
                codes[16 * j + i] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + i] + dm) / d), 0, 3));
        }
        pack_2bit(codes, bq.qs);
        store_block(dst, b, bq);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Q3_K: value = d * (scale - 32) * (3-bit code - 4) per 16 values

void q3_k_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const auto bq = load_block<BlockQ3_K>(src, b);
        const float d_all = half(bq.d);
        float* y = dst + b * kSuper;
        for (int s = 0; s < kSuper / 16; ++s) {
            const float dl = d_all * unpack_q3_scale(s, bq.scales);
            for (int i = 0; i < 16; ++i) {
                const int e = 16 * s + i;
                const int high = (bq.hmask[e % 32] >> (e / 32)) & 1;
                y[e] = dl * (two_bit(bq.qs, e) - (high ? 0 : 4));
            }
        }
    }
}

void q3_k_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const float* x = src + b * kSuper;
        int8_t codes[kSuper];
        float scales[kSuper / 16];
        float max_scale = 0, amax = 0;
        for (int j = 0; j < kSuper / 16; ++j) {
            scales[j] = fit_symmetric_refined(16, 4, x + 16 * j, codes + 16 * j);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        BlockQ3_K bq{};
        if (max_scale != 0) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < kSuper / 16; ++j) {
                auto l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
                l = static_cast<int8_t>(clamp_int(l, -32, 31) + 32);
                if (j < 8)
                    bq.scales[j] = static_cast<uint8_t>(l & 0xF);
                else
                    bq.scales[j - 8] = static_cast<uint8_t>(bq.scales[j - 8] | ((l & 0xF) << 4));
                l = static_cast<int8_t>(l >> 4);
                bq.scales[j % 4 + 8] = static_cast<uint8_t>(bq.scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            bq.d = to_half(1 / iscale);
        } else {
            bq.d = to_half(0.f);
        }
        for (int j = 0; j < kSuper / 16; ++j) {
            const float d = half(bq.d) * static_cast<int8_t>(unpack_q3_scale(j, bq.scales));
            if (d == 0) continue;
            for (int i = 0; i < 16; ++i)
                codes[16 * j + i] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
        }
        uint8_t low[kSuper];
        for (int e = 0; e < kSuper; ++e) {
            int code = codes[e];
            if (code > 3) {
                bq.hmask[e % 32] = static_cast<uint8_t>(bq.hmask[e % 32] | (1u << (e / 32)));
                code -= 4;
            }
            low[e] = static_cast<uint8_t>(code);
        }
        pack_2bit(low, bq.qs);
        store_block(dst, b, bq);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Q4_K / Q5_K: value = d * scale * code - dmin * min per eighth of the super-block, 4-bit / 5-bit codes

void q4_k_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const auto bq = load_block<BlockQ4_K>(src, b);
        const float d = half(bq.d), dmin = half(bq.dmin);
        float* y = dst + b * kSuper;
        for (int c = 0; c < kSuper / 64; ++c) {
            uint8_t sc, m;
            unpack_scale_min(2 * c, bq.scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            unpack_scale_min(2 * c + 1, bq.scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t* q = bq.qs + 32 * c;
            for (int l = 0; l < 32; ++l) y[64 * c + l] = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) y[64 * c + 32 + l] = d2 * (q[l] >> 4) - m2;
        }
    }
}

void q4_k_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const float* x = src + b * kSuper;
        BlockQ4_K bq{};
        uint8_t codes[kSuper];
        fit_k_scales(x, 15, -1.f, 20, bq.d, bq.dmin, bq.scales, codes);
        for (int c = 0; c < kSuper / 64; ++c)
            for (int l = 0; l < 32; ++l)
                bq.qs[32 * c + l] = static_cast<uint8_t>(codes[64 * c + l] | (codes[64 * c + 32 + l] << 4));
        store_block(dst, b, bq);
    }
}

void q5_k_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const auto bq = load_block<BlockQ5_K>(src, b);
        const float d = half(bq.d), dmin = half(bq.dmin);
        float* y = dst + b * kSuper;
        for (int c = 0; c < kSuper / 64; ++c) {
            uint8_t sc, m;
            unpack_scale_min(2 * c, bq.scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            unpack_scale_min(2 * c + 1, bq.scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t* q = bq.qs + 32 * c;
            const unsigned lo_bit = 1u << (2 * c), hi_bit = 2u << (2 * c);
            for (int l = 0; l < 32; ++l) y[64 * c + l] = d1 * ((q[l] & 0xF) + (bq.qh[l] & lo_bit ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) y[64 * c + 32 + l] = d2 * ((q[l] >> 4) + (bq.qh[l] & hi_bit ? 16 : 0)) - m2;
        }
    }
}

void q5_k_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const float* x = src + b * kSuper;
        BlockQ5_K bq{};
        uint8_t codes[kSuper];
        fit_k_scales(x, 31, -0.5f, 15, bq.d, bq.dmin, bq.scales, codes);
        for (int c = 0; c < kSuper / 64; ++c) {
            for (int l = 0; l < 32; ++l) {
                int lo = codes[64 * c + l], hi = codes[64 * c + 32 + l];
                if (lo > 15) {
                    lo -= 16;
                    bq.qh[l] = static_cast<uint8_t>(bq.qh[l] | (1u << (2 * c)));
                }
                if (hi > 15) {
                    hi -= 16;
                    bq.qh[l] = static_cast<uint8_t>(bq.qh[l] | (2u << (2 * c)));
                }
                bq.qs[32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
            }
        }
        store_block(dst, b, bq);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Q6_K: value = d * scale * (6-bit code - 32) per 16 values

void q6_k_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const auto bq = load_block<BlockQ6_K>(src, b);
        const float d = half(bq.d);
        float* y = dst + b * kSuper;
        for (int e = 0; e < kSuper; ++e) {
            // per 128 values: ql byte l holds values l (low nibble) and l + 64 (high); ql byte l + 32 values
            // l + 32 and l + 96; qh byte l the top bits of l, l + 32, l + 64, l + 96 in bit pairs 0..3
            const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
            const uint8_t lowbyte = bq.ql[64 * h + l + 32 * (quarter & 1)];
            const int low = quarter < 2 ? lowbyte & 0xF : lowbyte >> 4;
            const int top = (bq.qh[32 * h + l] >> (2 * quarter)) & 3;
            const auto q = static_cast<int8_t>((low | (top << 4)) - 32);
            y[e] = d * bq.scales[e / 16] * q;
        }
    }
}

void q6_k_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) store_block(dst, b, quantize_q6_k_block(src + b * kSuper, nullptr));
}

// ---------------------------------------------------------------------------------------------------------
// Q8_K: value = d * code, d in f32; bsums for the dot products

void q8_k_to_f32(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const auto bq = load_block<BlockQ8_K>(src, b);
        for (int j = 0; j < kSuper; ++j) dst[b * kSuper + j] = bq.d * bq.qs[j];
    }
}

// An all-zero block gets d = 0, zero codes and zero sums (ggml leaves that block's bsums as they were).
void q8_k_from_f32(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const float* x = src + b * kSuper;
        float max = 0, amax = 0;
        for (int j = 0; j < kSuper; ++j) {
            if (std::fabs(x[j]) > amax) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        BlockQ8_K bq{};
        if (amax != 0) {
            const float iscale = -127.f / max;
            for (int j = 0; j < kSuper; ++j) bq.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
            for (int s = 0; s < kSuper / 16; ++s) {
                int sum = 0;
                for (int i = 0; i < 16; ++i) sum += bq.qs[16 * s + i];
                bq.bsums[s] = static_cast<int16_t>(sum);
            }
            bq.d = 1 / iscale;
        }
        store_block(dst, b, bq);
    }
}

}  // namespace gkq::rows
