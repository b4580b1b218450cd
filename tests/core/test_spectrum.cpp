// Spectral analysis: exact spectra of matrices built with known singular values, randomized top-k, the
// metrics on hand-computed cases, the WeightWatcher-style fits on synthetic samples, and analyze_model's
// ordering, threading and cancellation on an in-memory model.
#include "formats/model_file_data.h"
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/spectrum.h"

#include <lapacke.h>

#include <QtTest>
#include <algorithm>
#include <cmath>
#include <thread>

using namespace gkq;

namespace {

// splitmix64 + Box-Muller: the test's own generator, independent of the one under test.
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
    double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
};

// (m, k) row-major with orthonormal columns: Gaussian columns, modified Gram-Schmidt applied twice.
std::vector<double> orthonormal_columns(int64_t m, int64_t k, uint64_t seed) {
    Rng rng{seed};
    std::vector<double> q(static_cast<size_t>(m * k));
    for (double& v : q) v = rng.normal();
    for (int64_t j = 0; j < k; ++j) {
        for (int pass = 0; pass < 2; ++pass) {
            for (int64_t p = 0; p < j; ++p) {
                double dot = 0.0;
                for (int64_t i = 0; i < m; ++i) dot += q[i * k + p] * q[i * k + j];
                for (int64_t i = 0; i < m; ++i) q[i * k + j] -= dot * q[i * k + p];
            }
        }
        double norm = 0.0;
        for (int64_t i = 0; i < m; ++i) norm += q[i * k + j] * q[i * k + j];
        norm = std::sqrt(norm);
        for (int64_t i = 0; i < m; ++i) q[i * k + j] /= norm;
    }
    return q;
}

// W = U diag(s) V^T (rows, cols) row-major float32, s of length min(rows, cols).
std::vector<float> matrix_with_spectrum(int64_t rows, int64_t cols, const std::vector<double>& s, uint64_t seed) {
    const int64_t n = std::min(rows, cols);
    const auto u = orthonormal_columns(rows, n, seed);
    const auto v = orthonormal_columns(cols, n, seed + 1000);
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            double sum = 0.0;
            for (int64_t t = 0; t < n; ++t) sum += u[i * n + t] * s[t] * v[j * n + t];
            w[i * cols + j] = static_cast<float>(sum);
        }
    return w;
}

// n values from `top` down to `top * ratio`, evenly spaced in log.
std::vector<double> log_spaced(int64_t n, double top, double ratio) {
    std::vector<double> s(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) s[i] = top * std::pow(ratio, n > 1 ? double(i) / double(n - 1) : 0.0);
    return s;
}

double max_rel_diff(const std::vector<double>& got, const std::vector<double>& want, int64_t n) {
    double worst = 0.0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(got[i] - want[i]) / want[i]);
    return worst;
}

// Pareto samples with density ~ x^-alpha above xmin.
std::vector<double> pareto(int64_t n, double alpha, double xmin, uint64_t seed) {
    Rng rng{seed};
    std::vector<double> x(static_cast<size_t>(n));
    for (double& v : x) v = xmin * std::pow(rng.uniform(), -1.0 / (alpha - 1.0));
    return x;
}

// An in-memory model over caller-owned buffers (the readers are not needed to test the driver).
struct FakeModel {
    std::vector<std::vector<uint8_t>> buffers;
    std::unique_ptr<ModelFileData> data = std::make_unique<ModelFileData>();

    void add(const std::string& name, TensorRole role, int32_t layer, std::vector<int64_t> shape, DType dtype,
             std::vector<uint8_t> bytes) {
        buffers.push_back(std::move(bytes));
        Tensor t;
        t.name = name;
        t.role = role;
        t.layer = layer;
        t.shape = std::move(shape);
        t.dtype = dtype;
        t.type_name = std::string(dtype_name(dtype));
        t.n_bytes = buffers.back().size();
        t.data = buffers.back().data();
        data->tensors.push_back(std::move(t));
    }
    void add_f32(const std::string& name, TensorRole role, int32_t layer, int64_t rows, int64_t cols,
                 const std::vector<float>& w) {
        std::vector<uint8_t> b(w.size() * 4);
        std::memcpy(b.data(), w.data(), b.size());
        add(name, role, layer, {rows, cols}, DType::F32, std::move(b));
    }
    ModelFile open() {
        data->path = "fake.bin";
        return ModelFile(std::move(data));
    }
};

}  // namespace

