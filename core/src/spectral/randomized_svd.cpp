// Randomized top-k SVD (Halko, Martinsson & Tropp 2011, "Finding structure with randomness", Alg. 4.4:
// randomized subspace iteration). The big products run in float32 through sgemm; the small (cols, l) problem
// at the end is solved in double by dgesdd.
#include "gkq/spectrum.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <new>

namespace gkq {

namespace {

// splitmix64: a fixed, portable generator (std::normal_distribution differs between standard libraries, which
// would break "same seed, same result").
struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    double uniform_open() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
};

// Standard normal samples by Box-Muller.
void fill_gaussian(float* out, int64_t n, uint64_t seed) {
    SplitMix64 rng{seed};
    constexpr double kTwoPi = 6.283185307179586476925;
    for (int64_t i = 0; i < n; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(rng.uniform_open()));
        const double t = kTwoPi * rng.uniform_open();
        out[i] = static_cast<float>(r * std::cos(t));
        if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(t));
    }
}

// Householder QR (sgeqrf + sorgqr): replaces the column-major (m, l) matrix y (m >= l) by the Q factor.
Status householder_qr(float* y, int64_t m, int64_t l) {
    std::vector<float> tau(static_cast<size_t>(l));
    lapack_int info = LAPACKE_sgeqrf(LAPACK_COL_MAJOR, static_cast<lapack_int>(m), static_cast<lapack_int>(l), y,
                                     static_cast<lapack_int>(m), tau.data());
    if (info == 0)
        info = LAPACKE_sorgqr(LAPACK_COL_MAJOR, static_cast<lapack_int>(m), static_cast<lapack_int>(l),
                              static_cast<lapack_int>(l), y, static_cast<lapack_int>(m), tau.data());
    if (info != 0) return error(StatusCode::Internal, "randomized_svd: QR failed (info " + std::to_string(info) + ")");
    return Status::ok();
}

// CholeskyQR2 in double (Fukaya et al. 2014): R from the Cholesky factor of Y^T Y, Y <- Y R^-1, done twice so the
// column-major (m, l) yd becomes orthonormal to working precision; `r` (when given) receives the (l, l) upper
// triangular R = R_2 R_1 (column-major, zero below the diagonal). All BLAS-3: on 11008 x 128 it took 0.02 s where
// sgeqrf + sorgqr took 0.3 s (their panels are BLAS-2), a tenth of the whole top-64. It needs cond(Y) well below
// 1e8: false (yd then unusable) when Y is (nearly) rank deficient, e.g. the sketch of a zero or low-rank matrix.
bool cholesky_qr2(std::vector<double>& yd, int64_t m, int64_t l, std::vector<double>* r) {
    std::vector<double> g(static_cast<size_t>(l * l));
    const int im = static_cast<int>(m), il = static_cast<int>(l);
    for (int pass = 0; pass < 2; ++pass) {
        cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, il, im, 1.0, yd.data(), im, 0.0, g.data(), il);
        if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'U', il, g.data(), il) != 0) return false;
        for (int64_t j = 0; j < l; ++j)
            for (int64_t i = j + 1; i < l; ++i) g[static_cast<size_t>(j * l + i)] = 0.0;
        if (pass == 0) {
            // diag(R) spans at least the conditioning of Y's columns: a tiny ratio means Q would not be orthonormal.
            double lo = g[0], hi = g[0];
            for (int64_t i = 1; i < l; ++i) {
                lo = std::min(lo, g[static_cast<size_t>(i * l + i)]);
                hi = std::max(hi, g[static_cast<size_t>(i * l + i)]);
            }
            if (!std::isfinite(hi) || !(lo > 1e-6 * hi)) return false;
            if (r) *r = g;
        } else if (r) {
            cblas_dtrmm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, il, il, 1.0, g.data(), il,
                        r->data(), il);
        }
        cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, im, il, 1.0, g.data(), il,
                    yd.data(), im);
    }
    return true;
}

// Replaces the column-major (m, l) matrix y (m >= l) by the Q factor of its QR factorization.
Status orthonormalize(float* y, int64_t m, int64_t l) {
    std::vector<double> yd(y, y + m * l);
    if (!cholesky_qr2(yd, m, l, nullptr)) return householder_qr(y, m, l);
    std::copy(yd.begin(), yd.end(), y);
    return Status::ok();
}

// SVD of the column-major (m, l) matrix z (m >= l) in double: z = U diag(s) V^T with U (m, l) column-major in `u`
// and V^T (l, l) column-major in `vt`. Through Z = Q R (CholeskyQR2) and the SVD of the small R when Z is well
// conditioned (0.01 s instead of dgesdd's 0.27 s on 11008 x 128, whose Householder QR is BLAS-2 bound).
Status small_svd(const std::vector<float>& z, int64_t m, int64_t l, std::vector<double>& s, std::vector<double>& u,
                 std::vector<double>& vt) {
    const int im = static_cast<int>(m), il = static_cast<int>(l);
    std::vector<double> zd(z.begin(), z.end());
    s.resize(static_cast<size_t>(l));
    u.resize(static_cast<size_t>(m * l));
    vt.resize(static_cast<size_t>(l * l));
    std::vector<double> r;
    lapack_int info = 0;
    if (cholesky_qr2(zd, m, l, &r)) {
        std::vector<double> ur(static_cast<size_t>(l * l));
        info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', il, il, r.data(), il, s.data(), ur.data(), il, vt.data(), il);
        if (info == 0)
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, im, il, il, 1.0, zd.data(), im, ur.data(), il, 0.0,
                        u.data(), im);
    } else {
        zd.assign(z.begin(), z.end());
        info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', im, il, zd.data(), im, s.data(), u.data(), im, vt.data(), il);
    }
    if (info != 0)
        return error(info > 0 ? StatusCode::InvalidArgument : StatusCode::Internal,
                     "randomized_svd: dgesdd failed (info " + std::to_string(info) +
                         (info > 0 ? "; the matrix holds NaN or Inf?)" : ")"));
    return Status::ok();
}

}  // namespace

