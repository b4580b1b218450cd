// AVX2/F16C dequantization: factor codes (unpack 2/4/8-bit, delta prefix sums, codes to floats) and f16 / Q8_0 /
// Q4_0 blocks. Every value is computed with the oracle's f32 operations (an exact int -> float conversion and one
// multiply), so the results equal dequantize_*_ref bit for bit. Compiled with -mavx2 -mfma -mf16c: call only when
// cpu_has_avx2_fma().
#include "cpu/cpu_kernels.h"
#include "cpu/parallel.h"
#include "gkq/block_layout.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace gkq::kernels::cpu {

// The vector helpers are static and inlined: their 32-byte arguments never cross an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

// Codes are decoded in chunks that stay in L1 between the unpack, prefix-sum and convert passes.
constexpr int64_t kCodeChunk = 4096;

uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

bool aligned(const void* p, uintptr_t a) {
    return reinterpret_cast<uintptr_t>(p) % a == 0;
}

inline void store8(float* p, __m256 v, bool stream) {
    if (stream)
        _mm256_stream_ps(p, v);
    else
        _mm256_storeu_ps(p, v);
}

// n codes from code index `first` of a packed stream, one per byte.
void unpack_codes(const uint8_t* data, int bits, uint64_t first, int64_t n, uint8_t* out) {
    if (bits == 8) {
        std::memcpy(out, data + first, static_cast<size_t>(n));
        return;
    }
    const uint64_t per_byte = 8u / static_cast<unsigned>(bits);
    int64_t i = 0;
    for (; i < n && (first + static_cast<uint64_t>(i)) % per_byte != 0; ++i)
        out[i] = packed_code(data, first + static_cast<uint64_t>(i), bits);
    const uint8_t* p = data + (first + static_cast<uint64_t>(i)) / per_byte;
    const __m128i nibble = _mm_set1_epi8(0x0F);
    if (bits == 4) {
        // byte j holds codes 2j (low nibble) and 2j + 1 (high nibble)
        for (; i + 32 <= n; i += 32, p += 16) {
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
            const __m128i lo = _mm_and_si128(b, nibble);
            const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_unpacklo_epi8(lo, hi));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 16), _mm_unpackhi_epi8(lo, hi));
        }
    } else {
        // byte j holds codes 4j .. 4j + 3 in bit pairs 0-1, 2-3, 4-5, 6-7
        const __m128i pair = _mm_set1_epi8(0x03);
        for (; i + 64 <= n; i += 64, p += 16) {
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
            const __m128i c0 = _mm_and_si128(b, pair);
            const __m128i c1 = _mm_and_si128(_mm_srli_epi16(b, 2), pair);
            const __m128i c2 = _mm_and_si128(_mm_srli_epi16(b, 4), pair);
            const __m128i c3 = _mm_and_si128(_mm_srli_epi16(b, 6), pair);
            const __m128i c01_lo = _mm_unpacklo_epi8(c0, c1), c01_hi = _mm_unpackhi_epi8(c0, c1);
            const __m128i c23_lo = _mm_unpacklo_epi8(c2, c3), c23_hi = _mm_unpackhi_epi8(c2, c3);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_unpacklo_epi16(c01_lo, c23_lo));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 16), _mm_unpackhi_epi16(c01_lo, c23_lo));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 32), _mm_unpacklo_epi16(c01_hi, c23_hi));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 48), _mm_unpackhi_epi16(c01_hi, c23_hi));
        }
    }
    for (; i < n; ++i) out[i] = packed_code(data, first + static_cast<uint64_t>(i), bits);
}

// In place: c_i = (carry + s_0 + ... + s_i) mod 2^bits. Byte additions wrap mod 256, and 2^bits divides 256, so the
// sums are masked only when stored. `carry` is the running sum (mod 256) before this chunk, and after it.
void prefix_sums(uint8_t* c, int64_t n, uint8_t mask, uint8_t& carry) {
    const __m128i m = _mm_set1_epi8(static_cast<char>(mask));
    const __m128i last = _mm_set1_epi8(15);
    __m128i run = _mm_set1_epi8(static_cast<char>(carry));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 1));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 2));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 4));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 8));
        x = _mm_add_epi8(x, run);
        run = _mm_shuffle_epi8(x, last);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i), _mm_and_si128(x, m));
    }
    auto s = static_cast<uint8_t>(_mm_cvtsi128_si32(run));
    for (; i < n; ++i) {
        s = static_cast<uint8_t>(s + c[i]);
        c[i] = static_cast<uint8_t>(s & mask);
    }
    carry = s;
}

// out[i] = (2 c_i - top) * step.
void codes_to_floats(const uint8_t* c, int64_t n, int top, float step, float* out, bool stream) {
    const __m256i topv = _mm256_set1_epi32(top);
    const __m256 stepv = _mm256_set1_ps(step);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t eight;
        std::memcpy(&eight, c + i, 8);
        const __m256i ci = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(eight)));
        const __m256i q = _mm256_sub_epi32(_mm256_add_epi32(ci, ci), topv);
        store8(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(q), stepv), stream);
    }
    for (; i < n; ++i) out[i] = static_cast<float>(2 * static_cast<int>(c[i]) - top) * step;
}

}  // namespace

