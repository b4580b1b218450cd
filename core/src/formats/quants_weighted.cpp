// The importance-weighted quantizers: ggml's quantize_<type>(src, dst, n_rows, n_per_row, quant_weights), which
// llama-quantize calls (through ggml_quantize_chunk) with an importance matrix's per-column weights. Each row is
// fitted on its own; a value's weight is its column's importance times sqrt(sigma^2 + x^2), sigma^2 the mean
// square of the row (legacy types) or of the super-block (k-quants, twice that), and the sub-block scales are then
// themselves fitted by weight. Without importance these give what llama-quantize writes without an imatrix: the
// reference quantizer (from_f32) for all but IQ4_NL, whose scale is searched over 15 candidates either way.
#include "convert_rows.h"
#include "quant_blocks.h"

#include <algorithm>
#include <cmath>

namespace gkq::rows {

using namespace gkq::quant;

namespace {

using RefRow = void (*)(const float* src, void* dst, int64_t n);

// Without importance: the reference quantizer over all rows at once, as ggml.
bool reference_when_unweighted(RefRow ref, const float* src, void* dst, int64_t n_rows, int64_t n_per_row,
                               const float* importance) {
    if (importance != nullptr) return false;
    ref(src, dst, n_rows * n_per_row);
    return true;
}

float mean_square(const float* x, int64_t n) {
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
    return sum / static_cast<float>(n);
}

void importance_weights(const float* x, const float* qw, float sigma2, int n, float* w) {
    for (int j = 0; j < n; ++j) w[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

void pack_5bit(const uint8_t* codes, uint8_t* qs, uint8_t* qh_bytes) {
    constexpr int kHalf = kLegacy / 2;
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
        const uint32_t q0 = codes[j], q1 = codes[j + kHalf];
        qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
        qh |= ((q0 & 0x10u) >> 4) << j;
        qh |= ((q1 & 0x10u) >> 4) << (j + kHalf);
    }
    std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// Q4_1 / Q5_1: one weighted affine fit per block (ggml's make_qkx3_quants, 37 trial scales).
template <class Block, int kMax>
void affine_blocks(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    const int64_t per_row = n_per_row / kLegacy;
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* x = src + r * n_per_row;
        const float sigma2 = mean_square(x, n_per_row);
        for (int64_t b = 0; b < per_row; ++b) {
            const float* xb = x + kLegacy * b;
            float w[kLegacy];
            uint8_t codes[kLegacy], trial[kLegacy];
            importance_weights(xb, importance + kLegacy * b, sigma2, kLegacy, w);
            float min;
            const float d = fit_affine(kLegacy, kMax, xb, w, codes, &min, trial, -0.9f, 0.05f, 36, false);
            Block bq{};
            bq.d = to_half(d);
            bq.m = to_half(-min);
            if constexpr (kMax == 15) {
                for (int j = 0; j < kLegacy / 2; ++j)
                    bq.qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + kLegacy / 2] << 4));
            } else {
                pack_5bit(codes, bq.qs, bq.qh);
            }
            store_block(dst, r * per_row + b, bq);
        }
    }
}

// The k-quants' requantization of every value with its sub-block's scale (and min) as stored.
void requantize_affine(const float* x, int sub, int nmax, float d_all, float dmin_all, const uint8_t* sc,
                       const uint8_t* m, int n_sub, uint8_t* codes) {
    for (int j = 0; j < n_sub; ++j) {
        const float d = d_all * sc[j];
        if (d == 0) continue;
        const float dm = dmin_all * m[j];
        for (int i = 0; i < sub; ++i)
            codes[sub * j + i] = static_cast<uint8_t>(clamp_int(nearest_int((x[sub * j + i] + dm) / d), 0, nmax));
    }
}

