// WebAssembly-SIMD (wasm_simd128.h) reconstruction kernels, the edge tier of the kernels in kernels/cpu: the source
// documents' gkq_dequantize_simd and gkq_matmul_reconstruct_simd, and what a knot record needs besides (2/4/8-bit
// factor codes with delta coding, head folding, f16 / Q8_0 / Q4_0 blocks, the residual added in the same pass).
// Arithmetic: the oracles' f32 operations in the oracles' order (docs/codec.md; kernels/cpu/*_ref.cpp) — WebAssembly
// has no fused multiply-add in SIMD128, so every result equals the native CpuRef / gkq::decode_tensor bit for bit.
// Built by emcc into a standalone .wasm (no JavaScript glue); wasm/js/gkq_reconstructor.mjs loads it.
#include <emscripten.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#define GKQ_EXPORT EMSCRIPTEN_KEEPALIVE

enum { kChunk = 4096 };  // codes decoded per pass (stays in cache between unpack, prefix sum and convert)

// ---- factor codes -------------------------------------------------------------------------------------------------

static inline uint8_t packed_code(const uint8_t* data, uint32_t i, uint32_t bits) {
    const uint32_t per_byte = 8u / bits;
    return (uint8_t)((data[i / per_byte] >> ((i % per_byte) * bits)) & ((1u << bits) - 1u));
}