class TestSpectrum : public QObject {
    Q_OBJECT
private slots:
    // ---- full spectrum ----
    void fullSpectrumMatchesKnownValues_data() {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<double>("ratio");  // smallest / largest singular value
        QTest::newRow("tall 300 x 120") << 300 << 120 << 1e-3;
        QTest::newRow("wide 90 x 250") << 90 << 250 << 1e-3;
        QTest::newRow("square 128 x 128") << 128 << 128 << 1e-3;
        QTest::newRow("square 200 x 200, s_min = 1e-4 s_1") << 200 << 200 << 1e-4;
        QTest::newRow("1 x 57") << 1 << 57 << 1.0;
        QTest::newRow("73 x 1") << 73 << 1 << 1.0;
        QTest::newRow("1 x 1") << 1 << 1 << 1.0;
    }
    void fullSpectrumMatchesKnownValues() {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(double, ratio);
        const int64_t n = std::min(rows, cols);
        const auto s = log_spaced(n, 3.7, ratio);
        const auto w = matrix_with_spectrum(rows, cols, s, 11 + rows);
        std::vector<double> got;
        QVERIFY(singular_values(w.data(), rows, cols, got).is_ok());
        QCOMPARE(int64_t(got.size()), n);
        QVERIFY(std::is_sorted(got.rbegin(), got.rend()));
        const double err = max_rel_diff(got, s, n);
        if (err > 1e-5) QFAIL(qPrintable(QString("max relative error %1").arg(err)));
    }

    void fullSpectrumAgreesWithDoubleLapack() {
        // A Gaussian matrix (no designed spectrum): the oracle is dgesdd on the same values in double.
        const int rows = 180, cols = 260;
        Rng rng{5};
        std::vector<float> w(rows * cols);
        for (float& v : w) v = static_cast<float>(rng.normal());
        std::vector<double> wd(w.begin(), w.end()), want(rows);
        double dummy = 0;
        QCOMPARE(LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', cols, rows, wd.data(), cols, want.data(), &dummy, 1, &dummy, 1),
                 0);
        std::vector<double> got;
        QVERIFY(singular_values(w.data(), rows, cols, got).is_ok());
        QVERIFY(max_rel_diff(got, want, rows) < 1e-9);
    }

    void fullSpectrumOfRankDeficientMatrix() {
        // Rank 5 in 60 x 40: the 35 zero singular values come out at rounding level.
        std::vector<double> s(40, 0.0);
        for (int i = 0; i < 5; ++i) s[i] = 5.0 - i;
        const auto w = matrix_with_spectrum(60, 40, s, 3);
        std::vector<double> got;
        QVERIFY(singular_values(w.data(), 60, 40, got).is_ok());
        QVERIFY(max_rel_diff(got, s, 5) < 1e-6);
        for (int i = 5; i < 40; ++i) QVERIFY2(got[i] < 1e-5, qPrintable(QString::number(got[i])));
    }

    void fullSpectrumRejectsBadInput() {
        std::vector<double> out;
        Status s = singular_values(nullptr, 0, 3, out);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY(s.message().find("0 x 3") != std::string::npos);
        std::vector<float> w = {1, 2, NAN, 4};
        s = singular_values(w.data(), 2, 2, out);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY(s.message().find("NaN or Inf") != std::string::npos);
    }