// Q4_K / Q5_K's weighted sub-block fits, their scales and mins fitted by weight to 6 bits and packed.
void weighted_k_scales(const float* x, const float* qw, int nmax, uint16_t& d_out, uint16_t& dmin_out, uint8_t* packed,
                       uint8_t* codes) {
    constexpr int kSub = 32, kN = kSuper / kSub;
    const float sigma2 = 2 * mean_square(x, kSuper);
    float scales[kN], mins[kN], sw[kN], w[kSub];
    uint8_t trial[kSub], ls[kN], lm[kN];
    for (int j = 0; j < kN; ++j) {
        importance_weights(x + kSub * j, qw + kSub * j, sigma2, kSub, w);
        float sumw = 0;
        for (int l = 0; l < kSub; ++l) sumw += w[l];
        sw[j] = sumw;
        scales[j] = fit_affine(kSub, nmax, x + kSub * j, w, codes + kSub * j, &mins[j], trial, -0.9f, 0.05f, 36, false);
    }
    const float d_super = fit_positive(kN, 63, scales, ls, sw);
    const float m_super = fit_positive(kN, 63, mins, lm, sw);
    std::fill(packed, packed + GKQ_K_SCALE_BYTES, uint8_t{0});
    for (int j = 0; j < kN; ++j) pack_scale_min(j, std::min<uint8_t>(63, ls[j]), std::min<uint8_t>(63, lm[j]), packed);
    d_out = to_half(d_super);
    dmin_out = to_half(m_super);
    uint8_t sc[kN], m[kN];
    for (int j = 0; j < kN; ++j) unpack_scale_min(j, packed, sc[j], m[j]);
    requantize_affine(x, kSub, nmax, half(d_out), half(dmin_out), sc, m, kN, codes);
}

}  // namespace

// ---- legacy blocks ----

void q4_1_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q4_1_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    affine_blocks<BlockQ4_1, 15>(src, dst, n_rows, n_per_row, importance);
}

void q5_1_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q5_1_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    affine_blocks<BlockQ5_1, 31>(src, dst, n_rows, n_per_row, importance);
}

// Q4_0: ggml's quantize_row_q4_0_impl, a weighted symmetric fit per block (make_qx_quants, nmax 8) stored as
// gkq/block_layout.h's Q4_0 block (f16 scale, then value j in the low nibble of byte j and value j + 16 in its high).
void q4_0_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q4_0_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    const int64_t per_row = n_per_row / kLegacy;
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* x = src + r * n_per_row;
        const float sigma2 = mean_square(x, n_per_row);
        for (int64_t b = 0; b < per_row; ++b) {
            const float* xb = x + kLegacy * b;
            float w[kLegacy];
            int8_t codes[kLegacy];
            importance_weights(xb, importance + kLegacy * b, sigma2, kLegacy, w);
            const uint16_t d = to_half(fit_symmetric(kLegacy, 8, xb, codes, w));
            uint8_t block[GKQ_Q4_0_BLOCK_BYTES];
            std::memcpy(block, &d, sizeof(d));
            for (int j = 0; j < kLegacy / 2; ++j)
                block[GKQ_BLOCK_SCALE_BYTES + j] = static_cast<uint8_t>(
                    static_cast<uint8_t>(codes[j]) | (static_cast<uint8_t>(codes[j + kLegacy / 2]) << 4));
            std::memcpy(out + (r * per_row + b) * GKQ_Q4_0_BLOCK_BYTES, block, sizeof(block));
        }
    }
}

void q5_0_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q5_0_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    const int64_t per_row = n_per_row / kLegacy;
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* x = src + r * n_per_row;
        const float sigma2 = mean_square(x, n_per_row);
        for (int64_t b = 0; b < per_row; ++b) {
            const float* xb = x + kLegacy * b;
            float w[kLegacy];
            int8_t codes[kLegacy];
            importance_weights(xb, importance + kLegacy * b, sigma2, kLegacy, w);
            BlockQ5_0 bq{};
            bq.d = to_half(fit_symmetric(kLegacy, 16, xb, codes, w));
            uint8_t u[kLegacy];
            for (int j = 0; j < kLegacy; ++j) u[j] = static_cast<uint8_t>(codes[j]);
            pack_5bit(u, bq.qs, bq.qh);
            store_block(dst, r * per_row + b, bq);
        }
    }
}

