// Spectral analysis of weight matrices: exact singular values, randomized top-k triplets, the metrics that say
// what any rank costs, WeightWatcher-compatible heavy-tail metrics, and the whole-model driver.
// Contract: matrices are row-major float32 (rows, cols) as tensor_to_f32 returns them; singular values are
// double and sorted descending; nothing throws (allocation failures become a Status); every function is
// deterministic (the randomized SVD takes a seed). Qt- and Eigen-free: raw pointers and std types only.
#pragma once

#include "gkq/progress.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace gkq {

class Weights;

// ---- exact spectrum ----------------------------------------------------------------------------------------------

// All min(rows, cols) singular values of the row-major (rows, cols) matrix w, descending, into `out`.
// A backward-stable symmetric eigensolver on the Gram matrix formed in double precision: s_i is off by at most
// about eps64 * n * s_1^2 / (2 s_i) (relative 1e-6 or better down to s_i = 1e-3 s_1 for n <= 10^4; measured
// 1e-7 on s_i = 1/(1+i), n = 4096). Limits: min(rows, cols) <= 46340, max(rows, cols) < 2^31 (32-bit LAPACK).
Status singular_values(const float* w, int64_t rows, int64_t cols, std::vector<double>& out);

// ---- randomized top-k SVD (Halko, Martinsson & Tropp 2011, Alg. 4.4) ------------------------------------------------

struct RandomizedSvdOptions {
    int64_t oversampling = 10;      // extra sketch columns p: the sketch has l = min(k + p, min(rows, cols)) columns
    int n_power_iterations = 2;     // q: each multiplies by (A A^T) once, re-orthonormalized by QR in between
    uint64_t seed = 0x5eed5eedULL;  // the Gaussian test matrix; same seed, same matrix, same result
};

struct TopKSvd {
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t k = 0;
    std::vector<float> u;   // (rows, k) row-major: left singular vectors as columns
    std::vector<double> s;  // (k) descending
    std::vector<float> v;   // (cols, k) row-major: right singular vectors as columns; W ~ u diag(s) v^T
};

// The k largest singular triplets of the row-major (rows, cols) matrix w, 1 <= k <= min(rows, cols).
// Cost about (2q + 2) * 2 * rows * cols * l flops; values are accurate when s_{l+1} / s_k is small.
Result<TopKSvd> randomized_svd(const float* w, int64_t rows, int64_t cols, int64_t k,
                               const RandomizedSvdOptions& options = {});

// ---- metrics from a spectrum ----------------------------------------------------------------------------------------
// Notation: s_1 >= s_2 >= ... >= s_n >= 0 the singular values, E = ||W||_F^2 = sum_i s_i^2 the energy.
// Functions taking `frobenius_sq` accept E < 0 to mean "sum s_i^2 over the given values" (a complete spectrum);
// pass the exact E (see frobenius_sq()) when only the top values are known.

// ||W||_F^2 of a row-major matrix, accumulated in double.
double frobenius_sq(const float* w, int64_t rows, int64_t cols);

// c_k = sum_{i<=k} s_i^2 / E for k = 1..n (c[k-1]); all zero for a zero matrix.
std::vector<double> cumulative_energy(const double* s, int64_t n, double frobenius_sq = -1.0);

// The smallest k with sum_{i<=k} s_i^2 >= fraction * E (ties within 1e-12 relative count as reached);
// 0 for a zero matrix; -1 when the given values do not reach it (a top-k spectrum).
int64_t rank_for_energy(const double* s, int64_t n, double fraction, double frobenius_sq = -1.0);

// Exact relative Frobenius error of the best rank-k approximation (Eckart-Young):
// ||W - W_k||_F / ||W||_F = sqrt(sum_{i>k} s_i^2 / E); 0 for k >= n of a complete spectrum or a zero matrix.
// With a partial spectrum k must be <= n (else NaN); the tail is then E - sum_{i<=k} s_i^2.
double relative_error_at_rank(const double* s, int64_t n, int64_t k, double frobenius_sq = -1.0);

// sum_{i<=k} s_i^2 / E, and its bound from the stable rank: top-k energy <= min(1, k / stable_rank), because
// every s_i^2 <= s_1^2 = E / stable_rank.
double top_k_energy(const double* s, int64_t n, int64_t k, double frobenius_sq = -1.0);
double top_k_energy_bound(double stable_rank, int64_t k);