// n codes from code index `first` of an LSB-first packed stream, one per byte.
static void unpack_codes(const uint8_t* data, uint32_t bits, uint32_t first, uint32_t n, uint8_t* out) {
    if (bits == 8) {
        memcpy(out, data + first, n);
        return;
    }
    const uint32_t per_byte = 8u / bits;
    uint32_t i = 0;
    for (; i < n && (first + i) % per_byte != 0; ++i) out[i] = packed_code(data, first + i, bits);
    const uint8_t* p = data + (first + i) / per_byte;
    if (bits == 4) {
        const v128_t nibble = wasm_i8x16_splat(0x0F);
        for (; i + 32 <= n; i += 32, p += 16) {
            const v128_t b = wasm_v128_load(p);
            const v128_t lo = wasm_v128_and(b, nibble);
            const v128_t hi = wasm_u8x16_shr(b, 4);
            wasm_v128_store(out + i, wasm_i8x16_shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
            wasm_v128_store(out + i + 16,
                            wasm_i8x16_shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31));
        }
    } else {
        const v128_t pair = wasm_i8x16_splat(0x03);
        for (; i + 64 <= n; i += 64, p += 16) {
            const v128_t b = wasm_v128_load(p);
            const v128_t c0 = wasm_v128_and(b, pair);
            const v128_t c1 = wasm_v128_and(wasm_u8x16_shr(b, 2), pair);
            const v128_t c2 = wasm_v128_and(wasm_u8x16_shr(b, 4), pair);
            const v128_t c3 = wasm_u8x16_shr(b, 6);
            // byte j -> codes 4j .. 4j + 3: interleave (c0, c1) and (c2, c3) bytewise, then the pairs 16-bit-wise
            const v128_t c01_lo = wasm_i8x16_shuffle(c0, c1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            const v128_t c01_hi = wasm_i8x16_shuffle(c0, c1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            const v128_t c23_lo = wasm_i8x16_shuffle(c2, c3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            const v128_t c23_hi = wasm_i8x16_shuffle(c2, c3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            wasm_v128_store(out + i, wasm_i16x8_shuffle(c01_lo, c23_lo, 0, 8, 1, 9, 2, 10, 3, 11));
            wasm_v128_store(out + i + 16, wasm_i16x8_shuffle(c01_lo, c23_lo, 4, 12, 5, 13, 6, 14, 7, 15));
            wasm_v128_store(out + i + 32, wasm_i16x8_shuffle(c01_hi, c23_hi, 0, 8, 1, 9, 2, 10, 3, 11));
            wasm_v128_store(out + i + 48, wasm_i16x8_shuffle(c01_hi, c23_hi, 4, 12, 5, 13, 6, 14, 7, 15));
        }
    }
    for (; i < n; ++i) out[i] = packed_code(data, first + i, bits);
}

// In place: c_i = (carry + s_0 + ... + s_i) mod 2^bits; byte sums wrap mod 256, which 2^bits divides.
static void prefix_sums(uint8_t* c, uint32_t n, uint8_t mask, uint8_t* carry) {
    const v128_t zero = wasm_i8x16_splat(0), m = wasm_i8x16_splat((int8_t)mask);
    v128_t run = wasm_i8x16_splat((int8_t)*carry);
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v128_t x = wasm_v128_load(c + i);
        // x += x shifted up by 1, 2, 4, 8 bytes (zeros shifted in)
        x = wasm_i8x16_add(x, wasm_i8x16_shuffle(zero, x, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30));
        x = wasm_i8x16_add(x, wasm_i8x16_shuffle(zero, x, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29));
        x = wasm_i8x16_add(x, wasm_i8x16_shuffle(zero, x, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27));
        x = wasm_i8x16_add(x, wasm_i8x16_shuffle(zero, x, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23));
        x = wasm_i8x16_add(x, run);
        run = wasm_i8x16_shuffle(x, x, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15);
        wasm_v128_store(c + i, wasm_v128_and(x, m));
    }
    uint8_t s = (uint8_t)wasm_u8x16_extract_lane(run, 0);
    for (; i < n; ++i) {
        s = (uint8_t)(s + c[i]);
        c[i] = (uint8_t)(s & mask);
    }
    *carry = s;
}

// out[i] = (2 c_i - top) * step
static void codes_to_floats(const uint8_t* c, uint32_t n, int32_t top, float step, float* out) {
    const v128_t topv = wasm_i32x4_splat(top), stepv = wasm_f32x4_splat(step);
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const v128_t b = wasm_v128_load(c + i);
        const v128_t lo = wasm_u16x8_extend_low_u8x16(b), hi = wasm_u16x8_extend_high_u8x16(b);
        const v128_t q[4] = {wasm_u32x4_extend_low_u16x8(lo), wasm_u32x4_extend_high_u16x8(lo),
                             wasm_u32x4_extend_low_u16x8(hi), wasm_u32x4_extend_high_u16x8(hi)};
        for (int k = 0; k < 4; ++k) {
            const v128_t v = wasm_i32x4_sub(wasm_i32x4_shl(q[k], 1), topv);
            wasm_v128_store(out + i + 4 * k, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(v), stepv));
        }
    }
    for (; i < n; ++i) out[i] = (float)(2 * (int32_t)c[i] - top) * step;
}

// The documents' kernel: n 8-bit codes over [-max_val, max_val] (the codec's 8-bit factor quantizer, one vector).
GKQ_EXPORT void gkq_dequantize_simd(const uint8_t* q, float* out, uint32_t n, float max_val) {
    codes_to_floats(q, n, 255, max_val / 255.0f, out);
}

// out (n_vectors, len): vector v is the codes [first + v * len, ...) of a packed (packed != 0) or one-per-byte
// stream of `bits`-bit codes, delta coding undone per vector when `delta`; scales[v] is the vector's max |.|.
GKQ_EXPORT void gkq_dequantize_factors(const uint8_t* codes, uint32_t bits, uint32_t packed, uint32_t first,
                                       uint32_t n_vectors, uint32_t len, uint32_t delta, const float* scales,
                                       float* out) {
    const int32_t top = (1 << bits) - 1;
    uint8_t buf[kChunk];
    for (uint32_t v = 0; v < n_vectors; ++v) {
        const float step = scales[v] / (float)top;
        const uint32_t start = first + v * len;
        uint8_t carry = 0;
        for (uint32_t i = 0; i < len; i += kChunk) {
            const uint32_t n = len - i < kChunk ? len - i : kChunk;
            if (packed) unpack_codes(codes, bits, start + i, n, buf);
            else memcpy(buf, codes + start + i, n);
            if (delta) prefix_sums(buf, n, (uint8_t)top, &carry);
            codes_to_floats(buf, n, top, step, out + (size_t)v * len + i);
        }
    }
}

// out (k, n_heads * len): head g of vector r = base[r][i] * head_scales[g] (a folded factor, expanded).
GKQ_EXPORT void gkq_expand_heads(const float* base, uint32_t k, uint32_t len, const float* head_scales,
                                 uint32_t n_heads, float* out) {
    for (uint32_t r = 0; r < k; ++r)
        for (uint32_t g = 0; g < n_heads; ++g) {
            const v128_t s = wasm_f32x4_splat(head_scales[g]);
            const float* src = base + (size_t)r * len;
            float* dst = out + ((size_t)r * n_heads + g) * len;
            uint32_t i = 0;
            for (; i + 4 <= len; i += 4) wasm_v128_store(dst + i, wasm_f32x4_mul(wasm_v128_load(src + i), s));
            for (; i < len; ++i) dst[i] = src[i] * head_scales[g];
        }
}

// ---- blocks ---------------------------------------------------------------------------------------------------------

static inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t bits;
    if (e == 0) {
        const float f = (float)m * 5.9604644775390625e-08f;  // subnormal (or zero): m * 2^-24, exact
        return sign ? -f : f;
    }
    if (e == 31) bits = sign | 0x7F800000u | (m << 13);
    else bits = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float block_scale(const uint8_t* blk) {
    return f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
}

// 4 int8 at q, as floats times d.
static inline v128_t i8x4_times(const uint8_t* q, v128_t d) {
    int32_t four;
    memcpy(&four, q, 4);
    const v128_t b = wasm_i32x4_splat(four);
    const v128_t w = wasm_i32x4_extend_low_i16x8(wasm_i16x8_extend_low_i8x16(b));
    return wasm_f32x4_mul(wasm_f32x4_convert_i32x4(w), d);
}

// type 1: f16 values; 8: Q8_0 blocks; 4: Q4_0 blocks. n elements (a multiple of 32 for blocks).
GKQ_EXPORT void gkq_dequantize_blocks(uint32_t type, const uint8_t* src, uint32_t n, float* out) {
    if (type == 1) {
        for (uint32_t i = 0; i < n; ++i) out[i] = f16_to_f32((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
        return;
    }
    for (uint32_t b = 0; b < n / 32; ++b) {
        float* o = out + (size_t)b * 32;
        if (type == 8) {
            const uint8_t* blk = src + (size_t)b * 34;
            const v128_t d = wasm_f32x4_splat(block_scale(blk));
            for (int k = 0; k < 8; ++k) wasm_v128_store(o + 4 * k, i8x4_times(blk + 2 + 4 * k, d));
        } else {
            const uint8_t* blk = src + (size_t)b * 18;
            const float d = block_scale(blk);
            for (int j = 0; j < 16; ++j) {
                o[j] = (float)((blk[2 + j] & 0x0F) - 8) * d;
                o[j + 16] = (float)((blk[2 + j] >> 4) - 8) * d;
            }
        }
    }
}

// ---- reconstruction ------------------------------------------------------------------------------------------------

// Adds the residual's 8 elements e .. e + 7 (e % 8 == 0: a quarter of a 32-element block) to a0 (first 4), a1, as
// the oracle does: the low-rank sum + (q * d), each rounded.
static inline void add_residual8(const uint8_t* res, uint32_t bits, size_t e, v128_t* a0, v128_t* a1) {
    const size_t b = e / 32;
    const uint32_t j = (uint32_t)(e % 32);
    if (bits == 8) {
        const uint8_t* blk = res + b * 34;
        const v128_t d = wasm_f32x4_splat(block_scale(blk));
        *a0 = wasm_f32x4_add(*a0, i8x4_times(blk + 2 + j, d));
        *a1 = wasm_f32x4_add(*a1, i8x4_times(blk + 6 + j, d));
        return;
    }
    // Q4_0: elements j .. j + 7 are the low (j < 16) or high nibbles of bytes (j mod 16) .. (j mod 16) + 7
    const uint8_t* blk = res + b * 18;
    const v128_t d = wasm_f32x4_splat(block_scale(blk));
    v128_t x = wasm_v128_load64_zero(blk + 2 + (j & 15u));
    x = j < 16 ? wasm_v128_and(x, wasm_i8x16_splat(0x0F)) : wasm_u8x16_shr(x, 4);
    const v128_t q = wasm_i16x8_extend_low_i8x16(wasm_i8x16_sub(x, wasm_i8x16_splat(8)));
    *a0 = wasm_f32x4_add(*a0, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(q)), d));
    *a1 = wasm_f32x4_add(*a1, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(q)), d));
}

