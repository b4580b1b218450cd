// Marchenko-Pastur bulk fit, reproducing WeightWatcher's mp_fit (rescale=True) with fit_density_with_range:
// a linear-kernel density estimate of the rescaled eigenvalues, a brute-force search over the MP scale sigma
// and a Nelder-Mead polish (scipy.optimize.brute's default `finish=fmin`). Formulas: gkq/spectrum.h.
#include "gkq/spectrum.h"

#include <algorithm>
#include <cmath>

namespace gkq {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kDensityPoints = 1000;    // np.linspace(0, max + 0.5, 1000)
constexpr double kBandwidth = 0.1;      // WeightWatcher's bw
constexpr double kDensityFloor = 0.01;  // resid_mp drops points where the estimate is below this
constexpr double kPenalty = 1000.0;     // resid_mp's residual when the MP edges miss the density

// The density estimate on its grid, with the near-zero points removed, and the location of its peak.
struct Density {
    std::vector<double> x;
    std::vector<double> y;
    double x_peak = 0.0;
    double x_last = 0.0;
};

// sklearn KernelDensity(kernel='linear', bandwidth=h): (1 / (n h)) sum_i max(0, 1 - |x - v_i| / h).
Density estimate_density(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const double n = static_cast<double>(v.size());
    const double top = v.back() + 0.5;
    Density d;
    double y_peak = -1.0;
    for (int t = 0; t < kDensityPoints; ++t) {
        const double x = top * static_cast<double>(t) / (kDensityPoints - 1);
        auto lo = std::upper_bound(v.begin(), v.end(), x - kBandwidth);
        auto hi = std::lower_bound(v.begin(), v.end(), x + kBandwidth);
        double sum = 0.0;
        for (auto it = lo; it < hi; ++it) sum += 1.0 - std::fabs(x - *it) / kBandwidth;
        const double y = sum / (n * kBandwidth);
        if (y > kDensityFloor) {
            d.x.push_back(x);
            d.y.push_back(y);
            if (y > y_peak) {
                y_peak = y;
                d.x_peak = x;
            }
        }
    }
    if (!d.x.empty()) d.x_last = d.x.back();
    return d;
}

// Sum of squared residuals of WeightWatcher's resid_mp for one sigma; `penalized` tells whether the MP edges
// were rejected (every residual 1000).
double residual(const Density& d, double q, double sigma, bool* penalized) {
    double sum = 0.0;
    *penalized = false;
    if (q == 1.0) {
        // Quarter-circle law on the singular values, as WeightWatcher writes it: (1 / (pi sigma^2)) sqrt(4 - x^2).
        for (size_t i = 0; i < d.x.size(); ++i) {
            const double x = d.x[i];
            const double mp = x < 2.0 ? std::sqrt(4.0 - x * x) / (kPi * sigma * sigma) : 0.0;
            sum += (mp - d.y[i]) * (mp - d.y[i]);
        }
        return sum;
    }
    const double inv_sq = std::sqrt(1.0 / q);
    const double b = std::pow(sigma * (1.0 + inv_sq), 2.0);
    const double a = std::pow(sigma * (1.0 - inv_sq), 2.0);
    if (b < d.x_peak || b > d.x_last || a > d.x_peak) {
        *penalized = true;
        return static_cast<double>(d.x.size()) * kPenalty * kPenalty;
    }
    const double y_ratio = 1.0 / q;
    for (size_t i = 0; i < d.x.size(); ++i) {
        const double x = d.x[i];
        // numpy gives NaN (then 0 by nan_to_num) outside (a, b) and at x = 0.
        const double mp =
            (x > a && x < b) ? std::sqrt((b - x) * (x - a)) / (2.0 * kPi * sigma * sigma * x * y_ratio) : 0.0;
        sum += (mp - d.y[i]) * (mp - d.y[i]);
    }
    return sum;
}

// scipy.optimize.fmin (Nelder-Mead) in one dimension with its defaults: initial step 5 %, xtol = ftol = 1e-4,
// at most 200 iterations and 200 function evaluations.
template <class F>
double nelder_mead_1d(F f, double x0) {
    double sim[2] = {x0, x0 != 0.0 ? 1.05 * x0 : 0.00025};
    double fs[2] = {f(sim[0]), f(sim[1])};
    int calls = 2;
    auto order = [&] {
        if (fs[1] < fs[0]) {
            std::swap(sim[0], sim[1]);
            std::swap(fs[0], fs[1]);
        }
    };
    order();
    for (int it = 1; calls < 200 && it < 200; ++it) {
        if (std::fabs(sim[1] - sim[0]) <= 1e-4 && std::fabs(fs[0] - fs[1]) <= 1e-4) break;
        const double xbar = sim[0];
        const double xr = 2.0 * xbar - sim[1];
        const double fxr = f(xr);
        ++calls;
        if (fxr < fs[0]) {
            const double xe = 3.0 * xbar - 2.0 * sim[1];
            const double fxe = f(xe);
            ++calls;
            if (fxe < fxr)
                sim[1] = xe, fs[1] = fxe;
            else
                sim[1] = xr, fs[1] = fxr;
        } else {
            bool shrink = false;
            if (fxr < fs[1]) {
                const double xc = 1.5 * xbar - 0.5 * sim[1];
                const double fxc = f(xc);
                ++calls;
                if (fxc <= fxr)
                    sim[1] = xc, fs[1] = fxc;
                else
                    shrink = true;
            } else {
                const double xcc = 0.5 * xbar + 0.5 * sim[1];
                const double fxcc = f(xcc);
                ++calls;
                if (fxcc < fs[1])
                    sim[1] = xcc, fs[1] = fxcc;
                else
                    shrink = true;
            }
            if (shrink) {
                sim[1] = sim[0] + 0.5 * (sim[1] - sim[0]);
                fs[1] = f(sim[1]);
                ++calls;
            }
        }
        order();
    }
    return sim[0];
}

}  // namespace