struct SpectrumMetrics {
    int64_t n_values = 0;       // singular values the metrics were computed from
    bool complete = true;       // all min(rows, cols) values; false for a top-k spectrum
    double frobenius_sq = 0.0;  // E
    double s1 = 0.0;            // spectral norm ||W||_2
    double s2 = 0.0;
    double stable_rank = 0.0;  // E / s_1^2 (0 for a zero matrix)
    // Roy & Vetterli (2007) effective rank: exp(-sum p_i ln p_i) with p_i = s_i / sum_j s_j (singular values, not
    // their squares). NaN for a partial spectrum; 0 for a zero matrix.
    double effective_rank = std::numeric_limits<double>::quiet_NaN();
    double s1_over_s2 = std::numeric_limits<double>::quiet_NaN();  // NaN when n < 2 or s_2 == 0
    int64_t rank_90 = 0;   // rank_for_energy(0.90); -1 when a partial spectrum does not reach it
    int64_t rank_99 = 0;   // rank_for_energy(0.99)
    int64_t rank_999 = 0;  // rank_for_energy(0.999)
};

SpectrumMetrics spectrum_metrics(const double* s, int64_t n, bool complete = true, double frobenius_sq = -1.0);

// ---- heavy-tail metrics (WeightWatcher-compatible) ------------------------------------------------------------------
// On the eigenvalues lambda_i = s_i^2 of W^T W, NOT normalized by N (WeightWatcher's default normalize=False).
// Power law (WeightWatcher's WWFit, the `powerlaw` package's continuous MLE with xmin by minimum KS distance):
//   data x_1 <= ... <= x_N: the eigenvalues > 1e-5 (WeightWatcher's EVALS_THRESH), sorted ascending;
//   for each candidate xmin = x_i, i = 1..N-1, with n = N - i + 1 tail values x_i..x_N:
//     alpha_i = 1 + n / sum_{j>=i} ln(x_j / x_i)
//     D_i     = max_{j>=i} | 1 - (x_j / x_i)^(1 - alpha_i) - (j - i) / n |   (1 when alpha_i <= 1)
//   the fit is the candidate with the smallest D (the first on ties): alpha, xmin, D (the KS distance),
//   sigma = (alpha - 1) / sqrt(n), n_tail = #{lambda >= xmin} (WeightWatcher's num_pl_spikes), xmax = x_N.
//   alpha_hat = alpha * log10(lambda_max) (WeightWatcher's alpha_weighted),
//   log_spectral_norm = log10(lambda_max), log_norm = log10(sum lambda) (= log10 ||W||_F^2).
//   A fit needs >= 50 eigenvalues above the threshold; fewer, or alpha > 8, is unreliable: alpha is then NaN and
//   `reason` says why.
// Marchenko-Pastur bulk (WeightWatcher's mp_fit with rescale=True):
//   N >= M the matrix dimensions, Q = N / M, M eigenvalues; rescale so their mean is 1: l_i = lambda_i * M / E;
//   sigma is fitted by WeightWatcher's fit_density_with_range: a linear-kernel density estimate (bandwidth 0.1)
//   of the l_i (of sqrt(l_i) when Q == 1) on 1000 points of [0, max + 0.5], points with density < 0.01 dropped;
//   a brute-force search over sigma = (0.05 + 0.01 j) * sigma_0, j = 0..194, sigma_0 = sqrt(l_max) / (1 + Q^-1/2),
//   minimizing the squared residual against the MP density (quarter circle when Q == 1; residual 1000 per point
//   when the MP edges miss the density's peak or exceed its range), polished by Nelder-Mead (scipy fmin);
//   bulk_max = (sigma (1 + Q^-1/2))^2, TW = Q^-1/2 * bulk_max^(2/3) * M^(-2/3),
//   n_spikes = #{l_i > bulk_max + sqrt(TW)}, mp_softrank = bulk_max / l_max; bulk edges reported in the units
//   of lambda (multiplied back by E / M). Also needs >= 50 eigenvalues.

// Why a fit gave no number (reason strings carry the details).
enum class FitProblem : uint8_t {
    None,
    TooFewEigenvalues,  // fewer than kMinEigenvaluesForFit
    AlphaTooLarge,      // alpha > kMaxReliableAlpha: no heavy tail
    NoFit,              // no candidate produced a usable fit
    PartialSpectrum,    // only the top-k values are known (analyze_model with top_k and without full)
};

constexpr int64_t kMinEigenvaluesForFit = 50;
constexpr double kMaxReliableAlpha = 8.0;
constexpr double kEigenvalueThreshold = 1e-5;