// IQ4_NL: the scale from the largest-magnitude value, then 15 trial scales (code book entry 0 plus -7..7 over the
// maximum), keeping the best weighted least-squares fit, and the indices redone for the scale kept. Weights:
// importance * sqrt(sigma^2 + x^2) with sigma^2 twice the block's mean square, or x^2 without importance.
void iq4_nl_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    constexpr int kTries = 7;
    const int64_t per_row = n_per_row / kLegacy;
    const auto* values = kNonLinearCodes;
    for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t b = 0; b < per_row; ++b) {
            const float* x = src + r * n_per_row + kLegacy * b;
            float w[kLegacy];
            if (importance != nullptr) {
                float sigma2 = 0;
                for (int j = 0; j < kLegacy; ++j) sigma2 += x[j] * x[j];
                sigma2 *= 2.f / kLegacy;
                importance_weights(x, importance + kLegacy * b, sigma2, kLegacy, w);
            } else {
                for (int j = 0; j < kLegacy; ++j) w[j] = x[j] * x[j];
            }
            float amax = 0, max = 0;
            for (int j = 0; j < kLegacy; ++j) {
                const float ax = std::fabs(x[j]);
                if (ax > amax) {
                    amax = ax;
                    max = x[j];
                }
            }
            float d = 0;
            if (!(amax < kGroupMaxEps)) {
                d = -max / values[0];
                float id = 1 / d;
                float sumqx = 0, sumq2 = 0;
                for (int j = 0; j < kLegacy; ++j) {
                    const float q = values[nearest_code(id * x[j])];
                    sumqx += w[j] * q * x[j];
                    sumq2 += w[j] * q * q;
                }
                d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
                float best = d * sumqx;
                for (int t = -kTries; t <= kTries; ++t) {
                    id = (t + values[0]) / max;
                    sumqx = sumq2 = 0;
                    for (int j = 0; j < kLegacy; ++j) {
                        const float q = values[nearest_code(id * x[j])];
                        sumqx += w[j] * q * x[j];
                        sumq2 += w[j] * q * q;
                    }
                    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                        d = sumqx / sumq2;
                        best = d * sumqx;
                    }
                }
            }
            BlockIQ4_NL bq{};
            bq.d = to_half(d);
            const float id = d != 0 ? 1 / d : 0;
            uint8_t codes[kLegacy];
            for (int j = 0; j < kLegacy; ++j) codes[j] = static_cast<uint8_t>(nearest_code(id * x[j]));
            for (int j = 0; j < kLegacy / 2; ++j)
                bq.qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + kLegacy / 2] << 4));
            store_block(dst, r * per_row + b, bq);
        }
    }
}

// ---- k-quants ----

void q2_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q2_k_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    constexpr int kN = kSuper / 16;
    const int64_t per_row = n_per_row / kSuper;
    for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t b = 0; b < per_row; ++b) {
            const float* x = src + r * n_per_row + kSuper * b;
            const float* qw = importance + kSuper * b;
            const float sigma2 = mean_square(x, kSuper);
            float scales[kN], mins[kN], sw[kN], w[16];
            uint8_t codes[kSuper], trial[16], ls[kN], lm[kN];
            for (int j = 0; j < kN; ++j) {
                importance_weights(x + 16 * j, qw + 16 * j, sigma2, 16, w);
                float sumw = 0;
                for (int l = 0; l < 16; ++l) sumw += w[l];
                sw[j] = sumw;
                scales[j] = fit_affine(16, 3, x + 16 * j, w, codes + 16 * j, &mins[j], trial, -0.9f, 0.05f, 36, false);
            }
            const float dm = fit_positive(kN, 15, scales, ls, sw);
            const float mm = fit_positive(kN, 15, mins, lm, sw);
            BlockQ2_K bq{};
            bq.d = to_half(dm);
            bq.dmin = to_half(mm);
            uint8_t sc[kN], m[kN];
            for (int j = 0; j < kN; ++j) {
                bq.scales[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
                sc[j] = bq.scales[j] & 0xF;
                m[j] = bq.scales[j] >> 4;
            }
            requantize_affine(x, 16, 3, half(bq.d), half(bq.dmin), sc, m, kN, codes);
            pack_2bit(codes, bq.qs);
            store_block(dst, r * per_row + b, bq);
        }
    }
}

