// Exact singular values through the Gram matrix in double precision.
//
// Why the Gram matrix and not LAPACK's SVD, by measurement on this project's 2-core AVX-512 machine (OpenBLAS
// 0.3.21, 2 threads, shared with other builds: load average about 7), with bench_spectrum (float32 matrices with
// s_i = 1/(1+i), medians of back-to-back runs, errors against the true values):
//   shape          Gram + dsyevd   sgesdd 'N'   ratio   max rel error (ours / sgesdd)
//   512 x 512      0.11 s          0.25 s       0.42    7.0e-8 / 1.8e-6
//   1024 x 1024    0.65 s          1.40 s       0.52    1.0e-7 / 2.3e-6
//   2048 x 2048    2.2 s           5.1 s        0.40    1.1e-7 / 6.8e-6
//   4096 x 4096    19.2 s          29.5 s       0.65    9.4e-8 / 9.9e-6
//   4096 x 11008   22.1 s          40.0 s       0.55    8.5e-8 / 9.7e-6
// dgesdd 'N' (exact, in double) was 2-3x slower than sgesdd, and dsyevd_2stage 1.1-2.4x slower than dsyevd (its
// bulge chasing runs serially here). The Gram matrix costs rows * cols * n flops of dsyrk (BLAS-3); the rest is
// dsyevd's tridiagonal reduction of one n x n matrix, where sgesdd bidiagonalizes the whole (rows, cols) matrix
// with half of its flops in memory-bound BLAS-2 on twice the data per step.
// Accuracy: products of two floats are exact in double and the sums carry eps64, so each eigenvalue of W W^T is
// off by about eps64 * n * s_1^2 and s_i by that over 2 s_i: relative 1e-10 at s_i = 1e-3 s_1. sgesdd works in
// float and is off by about eps32 * s_1 absolute (the 1e-5 above at s_n = s_1 / 4096). The Gram route loses only
// for s_i below ~1e-5 s_1, where a float32 matrix's own rounding already decides the value.
#include "gkq/spectrum.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <new>

namespace gkq {

namespace {

// k-panel width for the Gram accumulation: the panel is converted to double once and fed to dsyrk, so the
// double copy of W never exists whole (memory n^2 + n * kPanel doubles).
constexpr int64_t kPanel = 256;
constexpr int64_t kMaxGramSide = 46340;  // n * n must fit a 32-bit LAPACK index

}  // namespace

Status singular_values(const float* w, int64_t rows, int64_t cols, std::vector<double>& out) {
    if (rows <= 0 || cols <= 0)
        return error(StatusCode::InvalidArgument,
                     "singular_values: shape " + std::to_string(rows) + " x " + std::to_string(cols) + " is empty");
    if (w == nullptr) return error(StatusCode::InvalidArgument, "singular_values: no matrix data");
    const int64_t n = std::min(rows, cols);
    const int64_t k_total = std::max(rows, cols);
    if (n > kMaxGramSide || k_total > INT32_MAX)
        return error(StatusCode::Unsupported, "singular_values: shape " + std::to_string(rows) + " x " +
                                                  std::to_string(cols) + " exceeds 32-bit LAPACK limits");
    try {
        // G (n, n) column-major, upper triangle filled by dsyrk.
        std::vector<double> g(static_cast<size_t>(n * n), 0.0);
        const int64_t panel = std::min(kPanel, k_total);
        std::vector<double> buf(static_cast<size_t>(panel * n));
        if (rows <= cols) {
            // G = W W^T. Viewed column-major, W is A = (cols, rows) with lda = cols and G = A^T A; a k-panel of A
            // is a column range of every row of W.
            for (int64_t k0 = 0; k0 < cols; k0 += panel) {
                const int64_t b = std::min(panel, cols - k0);
                for (int64_t r = 0; r < rows; ++r) {
                    const float* src = w + r * cols + k0;
                    double* dst = buf.data() + r * b;
                    for (int64_t j = 0; j < b; ++j) dst[j] = src[j];
                }
                cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, static_cast<int>(n), static_cast<int>(b), 1.0,
                            buf.data(), static_cast<int>(b), 1.0, g.data(), static_cast<int>(n));
            }
        } else {
            // G = W^T W. Column-major, W is A = (cols, rows) and G = A A^T; a k-panel is a block of whole rows.
            for (int64_t k0 = 0; k0 < rows; k0 += panel) {
                const int64_t b = std::min(panel, rows - k0);
                const float* src = w + k0 * cols;
                for (int64_t i = 0; i < b * cols; ++i) buf[static_cast<size_t>(i)] = src[i];
                cblas_dsyrk(CblasColMajor, CblasUpper, CblasNoTrans, static_cast<int>(n), static_cast<int>(b), 1.0,
                            buf.data(), static_cast<int>(cols), 1.0, g.data(), static_cast<int>(n));
            }
        }
        buf = {};
        // The diagonal holds each row's (or column's) squared norm: finite exactly when the data is.
        for (int64_t i = 0; i < n; ++i)
            if (!std::isfinite(g[static_cast<size_t>(i * n + i)]))
                return error(StatusCode::InvalidArgument, "singular_values: the matrix holds NaN or Inf");
        std::vector<double> ev(static_cast<size_t>(n));
        const lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'N', 'U', static_cast<lapack_int>(n), g.data(),
                                               static_cast<lapack_int>(n), ev.data());
        if (info != 0)
            return error(StatusCode::Internal, "singular_values: dsyevd failed (info " + std::to_string(info) + ")");
        out.resize(static_cast<size_t>(n));
        // dsyevd returns ascending eigenvalues; rounding can push the zero ones slightly negative.
        for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = std::sqrt(std::max(0.0, ev[n - 1 - i]));
        return Status::ok();
    } catch (const std::bad_alloc&) {
        return error(StatusCode::InvalidArgument, "singular_values: out of memory for a Gram matrix of " +
                                                      std::to_string(n) + " x " + std::to_string(n) + " doubles");
    }
}

double frobenius_sq(const float* w, int64_t rows, int64_t cols) {
    double sum = 0.0;
    const int64_t n = rows * cols;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * static_cast<double>(w[i]);
    return sum;
}

}  // namespace gkq