MarchenkoPasturFit fit_marchenko_pastur(const double* eigenvalues, int64_t n, int64_t rows, int64_t cols) {
    MarchenkoPasturFit fit;
    const int64_t big = std::max(rows, cols), small = std::min(rows, cols);
    if (small <= 0 || n <= 0) {
        fit.reason = "no eigenvalues";
        return fit;
    }
    fit.q = static_cast<double>(big) / static_cast<double>(small);
    if (n < kMinEigenvaluesForFit) {
        fit.problem = FitProblem::TooFewEigenvalues;
        fit.reason = "only " + std::to_string(n) + " eigenvalues (a Marchenko-Pastur fit needs " +
                     std::to_string(kMinEigenvaluesForFit) + ")";
        return fit;
    }
    double sum = 0.0, lmax = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        sum += eigenvalues[i];
        lmax = std::max(lmax, eigenvalues[i]);
    }
    if (!(sum > 0.0) || !std::isfinite(sum)) {
        fit.reason = "the eigenvalues sum to " + std::to_string(sum);
        return fit;
    }
    // WeightWatcher rescales W so that the eigenvalues have mean 1: Wscale^2 = M / sum(lambda), M = their count.
    const double scale = static_cast<double>(n) / sum;
    std::vector<double> l(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) l[static_cast<size_t>(i)] = eigenvalues[i] * scale;
    const double l_max = lmax * scale;
    const double q = fit.q;
    const double inv_sq = 1.0 / std::sqrt(q);
    const double sigma0 = std::sqrt(l_max) / (1.0 + inv_sq);  // calc_sigma(Q, evals) on the rescaled eigenvalues

    std::vector<double> to_fit = l;
    if (q == 1.0)
        for (double& v : to_fit) v = std::sqrt(v);
    const Density d = estimate_density(std::move(to_fit));
    if (d.x.empty()) {
        fit.reason = "the eigenvalue density is below 0.01 everywhere";
        return fit;
    }
    bool penalized = false;
    int best_j = 0;
    double best_f = 0.0;
    bool best_penalized = true;
    for (int j = 0; j < 195; ++j) {
        const double sg = (0.05 + 0.01 * j) * sigma0;
        const double f = residual(d, q, sg, &penalized);
        if (j == 0 || f < best_f) {
            best_j = j;
            best_f = f;
            best_penalized = penalized;
        }
    }
    if (best_penalized) {
        fit.reason = "no sigma puts the Marchenko-Pastur edges around the density's peak";
        return fit;
    }
    const double sigma =
        nelder_mead_1d([&](double sg) { return residual(d, q, sg, &penalized); }, (0.05 + 0.01 * best_j) * sigma0);
    const double bulk_max = std::pow(sigma * (1.0 + inv_sq), 2.0);
    const double bulk_min = std::pow(sigma * (1.0 - inv_sq), 2.0);
    const double tw = inv_sq * std::pow(bulk_max, 2.0 / 3.0) * std::pow(static_cast<double>(small), -2.0 / 3.0);
    const double cutoff = bulk_max + std::sqrt(tw);
    for (double v : l)
        if (v > cutoff) ++fit.n_spikes;
    fit.reliable = true;
    fit.problem = FitProblem::None;
    fit.sigma = sigma;
    fit.bulk_max = bulk_max / scale;
    fit.bulk_min = bulk_min / scale;
    fit.softrank = bulk_max / l_max;
    return fit;
}

}  // namespace gkq
