// Every codec preset on the shared real checkpoints: each tensor encodes, decodes, and its reported accounting equals
// what is recomputed here from the decoded tensor. Prints the measured mean relative error and bits per weight per
// preset (the honest numbers, whatever they are). Skips where ../shared/models is absent.
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "test_support.h"

#include <QtTest>
#include <cmath>
#include <map>

using namespace gkq;

namespace {

using test::measure;
using test::Measured;

}  // namespace

class TestCodecModels : public QObject {
    Q_OBJECT
private slots:
    void presetsOnSharedCheckpoints_data() {
        QTest::addColumn<QString>("model");
        QTest::newRow("llama2xs-279K") << "llama2xs-279K/model.bin";
        QTest::newRow("babyllama-tok105") << "babyllama-tok105/model5000.bin";
    }
    void presetsOnSharedCheckpoints() {
        QFETCH(QString, model);
        const auto path = test::shared_model(model.toStdString());
        if (!path) QSKIP(test::shared_models_skip_reason(model.toStdString()).c_str());
        Result<ModelFile> file = ModelFile::open(*path);
        QVERIFY2(file.is_ok(), file.message().c_str());
        std::map<std::string, double> mean_error;
        for (const std::string& name : preset_names()) {
            const Preset preset = *find_preset(name);
            if (preset_needs_gram(preset)) continue;  // needs a calibration pass (test_cli_imatrix runs those)
            uint64_t payload = 0, elements = 0;
            double error_sum = 0.0;
            int n_matrices = 0, n_folded = 0;
            for (const Tensor& t : file->tensors()) {
                Result<std::vector<float>> w = tensor_to_f32(t);
                QVERIFY2(w.is_ok(), w.message().c_str());
                TensorInput in;
                in.name = t.name;
                in.role = t.role;
                in.layer = t.layer;
                in.shape = t.shape;
                in.data = w->data();
                in.n_heads = fold_head_count(t.role, file->config());
                TensorReport r;
                const CodecParams params = resolve_params(preset, t.role, t.layer, t.n_dims(), {}, {});
                Result<EncodedTensor> e = encode_tensor(in, params, &r);
                QVERIFY2(e.is_ok(), e.message().c_str());
                Result<std::vector<float>> d = decode_tensor(*e);
                QVERIFY2(d.is_ok(), d.message().c_str());
                const Measured m = measure(*w, *d);
                QVERIFY2(std::fabs(r.rel_error - m.rel) <= 1e-12 * m.rel, t.name.c_str());
                QCOMPARE(r.max_abs_error, m.max_abs);
                QCOMPARE(r.bits_per_weight, 8.0 * double(e->payload.size()) / double(t.n_elements()));
                // a k-quant (a mixture's, or lowrank-q4k's residual) falls back on these checkpoints' rows of 64 / 128
                // (no whole 256-value block)
                const bool k_quant =
                    !preset.llama_mixture.empty() || (params.residual != ResidualKind::None &&
                                                      dtype_block_elements(residual_dtype(params.residual)) == 256);
                if (!k_quant || t.cols() % 256 == 0) QVERIFY2(r.fallback.empty(), r.fallback.c_str());
                payload += e->payload.size();
                elements += uint64_t(t.n_elements());
                if (t.n_dims() == 2) {
                    error_sum += r.rel_error;
                    ++n_matrices;
                    n_folded += r.fold_applied;
                }
            }
            mean_error[name] = error_sum / n_matrices;
            qInfo(
                "%s %-10s mean rel error over %d matrices %.4f, %.3f bits per weight (payloads of all %llu "
                "weights), folding applied to %d",
                qPrintable(model), name.c_str(), n_matrices, mean_error[name], 8.0 * double(payload) / double(elements),
                static_cast<unsigned long long>(elements), n_folded);
        }
        QVERIFY(mean_error["q8_0"] < mean_error["q4_0"]);
        QVERIFY(mean_error["lowrank-q4"] < mean_error["q4_0"]);
    }
};

QTEST_APPLESS_MAIN(TestCodecModels)
#include "test_codec_models.moc"