void q3_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q3_k_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    constexpr int kN = kSuper / 16;
    const int64_t per_row = n_per_row / kSuper;
    for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t b = 0; b < per_row; ++b) {
            const float* x = src + r * n_per_row + kSuper * b;
            const float* qw = importance + kSuper * b;
            const float sigma2 = 2 * mean_square(x, kSuper);
            float scales[kN], sw[kN], w[16];
            int8_t codes[kSuper], ls[kN];
            for (int j = 0; j < kN; ++j) {
                importance_weights(x + 16 * j, qw + 16 * j, sigma2, 16, w);
                float sumw = 0;
                for (int l = 0; l < 16; ++l) sumw += w[l];
                sw[j] = sumw;
                scales[j] = fit_symmetric(16, 4, x + 16 * j, codes + 16 * j, w);
            }
            BlockQ3_K bq{};
            const float d_super = fit_symmetric(kN, 32, scales, ls, sw);
            for (int j = 0; j < kN; ++j) {
                int l = ls[j];
                if (j < 8)
                    bq.scales[j] = static_cast<uint8_t>(l & 0xF);
                else
                    bq.scales[j - 8] = static_cast<uint8_t>(bq.scales[j - 8] | ((l & 0xF) << 4));
                l >>= 4;
                bq.scales[j % 4 + 8] = static_cast<uint8_t>(bq.scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            bq.d = to_half(d_super);
            for (int j = 0; j < kN; ++j) {
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
            store_block(dst, r * per_row + b, bq);
        }
    }
}

void q4_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q4_k_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    const int64_t per_row = n_per_row / kSuper;
    for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t b = 0; b < per_row; ++b) {
            const float* x = src + r * n_per_row + kSuper * b;
            BlockQ4_K bq{};
            uint8_t codes[kSuper];
            weighted_k_scales(x, importance + kSuper * b, 15, bq.d, bq.dmin, bq.scales, codes);
            for (int c = 0; c < kSuper / 64; ++c)
                for (int l = 0; l < 32; ++l)
                    bq.qs[32 * c + l] = static_cast<uint8_t>(codes[64 * c + l] | (codes[64 * c + 32 + l] << 4));
            store_block(dst, r * per_row + b, bq);
        }
    }
}

void q5_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q5_k_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    const int64_t per_row = n_per_row / kSuper;
    for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t b = 0; b < per_row; ++b) {
            const float* x = src + r * n_per_row + kSuper * b;
            BlockQ5_K bq{};
            uint8_t codes[kSuper];
            weighted_k_scales(x, importance + kSuper * b, 31, bq.d, bq.dmin, bq.scales, codes);
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
            store_block(dst, r * per_row + b, bq);
        }
    }
}

void q6_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance) {
    if (reference_when_unweighted(q6_k_from_f32, src, dst, n_rows, n_per_row, importance)) return;
    const int64_t per_row = n_per_row / kSuper;
    for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t b = 0; b < per_row; ++b)
            store_block(dst, r * per_row + b,
                        quantize_q6_k_block(src + r * n_per_row + kSuper * b, importance + kSuper * b));
}

}  // namespace gkq::rows