void dequantize_factors_avx2(const uint8_t* codes, int bits, bool packed, uint64_t first, int64_t n_vectors,
                             int64_t len, bool delta, const float* scales, float* out, int n_threads) {
    const int top = (1 << bits) - 1;
    const uint64_t out_bytes = static_cast<uint64_t>(n_vectors) * static_cast<uint64_t>(len) * 4;
    // Every chunk starts 32-byte aligned when out is and len is a multiple of 8.
    const bool stream = out_bytes >= kStreamingMinBytes && aligned(out, 32) && len % 8 == 0;
    const int64_t per_vector = std::max<int64_t>(1, (len + kCodeChunk - 1) / kCodeChunk);
    const int64_t min_vectors = std::max<int64_t>(1, 64 / per_vector);  // ~256K codes before another thread helps
    const int64_t chunk = chunk_for(n_vectors, n_threads, 1, min_vectors);
    std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(n_workers(n_vectors, chunk, n_threads)));
    for (auto& b : bufs) b.resize(static_cast<size_t>(std::min(len, kCodeChunk)));
    parallel_chunks(n_vectors, chunk, n_threads, [&](int worker, int64_t v0, int64_t v1) {
        std::vector<uint8_t>& buf = bufs[static_cast<size_t>(worker)];
        for (int64_t v = v0; v < v1; ++v) {
            const float step = scales[v] / static_cast<float>(top);
            const uint64_t start = first + static_cast<uint64_t>(v) * static_cast<uint64_t>(len);
            uint8_t carry = 0;
            for (int64_t i = 0; i < len; i += kCodeChunk) {
                const int64_t n = std::min(kCodeChunk, len - i);
                if (packed)
                    unpack_codes(codes, bits, start + static_cast<uint64_t>(i), n, buf.data());
                else
                    std::memcpy(buf.data(), codes + start + static_cast<uint64_t>(i), static_cast<size_t>(n));
                if (delta) prefix_sums(buf.data(), n, static_cast<uint8_t>(top), carry);
                codes_to_floats(buf.data(), n, top, step, out + v * len + i, stream);
            }
        }
        if (stream) _mm_sfence();
    });
}

void dequantize_f16_avx2(const uint8_t* src, uint64_t n, float* out, int n_threads) {
    const bool stream = n * 4 >= kStreamingMinBytes && aligned(out, 32);
    const auto n8 = static_cast<int64_t>(n / 8);
    parallel_chunks(n8, chunk_for(n8, n_threads, 64, 32768), n_threads, [&](int, int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * b));
            store8(out + 8 * b, _mm256_cvtph_ps(h), stream);
        }
        if (stream) _mm_sfence();
    });
    for (uint64_t i = n / 8 * 8; i < n; ++i) out[i] = _cvtsh_ss(load_u16(src + 2 * i));
}

void dequantize_q8_0_avx2(const uint8_t* src, uint64_t n, float* out, int n_threads) {
    constexpr BlockLayout Q8 = kQ8_0Block;
    static_assert(Q8.elements == 4 * 8, "a Q8_0 block is four vectors of 8 floats here");
    const bool stream = n * 4 >= kStreamingMinBytes && aligned(out, 32);
    const auto n_blocks = static_cast<int64_t>(n / Q8.elements);
    parallel_chunks(n_blocks, chunk_for(n_blocks, n_threads, 64, 8192), n_threads, [&](int, int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
            const uint8_t* blk = src + b * Q8.bytes;
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(blk)));
            float* o = out + b * Q8.elements;
            for (int h = 0; h < 4; ++h) {
                uint64_t eight;
                std::memcpy(&eight, blk + Q8.codes_offset + 8 * h, 8);
                const __m256i q = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(static_cast<long long>(eight)));
                store8(o + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d), stream);
            }
        }
        if (stream) _mm_sfence();
    });
}

void dequantize_q4_0_avx2(const uint8_t* src, uint64_t n, float* out, int n_threads) {
    constexpr BlockLayout Q4 = kQ4_0Block;
    static_assert(Q4.elements == 2 * 16, "a Q4_0 block is one 16-byte vector of nibble pairs here");
    const bool stream = n * 4 >= kStreamingMinBytes && aligned(out, 32);
    const auto n_blocks = static_cast<int64_t>(n / Q4.elements);
    const __m128i nibble = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    parallel_chunks(n_blocks, chunk_for(n_blocks, n_threads, 64, 8192), n_threads, [&](int, int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
            const uint8_t* blk = src + b * Q4.bytes;
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(blk)));
            const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + Q4.codes_offset));
            const __m128i lo = _mm_sub_epi8(_mm_and_si128(x, nibble), eight);                     // elements 0-15
            const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), nibble), eight);  // 16-31
            float* o = out + b * Q4.elements;
            store8(o, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d), stream);
            store8(o + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d), stream);
            store8(o + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d), stream);
            store8(o + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d), stream);
        }
        if (stream) _mm_sfence();
    });
}

}  // namespace gkq::kernels::cpu
