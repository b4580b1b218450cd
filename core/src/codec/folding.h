// Head folding (the attention half of hierarchical folding): one factor of an attention projection, split into
// its heads, stored as one shared base block plus one scale per head: F_h ~ c_h * B.
// The fit is the best rank-1 approximation of the matrix whose row h is vec(F_h diag(sigma)), so the error is
// weighted the way it enters W = U diag(sigma) V^T (the other factor is orthonormal): the measured relative fit
// error is ||F diag(s) - F_folded diag(s)||_F / ||F diag(s)||_F.
#pragma once

#include <cstdint>
#include <vector>

namespace gkq::codec {

struct HeadFold {
    double fit_error = 0.0;          // relative, as above (0 for an all-zero factor)
    std::vector<float> head_scales;  // (n_heads): c_h, the largest |c_h| is 1
    std::vector<double> base;        // (len / n_heads, k) row-major: B
};

// factor: (len, k) row-major; sigma: (k); len must be a multiple of n_heads >= 2.
HeadFold fit_head_fold(const double* factor, int64_t len, int64_t k, const double* sigma, int32_t n_heads);

}  // namespace gkq::codec