// out (rows, cols) = U diag(sigma) V^T (+ residual), u(i, r) = u[i * su_row + r * su_rank], vt (k, cols) row-major.
// Tiles of 4 rows x 8 columns: per rank, two loads of V^T serve four rows. Sums r ascending from 0, mul then add.
static void reconstruct(const float* u, size_t su_row, size_t su_rank, const float* sigma, const float* vt,
                        float* out, uint32_t rows, uint32_t cols, uint32_t k, const uint8_t* residual,
                        uint32_t residual_bits, float* us /* (k, 4) scratch */) {
    for (uint32_t i0 = 0; i0 < rows; i0 += 4) {
        const uint32_t mr = rows - i0 < 4 ? rows - i0 : 4;
        for (uint32_t r = 0; r < k; ++r)
            for (uint32_t m = 0; m < 4; ++m) us[r * 4 + m] = m < mr ? sigma[r] * u[(i0 + m) * su_row + r * su_rank] : 0.0f;
        uint32_t j = 0;
        for (; j + 8 <= cols; j += 8) {
            v128_t acc[4][2];
            for (int m = 0; m < 4; ++m) acc[m][0] = acc[m][1] = wasm_f32x4_splat(0.0f);
            const float* b = vt + j;
            for (uint32_t r = 0; r < k; ++r, b += cols) {
                const v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 4);
                for (int m = 0; m < 4; ++m) {
                    const v128_t a = wasm_f32x4_splat(us[r * 4 + m]);
                    acc[m][0] = wasm_f32x4_add(acc[m][0], wasm_f32x4_mul(a, b0));
                    acc[m][1] = wasm_f32x4_add(acc[m][1], wasm_f32x4_mul(a, b1));
                }
            }
            for (uint32_t m = 0; m < mr; ++m) {
                const size_t e = (size_t)(i0 + m) * cols + j;
                if (residual_bits) add_residual8(residual, residual_bits, e, &acc[m][0], &acc[m][1]);
                wasm_v128_store(out + e, acc[m][0]);
                wasm_v128_store(out + e + 4, acc[m][1]);
            }
        }
        for (; j < cols; ++j)  // no residual here: residual rows are whole 32-element blocks
            for (uint32_t m = 0; m < mr; ++m) {
                float acc = 0.0f;
                for (uint32_t r = 0; r < k; ++r) acc += us[r * 4 + m] * vt[(size_t)r * cols + j];
                out[(size_t)(i0 + m) * cols + j] = acc;
            }
    }
}

