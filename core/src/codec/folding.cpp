#include "codec/folding.h"

#include "gkq/assert.h"

#include <Eigen/Dense>
#include <cmath>

namespace gkq::codec {

HeadFold fit_head_fold(const double* factor, int64_t len, int64_t k, const double* sigma, int32_t n_heads) {
    GKQ_ASSERT(n_heads >= 2 && len % n_heads == 0);
    const int64_t h = len / n_heads;
    // m: (n_heads, h * k), row g = vec(F_g diag(sigma)); F_g is rows [g*h, (g+1)*h) of the factor
    Eigen::MatrixXd m(n_heads, h * k);
    for (int64_t g = 0; g < n_heads; ++g)
        for (int64_t r = 0; r < h; ++r)
            for (int64_t j = 0; j < k; ++j) m(g, r * k + j) = factor[(g * h + r) * k + j] * sigma[j];

    HeadFold fold;
    fold.head_scales.assign(static_cast<size_t>(n_heads), 0.0f);
    fold.base.assign(static_cast<size_t>(h * k), 0.0);
    const double norm = m.norm();
    if (norm == 0.0) return fold;

    // The top eigenvector of the small Gram matrix m m^T is the best c (unit); then b = m^T c.
    const Eigen::MatrixXd gram = m * m.transpose();
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram);
    Eigen::VectorXd c = eig.eigenvectors().col(n_heads - 1);  // eigenvalues ascending
    Eigen::VectorXd b = m.transpose() * c;
    fold.fit_error = (m - c * b.transpose()).norm() / norm;

    // Normalize so the largest |c_h| is +1 (the base then is the strongest head's block).
    Eigen::Index top = 0;
    c.cwiseAbs().maxCoeff(&top);
    const double alpha = c(top);
    c /= alpha;
    b *= alpha;
    for (int64_t g = 0; g < n_heads; ++g) fold.head_scales[static_cast<size_t>(g)] = static_cast<float>(c(g));
    for (int64_t r = 0; r < h; ++r)
        for (int64_t j = 0; j < k; ++j)
            fold.base[static_cast<size_t>(r * k + j)] = sigma[j] > 0.0 ? b(r * k + j) / sigma[j] : 0.0;
    return fold;
}

}  // namespace gkq::codec