struct PowerLawFit {
    bool reliable = false;
    FitProblem problem = FitProblem::NoFit;
    std::string reason;  // empty when reliable
    double alpha = std::numeric_limits<double>::quiet_NaN();
    double xmin = std::numeric_limits<double>::quiet_NaN();
    double xmax = std::numeric_limits<double>::quiet_NaN();
    double ks_distance = std::numeric_limits<double>::quiet_NaN();
    double sigma = std::numeric_limits<double>::quiet_NaN();  // standard error of alpha
    int64_t n_fit = 0;                                        // eigenvalues above the threshold
    int64_t n_tail = 0;                                       // eigenvalues >= xmin
};

// Fits eigenvalues (any order, n of them) as described above.
PowerLawFit fit_power_law(const double* eigenvalues, int64_t n);

struct MarchenkoPasturFit {
    bool reliable = false;
    FitProblem problem = FitProblem::NoFit;
    std::string reason;
    double q = std::numeric_limits<double>::quiet_NaN();         // N / M >= 1
    double sigma = std::numeric_limits<double>::quiet_NaN();     // in rescaled units (WeightWatcher sigma_mp)
    double bulk_min = std::numeric_limits<double>::quiet_NaN();  // lambda_-, units of lambda
    double bulk_max = std::numeric_limits<double>::quiet_NaN();  // lambda_+, units of lambda
    double softrank = std::numeric_limits<double>::quiet_NaN();  // lambda_+ / lambda_max
    int64_t n_spikes = 0;                                        // eigenvalues above lambda_+ (+ Tracy-Widom)
};

// Eigenvalues (any order, n of them) of W^T W for a (rows, cols) matrix.
MarchenkoPasturFit fit_marchenko_pastur(const double* eigenvalues, int64_t n, int64_t rows, int64_t cols);

struct HeavyTailMetrics {
    PowerLawFit power_law;
    MarchenkoPasturFit marchenko_pastur;
    double lambda_max = 0.0;                                              // s_1^2 (WeightWatcher's "spectral_norm")
    double log_spectral_norm = std::numeric_limits<double>::quiet_NaN();  // log10(lambda_max)
    double log_norm = std::numeric_limits<double>::quiet_NaN();           // log10(sum lambda)
    double alpha_hat = std::numeric_limits<double>::quiet_NaN();  // alpha * log10(lambda_max); NaN if unreliable
};

// From the complete singular values (descending, n = min(rows, cols)) of a (rows, cols) matrix.
HeavyTailMetrics heavy_tail_metrics(const double* s, int64_t n, int64_t rows, int64_t cols);

// ---- whole model ----------------------------------------------------------------------------------------------------

struct AnalyzeOptions {
    bool full = true;   // the exact full spectrum (all metrics)
    int64_t top_k = 0;  // > 0: also the top-k by randomized SVD; alone (full = false) it replaces the full spectrum
    RandomizedSvdOptions randomized;
    int n_threads = 0;  // tensors analyzed at once; 0: std::thread::hardware_concurrency()
};

struct TensorSpectrum {
    std::string name;
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;
    int64_t rows = 0;
    int64_t cols = 0;
    std::string skipped;        // non-empty: why this tensor was not analyzed (e.g. a type with no f32 conversion)
    double frobenius_sq = 0.0;  // ||W||_F^2, exact
    std::vector<double> singular_values;  // (min(rows, cols)) descending; empty without `full`
    std::vector<double> top_k_values;     // (k) descending by randomized SVD; empty without top_k
    double top_k_max_rel_error = std::numeric_limits<double>::quiet_NaN();  // vs the full spectrum, when both
    SpectrumMetrics metrics;      // from the full spectrum, else from the top-k values and frobenius_sq
    HeavyTailMetrics heavy_tail;  // full spectrum only (else reliable = false with a reason)
    double seconds = 0.0;         // wall time for this tensor
};

// Analyzes every 2-D tensor of `model` (a model file, or a knot: each record decoded), in tensor order. Each worker
// converts one tensor to float32 at a time (memory: n_threads tensors' working sets plus the results). With several
// workers, OpenBLAS runs one thread per call for the duration (restored afterwards). `progress` is called on the
// calling thread with the fraction of the work (weighted by rows * cols * min(rows, cols)) and the tensor just
// finished; returning false stops after the tensors in flight and returns Cancelled. Tensors whose type has no
// float32 conversion are reported with `skipped` set; other errors stop the analysis and name the tensor.
Result<std::vector<TensorSpectrum>> analyze_model(const Weights& model, const AnalyzeOptions& options,
                                                  const ProgressFn& progress = {});

}  // namespace gkq
