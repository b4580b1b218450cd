#include "codec/lowrank.h"

#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace gkq::codec {

Result<Svd> svd_thin(const std::function<void(double*)>& fill, int64_t rows, int64_t cols, const std::string& label) {
    constexpr int64_t kMaxDim = std::numeric_limits<lapack_int>::max();
    if (rows > kMaxDim || cols > kMaxDim)
        return error(StatusCode::Unsupported, label + ": a dimension exceeds LAPACK's 32-bit index range");
    Svd svd;
    svd.rows = rows;
    svd.cols = cols;
    const int64_t p = std::min(rows, cols);
    if (p == 0) return svd;
    // Row-major (rows, cols) is the column-major (cols, rows) matrix W^T = X S Y^T, so W = Y S X^T: LAPACK's left
    // vectors X (of W^T) are W's right vectors and its right vectors Y are W's left vectors.
    svd.s.resize(static_cast<size_t>(p));
    svd.vw.resize(static_cast<size_t>(cols * p));
    svd.uw.resize(static_cast<size_t>(p * rows));
    const auto m = static_cast<lapack_int>(cols), n = static_cast<lapack_int>(rows), lp = static_cast<lapack_int>(p);
    std::vector<double> a(static_cast<size_t>(rows * cols));
    fill(a.data());
    lapack_int info =
        LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', m, n, a.data(), m, svd.s.data(), svd.vw.data(), m, svd.uw.data(), lp);
    if (info > 0) {  // divide and conquer did not converge: QR iteration on a fresh copy (dgesdd destroyed it)
        fill(a.data());
        std::vector<double> superb(static_cast<size_t>(std::max<int64_t>(p - 1, 1)));
        info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'S', 'S', m, n, a.data(), m, svd.s.data(), svd.vw.data(), m,
                              svd.uw.data(), lp, superb.data());
    }
    if (info != 0)
        return error(StatusCode::Internal,
                     label + ": the SVD did not converge (LAPACK info " + std::to_string(info) + ")");
    return svd;
}

void top_factors(const Svd& svd, int64_t k, std::vector<double>& u, std::vector<double>& v) {
    const int64_t rows = svd.rows, cols = svd.cols, p = static_cast<int64_t>(svd.s.size());
    u.assign(static_cast<size_t>(rows * k), 0.0);
    v.assign(static_cast<size_t>(cols * k), 0.0);
    for (int64_t r = 0; r < k; ++r) {
        double best = 0.0;
        double sign = 1.0;
        for (int64_t i = 0; i < rows; ++i) {
            const double x = svd.uw[static_cast<size_t>(r + i * p)];
            if (std::fabs(x) > best) {
                best = std::fabs(x);
                sign = x < 0.0 ? -1.0 : 1.0;
            }
        }
        for (int64_t i = 0; i < rows; ++i)
            u[static_cast<size_t>(i * k + r)] = sign * svd.uw[static_cast<size_t>(r + i * p)];
        for (int64_t j = 0; j < cols; ++j)
            v[static_cast<size_t>(j * k + r)] = sign * svd.vw[static_cast<size_t>(r * cols + j)];
    }
}

double energy_fraction(const std::vector<double>& s, int64_t k) {
    double total = 0.0, kept = 0.0;
    for (size_t i = 0; i < s.size(); ++i) {
        total += s[i] * s[i];
        if (static_cast<int64_t>(i) < k) kept += s[i] * s[i];
    }
    return total > 0.0 ? kept / total : 1.0;
}

int64_t select_rank(const std::vector<double>& s, const CodecParams& p, int64_t rows, int64_t cols) {
    const int64_t n = static_cast<int64_t>(s.size());
    int64_t k;
    if (p.rank > 0) {
        k = p.rank;
    } else {
        double total = 0.0;
        for (double x : s) total += x * x;
        k = 0;
        if (total > 0.0 && p.max_rel_error > 0.0) {
            // smallest k with tail energy sum_{i>=k} s_i^2 <= budget^2 * total; the tail summed from the small end
            const double allowed = p.max_rel_error * p.max_rel_error * total;
            double tail = 0.0;
            k = n;
            for (int64_t i = n - 1; i >= 0; --i) {
                tail += s[static_cast<size_t>(i)] * s[static_cast<size_t>(i)];
                if (tail > allowed) break;
                k = i;
            }
        } else if (total > 0.0) {
            const double need = p.energy * total * (1.0 - 1e-12);  // ties within rounding count as reached
            double kept = 0.0;
            k = n;
            for (int64_t i = 0; i < n; ++i) {
                kept += s[static_cast<size_t>(i)] * s[static_cast<size_t>(i)];
                if (kept >= need) {
                    k = i + 1;
                    break;
                }
            }
        }
        if (p.max_components > 0) k = std::min<int64_t>(k, p.max_components);
    }
    const int64_t min_dim = std::min(rows, cols);
    if (p.max_rank_fraction > 0.0)
        k = std::min<int64_t>(k, std::max<int64_t>(1, static_cast<int64_t>(p.max_rank_fraction * min_dim)));
    return std::clamp<int64_t>(k, 0, min_dim);
}

}  // namespace gkq::codec
