// The scalar reference dot products of the type table (gkq/type_traits.h's dot_f32): the row converted exactly
// (to_f32) a block or chunk at a time, each value multiplied by its activation and summed in the transformer's order
// (core/src/infer/kernels.h): eight lane sums, lane k taking the terms j = k (mod 8) below n - n % 8 in ascending j,
// combined as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the remaining terms added in order. The oracle
// of the transformer's stored products (scalar and SIMD), which give these bits; built with -ffp-contract=off like the
// quantizers.
#include "convert_rows.h"
#include "quant_blocks.h"

#include <algorithm>

namespace gkq::rows {

namespace {

// The lane sums of one row, fed in order a piece at a time.
class LaneDot {
public:
    explicit LaneDot(int64_t n) : m_n8(n & ~int64_t{7}) {}
    // Converted values w[0..m) of row positions j0..j0+m-1 against x (the whole row's activations).
    void add(const float* w, const float* x, int64_t j0, int64_t m) {
        for (int64_t i = 0; i < m; ++i) {
            const int64_t j = j0 + i;
            if (j < m_n8)
                m_lane[j & 7] += w[i] * x[j];
            else
                m_tail[m_n_tail++] = w[i] * x[j];
        }
    }
    float sum() const {
        const float* l = m_lane;
        float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        for (int i = 0; i < m_n_tail; ++i) s += m_tail[i];
        return s;
    }

private:
    int64_t m_n8;
    float m_lane[8] = {};
    float m_tail[7] = {};
    int m_n_tail = 0;
};

// `chunk` values (a whole number of blocks of `chunk_bytes`; a plain type's last chunk may be shorter) at a time.
template <void (*ToF32)(const void*, float*, int64_t), int64_t chunk, int64_t chunk_bytes>
float dot_by_chunks(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(row);
    float buf[chunk];
    LaneDot dot(n);
    for (int64_t i = 0; i < n; i += chunk) {
        const int64_t m = std::min(chunk, n - i);
        ToF32(p + (i / chunk) * chunk_bytes, buf, m);
        dot.add(buf, x, i, m);
    }
    return dot.sum();
}

constexpr int64_t kPlainChunk = 64;  // values of a plain type converted at a time

}  // namespace

#define GKQ_DOT_ROW(type, elements, bytes)                               \
    float type##_dot_f32(const void* row, const float* x, int64_t n) {   \
        return dot_by_chunks<type##_to_f32, elements, bytes>(row, x, n); \
    }

GKQ_DOT_ROW(f32, kPlainChunk, kPlainChunk * 4)
GKQ_DOT_ROW(f16, kPlainChunk, kPlainChunk * 2)
GKQ_DOT_ROW(bf16, kPlainChunk, kPlainChunk * 2)
GKQ_DOT_ROW(q8_0, GKQ_Q8_0_BLOCK_ELEMENTS, GKQ_Q8_0_BLOCK_BYTES)
GKQ_DOT_ROW(q4_0, GKQ_Q4_0_BLOCK_ELEMENTS, GKQ_Q4_0_BLOCK_BYTES)
GKQ_DOT_ROW(q4_1, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q4_1_BLOCK_BYTES)
GKQ_DOT_ROW(q5_0, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q5_0_BLOCK_BYTES)
GKQ_DOT_ROW(q5_1, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q5_1_BLOCK_BYTES)
GKQ_DOT_ROW(iq4_nl, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_IQ4_NL_BLOCK_BYTES)
GKQ_DOT_ROW(q2_k, GKQ_QK_K, GKQ_Q2_K_BLOCK_BYTES)
GKQ_DOT_ROW(q3_k, GKQ_QK_K, GKQ_Q3_K_BLOCK_BYTES)
GKQ_DOT_ROW(q4_k, GKQ_QK_K, GKQ_Q4_K_BLOCK_BYTES)
GKQ_DOT_ROW(q5_k, GKQ_QK_K, GKQ_Q5_K_BLOCK_BYTES)
GKQ_DOT_ROW(q6_k, GKQ_QK_K, GKQ_Q6_K_BLOCK_BYTES)
GKQ_DOT_ROW(q8_k, GKQ_QK_K, GKQ_Q8_K_BLOCK_BYTES)

#undef GKQ_DOT_ROW

}  // namespace gkq::rows
