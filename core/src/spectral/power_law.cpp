// Power-law fit of an eigenvalue tail, as WeightWatcher's WWFit does it (continuous maximum likelihood for each
// candidate xmin, the xmin with the smallest Kolmogorov-Smirnov distance wins), and the heavy-tail summary of a
// spectrum. Formulas: gkq/spectrum.h.
#include "gkq/spectrum.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gkq {

namespace {

std::string format_number(const char* fmt, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

}  // namespace

PowerLawFit fit_power_law(const double* eigenvalues, int64_t n) {
    PowerLawFit fit;
    std::vector<double> x;
    x.reserve(static_cast<size_t>(std::max<int64_t>(n, 0)));
    for (int64_t i = 0; i < n; ++i)
        if (eigenvalues[i] > kEigenvalueThreshold && std::isfinite(eigenvalues[i])) x.push_back(eigenvalues[i]);
    std::sort(x.begin(), x.end());
    const int64_t N = static_cast<int64_t>(x.size());
    fit.n_fit = N;
    if (N < kMinEigenvaluesForFit) {
        fit.problem = FitProblem::TooFewEigenvalues;
        fit.reason = "only " + std::to_string(N) + " eigenvalues above 1e-5 (a power-law fit needs " +
                     std::to_string(kMinEigenvaluesForFit) + ")";
        return fit;
    }
    std::vector<double> lx(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) lx[static_cast<size_t>(i)] = std::log(x[static_cast<size_t>(i)]);
    // suffix[i] = sum_{j>=i} ln x_j, summed from the top so each candidate costs O(1) for alpha.
    std::vector<double> suffix(static_cast<size_t>(N + 1), 0.0);
    for (int64_t i = N - 1; i >= 0; --i) suffix[static_cast<size_t>(i)] = suffix[static_cast<size_t>(i + 1)] + lx[i];

    int64_t best = -1;
    double best_d = 0.0, best_alpha = 0.0;
    for (int64_t i = 0; i + 1 < N; ++i) {
        const double nt = static_cast<double>(N - i);
        const double log_sum = suffix[static_cast<size_t>(i)] - nt * lx[static_cast<size_t>(i)];
        // All tail values equal: no slope to fit (WeightWatcher gets alpha = inf here); leave D at 1.
        double d = 1.0;
        const double alpha = log_sum > 0.0 ? 1.0 + nt / log_sum : std::numeric_limits<double>::infinity();
        if (log_sum > 0.0 && alpha > 1.0) {
            d = 0.0;
            const double e = 1.0 - alpha;
            for (int64_t j = i; j < N; ++j) {
                const double cdf = 1.0 - std::exp(e * (lx[static_cast<size_t>(j)] - lx[static_cast<size_t>(i)]));
                d = std::max(d, std::fabs(cdf - static_cast<double>(j - i) / nt));
            }
        }
        if (best < 0 || d < best_d) {
            best = i;
            best_d = d;
            best_alpha = alpha;
        }
    }
    if (!(best_alpha > 1.0) || !std::isfinite(best_alpha)) {
        fit.reason = "no candidate xmin gives a finite alpha > 1";
        return fit;
    }
    if (best_alpha > kMaxReliableAlpha) {
        fit.problem = FitProblem::AlphaTooLarge;
        fit.reason = "alpha " + format_number("%.2f", best_alpha) + " > 8: no heavy tail to fit";
        return fit;
    }
    const double nt = static_cast<double>(N - best);
    fit.reliable = true;
    fit.problem = FitProblem::None;
    fit.alpha = best_alpha;
    fit.xmin = x[static_cast<size_t>(best)];
    fit.xmax = x.back();
    fit.ks_distance = best_d;
    fit.sigma = (best_alpha - 1.0) / std::sqrt(nt);
    // WeightWatcher counts every eigenvalue >= xmin (num_pl_spikes), zeros excluded by xmin > 1e-5.
    for (int64_t i = 0; i < n; ++i)
        if (eigenvalues[i] >= fit.xmin) ++fit.n_tail;
    return fit;
}

HeavyTailMetrics heavy_tail_metrics(const double* s, int64_t n, int64_t rows, int64_t cols) {
    HeavyTailMetrics h;
    std::vector<double> lambda(static_cast<size_t>(std::max<int64_t>(n, 0)));
    double sum = 0.0;
    for (int64_t i = n - 1; i >= 0; --i) {
        lambda[static_cast<size_t>(i)] = s[i] * s[i];
        sum += s[i] * s[i];
    }
    h.lambda_max = n > 0 ? lambda[0] : 0.0;
    if (h.lambda_max > 0.0) h.log_spectral_norm = std::log10(h.lambda_max);
    if (sum > 0.0) h.log_norm = std::log10(sum);
    h.power_law = fit_power_law(lambda.data(), n);
    if (h.power_law.reliable && h.lambda_max > 0.0) h.alpha_hat = h.power_law.alpha * h.log_spectral_norm;
    h.marchenko_pastur = fit_marchenko_pastur(lambda.data(), n, rows, cols);
    return h;
}

}  // namespace gkq
