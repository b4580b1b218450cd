#include "codec/whiten.h"

#include <cblas.h>
#include <lapacke.h>

#include <cmath>
#include <limits>

namespace gkq::codec {

Result<Whitener> cholesky_whitener(const double* gram, int64_t n, const std::string& label) {
    if (n > std::numeric_limits<lapack_int>::max())
        return error(StatusCode::Unsupported, label + ": the Gram matrix exceeds LAPACK's 32-bit index range");
    Whitener w;
    w.n = n;
    double trace = 0.0;
    for (int64_t i = 0; i < n * n; ++i)
        if (!std::isfinite(gram[i]))
            return error(StatusCode::InvalidArgument,
                         label + ": Gram matrix element " + std::to_string(i) + " is not finite");
    for (int64_t i = 0; i < n; ++i) {
        const double d = gram[i * n + i];
        if (d < 0.0)
            return error(StatusCode::InvalidArgument, label + ": Gram matrix diagonal element " + std::to_string(i) +
                                                          " is negative (not a Gram matrix)");
        trace += d;
    }
    const double mean = n > 0 && trace > 0.0 ? trace / static_cast<double>(n) : 1.0;
    const auto ln = static_cast<lapack_int>(n);
    double shift = 0.0;
    for (int attempt = 0; attempt <= 16; ++attempt) {
        w.l.assign(gram, gram + n * n);
        for (int64_t i = 0; i < n; ++i) w.l[static_cast<size_t>(i * n + i)] += shift;
        const lapack_int info = n > 0 ? LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', ln, w.l.data(), ln) : 0;
        if (info == 0) {
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = i + 1; j < n; ++j) w.l[static_cast<size_t>(i * n + j)] = 0.0;
            w.shift = shift;
            return w;
        }
        if (info < 0)
            return error(StatusCode::Internal, label + ": dpotrf argument " + std::to_string(-info) + " rejected");
        shift = shift == 0.0 ? 1e-10 * mean : shift * 10.0;
    }
    return error(StatusCode::InvalidArgument,
                 label + ": the Gram matrix is not positive definite even with a diagonal shift of " +
                     std::to_string(shift / 10.0) + " (the mean diagonal is " + std::to_string(mean) + ")");
}

void whiten_rows(const Whitener& w, double* m, int64_t rows) {
    if (rows == 0 || w.n == 0) return;
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, static_cast<int>(rows),
                static_cast<int>(w.n), 1.0, w.l.data(), static_cast<int>(w.n), m, static_cast<int>(w.n));
}

void unwhiten_factor(const Whitener& w, double* v, int64_t k) {
    if (k == 0 || w.n == 0) return;
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, static_cast<int>(w.n),
                static_cast<int>(k), 1.0, w.l.data(), static_cast<int>(w.n), v, static_cast<int>(k));
}

}  // namespace gkq::codec