    // ---- randomized top-k ----
    void randomizedTopKMatchesGappedSpectrum_data() {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("k");
        QTest::newRow("tall 400 x 150, k 10") << 400 << 150 << 10;
        QTest::newRow("wide 120 x 500, k 16") << 120 << 500 << 16;
        QTest::newRow("square 200 x 200, k 8") << 200 << 200 << 8;
        QTest::newRow("k = min(rows, cols)") << 50 << 30 << 30;
    }
    void randomizedTopKMatchesGappedSpectrum() {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, k);
        const int n = std::min(rows, cols);
        // k values from 10 down to 5, then a gap to a tail from 0.5 down to 0.005.
        std::vector<double> s = log_spaced(k, 10.0, 0.5);
        const auto tail = log_spaced(n - k, 0.5, 0.01);
        s.insert(s.end(), tail.begin(), tail.end());
        const auto w = matrix_with_spectrum(rows, cols, s, 77 + k);
        auto r = randomized_svd(w.data(), rows, cols, k);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->k, int64_t(k));
        QCOMPARE(r->u.size(), size_t(rows) * k);
        QCOMPARE(r->v.size(), size_t(cols) * k);
        const double err = max_rel_diff(r->s, s, k);
        if (err > 1e-3) QFAIL(qPrintable(QString("max relative error %1").arg(err)));
        // The triplets reconstruct W as well as the best rank-k approximation does.
        double diff = 0.0, total = 0.0;
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < cols; ++j) {
                double a = 0.0;
                for (int t = 0; t < k; ++t) a += double(r->u[i * k + t]) * r->s[t] * r->v[j * k + t];
                const double x = w[i * cols + j];
                diff += (x - a) * (x - a);
                total += x * x;
            }
        const double best = relative_error_at_rank(s.data(), n, k);
        QVERIFY2(std::fabs(std::sqrt(diff / total) - best) < 1e-3,
                 qPrintable(QString("%1 vs %2").arg(std::sqrt(diff / total)).arg(best)));
    }

    void randomizedHandlesRankDeficientSketches() {
        // Rank 3 with a sketch of 13 columns: the sketch is rank deficient (Cholesky QR cannot orthonormalize it).
        std::vector<double> s(80, 0.0);
        s[0] = 4.0, s[1] = 2.0, s[2] = 1.0;
        const auto w = matrix_with_spectrum(100, 80, s, 12);
        auto r = randomized_svd(w.data(), 100, 80, 3);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QVERIFY(max_rel_diff(r->s, s, 3) < 1e-5);
        // The zero matrix: zero values, finite vectors.
        const std::vector<float> zero(30 * 20, 0.0f);
        r = randomized_svd(zero.data(), 30, 20, 4);
        QVERIFY2(r.is_ok(), r.message().c_str());
        for (double v : r->s) QCOMPARE(v, 0.0);
        for (float v : r->u) QVERIFY(std::isfinite(v));
    }

    void randomizedIsDeterministicPerSeed() {
        const auto w = matrix_with_spectrum(80, 60, log_spaced(60, 2.0, 1e-2), 9);
        RandomizedSvdOptions o;
        o.seed = 42;
        auto a = randomized_svd(w.data(), 80, 60, 5, o);
        auto b = randomized_svd(w.data(), 80, 60, 5, o);
        QVERIFY(a.is_ok() && b.is_ok());
        QVERIFY(a->s == b->s);
        QVERIFY(a->u == b->u);
        QVERIFY(a->v == b->v);
        o.seed = 43;
        auto c = randomized_svd(w.data(), 80, 60, 5, o);
        QVERIFY(c.is_ok());
        QVERIFY(c->u != a->u);
    }

    void randomizedRejectsBadK() {
        std::vector<float> w(12, 1.0f);
        auto r = randomized_svd(w.data(), 3, 4, 4);
        QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
        QVERIFY(r.message().find("k = 4 is outside 1..3") != std::string::npos);
        r = randomized_svd(w.data(), 3, 4, 0);
        QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    }

    // ---- metrics ----
    void metricsOnHandComputedSpectrum() {
        // Energies 9, 4, 1, 1, 1 of 16.
        const std::vector<double> s = {3, 2, 1, 1, 1};
        const auto c = cumulative_energy(s.data(), 5);
        const std::vector<double> want_c = {9.0 / 16, 13.0 / 16, 14.0 / 16, 15.0 / 16, 1.0};
        for (int i = 0; i < 5; ++i) QCOMPARE(c[i], want_c[i]);
        const SpectrumMetrics m = spectrum_metrics(s.data(), 5);
        QCOMPARE(m.frobenius_sq, 16.0);
        QCOMPARE(m.s1, 3.0);
        QCOMPARE(m.stable_rank, 16.0 / 9.0);
        QCOMPARE(m.s1_over_s2, 1.5);
        QCOMPARE(m.rank_90, int64_t(4));  // 14.4 of 16 needs 15
        QCOMPARE(m.rank_99, int64_t(5));
        QCOMPARE(m.rank_999, int64_t(5));
        const double h =
            -(3.0 / 8 * std::log(3.0 / 8) + 2.0 / 8 * std::log(2.0 / 8) + 3 * (1.0 / 8) * std::log(1.0 / 8));
        QVERIFY(std::fabs(m.effective_rank - std::exp(h)) < 1e-12);
        QCOMPARE(relative_error_at_rank(s.data(), 5, 0), 1.0);
        QCOMPARE(relative_error_at_rank(s.data(), 5, 1), std::sqrt(7.0 / 16));
        QCOMPARE(relative_error_at_rank(s.data(), 5, 2), std::sqrt(3.0 / 16));
        QCOMPARE(relative_error_at_rank(s.data(), 5, 4), std::sqrt(1.0 / 16));
        QCOMPARE(relative_error_at_rank(s.data(), 5, 5), 0.0);
        QCOMPARE(relative_error_at_rank(s.data(), 5, 9), 0.0);
        QCOMPARE(top_k_energy(s.data(), 5, 2), 13.0 / 16);
    }

    void energyRankTiesCountAsReached() {
        const std::vector<double> s = {3, 1};  // 9 of 10 is exactly 90 %
        QCOMPARE(rank_for_energy(s.data(), 2, 0.9), int64_t(1));
        const std::vector<double> t = {std::sqrt(99.0), 1};  // 99 of 100
        QCOMPARE(rank_for_energy(t.data(), 2, 0.99), int64_t(1));
    }

    void metricsOfZeroMatrix() {
        const std::vector<double> s(4, 0.0);
        const SpectrumMetrics m = spectrum_metrics(s.data(), 4);
        QCOMPARE(m.stable_rank, 0.0);
        QCOMPARE(m.effective_rank, 0.0);
        QCOMPARE(m.rank_99, int64_t(0));
        QVERIFY(std::isnan(m.s1_over_s2));
        QCOMPARE(relative_error_at_rank(s.data(), 4, 1), 0.0);
    }

    void metricsOfPartialSpectrum() {
        // The top two of {3, 2, 1, 1, 1}, with the exact energy 16 from the matrix.
        const std::vector<double> s = {3, 2};
        const SpectrumMetrics m = spectrum_metrics(s.data(), 2, false, 16.0);
        QVERIFY(!m.complete);
        QCOMPARE(m.stable_rank, 16.0 / 9.0);
        QCOMPARE(m.rank_90, int64_t(-1));
        QVERIFY(std::isnan(m.effective_rank));
        QCOMPARE(relative_error_at_rank(s.data(), 2, 2, 16.0), std::sqrt(3.0 / 16));
        QVERIFY(std::isnan(relative_error_at_rank(s.data(), 2, 3, 16.0)));
        const std::vector<double> big = {4, 1};  // 16 of 17 reaches 90 % within the known values
        QCOMPARE(rank_for_energy(big.data(), 2, 0.9, 17.0), int64_t(1));
    }

    void topKEnergyNeverExceedsStableRankBound() {
        Rng rng{3};
        for (int trial = 0; trial < 20; ++trial) {
            std::vector<double> s(50);
            for (double& v : s) v = rng.uniform() * 10.0;
            std::sort(s.rbegin(), s.rend());
            const SpectrumMetrics m = spectrum_metrics(s.data(), 50);
            for (int k = 1; k <= 50; ++k)
                QVERIFY(top_k_energy(s.data(), 50, k) <= top_k_energy_bound(m.stable_rank, k) + 1e-15);
        }
        // A flat spectrum meets the bound: stable rank n, top-k energy k / n.
        const std::vector<double> flat(8, 2.0);
        const SpectrumMetrics m = spectrum_metrics(flat.data(), 8);
        QCOMPARE(m.stable_rank, 8.0);
        QCOMPARE(top_k_energy(flat.data(), 8, 3), top_k_energy_bound(m.stable_rank, 3));
        QCOMPARE(top_k_energy_bound(m.stable_rank, 20), 1.0);
    }

    // ---- heavy-tail fits ----
    void powerLawRecoversParetoExponent_data() {
        QTest::addColumn<double>("alpha");
        QTest::newRow("alpha 1.5") << 1.5;
        QTest::newRow("alpha 2.0") << 2.0;
        QTest::newRow("alpha 3.0") << 3.0;
        QTest::newRow("alpha 4.5") << 4.5;
    }
    void powerLawRecoversParetoExponent() {
        QFETCH(double, alpha);
        // 3000 Pareto samples above 0.5, plus a bulk of 1000 values below it and 40 zeros the fit must ignore.
        auto x = pareto(3000, alpha, 0.5, 100 + int(alpha * 10));
        Rng rng{7};
        for (int i = 0; i < 1000; ++i) x.push_back(0.5 * rng.uniform());
        x.insert(x.end(), 40, 0.0);
        const PowerLawFit f = fit_power_law(x.data(), int64_t(x.size()));
        QVERIFY2(f.reliable, f.reason.c_str());
        QCOMPARE(f.problem, FitProblem::None);
        QCOMPARE(f.n_fit, int64_t(4000));
        QVERIFY2(std::fabs(f.alpha - alpha) <= 0.1, qPrintable(QString("alpha %1 xmin %2").arg(f.alpha).arg(f.xmin)));
        QVERIFY(f.ks_distance > 0 && f.ks_distance < 0.05);
        QVERIFY(f.n_tail >= 100);
        QCOMPARE(f.sigma, (f.alpha - 1) / std::sqrt(double(f.n_tail)));
    }

    void powerLawNeedsFiftyEigenvalues() {
        auto x = pareto(49, 3.0, 1.0, 5);
        x.insert(x.end(), 30, 1e-6);  // below the 1e-5 threshold: not counted
        PowerLawFit f = fit_power_law(x.data(), int64_t(x.size()));
        QVERIFY(!f.reliable);
        QCOMPARE(f.problem, FitProblem::TooFewEigenvalues);
        QVERIFY(std::isnan(f.alpha));
        QCOMPARE(f.reason, std::string("only 49 eigenvalues above 1e-5 (a power-law fit needs 50)"));
        x = pareto(50, 3.0, 1.0, 5);
        f = fit_power_law(x.data(), 50);
        QVERIFY2(f.reliable, f.reason.c_str());
    }

    void powerLawAboveEightIsUnreliable() {
        const auto x = pareto(2000, 12.0, 1.0, 8);
        const PowerLawFit f = fit_power_law(x.data(), 2000);
        QVERIFY(!f.reliable);
        QCOMPARE(f.problem, FitProblem::AlphaTooLarge);
        QVERIFY(std::isnan(f.alpha));
        QVERIFY2(f.reason.find(" > 8: no heavy tail to fit") != std::string::npos, f.reason.c_str());
    }

    void marchenkoPasturFindsPlantedSpikes() {
        // Gaussian noise (N 600 x M 300) plus three strong rank-1 signals: three eigenvalues above the bulk.
        const int rows = 600, cols = 300;
        Rng rng{21};
        std::vector<float> w(rows * cols);
        for (float& v : w) v = static_cast<float>(rng.normal());
        const auto u = orthonormal_columns(rows, 3, 1);
        const auto v = orthonormal_columns(cols, 3, 2);
        const double strength[3] = {400.0, 300.0, 200.0};  // noise edge ~ sqrt(600) + sqrt(300) = 41.8
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < cols; ++j)
                for (int t = 0; t < 3; ++t) w[i * cols + j] += float(strength[t] * u[i * 3 + t] * v[j * 3 + t]);
        std::vector<double> s;
        QVERIFY(singular_values(w.data(), rows, cols, s).is_ok());
        const HeavyTailMetrics h = heavy_tail_metrics(s.data(), cols, rows, cols);
        const MarchenkoPasturFit& mp = h.marchenko_pastur;
        QVERIFY2(mp.reliable, mp.reason.c_str());
        QCOMPARE(mp.q, 2.0);
        QCOMPARE(mp.n_spikes, int64_t(3));
        // The bulk edge sits between the noise's largest eigenvalue and the weakest spike.
        QVERIFY2(mp.bulk_max > 0.9 * s[3] * s[3] && mp.bulk_max < s[2] * s[2],
                 qPrintable(QString("edge %1, s4^2 %2").arg(mp.bulk_max).arg(s[3] * s[3])));
        QVERIFY(mp.bulk_min < mp.bulk_max);
        QCOMPARE(mp.softrank * s[0] * s[0], mp.bulk_max);
        // Log norms and alpha-hat follow from lambda = s^2 exactly.
        QCOMPARE(h.lambda_max, s[0] * s[0]);
        QCOMPARE(h.log_spectral_norm, std::log10(s[0] * s[0]));
        if (h.power_law.reliable) QCOMPARE(h.alpha_hat, h.power_law.alpha * h.log_spectral_norm);
    }

    void marchenkoPasturOfPureNoiseHasNoSpikes() {
        const int rows = 500, cols = 250;
        Rng rng{4};
        std::vector<float> w(rows * cols);
        for (float& v : w) v = static_cast<float>(rng.normal());
        std::vector<double> s;
        QVERIFY(singular_values(w.data(), rows, cols, s).is_ok());
        const HeavyTailMetrics h = heavy_tail_metrics(s.data(), cols, rows, cols);
        QVERIFY2(h.marchenko_pastur.reliable, h.marchenko_pastur.reason.c_str());
        QCOMPARE(h.marchenko_pastur.n_spikes, int64_t(0));
        // The MP edge of an N x M Gaussian matrix's W^T W is (sqrt N + sqrt M)^2.
        const double edge = std::pow(std::sqrt(500.0) + std::sqrt(250.0), 2.0);
        QVERIFY2(std::fabs(h.marchenko_pastur.bulk_max / edge - 1.0) < 0.1,
                 qPrintable(QString("edge %1 vs %2").arg(h.marchenko_pastur.bulk_max).arg(edge)));
    }

    void heavyTailNeedsFiftyEigenvalues() {
        const auto w = matrix_with_spectrum(100, 40, log_spaced(40, 1.0, 0.1), 2);
        std::vector<double> s;
        QVERIFY(singular_values(w.data(), 100, 40, s).is_ok());
        const HeavyTailMetrics h = heavy_tail_metrics(s.data(), 40, 100, 40);
        QVERIFY(!h.power_law.reliable);
        QVERIFY(!h.marchenko_pastur.reliable);
        QCOMPARE(h.marchenko_pastur.problem, FitProblem::TooFewEigenvalues);
        QCOMPARE(h.marchenko_pastur.reason, std::string("only 40 eigenvalues (a Marchenko-Pastur fit needs 50)"));
        QVERIFY(std::isnan(h.alpha_hat));
        QVERIFY(std::isfinite(h.log_spectral_norm));
    }

    // ---- analyze_model ----
    void analyzeModelReportsEveryMatrixInOrder() {
        FakeModel fm;
        const auto s_a = log_spaced(64, 2.0, 1e-2), s_b = log_spaced(48, 1.0, 0.1);
        const auto a = matrix_with_spectrum(64, 96, s_a, 1);
        const auto b = matrix_with_spectrum(120, 48, s_b, 2);
        fm.add_f32("blk.0.attn_q.weight", TensorRole::AttnQ, 0, 64, 96, a);
        fm.add("blk.0.attn_norm.weight", TensorRole::AttnNorm, 0, {64}, DType::F32, std::vector<uint8_t>(256));
        std::vector<uint16_t> b16(b.size());
        encode_f16(b.data(), b.size(), b16.data());
        std::vector<uint8_t> b16_bytes(b16.size() * 2);
        std::memcpy(b16_bytes.data(), b16.data(), b16_bytes.size());
        fm.add("blk.0.ffn_down.weight", TensorRole::FfnDown, 0, {120, 48}, DType::F16, std::move(b16_bytes));
        fm.add("rope.table", TensorRole::Other, -1, {4, 8}, DType::I32, std::vector<uint8_t>(128));
        fm.add_f32("output.weight", TensorRole::Output, -1, 64, 96, a);
        ModelFile model = fm.open();

        AnalyzeOptions opt;
        opt.top_k = 4;
        std::vector<double> fractions;
        const auto caller = std::this_thread::get_id();
        bool other_thread = false;
        auto r = analyze_model(model, opt, [&](double f, std::string_view) {
            fractions.push_back(f);
            other_thread |= std::this_thread::get_id() != caller;
            return true;
        });
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->size(), size_t(4));  // the 1-D norm is not a matrix
        QCOMPARE((*r)[0].name, std::string("blk.0.attn_q.weight"));
        QCOMPARE((*r)[1].name, std::string("blk.0.ffn_down.weight"));
        QCOMPARE((*r)[2].name, std::string("rope.table"));
        QCOMPARE((*r)[3].name, std::string("output.weight"));
        QVERIFY2((*r)[2].skipped.find("cannot be converted to float32") != std::string::npos, (*r)[2].skipped.c_str());
        QVERIFY((*r)[0].skipped.empty());
        QCOMPARE((*r)[0].rows, int64_t(64));
        QCOMPARE((*r)[0].layer, 0);
        QCOMPARE((*r)[1].role, TensorRole::FfnDown);
        QVERIFY(max_rel_diff((*r)[0].singular_values, s_a, 64) < 1e-5);
        QVERIFY(max_rel_diff((*r)[1].singular_values, s_b, 48) < 2e-3);  // f16 storage
        QVERIFY((*r)[0].singular_values == (*r)[3].singular_values);
        QCOMPARE((*r)[0].metrics.rank_99, rank_for_energy(s_a.data(), 64, 0.99));
        QCOMPARE((*r)[0].top_k_values.size(), size_t(4));
        QVERIFY((*r)[0].top_k_max_rel_error < 1e-3);
        QVERIFY((*r)[0].heavy_tail.power_law.reliable || !(*r)[0].heavy_tail.power_law.reason.empty());
        QVERIFY(!other_thread);
        QCOMPARE(fractions.size(), size_t(4));
        QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
        QCOMPARE(fractions.back(), 1.0);

        // One worker gives the same numbers as several.
        opt.n_threads = 1;
        auto r1 = analyze_model(model, opt);
        QVERIFY(r1.is_ok());
        // (OpenBLAS may run a single worker's calls on several threads: sums in another order, so not bit-equal.)
        for (size_t i = 0; i < r->size(); ++i) {
            QCOMPARE((*r1)[i].singular_values.size(), (*r)[i].singular_values.size());
            if (!(*r)[i].singular_values.empty())
                QVERIFY(max_rel_diff((*r1)[i].singular_values, (*r)[i].singular_values,
                                     int64_t((*r)[i].singular_values.size())) < 1e-12);
        }
    }

    void analyzeModelTopKOnly() {
        FakeModel fm;
        const auto s = log_spaced(60, 5.0, 1e-2);
        fm.add_f32("token_embd.weight", TensorRole::TokenEmbd, -1, 90, 60, matrix_with_spectrum(90, 60, s, 4));
        ModelFile model = fm.open();
        AnalyzeOptions opt;
        opt.full = false;
        opt.top_k = 8;
        opt.randomized.n_power_iterations = 4;
        auto r = analyze_model(model, opt);
        QVERIFY2(r.is_ok(), r.message().c_str());
        const TensorSpectrum& t = (*r)[0];
        QVERIFY(t.singular_values.empty());
        QVERIFY(!t.metrics.complete);
        QVERIFY(std::fabs(t.metrics.stable_rank / spectrum_metrics(s.data(), 60).stable_rank - 1) < 1e-3);
        QCOMPARE(t.metrics.rank_99, int64_t(-1));
        QVERIFY(std::isnan(t.metrics.effective_rank));
        QVERIFY(!t.heavy_tail.power_law.reliable);
        QCOMPARE(t.heavy_tail.power_law.problem, FitProblem::PartialSpectrum);
        QCOMPARE(t.heavy_tail.power_law.reason,
                 std::string("needs the full spectrum (only the top 8 values are known)"));
    }

    void analyzeModelCancels() {
        FakeModel fm;
        const auto w = matrix_with_spectrum(40, 30, log_spaced(30, 1.0, 0.1), 6);
        for (int i = 0; i < 12; ++i)
            fm.add_f32("blk." + std::to_string(i) + ".attn_q.weight", TensorRole::AttnQ, i, 40, 30, w);
        ModelFile model = fm.open();
        int calls = 0;
        auto r = analyze_model(model, {}, [&](double, std::string_view) {
            ++calls;
            return false;
        });
        QCOMPARE(r.status().code(), StatusCode::Cancelled);
        QCOMPARE(r.message(), std::string("fake.bin: analysis cancelled"));
        QCOMPARE(calls, 1);
    }

    void analyzeModelRejectsEmptyRequest() {
        FakeModel fm;
        ModelFile model = fm.open();
        AnalyzeOptions opt;
        opt.full = false;
        QCOMPARE(analyze_model(model, opt).status().code(), StatusCode::InvalidArgument);
    }
};

QTEST_APPLESS_MAIN(TestSpectrum)
#include "test_spectrum.moc"
