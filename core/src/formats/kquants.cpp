// Rows of the type table for llama.cpp's k-quants: super-blocks of 16 sub-blocks (Q2_K, Q3_K, Q6_K) or 8 (Q4_K,
// Q5_K), each sub-block with its own scale (and minimum, for Q2_K / Q4_K / Q5_K) stored as a small integer times the
// super-block's f16 d (and dmin). The quantizers are ggml's reference ones (quantize_row_q*_K_ref): fit each
// sub-block, quantize the sub-block scales against their maximum, then requantize the values with the scales as
// stored. See quant_blocks.h for the bit-exactness contract.
#include "convert_rows.h"
#include "quant_blocks.h"

#include <algorithm>
#include <cmath>

namespace gkq::rows {

using namespace gkq::quant;

namespace {

// ---------------------------------------------------------------------------------------------------------
// Sub-block fits

// Symmetric codes in [-nmax, nmax - 1] for n values, stored offset by nmax in `codes`; returns the scale. The
// weight of each value is x^2. Starts from the scale that maps the largest-magnitude value onto -nmax, then
// tries 18 nearby scales and keeps the codes whose least-squares scale explains the most of sum w x^2
// (ggml's make_qx_quants with rmse_type 1).
float fit_symmetric(int n, int nmax, const float* x, int8_t* codes) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        std::fill(codes, codes + n, int8_t{0});
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        codes[i] = static_cast<int8_t>(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; ++step) {
        if (step == 0) continue;
        iscale = -(nmax + 0.1f * step) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                codes[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's symmetric fit (ggml's make_q3_quants with do_rmse): codes from the largest-magnitude value, then up to
// five passes that move single codes where that raises the weighted fit (weights x^2). Codes stored offset by
// nmax; returns the scale.
float fit_symmetric_refined(int n, int nmax, const float* x, int8_t* codes) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        std::fill(codes, codes + n, int8_t{0});
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        codes[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * codes[i];
            if (slx > 0) {
                float sl2 = suml2 - w * codes[i] * codes[i];
                const int l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (l != codes[i]) {
                    slx += w * x[i] * l;
                    sl2 += w * l * l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        codes[i] = static_cast<int8_t>(l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    for (int i = 0; i < n; ++i) codes[i] = static_cast<int8_t>(codes[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Codes in [0, nmax] with value = scale * code - min, min >= 0 (ggml's make_qkx2_quants): the range fit, then
// nstep + 1 trial scales (nmax + rmin + rdelta * step over the range), each followed by the weighted
// least-squares scale and min for its codes, keeping the one of least weighted error (absolute when use_mad,
// squared otherwise). Returns the scale; *the_min gets min.
float fit_affine(int n, int nmax, const float* x, const float* weights, uint8_t* codes, float* the_min, uint8_t* trial,
                 float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        std::fill(codes, codes + n, uint8_t{0});
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        codes[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
        float diff = scale * codes[i] + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int step = 0; step <= nstep; ++step) {
        iscale = (rmin + rdelta * step + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
            trial[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * trial[i] + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                error += weights[i] * diff;
            }
            if (error < best_error) {
                std::copy(trial, trial + n, codes);
                best_error = error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// ---------------------------------------------------------------------------------------------------------
// Packing shared by several types

// Sub-block j's 6-bit scale and min from the 12 bytes of Q4_K / Q5_K: j < 4 in the low six bits of bytes j
// and j + 4; j >= 4 in the nibbles of byte j + 4, with their top two bits in the spare bits of bytes j - 4, j.
void unpack_scale_min(int j, const uint8_t* packed, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = packed[j] & 63;
        m = packed[j + 4] & 63;
    } else {
        sc = static_cast<uint8_t>((packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
    }
}

void pack_scale_min(int j, uint8_t sc, uint8_t m, uint8_t* packed) {
    if (j < 4) {
        packed[j] = sc;
        packed[j + 4] = m;
    } else {
        packed[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
        packed[j - 4] = static_cast<uint8_t>(packed[j - 4] | ((sc >> 4) << 6));
        packed[j] = static_cast<uint8_t>(packed[j] | ((m >> 4) << 6));
    }
}

// Q3_K's sixteen 6-bit scales: low nibbles in bytes 0..7 (j and j + 8 share byte j % 8), top two bits in
// bytes 8..11 (bits 2 (j / 4) of byte 8 + j % 4).
int unpack_q3_scale(int j, const uint8_t* packed) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// Two-bit codes of 256 values: per 128 values, byte l of the 32 holds values l, l + 32, l + 64, l + 96.
void pack_2bit(const uint8_t* codes, uint8_t* qs) {
    for (int j = 0; j < kSuper; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = static_cast<uint8_t>(codes[j + l] | (codes[j + l + 32] << 2) | (codes[j + l + 64] << 4) |
                                                 (codes[j + l + 96] << 6));
}

inline int two_bit(const uint8_t* qs, int e) {
    const int r = e % 128;
    return (qs[(e / 128) * 32 + r % 32] >> (2 * (r / 32))) & 3;
}

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
    for (int64_t b = 0; b < n / kSuper; ++b) {
        const float* x = src + b * kSuper;
        int8_t codes[kSuper];
        float scales[kSuper / 16];
        float max_scale = 0, max_abs_scale = 0;
        for (int s = 0; s < kSuper / 16; ++s) {
            scales[s] = fit_symmetric(16, 32, x + 16 * s, codes + 16 * s);
            if (std::fabs(scales[s]) > max_abs_scale) {
                max_abs_scale = std::fabs(scales[s]);
                max_scale = scales[s];
            }
        }
        BlockQ6_K bq{};
        if (max_abs_scale < kGroupMaxEps) {  // all zeros: an all-zero block
            store_block(dst, b, bq);
            continue;
        }
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
                bq.qh[32 * h + l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) |
                                                         ((c[l + 64] >> 4) << 4) | ((c[l + 96] >> 4) << 6));
            }
        }
        store_block(dst, b, bq);
    }
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
