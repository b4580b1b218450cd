// Truncated SVD for the low-rank methods, in float64 through LAPACK (dgesdd, dgesvd when it does not converge),
// and the choice of the rank k from the spectrum (CodecParams rules).
#pragma once

#include "gkq/codec.h"
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

// k by the CodecParams rules (see codec.h) from the descending singular values.
int64_t select_rank(const std::vector<double>& s, const CodecParams& p, int64_t rows, int64_t cols);

// sum_{i<k} s_i^2 / sum s_i^2 (1 for an all-zero spectrum).
double energy_fraction(const std::vector<double>& s, int64_t k);

}  // namespace gkq::codec
