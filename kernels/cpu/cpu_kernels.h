// The CPU kernels behind gkq/kernels.h: scalar *_ref oracles (the arithmetic of docs/codec.md, as the codec does it)
// and their AVX2/FMA/F16C versions (*_avx2, in files compiled with -mavx2 -mfma -mf16c: call them only when
// cpu_has_avx2_fma() says so). Arguments are checked by the dispatcher (kernels/src/dispatch.cpp), not here.
// The *_avx2 functions split their work over `n_threads` threads (the caller included) by output rows / vectors.
#pragma once

#include <cstdint>

namespace gkq::kernels::cpu {

// ---- scalar oracles ----

// One code at code index i of an LSB-first packed stream of `bits`-bit codes.
inline uint8_t packed_code(const uint8_t* data, uint64_t i, int bits) {
    const unsigned per_byte = 8u / static_cast<unsigned>(bits);
    return static_cast<uint8_t>((data[i / per_byte] >> ((i % per_byte) * static_cast<unsigned>(bits))) &
                                ((1u << bits) - 1u));
}

// See gkq::kernels::dequantize_factors.
void dequantize_factors_ref(const uint8_t* codes, int bits, bool packed, uint64_t first, int64_t n_vectors, int64_t len,
                            bool delta, const float* scales, float* out);
// out (k, n_heads * len): head g of vector r = base[r][i] * head_scales[g] (a folded factor expanded).
void expand_heads_ref(const float* base, int64_t k, int64_t len, const float* head_scales, int64_t n_heads, float* out);
void dequantize_f16_ref(const uint8_t* src, uint64_t n, float* out);
void dequantize_q8_0_ref(const uint8_t* src, uint64_t n, float* out);
void dequantize_q4_0_ref(const uint8_t* src, uint64_t n, float* out);
// See gkq::kernels::reconstruct; residual_bits 0, 4 or 8.
void reconstruct_ref(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                     const uint8_t* residual, int residual_bits, float* out);

// ---- AVX2 / FMA / F16C ----

bool cpu_has_avx2_fma();  // AVX2, FMA and F16C, as __builtin_cpu_supports reports them

void dequantize_factors_avx2(const uint8_t* codes, int bits, bool packed, uint64_t first, int64_t n_vectors,
                             int64_t len, bool delta, const float* scales, float* out, int n_threads);
void dequantize_f16_avx2(const uint8_t* src, uint64_t n, float* out, int n_threads);
void dequantize_q8_0_avx2(const uint8_t* src, uint64_t n, float* out, int n_threads);
void dequantize_q4_0_avx2(const uint8_t* src, uint64_t n, float* out, int n_threads);
void reconstruct_avx2(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                      const uint8_t* residual, int residual_bits, float* out, int n_threads);

// Outputs at least this large are written with streaming stores (they would only evict the caches).
inline constexpr uint64_t kStreamingMinBytes = uint64_t{16} << 20;

}  // namespace gkq::kernels::cpu
