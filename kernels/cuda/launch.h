// The CUDA kernels' launchers: device pointers, the default stream, asynchronous (check last_launch_status or
// synchronize). Each computes exactly what its CPU oracle in kernels/cpu/cpu_kernels.h computes; dequantization
// bit for bit, reconstruction with fused multiply-adds in the oracle's order (r ascending from 0).
#pragma once

#include <cstdint>

namespace gkq::kernels::cuda {

// out (n_vectors, len): codes [first + v * len, ...) of a packed (bits per code, LSB-first) or one-per-byte stream;
// delta undone per vector (one thread block per vector, block-wide prefix sums).
void launch_dequantize_factors(const uint8_t* codes, int bits, bool packed, uint64_t first, int64_t n_vectors,
                               int64_t len, bool delta, const float* scales, float* out);
// out (k, n_heads * len): head g of vector r = base[r][i] * head_scales[g].
void launch_expand_heads(const float* base, int64_t k, int64_t len, const float* head_scales, int64_t n_heads,
                         float* out);
// n elements; type 1 = f16, 8 = Q8_0 blocks, 4 = Q4_0 blocks.
void launch_dequantize_blocks(int type, const uint8_t* src, uint64_t n, float* out);
// out (rows, cols) = U diag(sigma) V^T (+ residual): 64 x 64 output tiles, ut (k, rows) and vt (k, cols) staged
// through shared memory 16 ranks at a time, the residual (bits 4 / 8, or 0) added at the store.
void launch_reconstruct(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                        const uint8_t* residual, int residual_bits, float* out);

}  // namespace gkq::kernels::cuda
