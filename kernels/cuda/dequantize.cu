// CUDA dequantization: factor codes (unpack, delta prefix sums, codes to floats) and f16 / Q8_0 / Q4_0 blocks, in
// the oracles' f32 operations (__fmul_rn: no contraction), so the values equal kernels/cpu/dequantize_ref.cpp's.
#include "cuda/launch.h"
#include "gkq/block_layout.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gkq::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kItems = 8;                 // consecutive codes per thread
constexpr int kTile = kThreads * kItems;  // codes per block-wide step
constexpr int kWarps = kThreads / 32;

__device__ unsigned code_at(const uint8_t* codes, int bits, bool packed, uint64_t i) {
    if (!packed) return codes[i];
    const unsigned per_byte = 8u / static_cast<unsigned>(bits);
    return (codes[i / per_byte] >> ((i % per_byte) * static_cast<unsigned>(bits))) & ((1u << bits) - 1u);
}

__device__ float code_value(unsigned c, int top, float step) {
    return __fmul_rn(static_cast<float>(2 * static_cast<int>(c) - top), step);
}

// One block per vector. With delta, the codes are the running sums of the symbols mod 2^bits: each thread sums its
// kItems symbols, a warp-shuffle scan and a scan over the warps' totals give every thread its exclusive prefix, and
// `carry` holds the sum of all earlier tiles. Unsigned sums wrap mod 2^32, which 2^bits divides.
__global__ void dequantize_factors_kernel(const uint8_t* codes, int bits, bool packed, uint64_t first, int64_t len,
                                          bool delta, const float* scales, float* out) {
    __shared__ unsigned warp_sums[kWarps];
    const int64_t v = blockIdx.x;
    const int top = (1 << bits) - 1;
    const float step = __fdiv_rn(scales[v], static_cast<float>(top));
    const uint64_t start = first + static_cast<uint64_t>(v) * static_cast<uint64_t>(len);
    float* o = out + v * len;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned carry = 0;
    for (int64_t t0 = 0; t0 < len; t0 += kTile) {
        const int64_t base = t0 + static_cast<int64_t>(threadIdx.x) * kItems;
        unsigned c[kItems];
        unsigned local = 0;
#pragma unroll
        for (int j = 0; j < kItems; ++j) {
            c[j] = base + j < len ? code_at(codes, bits, packed, start + static_cast<uint64_t>(base + j)) : 0u;
            local += c[j];
        }
        if (!delta) {
#pragma unroll
            for (int j = 0; j < kItems; ++j)
                if (base + j < len) o[base + j] = code_value(c[j], top, step);
            continue;  // `delta` is the same for the whole block: no thread skips a barrier alone
        }
        unsigned x = local;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const unsigned y = __shfl_up_sync(0xffffffffu, x, d);
            if (lane >= d) x += y;
        }
        if (lane == 31) warp_sums[warp] = x;
        __syncthreads();
        unsigned warp_prefix = 0, tile_total = 0;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            const unsigned s = warp_sums[w];
            if (w < warp) warp_prefix += s;
            tile_total += s;
        }
        __syncthreads();  // warp_sums is rewritten by the next tile
        unsigned run = carry + warp_prefix + (x - local);
#pragma unroll
        for (int j = 0; j < kItems; ++j) {
            run += c[j];
            if (base + j < len) o[base + j] = code_value(run & static_cast<unsigned>(top), top, step);
        }
        carry += tile_total;
    }
}

__global__ void expand_heads_kernel(const float* base, int64_t k, int64_t len, const float* head_scales,
                                    int64_t n_heads, float* out) {
    const int64_t n = k * n_heads * len;
    for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t i = e % len, g = (e / len) % n_heads, r = e / (len * n_heads);
        out[e] = __fmul_rn(base[r * len + i], head_scales[g]);
    }
}

__device__ float half_at(const uint8_t* p) {
    const auto h = static_cast<unsigned short>(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(h));
}

__global__ void dequantize_blocks_kernel(int type, const uint8_t* src, uint64_t n, float* out) {
    for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < n;
         e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
        if (type == 1) {
            out[e] = half_at(src + 2 * e);
        } else if (type == 8) {
            const uint8_t* blk = src + e / GKQ_Q8_0_BLOCK_ELEMENTS * GKQ_Q8_0_BLOCK_BYTES;
            const int j = static_cast<int>(e % GKQ_Q8_0_BLOCK_ELEMENTS);
            out[e] = __fmul_rn(static_cast<float>(static_cast<int8_t>(blk[GKQ_BLOCK_SCALE_BYTES + j])), half_at(blk));
        } else {
            constexpr int half = GKQ_Q4_0_BLOCK_ELEMENTS / 2;
            const uint8_t* blk = src + e / GKQ_Q4_0_BLOCK_ELEMENTS * GKQ_Q4_0_BLOCK_BYTES;
            const int j = static_cast<int>(e % GKQ_Q4_0_BLOCK_ELEMENTS);
            const unsigned byte = blk[GKQ_BLOCK_SCALE_BYTES + j % half];
            const int q = static_cast<int>(j < half ? (byte & 15u) : (byte >> 4)) - 8;
            out[e] = __fmul_rn(static_cast<float>(q), half_at(blk));
        }
    }
}

unsigned grid_for(uint64_t n, int threads) {
    const uint64_t blocks = (n + static_cast<uint64_t>(threads) - 1) / static_cast<uint64_t>(threads);
    return static_cast<unsigned>(blocks < 65535ull * 16 ? (blocks ? blocks : 1) : 65535ull * 16);
}

}  // namespace

void launch_dequantize_factors(const uint8_t* codes, int bits, bool packed, uint64_t first, int64_t n_vectors,
                               int64_t len, bool delta, const float* scales, float* out) {
    if (n_vectors <= 0 || len <= 0) return;
    dequantize_factors_kernel<<<static_cast<unsigned>(n_vectors), kThreads>>>(codes, bits, packed, first, len, delta,
                                                                              scales, out);
}

void launch_expand_heads(const float* base, int64_t k, int64_t len, const float* head_scales, int64_t n_heads,
                         float* out) {
    const auto n = static_cast<uint64_t>(k * n_heads * len);
    if (n == 0) return;
    expand_heads_kernel<<<grid_for(n, kThreads), kThreads>>>(base, k, len, head_scales, n_heads, out);
}

void launch_dequantize_blocks(int type, const uint8_t* src, uint64_t n, float* out) {
    if (n == 0) return;
    dequantize_blocks_kernel<<<grid_for(n, kThreads), kThreads>>>(type, src, n, out);
}

}  // namespace gkq::kernels::cuda
