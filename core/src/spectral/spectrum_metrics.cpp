// What a spectrum says about low-rank approximation: energy curve, energy ranks, stable and effective rank,
// and the exact Eckart-Young error of every rank.
#include "gkq/spectrum.h"

#include <algorithm>
#include <cmath>

namespace gkq {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sum of s_i^2 for i in [from, n), added smallest first so a tail of tiny values is not lost against big ones.
double energy_from(const double* s, int64_t n, int64_t from) {
    double sum = 0.0;
    for (int64_t i = n - 1; i >= from; --i) sum += s[i] * s[i];
    return sum;
}

double energy_or(const double* s, int64_t n, double frobenius_sq) {
    return frobenius_sq >= 0.0 ? frobenius_sq : energy_from(s, n, 0);
}

}  // namespace

std::vector<double> cumulative_energy(const double* s, int64_t n, double frobenius_sq) {
    std::vector<double> c(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
    const double total = energy_or(s, n, frobenius_sq);
    if (total <= 0.0) return c;
    double head = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        head += s[i] * s[i];
        c[static_cast<size_t>(i)] = std::min(1.0, head / total);
    }
    return c;
}

int64_t rank_for_energy(const double* s, int64_t n, double fraction, double frobenius_sq) {
    const double total = energy_or(s, n, frobenius_sq);
    if (total <= 0.0) return 0;
    const double target = fraction * total * (1.0 - 1e-12);
    double head = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        head += s[i] * s[i];
        if (head >= target) return i + 1;
    }
    return frobenius_sq >= 0.0 ? -1 : n;
}

double relative_error_at_rank(const double* s, int64_t n, int64_t k, double frobenius_sq) {
    if (k < 0) return kNaN;
    const double total = energy_or(s, n, frobenius_sq);
    if (total <= 0.0) return 0.0;
    if (frobenius_sq < 0.0) return k >= n ? 0.0 : std::sqrt(energy_from(s, n, k) / total);
    // Partial spectrum: the tail is whatever the known head leaves of the exact total.
    if (k > n) return kNaN;
    double head = 0.0;
    for (int64_t i = 0; i < k; ++i) head += s[i] * s[i];
    return std::sqrt(std::max(0.0, total - head) / total);
}

double top_k_energy(const double* s, int64_t n, int64_t k, double frobenius_sq) {
    const double total = energy_or(s, n, frobenius_sq);
    if (total <= 0.0) return 0.0;
    double head = 0.0;
    for (int64_t i = 0; i < std::min(k, n); ++i) head += s[i] * s[i];
    return std::min(1.0, head / total);
}

double top_k_energy_bound(double stable_rank, int64_t k) {
    if (!(stable_rank > 0.0)) return 0.0;
    return std::min(1.0, static_cast<double>(k) / stable_rank);
}

SpectrumMetrics spectrum_metrics(const double* s, int64_t n, bool complete, double frobenius_sq) {
    SpectrumMetrics m;
    m.n_values = n;
    m.complete = complete;
    // A complete spectrum carries its own energy; a partial one needs the exact total from the matrix.
    const double given = complete ? -1.0 : frobenius_sq;
    m.frobenius_sq = energy_or(s, n, given);
    m.s1 = n > 0 ? s[0] : 0.0;
    m.s2 = n > 1 ? s[1] : 0.0;
    m.stable_rank = m.s1 > 0.0 ? m.frobenius_sq / (m.s1 * m.s1) : 0.0;
    if (n > 1 && m.s2 > 0.0) m.s1_over_s2 = m.s1 / m.s2;
    m.rank_90 = rank_for_energy(s, n, 0.90, given);
    m.rank_99 = rank_for_energy(s, n, 0.99, given);
    m.rank_999 = rank_for_energy(s, n, 0.999, given);
    if (complete) {
        double sum = 0.0;
        for (int64_t i = n - 1; i >= 0; --i) sum += s[i];
        if (sum > 0.0) {
            double h = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                const double p = s[i] / sum;
                if (p > 0.0) h -= p * std::log(p);
            }
            m.effective_rank = std::exp(h);
        } else {
            m.effective_rank = 0.0;
        }
    }
    return m;
}

}  // namespace gkq
