// CUDA reconstruction out (rows, cols) = U diag(sigma) V^T (+ residual): one 64 x 64 output tile per block of
// 16 x 16 threads, each thread 4 x 4 outputs (rows ty + 16m, columns tx + 16n, so a warp's stores cover whole
// 64-byte row segments). sigma * U and V^T are staged through shared memory 16 ranks at a time; every output sums
// r = 0 .. k-1 in ascending order with fmaf from 0 — the same operations as the AVX2 kernel — and the residual
// (dequantized as the oracle does: q * d, then one rounded add) is added at the store: W is written once.
#include "cuda/launch.h"
#include "gkq/block_layout.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gkq::kernels::cuda {

namespace {

constexpr int kTile = 64;            // output rows and columns per block
constexpr int kRanks = 16;           // ranks staged per step
constexpr int kSide = 16;            // threads per block side
constexpr int kPer = kTile / kSide;  // outputs per thread per side

__device__ float half_at(const uint8_t* p) {
    const auto h = static_cast<unsigned short>(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(h));
}

__device__ float residual_value(const uint8_t* res, int bits, uint64_t e) {
    if (bits == 8) {
        const uint8_t* blk = res + e / GKQ_Q8_0_BLOCK_ELEMENTS * GKQ_Q8_0_BLOCK_BYTES;
        const int j = static_cast<int>(e % GKQ_Q8_0_BLOCK_ELEMENTS);
        return __fmul_rn(static_cast<float>(static_cast<int8_t>(blk[GKQ_BLOCK_SCALE_BYTES + j])), half_at(blk));
    }
    constexpr int half = GKQ_Q4_0_BLOCK_ELEMENTS / 2;
    const uint8_t* blk = res + e / GKQ_Q4_0_BLOCK_ELEMENTS * GKQ_Q4_0_BLOCK_BYTES;
    const int j = static_cast<int>(e % GKQ_Q4_0_BLOCK_ELEMENTS);
    const unsigned byte = blk[GKQ_BLOCK_SCALE_BYTES + j % half];
    const int q = static_cast<int>(j < half ? (byte & 15u) : (byte >> 4)) - 8;
    return __fmul_rn(static_cast<float>(q), half_at(blk));
}

__global__ void reconstruct_kernel(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols,
                                   int64_t k, const uint8_t* residual, int residual_bits, float* out) {
    __shared__ float a_tile[kRanks][kTile];  // sigma_r * u[i][r] for the block's rows
    __shared__ float b_tile[kRanks][kTile];  // v[j][r] for the block's columns
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kSide + tx;
    const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile, j0 = static_cast<int64_t>(blockIdx.x) * kTile;
    float acc[kPer][kPer];
#pragma unroll
    for (int m = 0; m < kPer; ++m)
#pragma unroll
        for (int n = 0; n < kPer; ++n) acc[m][n] = 0.0f;

    for (int64_t r0 = 0; r0 < k; r0 += kRanks) {
        for (int l = tid; l < kRanks * kTile; l += kSide * kSide) {
            const int kk = l / kTile, ii = l % kTile;
            const int64_t r = r0 + kk, i = i0 + ii, j = j0 + ii;
            a_tile[kk][ii] = r < k && i < rows ? __fmul_rn(sigma[r], ut[r * rows + i]) : 0.0f;
            b_tile[kk][ii] = r < k && j < cols ? vt[r * cols + j] : 0.0f;
        }
        __syncthreads();
        const int n_ranks = static_cast<int>(k - r0 < kRanks ? k - r0 : kRanks);
        for (int kk = 0; kk < n_ranks; ++kk) {
            float a[kPer], b[kPer];
#pragma unroll
            for (int m = 0; m < kPer; ++m) a[m] = a_tile[kk][ty + kSide * m];
#pragma unroll
            for (int n = 0; n < kPer; ++n) b[n] = b_tile[kk][tx + kSide * n];
#pragma unroll
            for (int m = 0; m < kPer; ++m)
#pragma unroll
                for (int n = 0; n < kPer; ++n) acc[m][n] = fmaf(a[m], b[n], acc[m][n]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
        const int64_t i = i0 + ty + kSide * m;
        if (i >= rows) continue;
#pragma unroll
        for (int n = 0; n < kPer; ++n) {
            const int64_t j = j0 + tx + kSide * n;
            if (j >= cols) continue;
            const auto e = static_cast<uint64_t>(i * cols + j);
            float v = acc[m][n];
            if (residual_bits) v = __fadd_rn(v, residual_value(residual, residual_bits, e));
            out[e] = v;
        }
    }
}

}  // namespace

void launch_reconstruct(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                        const uint8_t* residual, int residual_bits, float* out) {
    if (rows <= 0 || cols <= 0) return;
    const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                    static_cast<unsigned>((rows + kTile - 1) / kTile));
    reconstruct_kernel<<<grid, dim3(kSide, kSide)>>>(ut, sigma, vt, rows, cols, k, residual, residual_bits, out);
}

}  // namespace gkq::kernels::cuda