// The documents' kernel: out (d_out, d_in) = u diag(sigma) vt with u (d_out, rank), vt (rank, d_in) row-major.
// Returns 0, or -1 when its scratch cannot be allocated.
GKQ_EXPORT int gkq_matmul_reconstruct_simd(const float* u, const float* sigma, const float* vt, float* out,
                                           uint32_t d_out, uint32_t d_in, uint32_t rank) {
    float* us = (float*)malloc((size_t)(rank ? rank : 1) * 4 * sizeof(float));
    if (!us) return -1;
    reconstruct(u, rank, 1, sigma, vt, out, d_out, d_in, rank, 0, 0, us);
    free(us);
    return 0;
}

// A knot record's reconstruction: ut (rank, d_out) as the payload stores U's vectors, the residual blocks
// (residual_bits 4 = Q4_0, 8 = Q8_0, 0 = none; d_in a multiple of 32) added in the same pass.
GKQ_EXPORT int gkq_reconstruct_residual(const float* ut, const float* sigma, const float* vt, float* out,
                                        uint32_t d_out, uint32_t d_in, uint32_t rank, const uint8_t* residual,
                                        uint32_t residual_bits) {
    float* us = (float*)malloc((size_t)(rank ? rank : 1) * 4 * sizeof(float));
    if (!us) return -1;
    reconstruct(ut, 1, d_out, sigma, vt, out, d_out, d_in, rank, residual, residual_bits, us);
    free(us);
    return 0;
}

GKQ_EXPORT void* gkq_malloc(uint32_t bytes) {
    return malloc(bytes ? bytes : 1);
}

GKQ_EXPORT void gkq_free(void* p) {
    free(p);
}
