// AVX2/FMA reconstruction out (rows, cols) = U diag(sigma) V^T (+ Q8_0/Q4_0 residual), blocked like a GEMM:
//   - V^T is packed one column block at a time into 16-column strips (k x 16 floats each, contiguous), sized so the
//     block stays in L2 while every row group of the chunk passes over it;
//   - sigma * U for 6 rows is packed (k x 6) and stays in L1;
//   - a 6 x 16 register tile (12 accumulators) sums r = 0 .. k-1 in ascending order with fused multiply-adds, then
//     the residual's 16 elements per row are dequantized and added as the tile is stored — one pass over W.
// Large outputs of low rank go out with streaming stores: W is written once and read later by someone else, and
// at rank <= kStreamMaxRank the kernel is store-bound. Above it the kernel is FMA-bound (k FMAs per element), and
// plain stores measured faster than streaming ones there (see kStreamMaxRank).
// Threads claim chunks of rows (parallel.h). Compiled with -mavx2 -mfma -mf16c: call only when cpu_has_avx2_fma().
#include "cpu/aligned.h"
#include "cpu/cpu_kernels.h"
#include "cpu/parallel.h"
#include "gkq/block_layout.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace gkq::kernels::cpu {

#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

constexpr int kMR = 6;                               // rows per register tile
constexpr int kNR = 16;                              // columns per register tile (two 8-float vectors)
constexpr int64_t kPanelBytes = int64_t{256} << 10;  // packed V^T column block, kept in L2
// Streaming stores only up to this rank. Measured on the Zen 4 build VM in process CPU time (so that other load does
// not count), outputs of 64-256 MB: at rank 3-10 streaming stores were 3-23% faster than plain ones; at rank 12 plain
// stores were 10% faster, at rank 16 7-18%, at rank 64 and 256 3-8% (1 and 2 threads, the benchmark's three shapes).
// The tile alone, storing into L1, runs at 94% of the FMA peak at rank 16; storing to memory, 83% with plain stores
// and 76% with streaming ones: streaming stores overlap less with the next tile's arithmetic.
constexpr int64_t kStreamMaxRank = 10;

enum class StoreMode { Plain, Stream };

uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

template <StoreMode kMode>
inline void store8(float* p, __m256 v) {
    if constexpr (kMode == StoreMode::Stream)
        _mm256_stream_ps(p, v);
    else
        _mm256_storeu_ps(p, v);
}

inline __m256 i8x8_to_ps(const uint8_t* q) {
    uint64_t eight;
    std::memcpy(&eight, q, 8);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(static_cast<long long>(eight))));
}

// Adds the residual elements e .. e + 15 (e % 16 == 0: one half of a Q8_0 / Q4_0 block) to a0 (first 8) and a1, as
// the oracle does: the low-rank sum + (q * d), a rounded product then a rounded sum (no fused multiply-add).
inline void add_residual(const uint8_t* res, int bits, uint64_t e, __m256& a0, __m256& a1) {
    const BlockLayout& block = residual_block(bits);
    static_assert(kQ8_0Block.elements == 2 * 16 && kQ4_0Block.elements == 2 * 16, "a block is two halves of 16 here");
    const uint64_t b = e / block.elements;
    const bool upper = e % block.elements != 0;
    const uint8_t* blk = res + b * block.bytes;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(blk)));
    if (bits == 8) {
        const uint8_t* q = blk + block.codes_offset + (upper ? 16 : 0);
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(i8x8_to_ps(q), d));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(i8x8_to_ps(q + 8), d));
        return;
    }
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + block.codes_offset));
    if (upper) x = _mm_srli_epi16(x, 4);
    x = _mm_sub_epi8(_mm_and_si128(x, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8));
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)), d));
    a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(x, 8))), d));
}

struct Job {
    const float* ut;     // (k, rows)
    const float* sigma;  // (k)
    const float* vt;     // (k, cols)
    int64_t rows, cols, k;
    const uint8_t* residual;
    int residual_bits;
    float* out;          // (rows, cols)
    int64_t block_cols;  // columns per packed panel, a multiple of kNR
};

// One 6 x 16 tile: a (k, 6) packed sigma * U rows, b (k, 16) packed strip; stores rows [0, mr) and columns [0, w)
// of it at out (row stride cols). out_index is the tile's first element in W (for the residual).
template <StoreMode kMode>
inline void tile(const Job& job, const float* a, const float* b, float* out, uint64_t out_index, int mr, int w) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(),
           c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(),
           c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int64_t r = 0; r < job.k; ++r) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        __m256 x = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(x, b0, c00);
        c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(x, b0, c10);
        c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(x, b0, c20);
        c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(x, b0, c30);
        c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(x, b0, c40);
        c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(x, b0, c50);
        c51 = _mm256_fmadd_ps(x, b1, c51);
        a += kMR;
        b += kNR;
    }
    if (mr == kMR && w == kNR && job.residual_bits == 0) {
        // the common tile, stored straight from the registers (the general path below indexes them: a spill)
        const int64_t c = job.cols;
        store8<kMode>(out, c00);
        store8<kMode>(out + 8, c01);
        store8<kMode>(out + c, c10);
        store8<kMode>(out + c + 8, c11);
        store8<kMode>(out + 2 * c, c20);
        store8<kMode>(out + 2 * c + 8, c21);
        store8<kMode>(out + 3 * c, c30);
        store8<kMode>(out + 3 * c + 8, c31);
        store8<kMode>(out + 4 * c, c40);
        store8<kMode>(out + 4 * c + 8, c41);
        store8<kMode>(out + 5 * c, c50);
        store8<kMode>(out + 5 * c + 8, c51);
        return;
    }
    __m256 acc[2 * kMR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int m = 0; m < mr; ++m) {
        float* p = out + m * job.cols;
        __m256 lo = acc[2 * m], hi = acc[2 * m + 1];
        if (w == kNR) {
            // residuals need whole blocks in every row, each a whole number of kNR columns: their tiles are full
            if (job.residual_bits) add_residual(job.residual, job.residual_bits, out_index + m * job.cols, lo, hi);
            store8<kMode>(p, lo);
            store8<kMode>(p + 8, hi);
        } else {
            alignas(32) float tmp[kNR];
            _mm256_store_ps(tmp, lo);
            _mm256_store_ps(tmp + 8, hi);
            std::memcpy(p, tmp, static_cast<size_t>(w) * 4);
        }
    }
}

