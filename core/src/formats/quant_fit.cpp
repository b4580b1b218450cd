// The fits and bit packing that ggml's quantizers share (ggml-quants.c's make_qx_quants, make_q3_quants,
// make_qkx2_quants / make_qkx3_quants, make_qp_quants, best_index_int8 and the scale packings), each reproduced
// operation for operation (quant_blocks.h).
#include "quant_blocks.h"

#include <algorithm>
#include <cmath>

namespace gkq::quant {

// The IQ4_NL code book (ggml's kvalues_iq4nl), ascending.
const int8_t kNonLinearCodes[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The index of the code nearest to v (the lower one on a tie), by bisection as ggml's best_index_int8.
int nearest_code(float v) {
    constexpr int n = 16;
    if (v <= kNonLinearCodes[0]) return 0;
    if (v >= kNonLinearCodes[n - 1]) return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < kNonLinearCodes[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - kNonLinearCodes[hi - 1] < kNonLinearCodes[hi] - v ? hi - 1 : hi;
}

// ---------------------------------------------------------------------------------------------------------
// Sub-block fits

// Symmetric codes in [-nmax, nmax - 1] for n values, stored offset by nmax in `codes`; returns the scale. The
// weight of value i is qw[i], or x^2 without qw. Starts from the scale that maps the largest-magnitude value onto
// -nmax, then tries 18 nearby scales and keeps the codes whose least-squares scale explains the most of sum w x^2
// (ggml's make_qx_quants with rmse_type 1).
float fit_symmetric(int n, int nmax, const float* x, int8_t* codes, const float* qw) {
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
        const float w = qw != nullptr ? qw[i] : x[i] * x[i];
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
            const float w = qw != nullptr ? qw[i] : x[i] * x[i];
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

// Non-negative codes in [0, nmax] for n values x >= 0 (sub-block scales or mins), weighted by qw (ggml's
// make_qp_quants): the best of nine trial scales around nmax / max, then up to five passes moving single codes
// where that raises the weighted fit. Returns the scale.
float fit_positive(int n, int nmax, const float* x, uint8_t* codes, const float* qw) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
    if (max < kGroupMaxEps) {
        std::fill(codes, codes + n, uint8_t{0});
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * codes[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int step = -4; step <= 4; ++step) {
        if (step == 0) continue;
        const float iscale_step = (0.1f * step + nmax) / max;
        const float scale_step = 1 / iscale_step;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::min(nmax, nearest_int(iscale_step * x[i]));
            const float diff = x[i] - scale_step * l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_step;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::min(nmax, nearest_int(iscale * x[i]));
        codes[i] = static_cast<uint8_t>(l);
        sumlx += qw[i] * x[i] * l;
        suml2 += qw[i] * l * l;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = qw[i];
            float slx = sumlx - w * x[i] * codes[i];
            float sl2 = suml2 - w * codes[i] * codes[i];
            if (slx > 0 && sl2 > 0) {
                const int l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
                if (l != codes[i]) {
                    slx += w * x[i] * l;
                    sl2 += w * l * l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        codes[i] = static_cast<uint8_t>(l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
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

int two_bit(const uint8_t* qs, int e) {
    const int r = e % 128;
    return (qs[(e / 128) * 32 + r % 32] >> (2 * (r / 32))) & 3;
}

}  // namespace gkq::quant
