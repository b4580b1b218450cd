// whitened_spectrum (gkq/codec.h): the singular values of W L, the spectrum of W as its inputs see it.
#include "codec/lowrank.h"
#include "codec/whiten.h"
#include "gkq/codec.h"

#include <algorithm>
#include <new>

namespace gkq {

Result<WhitenedSpectrum> whitened_spectrum(const float* w, int64_t rows, int64_t cols, const double* gram,
                                           const std::string& label) {
    if (w == nullptr || gram == nullptr || rows <= 0 || cols <= 0)
        return error(StatusCode::InvalidArgument,
                     label + ": whitened spectrum of an empty matrix or without a Gram matrix");
    try {
        auto whitener = codec::cholesky_whitener(gram, cols, label);
        if (!whitener) return whitener.status();
        const auto n = static_cast<size_t>(rows * cols);
        std::vector<double> m(n);
        std::copy(w, w + n, m.begin());
        codec::whiten_rows(*whitener, m.data(), rows);
        auto svd = codec::svd_thin([&](double* a) { std::copy(m.begin(), m.end(), a); }, rows, cols, label);
        if (!svd) return svd.status();
        WhitenedSpectrum out;
        out.singular_values = std::move(svd->s);
        out.metrics = spectrum_metrics(out.singular_values.data(), static_cast<int64_t>(out.singular_values.size()));
        out.shift = whitener->shift;
        return out;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, label + ": does not fit in memory for the whitened spectrum");
    }
}

}  // namespace gkq