// One worker's packed operands: a V^T column block (k, block_cols) as strips, and sigma * U for kMR rows (k, kMR).
struct Scratch {
    AlignedFloats panel;
    AlignedFloats a;
};

// Rows [i_begin, i_end) of W.
template <StoreMode kMode>
void run_rows(const Job& job, Scratch& scratch, int64_t i_begin, int64_t i_end) {
    const int64_t k = job.k;
    float* const panel = scratch.panel.get();
    float* const a = scratch.a.get();
    for (int64_t jb = 0; jb < job.cols; jb += job.block_cols) {
        const int64_t nb = std::min(job.block_cols, job.cols - jb);
        const int64_t n_strips = (nb + kNR - 1) / kNR;
        for (int64_t s = 0; s < n_strips; ++s) {
            const int64_t j = jb + s * kNR;
            const int64_t w = std::min<int64_t>(kNR, job.cols - j);
            float* dst = panel + s * k * kNR;
            for (int64_t r = 0; r < k; ++r) {
                std::memcpy(dst + r * kNR, job.vt + r * job.cols + j, static_cast<size_t>(w) * 4);
                std::fill(dst + r * kNR + w, dst + (r + 1) * kNR, 0.0f);
            }
        }
        for (int64_t i0 = i_begin; i0 < i_end; i0 += kMR) {
            const int mr = static_cast<int>(std::min<int64_t>(kMR, i_end - i0));
            for (int64_t r = 0; r < k; ++r) {
                const float s = job.sigma[r];
                const float* u = job.ut + r * job.rows + i0;
                for (int m = 0; m < kMR; ++m) a[r * kMR + m] = m < mr ? s * u[m] : 0.0f;
            }
            for (int64_t s = 0; s < n_strips; ++s) {
                const int64_t j = jb + s * kNR;
                const auto index = static_cast<uint64_t>(i0 * job.cols + j);
                tile<kMode>(job, a, panel + s * k * kNR, job.out + index, index, mr,
                            static_cast<int>(std::min<int64_t>(kNR, job.cols - j)));
            }
        }
    }
    if constexpr (kMode == StoreMode::Stream) _mm_sfence();
}

}  // namespace

void reconstruct_avx2(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                      const uint8_t* residual, int residual_bits, float* out, int n_threads) {
    // Factors that are not 64-byte aligned are copied first (k * (rows + cols) floats, small next to W): fed straight
    // from a std::vector, the packing reads made the whole kernel 1.8x slower at 8192 x 8192, rank 16 (bench, same
    // run: 22.8 ms against 12.6 ms from aligned copies of the same factors).
    AlignedFloats ut_copy, vt_copy;
    if (k > 0 && reinterpret_cast<uintptr_t>(ut) % 64 != 0) {
        ut_copy = aligned_floats(k * rows);
        std::memcpy(ut_copy.get(), ut, static_cast<size_t>(k * rows) * 4);
        ut = ut_copy.get();
    }
    if (k > 0 && reinterpret_cast<uintptr_t>(vt) % 64 != 0) {
        vt_copy = aligned_floats(k * cols);
        std::memcpy(vt_copy.get(), vt, static_cast<size_t>(k * cols) * 4);
        vt = vt_copy.get();
    }
    Job job{ut, sigma, vt, rows, cols, k, residual, residual_bits, out, 0};
    const auto out_addr = reinterpret_cast<uintptr_t>(out);
    // Streaming stores only where every full tile row is exactly one cache line: a tile writes six rows at once,
    // and a line that six tiles each fill in part goes to memory in parts (measured: 6x slower than plain stores).
    const bool stream = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * 4 >= kStreamingMinBytes &&
                        out_addr % 64 == 0 && cols % kNR == 0 && k <= kStreamMaxRank;
    const int64_t cols_up = (cols + kNR - 1) / kNR * kNR;
    job.block_cols = k == 0 ? cols_up : std::clamp<int64_t>(kPanelBytes / (4 * k) / kNR * kNR, kNR, cols_up);
    // A chunk of rows repacks V^T once: keep chunks long enough for that to be negligible (and >= 64K outputs).
    const int64_t min_rows = std::max<int64_t>(4 * kMR, 65536 / std::max<int64_t>(cols, 1));
    const int64_t chunk = chunk_for(rows, n_threads, kMR, min_rows);
    std::vector<Scratch> scratch(static_cast<size_t>(n_workers(rows, chunk, n_threads)));
    for (Scratch& s : scratch) s = Scratch{aligned_floats(k * job.block_cols), aligned_floats(k * kMR)};
    parallel_chunks(rows, chunk, n_threads, [&](int worker, int64_t i0, int64_t i1) {
        Scratch& mine = scratch[static_cast<size_t>(worker)];
        if (stream)
            run_rows<StoreMode::Stream>(job, mine, i0, i1);
        else
            run_rows<StoreMode::Plain>(job, mine, i0, i1);
    });
}

}  // namespace gkq::kernels::cpu
