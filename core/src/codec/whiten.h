// Whitening by the input activations for the activation-aware SVD (SVD-LLM): with G = X^T X (cols, cols) the Gram
// matrix of a weight's inputs and G + shift I = L L^T its Cholesky factorization, ||A X^T||_F^2 = ||A L||_F^2 for
// any A (rows, cols) (up to the shift's term shift ||A||_F^2). The truncated SVD of W L = U S V^T then minimizes
// the layer output error over rank k, and W' = U_k S_k V_k^T L^-1 has ||(W - W') L||_F^2 = sum of the dropped s_i^2.
#pragma once

#include "gkq/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq::codec {

struct Whitener {
    int64_t n = 0;
    std::vector<double> l;  // (n, n) row-major, lower triangular: G + shift I = L L^T
    double shift = 0.0;     // added to the diagonal of G so that the factorization exists (0 when none was needed)
};

// Cholesky factor of the (n, n) row-major symmetric `gram`. When G is not numerically positive definite, the
// shift starts at 1e-10 x (mean of the diagonal; 1 when that is 0) and grows 10-fold until the factorization
// succeeds (at most 16 tries). InvalidArgument naming `label` for a non-finite or negative-diagonal G, or when no
// shift up to 1e5 x the mean diagonal makes it positive definite.
Result<Whitener> cholesky_whitener(const double* gram, int64_t n, const std::string& label);

// m (rows, n) row-major becomes m L in place.
void whiten_rows(const Whitener& w, double* m, int64_t rows);

// v (n, k) row-major becomes L^-T v in place, so that (U S V^T) L^-1 = U S (L^-T V)^T.
void unwhiten_factor(const Whitener& w, double* v, int64_t k);

}  // namespace gkq::codec