Result<TopKSvd> randomized_svd(const float* w, int64_t rows, int64_t cols, int64_t k,
                               const RandomizedSvdOptions& options) {
    const int64_t n = std::min(rows, cols);
    if (rows <= 0 || cols <= 0 || w == nullptr)
        return error(StatusCode::InvalidArgument,
                     "randomized_svd: empty matrix " + std::to_string(rows) + " x " + std::to_string(cols));
    if (k < 1 || k > n)
        return error(StatusCode::InvalidArgument, "randomized_svd: k = " + std::to_string(k) + " is outside 1.." +
                                                      std::to_string(n) + " for a " + std::to_string(rows) + " x " +
                                                      std::to_string(cols) + " matrix");
    if (options.oversampling < 0 || options.n_power_iterations < 0)
        return error(StatusCode::InvalidArgument, "randomized_svd: negative oversampling or power iterations");
    const int64_t l = std::min(n, k + options.oversampling);
    const int64_t big = std::max(rows, cols);
    if (big > INT32_MAX || big * l > INT32_MAX)
        return error(StatusCode::Unsupported, "randomized_svd: " + std::to_string(big) + " x " + std::to_string(l) +
                                                  " sketch exceeds 32-bit LAPACK limits");
    const int ir = static_cast<int>(rows), ic = static_cast<int>(cols), il = static_cast<int>(l);
    try {
        // Column-major throughout: W (row-major rows x cols) is the column-major (cols, rows) matrix Wt.
        std::vector<float> omega(static_cast<size_t>(cols * l));  // (cols, l)
        std::vector<float> q(static_cast<size_t>(rows * l));      // (rows, l)
        std::vector<float> z(static_cast<size_t>(cols * l));      // (cols, l)
        fill_gaussian(omega.data(), cols * l, options.seed);

        // Y = W Omega, Q = orth(Y)
        cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, ir, il, ic, 1.0f, w, ic, omega.data(), ic, 0.0f, q.data(),
                    ir);
        omega = {};
        if (Status s = orthonormalize(q.data(), rows, l); !s) return s;
        for (int it = 0; it < options.n_power_iterations; ++it) {
            // Z = W^T Q, orth(Z); Q = orth(W Z): one multiplication by W W^T, re-orthonormalized so the small
            // singular directions are not lost to rounding.
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, ic, il, ir, 1.0f, w, ic, q.data(), ir, 0.0f,
                        z.data(), ic);
            if (Status s = orthonormalize(z.data(), cols, l); !s) return s;
            cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, ir, il, ic, 1.0f, w, ic, z.data(), ic, 0.0f, q.data(),
                        ir);
            if (Status s = orthonormalize(q.data(), rows, l); !s) return s;
        }
        // B = Q^T W (l, cols); B^T = W^T Q = Z (cols, l). SVD of Z in double: Z = U_z S V_z^T, so
        // B = V_z S U_z^T and W ~ (Q V_z) S U_z^T.
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, ic, il, ir, 1.0f, w, ic, q.data(), ir, 0.0f, z.data(),
                    ic);
        std::vector<double> sv, uz, vzt;  // (l), (cols, l), (l, l) = V_z^T
        if (Status st = small_svd(z, cols, l, sv, uz, vzt); !st) return st;
        z = {};

        TopKSvd r;
        r.rows = rows;
        r.cols = cols;
        r.k = k;
        r.s.assign(sv.begin(), sv.begin() + k);
        // U_k = Q V_z[:, :k], row-major (rows, k). vzt is column-major V_z^T, i.e. row-major V_z (l, l): its first
        // k columns (leading dimension l) are V_z[:, :k]; q column-major (rows, l) is row-major (l, rows).
        std::vector<float> vz(vzt.begin(), vzt.end());
        r.u.resize(static_cast<size_t>(rows * k));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ir, static_cast<int>(k), il, 1.0f, q.data(), ir, vz.data(),
                    il, 0.0f, r.u.data(), static_cast<int>(k));
        // V_k = U_z[:, :k], row-major (cols, k).
        r.v.resize(static_cast<size_t>(cols * k));
        for (int64_t j = 0; j < k; ++j)
            for (int64_t i = 0; i < cols; ++i)
                r.v[static_cast<size_t>(i * k + j)] = static_cast<float>(uz[static_cast<size_t>(j * cols + i)]);
        return r;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::InvalidArgument, "randomized_svd: out of memory for a " + std::to_string(rows) +
                                                      " x " + std::to_string(cols) +
                                                      " matrix with l = " + std::to_string(l));
    }
}

}  // namespace gkq
