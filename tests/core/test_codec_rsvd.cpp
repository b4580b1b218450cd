// The codec's rank selection on large matrices (codec/lowrank.h ranked_factors): the randomized SVD on matrices
// with a prescribed spectrum (gkq/synth.h), the kept energy exact for the factors it returns, the energy rule's
// k never below the exact one, the full SVD where the rule needs many values or the matrix is small.
#include "codec/lowrank.h"
#include "gkq/synth.h"

#include <QtTest>
#include <cmath>

using namespace gkq;
using namespace gkq::codec;

namespace {

struct Case {
    int64_t rows, cols;
    std::vector<float> w;
    std::vector<double> s;  // prescribed, descending
    double total = 0.0;
};

Case make(int64_t rows, int64_t cols) {
    Case c{rows, cols, std::vector<float>(static_cast<size_t>(rows * cols)), {}, 0.0};
    SynthMatrixOptions o;
    o.seed = 5;
    if (!synth_matrix(c.w.data(), rows, cols, o)) qFatal("synth_matrix failed");
    c.s = synth_singular_values(rows, cols, o);
    for (double x : c.s) c.total += x * x;
    return c;
}

std::function<void(double*)> filler(const Case& c) {
    return [&c](double* a) {
        for (size_t i = 0; i < c.w.size(); ++i) a[i] = c.w[i];
    };
}

// 1 - ||W - U S V^T||_F^2 / ||W||_F^2, from the factors as returned.
double measured_energy(const Case& c, const RankedFactors& f) {
    double err = 0.0, total = 0.0;
    for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t j = 0; j < c.cols; ++j) {
            double x = 0.0;
            for (int64_t r = 0; r < f.k; ++r)
                x += f.u[static_cast<size_t>(i * f.k + r)] * f.s[static_cast<size_t>(r)] *
                     f.v[static_cast<size_t>(j * f.k + r)];
            const double w = c.w[static_cast<size_t>(i * c.cols + j)];
            err += (w - x) * (w - x);
            total += w * w;
        }
    return 1.0 - err / total;
}

double exact_fraction(const Case& c, int64_t k) {
    double kept = 0.0;
    for (int64_t i = 0; i < k; ++i) kept += c.s[static_cast<size_t>(i)] * c.s[static_cast<size_t>(i)];
    return kept / c.total;
}

}  // namespace

class TestCodecRsvd : public QObject {
    Q_OBJECT
private slots:
    void fixedRankIsRandomizedAndAccountedExactly() {
        const Case c = make(1024, 1536);
        CodecParams p;
        p.rank = 16;
        auto f = ranked_factors(filler(c), c.w.data(), c.rows, c.cols, p, "w");
        QVERIFY2(f, f ? "" : f.message().c_str());
        QVERIFY(f->randomized);
        QCOMPARE(f->k, int64_t(16));
        // The energy it reports is the energy of the factors it returns (no tail estimate) ...
        const double measured = measured_energy(c, *f);
        QVERIFY2(std::fabs(f->energy_kept - measured) < 1e-4,
                 (std::to_string(f->energy_kept) + " vs " + std::to_string(measured)).c_str());
        // ... never above the optimum (Eckart-Young), and within 3 % of it on this slowly decaying spectrum.
        const double best = exact_fraction(c, 16);
        qInfo("rank 16 of 1024 x 1536: energy kept %.5f, optimum %.5f", f->energy_kept, best);
        QVERIFY(f->energy_kept <= best * (1 + 1e-6));
        QVERIFY(f->energy_kept >= 0.97 * best);
        for (int64_t i = 0; i < 16; ++i) QVERIFY(f->s[static_cast<size_t>(i)] <= c.s[static_cast<size_t>(i)] * 1.0001);
    }

    void energyRuleGrowsKAndNeverUndershoots() {
        const Case c = make(1024, 1024);
        CodecParams p;
        p.energy = 0.2;
        auto f = ranked_factors(filler(c), c.w.data(), c.rows, c.cols, p, "w");
        QVERIFY(f);
        QVERIFY(f->randomized);
        int64_t exact_k = 0;
        while (exact_fraction(c, exact_k) < 0.2) ++exact_k;
        qInfo("energy 0.2: k %lld (exact rule %lld), energy kept %.5f", static_cast<long long>(f->k),
              static_cast<long long>(exact_k), f->energy_kept);
        QVERIFY(f->k > 64);  // past the first try of 64 values
        QVERIFY(f->k >= exact_k);
        QVERIFY(f->k <= exact_k + exact_k / 10);
        QVERIFY(f->energy_kept >= 0.2 * (1 - 1e-9));
        QVERIFY(std::fabs(f->energy_kept - measured_energy(c, *f)) < 1e-4);

        p.max_components = 3;  // paper: at most 3 components
        f = ranked_factors(filler(c), c.w.data(), c.rows, c.cols, p, "w");
        QVERIFY(f && f->randomized);
        QCOMPARE(f->k, int64_t(3));
    }

    void fullSvdWhereItIsCheaper() {
        // 99.9 % of a heavy-tailed spectrum needs most of it: past min / 4 values the full SVD is used, exactly.
        const Case c = make(1024, 1024);
        CodecParams p;
        p.energy = 0.999;
        auto f = ranked_factors(filler(c), c.w.data(), c.rows, c.cols, p, "w");
        QVERIFY(f);
        QVERIFY(!f->randomized);
        QCOMPARE(f->k, select_rank(f->s, p, c.rows, c.cols));
        QVERIFY(f->k > 256);
        // A small matrix (the demo model's sizes) always takes the full SVD.
        const Case small = make(512, 1024);
        CodecParams r;
        r.rank = 16;
        f = ranked_factors(filler(small), small.w.data(), small.rows, small.cols, r, "w");
        QVERIFY(f && !f->randomized);
        QCOMPARE(f->k, int64_t(16));
        QVERIFY(std::fabs(f->energy_kept - exact_fraction(small, 16)) < 1e-5);
    }
};

QTEST_GUILESS_MAIN(TestCodecRsvd)
#include "test_codec_rsvd.moc"
