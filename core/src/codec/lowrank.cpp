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

int64_t param_fraction_rank(double fraction, int64_t rows, int64_t cols) {
    if (rows + cols == 0) return 0;
    const double k =
        std::floor(fraction * static_cast<double>(rows) * static_cast<double>(cols) / static_cast<double>(rows + cols));
    return std::max<int64_t>(1, static_cast<int64_t>(k));
}

int64_t select_rank(const std::vector<double>& s, const CodecParams& p, int64_t rows, int64_t cols) {
    const int64_t n = static_cast<int64_t>(s.size());
    int64_t k;
    if (p.rank > 0) {
        k = p.rank;
    } else if (p.param_fraction > 0.0) {
        k = param_fraction_rank(p.param_fraction, rows, cols);
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

namespace {

// The top-k of the randomized SVD as RankedFactors (u, v in double with top_factors' sign rule).
void take_randomized(const TopKSvd& t, int64_t k, RankedFactors& out) {
    const int64_t rows = t.rows, cols = t.cols, kk = t.k;
    out.k = k;
    out.s = t.s;
    out.u.assign(static_cast<size_t>(rows * k), 0.0);
    out.v.assign(static_cast<size_t>(cols * k), 0.0);
    for (int64_t r = 0; r < k; ++r) {
        double best = 0.0, sign = 1.0;
        for (int64_t i = 0; i < rows; ++i) {
            const double x = t.u[static_cast<size_t>(i * kk + r)];
            if (std::fabs(x) > best) {
                best = std::fabs(x);
                sign = x < 0.0 ? -1.0 : 1.0;
            }
        }
        for (int64_t i = 0; i < rows; ++i)
            out.u[static_cast<size_t>(i * k + r)] = sign * t.u[static_cast<size_t>(i * kk + r)];
        for (int64_t j = 0; j < cols; ++j)
            out.v[static_cast<size_t>(j * k + r)] = sign * t.v[static_cast<size_t>(j * kk + r)];
    }
}

}  // namespace

Result<RankedFactors> ranked_factors(const std::function<void(double*)>& fill, const float* w32, int64_t rows,
                                     int64_t cols, const CodecParams& p, const std::string& label) {
    const int64_t min_dim = std::min(rows, cols);
    RankedFactors out;
    if (randomized_svd_applies(rows, cols) && w32 != nullptr) {
        // The caps every rule shares (select_rank's), and what the rule asks for.
        int64_t cap = min_dim;
        if (p.max_rank_fraction > 0.0)
            cap = std::min<int64_t>(cap, std::max<int64_t>(1, static_cast<int64_t>(p.max_rank_fraction * min_dim)));
        const bool fixed = p.rank > 0 || p.param_fraction > 0.0;
        if (p.rank > 0)
            cap = std::min<int64_t>(cap, p.rank);
        else if (fixed)
            cap = std::min<int64_t>(cap, param_fraction_rank(p.param_fraction, rows, cols));
        if (!fixed && p.max_components > 0) cap = std::min<int64_t>(cap, p.max_components);
        const double total = gkq::frobenius_sq(w32, rows, cols);
        RandomizedSvdOptions ro;
        ro.n_power_iterations = kCodecPowerIterations;
        const int64_t limit = min_dim / 4;  // beyond this many values the full SVD is the cheaper one
        if (cap == 0) {
            out.k = 0;
            out.energy_kept = 1.0;
            out.randomized = true;
            return out;
        }
        const double fraction = p.max_rel_error > 0.0 ? 1.0 - p.max_rel_error * p.max_rel_error : p.energy;
        const double need = fraction * total * (1.0 - 1e-12);  // ties within rounding count as reached
        // (a zero matrix goes to the full SVD, whose factors select_rank gives the fixed rank as it always did)
        for (int64_t kk = fixed ? cap : std::min<int64_t>(cap, 64); total > 0.0 && kk + ro.oversampling <= limit;
             kk *= 2) {
            kk = std::min(kk, cap);
            Result<TopKSvd> t = randomized_svd(w32, rows, cols, kk, ro);
            if (!t) return error(t.status().code(), label + ": " + t.message());
            int64_t k = kk;
            double kept = 0.0;
            if (!fixed) {
                for (int64_t i = 0; i < kk; ++i) {
                    kept += t->s[static_cast<size_t>(i)] * t->s[static_cast<size_t>(i)];
                    if (kept >= need) {
                        k = i + 1;
                        break;
                    }
                }
                if (kept < need && kk < cap) {
                    // Not reached yet. Every further value is at most s_kk, so the most the values this path may
                    // still compute (up to min(rows, cols) / 4) can add is (limit - p - kk) s_kk^2: when that
                    // cannot reach E, the full SVD is the cheaper way and it is taken now.
                    const double last = t->s[static_cast<size_t>(kk - 1)];
                    const double room = static_cast<double>(std::max<int64_t>(0, limit - ro.oversampling - kk));
                    if (kept + room * last * last < need) break;
                    continue;
                }
            }
            take_randomized(*t, k, out);
            kept = 0.0;
            for (int64_t i = 0; i < k; ++i) kept += out.s[static_cast<size_t>(i)] * out.s[static_cast<size_t>(i)];
            out.energy_kept = std::min(1.0, kept / total);
            out.randomized = true;
            return out;
        }
        // the rule needs more than min_dim / 4 values: the full SVD below
    }
    Result<Svd> svd = svd_thin(fill, rows, cols, label);
    if (!svd) return svd.status();
    out.k = select_rank(svd->s, p, rows, cols);
    out.energy_kept = energy_fraction(svd->s, out.k);
    top_factors(*svd, out.k, out.u, out.v);
    out.s = std::move(svd->s);
    return out;
}

}  // namespace gkq::codec
