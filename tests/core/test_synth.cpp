// Synthetic checkpoints: the table's shapes give the published parameter counts, synth_matrix's spectrum is the
// prescribed one (measured by the exact spectrum and the WeightWatcher power-law fit analyze uses), the same seed
// gives the same bytes, and a written checkpoint reads back with its shapes.
#include "gkq/spectrum.h"
#include "gkq/synth.h"
#include "test_support.h"

#include <QtTest>
#include <cmath>
#include <cstring>

using namespace gkq;

class TestSynth : public QObject {
    Q_OBJECT
private slots:
    void tableGivesPublishedParameterCounts() {
        QVERIFY(synth_models().size() >= 5);
        for (const SynthModel& m : synth_models())
            QVERIFY2(synth_param_count(m, 0) == m.params, std::string(m.name).c_str());
        QCOMPARE(synth_param_count(*find_synth_model("tinyllama-1.1b"), 0), int64_t(1100048384));
        QCOMPARE(synth_param_count(*find_synth_model("llama-3-8b"), 0), int64_t(8030261248));
        QCOMPARE(synth_param_count(*find_synth_model("qwen2.5-0.5b"), 0), int64_t(494032768));
        QVERIFY(find_synth_model("no-such-model") == nullptr);
        QVERIFY(synth_model_names().find("mistral-7b") != std::string::npos);
        // --layers 2 of TinyLlama: embedding + output (32000 x 2048 each), 2 layers, the final norm
        QCOMPARE(synth_param_count(*find_synth_model("tinyllama-1.1b"), 2),
                 int64_t(2 * 65536000 + 2 * 44044288 + 2048));
    }

    void spectrumIsThePrescribedOne_data() {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<double>("alpha");
        QTest::newRow("wide 384x1000 alpha 3.5") << 384 << 1000 << 3.5;
        QTest::newRow("tall 1000x384 alpha 3.5") << 1000 << 384 << 3.5;
        QTest::newRow("square 512 alpha 2.5") << 512 << 512 << 2.5;
        QTest::newRow("ragged blocks 300x333 alpha 5") << 300 << 333 << 5.0;
    }
    void spectrumIsThePrescribedOne() {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(double, alpha);
        SynthMatrixOptions o;
        o.alpha = alpha;
        o.seed = 42;
        std::vector<float> w(static_cast<size_t>(rows) * cols);
        QVERIFY(synth_matrix(w.data(), rows, cols, o));
        const std::vector<double> want = synth_singular_values(rows, cols, o);
        std::vector<double> got;
        QVERIFY(singular_values(w.data(), rows, cols, got));
        QCOMPARE(got.size(), want.size());
        double worst = 0.0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]) / want[0]);
        QVERIFY2(worst < 1e-5, std::to_string(worst).c_str());  // exact up to float32 rounding
        // ||W||_F = 0.02 sqrt(rows cols)
        const double fro = std::sqrt(frobenius_sq(w.data(), rows, cols));
        QVERIFY(std::fabs(fro / (0.02 * std::sqrt(double(rows) * cols)) - 1.0) < 1e-5);
        // stable rank: exactly sum i^(-2 beta)
        const SpectrumMetrics sm = spectrum_metrics(got.data(), static_cast<int64_t>(got.size()));
        double sr = 0.0;
        for (double s : want) sr += s * s / (want[0] * want[0]);
        QVERIFY(std::fabs(sm.stable_rank / sr - 1.0) < 1e-4);
        // The WeightWatcher power-law fit `gkq analyze` reports finds the prescribed alpha within 5 % (measured: 0.5-1
        // %).
        const HeavyTailMetrics ht = heavy_tail_metrics(got.data(), static_cast<int64_t>(got.size()), rows, cols);
        QVERIFY2(ht.power_law.reliable, ht.power_law.reason.c_str());
        qInfo("alpha %.2f: fitted %.3f (xmin %.3g, %lld tail values), stable rank %.1f of %zu", alpha,
              ht.power_law.alpha, ht.power_law.xmin, static_cast<long long>(ht.power_law.n_tail), sm.stable_rank,
              got.size());
        QVERIFY2(std::fabs(ht.power_law.alpha - alpha) < 0.05 * alpha, std::to_string(ht.power_law.alpha).c_str());
        // dense: no exact zeros left by the mixing
        size_t zeros = 0;
        for (float x : w) zeros += x == 0.0f;
        QCOMPARE(zeros, size_t(0));
    }

    void sameSeedSameBytes() {
        SynthMatrixOptions o;
        o.seed = 7;
        std::vector<float> a(200 * 300), b(a.size()), c(a.size());
        QVERIFY(synth_matrix(a.data(), 200, 300, o));
        QVERIFY(synth_matrix(b.data(), 200, 300, o));
        o.seed = 8;
        QVERIFY(synth_matrix(c.data(), 200, 300, o));
        QVERIFY(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        QVERIFY(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)) != 0);
    }

    void badArguments() {
        float x[4];
        SynthMatrixOptions o;
        o.alpha = 1.0;
        QVERIFY(!synth_matrix(x, 2, 2, o));
        QVERIFY(!synth_matrix(x, 0, 2, {}));
        SynthOptions so;
        so.n_layers = 23;
        test::TempDir dir;
        auto r = synth_model(*find_synth_model("tinyllama-1.1b"), dir.path() + "/m", so);
        QVERIFY(!r);
        QVERIFY(r.message().find("22 layers") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestSynth)
#include "test_synth.moc"
