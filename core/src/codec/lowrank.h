// Truncated SVD for the low-rank methods, in float64 through LAPACK (dgesdd, dgesvd when it does not converge),
// and the choice of the rank k from the spectrum (CodecParams rules).
#pragma once

#include "gkq/codec.h"
#include "gkq/spectrum.h"
#include "gkq/status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gkq::codec {

struct Svd {
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<double> s;  // all min(rows, cols) singular values, descending
    // Thin factors as LAPACK returns them for the column-major (cols, rows) matrix W^T:
    std::vector<double> vw;  // (p, cols) vector-major: right singular vector r of W at [r * cols, (r + 1) * cols)
    std::vector<double> uw;  // column-major (p, rows), leading dimension p: u_r[i] = uw[r + i * p]
};

// The SVD of the row-major (rows, cols) matrix that `fill` writes (rows * cols doubles; called again when dgesdd
// does not converge and dgesvd takes over, so no second copy is kept). `label` names the tensor in errors.
Result<Svd> svd_thin(const std::function<void(double*)>& fill, int64_t rows, int64_t cols, const std::string& label);

// The top-k factors as row-major u (rows, k) and v (cols, k), signs fixed so that the largest-magnitude entry
// of each u_r is positive (a deterministic choice among the equivalent SVDs).
void top_factors(const Svd& svd, int64_t k, std::vector<double>& u, std::vector<double>& v);

// CodecParams::param_fraction's rank: max(1, floor(fraction * rows * cols / (rows + cols))).
int64_t param_fraction_rank(double fraction, int64_t rows, int64_t cols);

// k by the CodecParams rules (see codec.h) from the descending singular values.
int64_t select_rank(const std::vector<double>& s, const CodecParams& p, int64_t rows, int64_t cols);

// sum_{i<k} s_i^2 / sum s_i^2 (1 for an all-zero spectrum).
double energy_fraction(const std::vector<double>& s, int64_t k);

// The rank-k factors the CodecParams rules pick, from whichever SVD is cheaper:
// - the full SVD (svd_thin) when min(rows, cols) < kRandomizedMinDim (every matrix of the demo model, whose
//   knots stay byte-identical), or when the rank the rules need grows past min(rows, cols) / 4;
// - else the randomized top-k SVD of gkq/spectrum.h (Halko et al., `kCodecPowerIterations` power iterations,
//   oversampling 10) on the float32 matrix `w32`. A fixed rank is computed directly. An energy or error rule
//   needs the smallest k with sum_{i<=k} s_i^2 >= E ||W||_F^2: ||W||_F^2 is summed exactly from the matrix, and
//   k grows (64, 128, ... capped by max_components / max_rank_fraction) until the computed values reach E or the
//   cap; past min(rows, cols) / 4 the full SVD takes over. It takes over at once when even (min(rows, cols) / 4 - k)
//   more values of the last size s_k could not reach E (a bound that can only err towards the full, exact path). The
//   randomized values never exceed the true ones, so the k found is never smaller than the exact rule's.
// energy_kept is exact for the factors returned: ||W - Q B_k||_F^2 = ||W||_F^2 - sum_{i<=k} s_i^2 (the tail is
// never estimated from approximate values).
constexpr int64_t kRandomizedMinDim = 1024;
constexpr int kCodecPowerIterations = 4;

struct RankedFactors {
    int64_t k = 0;
    std::vector<double> s;     // (>= k) descending; the first k are the kept ones
    std::vector<double> u, v;  // row-major (rows, k) and (cols, k), signs as top_factors fixes them
    double energy_kept = 1.0;  // sum_{i<k} s_i^2 / ||W||_F^2
    bool randomized = false;
};

// `fill` writes the matrix in double for the full SVD (as svd_thin); `w32` is the same row-major matrix in
// float32 for the randomized one (may be null only when min(rows, cols) < kRandomizedMinDim).
Result<RankedFactors> ranked_factors(const std::function<void(double*)>& fill, const float* w32, int64_t rows,
                                     int64_t cols, const CodecParams& p, const std::string& label);

// True when ranked_factors may take the randomized path for this shape (then it needs w32).
inline bool randomized_svd_applies(int64_t rows, int64_t cols) {
    return rows >= kRandomizedMinDim && cols >= kRandomizedMinDim;
}

}  // namespace gkq::codec
