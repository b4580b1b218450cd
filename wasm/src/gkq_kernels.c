// WebAssembly-SIMD (wasm_simd128.h) reconstruction kernels, the edge tier of the kernels in kernels/cpu: the source
// documents' gkq_dequantize_simd and gkq_matmul_reconstruct_simd, and what a knot record needs besides (2/4/8-bit
// factor codes with delta coding, head folding, f16 / Q8_0 / Q4_0 blocks, the residual added in the same pass).
// Arithmetic: the oracles' f32 operations in the oracles' order (docs/codec.md; kernels/cpu/*_ref.cpp) — WebAssembly
// has no fused multiply-add in SIMD128, so every result equals the native CpuRef / gkq::decode_tensor bit for bit.
// Built by emcc into a standalone .wasm (no JavaScript glue); wasm/ts/gkq_reconstructor.mts loads it.
#include "gkq/block_layout.h"

#include <emscripten.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#define GKQ_EXPORT EMSCRIPTEN_KEEPALIVE

enum { kChunk = 4096 };  // codes decoded per pass (stays in cache between unpack, prefix sum and convert)

// The code below takes a Q8_0 or Q4_0 block as 8 vectors of 4 floats, its codes as 16-byte vectors.
enum { kQBlock = GKQ_Q8_0_BLOCK_ELEMENTS };  // elements of a Q8_0 / Q4_0 block
_Static_assert(GKQ_Q8_0_BLOCK_ELEMENTS == 8 * 4 && GKQ_Q4_0_BLOCK_ELEMENTS == GKQ_Q8_0_BLOCK_ELEMENTS,
               "the block loops assume 8 vectors of 4 floats per block");

// The block sizes the kernels were built with, for the TypeScript reconstructor's payload checks: type 8 (Q8_0) or
// 4 (Q4_0), as gkq_dequantize_blocks numbers them; 0 for any other type.
GKQ_EXPORT uint32_t gkq_block_elements(uint32_t type) {
    return type == 8 ? GKQ_Q8_0_BLOCK_ELEMENTS : type == 4 ? GKQ_Q4_0_BLOCK_ELEMENTS : 0;
}

