// Spectral analysis of the shared real checkpoints: it completes, every matrix gets a finite stable rank, and the
// rank-3 error read off the spectrum equals the error of an explicit rank-3 reconstruction from LAPACK's SVD.
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/spectrum.h"
#include "test_support.h"

#include <lapacke.h>

#include <QtTest>
#include <cmath>

using namespace gkq;

namespace {

// ||W - U_k S_k V_k^T||_F / ||W||_F with the triplets from dgesdd (double), W row-major (rows, cols).
double reconstruction_error(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t k) {
    const int64_t n = std::min(rows, cols);
    std::vector<double> a(w.begin(), w.end()), s(n), u(rows * n), vt(n * cols);
    const lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', int(rows), int(cols), a.data(), int(cols), s.data(),
                                           u.data(), int(n), vt.data(), int(cols));
    if (info != 0) return NAN;
    double diff = 0.0, total = 0.0;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            double approx = 0.0;
            for (int64_t t = 0; t < std::min(k, n); ++t) approx += u[i * n + t] * s[t] * vt[t * cols + j];
            const double x = w[i * cols + j];
            diff += (x - approx) * (x - approx);
            total += x * x;
        }
    return std::sqrt(diff / total);
}

}  // namespace

class TestSpectrumModels : public QObject {
    Q_OBJECT
private slots:
    void sharedCheckpoints_data() {
        QTest::addColumn<QString>("relative");
        QTest::newRow("llama2xs-279K") << "llama2xs-279K/model.bin";
        QTest::newRow("babyllama-tok105") << "babyllama-tok105/model5000.bin";
    }
    void sharedCheckpoints() {
        QFETCH(QString, relative);
        const auto path = test::shared_model(relative.toStdString());
        if (!path) QSKIP(test::shared_models_skip_reason(relative.toStdString()).c_str());
        auto model = ModelFile::open(*path);
        QVERIFY2(model.is_ok(), model.message().c_str());

        int n_progress = 0;
        auto result = analyze_model(*model, {}, [&](double, std::string_view) {
            ++n_progress;
            return true;
        });
        QVERIFY2(result.is_ok(), result.message().c_str());

        size_t n_matrices = 0, n_role_matrices = 0;
        for (const Tensor& t : model->tensors()) {
            if (t.n_dims() == 2) ++n_matrices;
            if (role_is_matrix(t.role)) ++n_role_matrices;
        }
        QVERIFY(n_role_matrices >= 36);  // 7 projections in each of 5 blocks + token_embd
        QCOMPARE(result->size(), n_matrices);
        QCOMPARE(n_progress, int(n_matrices));

        for (const TensorSpectrum& ts : *result) {
            const char* name = ts.name.c_str();
            QVERIFY2(ts.skipped.empty(), name);
            const int64_t n = std::min(ts.rows, ts.cols);
            QCOMPARE(int64_t(ts.singular_values.size()), n);
            QVERIFY2(std::isfinite(ts.metrics.stable_rank) && ts.metrics.stable_rank >= 1.0, name);
            QVERIFY2(ts.metrics.effective_rank >= 1.0 && ts.metrics.effective_rank <= double(n), name);
            QVERIFY2(ts.metrics.rank_90 <= ts.metrics.rank_99 && ts.metrics.rank_99 <= ts.metrics.rank_999, name);
            // Each fit either gives a number or says why not.
            QVERIFY2(ts.heavy_tail.power_law.reliable != !ts.heavy_tail.power_law.reason.empty(), name);
            QVERIFY2(ts.heavy_tail.marchenko_pastur.reliable != !ts.heavy_tail.marchenko_pastur.reason.empty(), name);

            const Tensor* t = model->find(ts.name);
            QVERIFY2(t != nullptr, name);
            auto w = tensor_to_f32(*t);
            QVERIFY2(w.is_ok(), w.message().c_str());
            const double from_spectrum = relative_error_at_rank(ts.singular_values.data(), n, 3);
            const double direct = reconstruction_error(*w, ts.rows, ts.cols, 3);
            QVERIFY2(std::fabs(from_spectrum - direct) < 1e-4,
                     qPrintable(QString("%1: rank-3 error %2 from the spectrum, %3 reconstructed")
                                    .arg(name)
                                    .arg(from_spectrum)
                                    .arg(direct)));
        }
    }
};

QTEST_APPLESS_MAIN(TestSpectrumModels)
#include "test_spectrum_models.moc"
