// The low-rank section of a LowRank / LowRankResidual payload (byte layout in docs/codec.md): sigma, the optional
// head-fold block, per-vector scales and the factor codes (bit-packed or run-length encoded). Shared by the encoder
// (which writes it), the decoder (which checks and reads it) and the kernels (which read it with the same checks),
// so none of them can drift apart. Implemented by the codec (core/src/codec/lowrank_payload.cpp, factor_quant.cpp).
#pragma once

#include "gkq/encoded_tensor.h"
#include "gkq/status.h"

#include <cstdint>
#include <vector>

namespace gkq::codec {

enum class FoldAxis : uint8_t { U = 0, V = 1 };  // U: heads split W's rows (q, k, v); V: its columns (o)

struct LowRankSection {
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t k = 0;
    int bits = 8;

    bool sigma_quantized = false;
    std::vector<float> sigma;          // (k) f32 values, when !sigma_quantized
    float sigma_max = 0.0f;            // when sigma_quantized
    std::vector<uint8_t> sigma_codes;  // (k), when sigma_quantized

    bool folded = false;
    FoldAxis fold_axis = FoldAxis::U;
    uint32_t n_heads = 0;
    std::vector<float> head_scales;  // (n_heads)

    std::vector<float> u_scales;  // (k) max |.| of each quantized U vector (of the base block when folded on U)
    std::vector<float> v_scales;  // (k)

    bool delta = false;
    bool rle = false;
    std::vector<uint8_t> symbols;  // the k U vectors' codes (u_len each), then the k V vectors' (v_len each),
                                   // delta-coded when `delta`: exactly what is packed or run-length encoded

    int64_t u_len() const { return folded && fold_axis == FoldAxis::U ? rows / n_heads : rows; }
    int64_t v_len() const { return folded && fold_axis == FoldAxis::V ? cols / n_heads : cols; }
    int64_t n_symbols() const { return k * (u_len() + v_len()); }
    uint32_t flags() const;  // the EncodedFlags this section sets
};

// ceil(n * bits / 8): the bytes of n bit-packed codes.
uint64_t packed_bytes(uint64_t n, int bits);

// Sigma as 8-bit codes over [0, sigma_max]: s' = sigma_max * c / 255 (f32, in that order).
inline float dequantize_sigma(uint8_t c, float sigma_max) {
    return sigma_max * static_cast<float>(c) / 255.0f;
}

void write_lowrank_section(const LowRankSection& s, std::vector<uint8_t>& out);

// Reads the section at the start of t.payload, checking it against the header fields (rank, factor_bits, flags)
// and the matrix view (rows, cols); `consumed` is its size. Corrupt naming the tensor on any mismatch.
Status read_lowrank_section(const EncodedTensor& t, int64_t rows, int64_t cols, LowRankSection& out,
                            uint64_t& consumed);

// The decoded factors: u (rows, k), v (cols, k) row-major, sigma (k); folding and delta undone.
void decoded_factors(const LowRankSection& s, std::vector<float>& u, std::vector<float>& sigma, std::vector<float>& v);

// The reference reconstruction: out[i * cols + j] = sum over r ascending of (sigma_r * u[i, r]) * v[j, r],
// accumulated in f32 from 0.
void reconstruct_lowrank(const LowRankSection& s, float* out);

}  // namespace gkq::codec