GKQ_EXPORT uint32_t gkq_block_bytes(uint32_t type) {
    return type == 8 ? GKQ_Q8_0_BLOCK_BYTES : type == 4 ? GKQ_Q4_0_BLOCK_BYTES : 0;
}

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
            wasm_v128_store(out + i,
                            wasm_i8x16_shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
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
            const v128_t c01_hi =
                wasm_i8x16_shuffle(c0, c1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            const v128_t c23_lo = wasm_i8x16_shuffle(c2, c3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            const v128_t c23_hi =
                wasm_i8x16_shuffle(c2, c3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
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
        x = wasm_i8x16_add(x,
                           wasm_i8x16_shuffle(zero, x, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30));
        x = wasm_i8x16_add(x,
                           wasm_i8x16_shuffle(zero, x, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29));
        x = wasm_i8x16_add(x,
                           wasm_i8x16_shuffle(zero, x, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27));
        x = wasm_i8x16_add(x,
                           wasm_i8x16_shuffle(zero, x, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23));
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

// Small integers to floats without an int -> float conversion instruction: LLVM narrows convert_i32x4 of a value it
// knows to fit 8 or 16 bits into a conversion from i8 / i16 vectors, which it then scalarizes (lane extracts and
// scalar cvtsi2ss: measured 3-4x slower). Instead: the bits 0x4B000000 | u are the float 2^23 + u (u < 2^23), and
// (2^23 + u) - (2^23 + bias) = u - bias exactly, for integers |u - bias| < 2^23 — the same value the conversion gives.
static inline v128_t u32_minus_to_f32(v128_t u, float bias) {
    return wasm_f32x4_sub(wasm_v128_or(u, wasm_i32x4_splat(0x4B000000)), wasm_f32x4_splat(8388608.0f + bias));
}

// 16 bytes as 4 vectors of 4 u32 lanes (zero-extended).
static inline void u8x16_to_u32(v128_t b, v128_t q[4]) {
    const v128_t lo = wasm_u16x8_extend_low_u8x16(b), hi = wasm_u16x8_extend_high_u8x16(b);
    q[0] = wasm_u32x4_extend_low_u16x8(lo);
    q[1] = wasm_u32x4_extend_high_u16x8(lo);
    q[2] = wasm_u32x4_extend_low_u16x8(hi);
    q[3] = wasm_u32x4_extend_high_u16x8(hi);
}

// out[i] = (2 c_i - top) * step
static void codes_to_floats(const uint8_t* c, uint32_t n, int32_t top, float step, float* out) {
    const v128_t stepv = wasm_f32x4_splat(step);
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v128_t q[4];
        u8x16_to_u32(wasm_v128_load(c + i), q);
        for (int k = 0; k < 4; ++k)
            wasm_v128_store(out + i + 4 * k,
                            wasm_f32x4_mul(u32_minus_to_f32(wasm_i32x4_shl(q[k], 1), (float)top), stepv));
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
            if (packed)
                unpack_codes(codes, bits, start + i, n, buf);
            else
                memcpy(buf, codes + start + i, n);
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
    if (e == 31)
        bits = sign | 0x7F800000u | (m << 13);
    else
        bits = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float block_scale(const uint8_t* blk) {
    return f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
}

// 16 bytes u (one vector) as the integers u - bias, times d: 4 vectors of floats (u - bias) * d, each rounded.
static inline void u8x16_times(v128_t u, float bias, v128_t d, v128_t f[4]) {
    v128_t q[4];
    u8x16_to_u32(u, q);
    for (int k = 0; k < 4; ++k) f[k] = wasm_f32x4_mul(u32_minus_to_f32(q[k], bias), d);
}

// 16 int8 q (Q8_0) times d: q + 128 is the byte with its top bit flipped.
static inline void i8x16_times(v128_t q, v128_t d, v128_t f[4]) {
    u8x16_times(wasm_v128_xor(q, wasm_i8x16_splat((int8_t)0x80)), 128.0f, d, f);
}

// 16 Q4_0 codes (one per byte, 0-15) times d: (q - 8) * d.
static inline void nibbles_times(v128_t q, v128_t d, v128_t f[4]) {
    u8x16_times(q, 8.0f, d, f);
}

// 4 f16 values (the low 16 bits of each lane) as f32, exactly as f16_to_f32: normals rebias the exponent,
// infinities and NaNs keep their payload, subnormals are m * 2^-24 (exact in f32).
static inline v128_t f16x4_to_f32(v128_t h) {
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
    const v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7FFF));
    const v128_t e = wasm_u32x4_shr(em, 10);
    const v128_t normal = wasm_i32x4_add(wasm_i32x4_shl(em, 13), wasm_i32x4_splat(112 << 23));
    const v128_t special = wasm_v128_or(wasm_i32x4_shl(em, 13), wasm_i32x4_splat(0x7F800000));
    const v128_t sub = wasm_f32x4_mul(u32_minus_to_f32(em, 0.0f), wasm_f32x4_splat(5.9604644775390625e-08f));
    v128_t bits = wasm_v128_bitselect(special, normal, wasm_i32x4_eq(e, wasm_i32x4_splat(31)));
    bits = wasm_v128_bitselect(sub, bits, wasm_i32x4_eq(e, wasm_i32x4_splat(0)));
    return wasm_v128_or(bits, sign);
}

// type 1: f16 values; 8: Q8_0 blocks; 4: Q4_0 blocks. n elements (whole blocks for the block types).
GKQ_EXPORT void gkq_dequantize_blocks(uint32_t type, const uint8_t* src, uint32_t n, float* out) {
    if (type == 1) {
        uint32_t i = 0;
        for (; i + 8 <= n; i += 8) {
            const v128_t h = wasm_v128_load(src + 2 * i);
            wasm_v128_store(out + i, f16x4_to_f32(wasm_u32x4_extend_low_u16x8(h)));
            wasm_v128_store(out + i + 4, f16x4_to_f32(wasm_u32x4_extend_high_u16x8(h)));
        }
        for (; i < n; ++i) out[i] = f16_to_f32((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
        return;
    }
    for (uint32_t b = 0; b < n / kQBlock; ++b) {
        float* o = out + (size_t)b * kQBlock;
        if (type == 8) {
            const uint8_t* blk = src + (size_t)b * GKQ_Q8_0_BLOCK_BYTES;
            const v128_t d = wasm_f32x4_splat(block_scale(blk));
            v128_t f[8];
            i8x16_times(wasm_v128_load(blk + GKQ_BLOCK_SCALE_BYTES), d, f);
            i8x16_times(wasm_v128_load(blk + GKQ_BLOCK_SCALE_BYTES + 16), d, f + 4);
            for (int v = 0; v < 8; ++v) wasm_v128_store(o + 4 * v, f[v]);
        } else {
            // elements 0-15 are the low nibbles of the 16 bytes, 16-31 the high ones; value (q - 8) * d
            const uint8_t* blk = src + (size_t)b * GKQ_Q4_0_BLOCK_BYTES;
            const v128_t d = wasm_f32x4_splat(block_scale(blk));
            const v128_t x = wasm_v128_load(blk + GKQ_BLOCK_SCALE_BYTES);
            v128_t f[8];
            nibbles_times(wasm_v128_and(x, wasm_i8x16_splat(0x0F)), d, f);
            nibbles_times(wasm_u8x16_shr(x, 4), d, f + 4);
            for (int v = 0; v < 8; ++v) wasm_v128_store(o + 4 * v, f[v]);
        }
    }
}

// ---- reconstruction ------------------------------------------------------------------------------------------------

// Blocked like the native AVX2 kernel (kernels/cpu/reconstruct_avx2.cpp), with the register tile V8 can hold in
// x64's 16 XMM registers (V8 keeps one as scratch): kMR rows x 2 vectors of columns = 8 accumulators, the 2 vectors
// of V^T, the broadcast and the product — 15 registers, no spill. (Node 20's V8 on the AMD EPYC build VM, rank 64,
// CPU time: 2 x 4, 3 x 2 and 1 x 6 vector tiles took 3-65% longer; 4 x 4 would spill.) V^T is packed one column
// block at a time into strips of kNR columns (k x kNR floats, contiguous): unpacked, the k rows of a strip lie
// cols * 4 bytes apart — in one L1 set when cols is a power of two — and a tile's loads missed L1 every time.
enum { kMR = 4, kNR = 8, kPanelFloats = 64 * 1024 /* 256 KB: the packed block stays in L2 */ };

// o[0, n) += the residual's elements e .. e + n - 1 (both multiples of kQBlock: whole Q4_0 / Q8_0 blocks), as the
// oracle adds them: the low-rank sum (already rounded to f32 in o) + (q * d). Runs right after the tiles stored o,
// while it is still in cache; one f16 scale per block instead of one per tile row.
static void add_residual_blocks(float* o, const uint8_t* res, uint32_t bits, size_t e, size_t n) {
    for (size_t b = e / kQBlock; b < (e + n) / kQBlock; ++b, o += kQBlock) {
        v128_t f[8];
        if (bits == 8) {
            const uint8_t* blk = res + b * GKQ_Q8_0_BLOCK_BYTES;
            const v128_t d = wasm_f32x4_splat(block_scale(blk));
            i8x16_times(wasm_v128_load(blk + GKQ_BLOCK_SCALE_BYTES), d, f);
            i8x16_times(wasm_v128_load(blk + GKQ_BLOCK_SCALE_BYTES + 16), d, f + 4);
        } else {
            // elements 0-15 are the low nibbles of the 16 bytes, 16-31 the high ones; value (q - 8) * d
            const uint8_t* blk = res + b * GKQ_Q4_0_BLOCK_BYTES;
            const v128_t d = wasm_f32x4_splat(block_scale(blk));
            const v128_t x = wasm_v128_load(blk + GKQ_BLOCK_SCALE_BYTES);
            nibbles_times(wasm_v128_and(x, wasm_i8x16_splat(0x0F)), d, f);
            nibbles_times(wasm_u8x16_shr(x, 4), d, f + 4);
        }
        for (int v = 0; v < 8; ++v) wasm_v128_store(o + 4 * v, wasm_f32x4_add(wasm_v128_load(o + 4 * v), f[v]));
    }
}

// The last row tile's rows [0, mr) (mr < kMR). Out of line, so that the accumulators of tile() never live in linear
// memory: an array indexed at run time would put them there, and that store and reload around every tile cost more
// than the whole write of W at rank 0.
__attribute__((noinline)) static void store_tile_rows(float* out, size_t cols, uint32_t mr, v128_t c00, v128_t c01,
                                                      v128_t c10, v128_t c11, v128_t c20, v128_t c21, v128_t c30,
                                                      v128_t c31) {
    const v128_t acc[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (uint32_t m = 0; m < mr; ++m) {
        wasm_v128_store(out + m * cols, acc[m][0]);
        wasm_v128_store(out + m * cols + 4, acc[m][1]);
    }
}

// One kMR x kNR tile: a (k, kMR) sigma * U (zeros past row mr), b (k, kNR) a packed strip; rows [0, mr) go to out
// (row stride cols). Sums r ascending from 0: mul, then add (the oracle's order; no FMA in SIMD128).
static inline void tile(const float* a, const float* b, uint32_t k, float* out, size_t cols, uint32_t mr) {
    const v128_t zero = wasm_f32x4_splat(0.0f);
    v128_t c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero, c30 = zero, c31 = zero;
    for (uint32_t r = 0; r < k; ++r, a += kMR, b += kNR) {
        const v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 4);
        v128_t x = wasm_v128_load32_splat(a);
        c00 = wasm_f32x4_add(c00, wasm_f32x4_mul(x, b0));
        c01 = wasm_f32x4_add(c01, wasm_f32x4_mul(x, b1));
        x = wasm_v128_load32_splat(a + 1);
        c10 = wasm_f32x4_add(c10, wasm_f32x4_mul(x, b0));
        c11 = wasm_f32x4_add(c11, wasm_f32x4_mul(x, b1));
        x = wasm_v128_load32_splat(a + 2);
        c20 = wasm_f32x4_add(c20, wasm_f32x4_mul(x, b0));
        c21 = wasm_f32x4_add(c21, wasm_f32x4_mul(x, b1));
        x = wasm_v128_load32_splat(a + 3);
        c30 = wasm_f32x4_add(c30, wasm_f32x4_mul(x, b0));
        c31 = wasm_f32x4_add(c31, wasm_f32x4_mul(x, b1));
    }
    if (mr < kMR) {
        store_tile_rows(out, cols, mr, c00, c01, c10, c11, c20, c21, c30, c31);
        return;
    }
    wasm_v128_store(out, c00);
    wasm_v128_store(out + 4, c01);
    wasm_v128_store(out + cols, c10);
    wasm_v128_store(out + cols + 4, c11);
    wasm_v128_store(out + 2 * cols, c20);
    wasm_v128_store(out + 2 * cols + 4, c21);
    wasm_v128_store(out + 3 * cols, c30);
    wasm_v128_store(out + 3 * cols + 4, c31);
}

// Scratch floats reconstruct() needs: the packed block and sigma * U for kMR rows.
static size_t block_cols_for(uint32_t cols, uint32_t k) {
    const size_t main_cols = cols - cols % kNR;
    // a multiple of kQBlock columns: a residual block never straddles two column blocks
    size_t block = (size_t)kPanelFloats / (k ? k : 1) / kQBlock * kQBlock;
    if (block < kQBlock) block = kQBlock;
    return block < main_cols ? block : main_cols;
}

// out (rows, cols) = U diag(sigma) V^T (+ residual), u(i, r) = u[i * su_row + r * su_rank], vt (k, cols) row-major;
// panel holds k * block_cols_for(cols, k) floats, a k * kMR.
static void reconstruct(const float* u, size_t su_row, size_t su_rank, const float* sigma, const float* vt, float* out,
                        uint32_t rows, uint32_t cols, uint32_t k, const uint8_t* residual, uint32_t residual_bits,
                        float* panel, float* a) {
    const size_t main_cols = cols - cols % kNR, block_cols = block_cols_for(cols, k);
    for (size_t jb = 0; jb < main_cols; jb += block_cols) {
        const size_t nb = main_cols - jb < block_cols ? main_cols - jb : block_cols;
        for (size_t s = 0; s < nb / kNR; ++s)
            for (uint32_t r = 0; r < k; ++r) {
                const float* src = vt + (size_t)r * cols + jb + s * kNR;
                float* dst = panel + (s * k + r) * kNR;
                wasm_v128_store(dst, wasm_v128_load(src));
                wasm_v128_store(dst + 4, wasm_v128_load(src + 4));
            }
        for (uint32_t i0 = 0; i0 < rows; i0 += kMR) {
            const uint32_t mr = rows - i0 < kMR ? rows - i0 : kMR;
            for (uint32_t r = 0; r < k; ++r)
                for (uint32_t m = 0; m < kMR; ++m)
                    a[r * kMR + m] = m < mr ? sigma[r] * u[(i0 + m) * su_row + r * su_rank] : 0.0f;
            const size_t e = (size_t)i0 * cols + jb;
            for (size_t s = 0; s < nb / kNR; ++s) tile(a, panel + s * k * kNR, k, out + e + s * kNR, cols, mr);
            if (residual_bits)
                for (uint32_t m = 0; m < mr; ++m)
                    add_residual_blocks(out + e + m * cols, residual, residual_bits, e + m * cols, nb);
        }
    }
    // the last cols % kNR columns, scalar (no residual here: residual rows are whole blocks)
    for (size_t j = main_cols; j < cols; ++j)
        for (uint32_t i = 0; i < rows; ++i) {
            float acc = 0.0f;
            for (uint32_t r = 0; r < k; ++r) acc += sigma[r] * u[i * su_row + r * su_rank] * vt[(size_t)r * cols + j];
            out[(size_t)i * cols + j] = acc;
        }
}

// Runs reconstruct() with its scratch; 0, or -1 when the scratch cannot be allocated.
static int reconstruct_with_scratch(const float* u, size_t su_row, size_t su_rank, const float* sigma, const float* vt,
                                    float* out, uint32_t rows, uint32_t cols, uint32_t k, const uint8_t* residual,
                                    uint32_t residual_bits) {
    const size_t n_panel = (size_t)k * block_cols_for(cols, k), n_a = (size_t)(k ? k : 1) * kMR;
    float* scratch = (float*)malloc((n_panel + n_a) * sizeof(float));
    if (!scratch) return -1;
    reconstruct(u, su_row, su_rank, sigma, vt, out, rows, cols, k, residual, residual_bits, scratch + n_a, scratch);
    free(scratch);
    return 0;
}

// The documents' kernel: out (d_out, d_in) = u diag(sigma) vt with u (d_out, rank), vt (rank, d_in) row-major.
// Returns 0, or -1 when its scratch cannot be allocated.
GKQ_EXPORT int gkq_matmul_reconstruct_simd(const float* u, const float* sigma, const float* vt, float* out,
                                           uint32_t d_out, uint32_t d_in, uint32_t rank) {
    return reconstruct_with_scratch(u, rank, 1, sigma, vt, out, d_out, d_in, rank, 0, 0);
}

// A knot record's reconstruction: ut (rank, d_out) as the payload stores U's vectors, the residual blocks
// (residual_bits 4 = Q4_0, 8 = Q8_0, 0 = none; d_in whole blocks) added to each row tile as it is written.
GKQ_EXPORT int gkq_reconstruct_residual(const float* ut, const float* sigma, const float* vt, float* out,
                                        uint32_t d_out, uint32_t d_in, uint32_t rank, const uint8_t* residual,
                                        uint32_t residual_bits) {
    return reconstruct_with_scratch(ut, 1, d_out, sigma, vt, out, d_out, d_in, rank, residual, residual_bits);
}

GKQ_EXPORT void* gkq_malloc(uint32_t bytes) {
    return malloc(bytes ? bytes : 1);
}

GKQ_EXPORT void gkq_free(void* p) {
    free(p);
}
