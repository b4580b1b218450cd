#include "charts/rank_stats.h"

#include <algorithm>

namespace gkq::ui {

double lowRankBitsPerWeight(int64_t rows, int64_t cols, int64_t k, int bits) {
    if (rows <= 0 || cols <= 0) return 0.0;
    return static_cast<double>(k) * static_cast<double>(rows + cols + 1) * bits /
           (static_cast<double>(rows) * static_cast<double>(cols));
}

RankStats rankStats(const TensorSpectrum& spectrum, int64_t k) {
    const auto& s = spectrum.singular_values;
    const auto n = static_cast<int64_t>(s.size());
    RankStats r;
    r.rank = std::clamp<int64_t>(k, 0, n);
    if (n == 0) return r;
    // The complete spectrum is its own energy (frobenius_sq < 0), so k = n gives exactly 0 error.
    r.relError = relative_error_at_rank(s.data(), n, r.rank);
    r.energyKept = top_k_energy(s.data(), n, r.rank);
    r.bpwF32 = lowRankBitsPerWeight(spectrum.rows, spectrum.cols, r.rank, 32);
    r.bpwF16 = lowRankBitsPerWeight(spectrum.rows, spectrum.cols, r.rank, 16);
    return r;
}

}  // namespace gkq::ui
