// Rknot files: the decay fit, JSON and gzip round trips, every validation error naming its JSON path (wrong type,
// out of range, unknown field, missing field, undefined metric set, inconsistent mask, bad gzip, corrupt and
// truncated streams), validated edits, encoding from a real knot (fields against independent computations) and
// the tuning round trip (edit one matrix's bit width -> re-quantize -> only that record differs).
#include "gkq/convert.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/rknot.h"
#include "gkq/saturation.h"
#include "gkq/spectrum.h"
#include "gkq/spectrum_cache.h"
#include "test_support.h"
#include "tiny_model.h"

#include <zlib.h>
#include <QtTest>

#include <cmath>
#include <string>
#include <vector>

using namespace gkq;

namespace {

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + (needle) + "]")))

Rknot sample() {
    Rknot r;
    r.model_name = "tiny";
    r.compression.method = "quantize --preset paper";
    r.compression.spectral_ratio = 3.5;
    r.compression.total_compression = 7.25;
    for (int i = 0; i < 2; ++i) {
        RknotLayer l;
        l.layer_id = i;
        l.tensor = "blk." + std::to_string(i) + ".ffn_up.weight";
        l.role = "ffn_up";
        l.method = "lowrank";
        l.rank = 8;
        l.bit_width = 4;
        l.base_singular_values = {4.0, 2.0, 1.0};
        l.spectral_decay_ratio = 0.5;
        l.num_levels = 2;
        l.level_residuals = {0.5, 0.25};
        l.is_self_similar = true;
        l.self_similarity_confidence = 0.99;
        r.layers.push_back(l);
    }
    RknotSaturationMaps m;
    m.source = "masks.json";
    m.command = "gkq profile";
    m.n_tokens = 100;
    RknotMaskLayer ml;
    ml.layer_id = 0;
    const std::vector<uint8_t> hot = {0, 1, 1, 0, 1};
    ml.runs = rle_encode_mask(hot);
    ml.bitmask_hash = bitmask_hash(hot);
    ml.compressed_size_bytes = rle_encoded_bytes(ml.runs);
    ml.neuron_count = 5;
    ml.saturation_threshold = 1.0;
    ml.scale = 0.5;
    ml.hot_count = 3;
    m.layers.push_back(ml);
    r.saturation_maps = m;
    r.measured.knot = "tiny.knot";
    r.measured.knot_command = "quantize --preset paper";
    r.measured.n_params = 1000;
    r.measured.file_bytes = 500;
    r.measured.bits_per_weight = 4.0;
    r.measured.spectrum_source = "model";
    RknotEval e;
    e.source = "eval.json";
    e.kld_mean = 0.02;
    e.top1_agreement = 0.9;
    e.ppl_ratio = 1.01;
    e.n_tokens = 123;
    r.measured.eval = e;
    r.quality_metrics.overall_quality = std::exp(-0.02);
    r.resonance_tuning.l2_lambda = 0.001;
    return r;
}

// The validation message of the sample after one edit (PATH=VALUE), or "" when it validates.
std::string edit_error(const std::string& assignment) {
    Rknot r = sample();
    Status s = rknot_set(r, {assignment}, "x.rknot");
    return s.is_ok() ? std::string() : s.message();
}

std::string gzip_bytes(const std::string& text) {
    std::string out(compressBound(text.size()) + 64, '\0');
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

std::string write_tiny_gguf(const test::TempDir& dir) {
    const std::string path = dir.file("tiny.gguf");
    auto m = test::make_tiny_model(test::tiny_config(false), 2);
    if (Status s = write_gguf(path, m.config, m.tensors); !s) qFatal("%s", s.message().c_str());
    return path;
}

}  // namespace

class TestRknot : public QObject {
    Q_OBJECT
private slots:
    void decayFit() {
        std::vector<double> s;
        for (int i = 0; i < 10; ++i) s.push_back(10.0 * std::pow(0.5, i));
        auto f = fit_spectral_decay(s.data(), 10);
        QVERIFY(f.has_value());
        QVERIFY(std::fabs(f->ratio - 0.5) < 1e-12);
        QVERIFY(std::fabs(f->r2 - 1.0) < 1e-12);
        // a flat spectrum has no variance to explain; fewer than 3 positive values give no fit
        std::vector<double> flat(5, 2.0);
        QVERIFY(!fit_spectral_decay(flat.data(), 5));
        std::vector<double> two = {3.0, 1.0, 0.0, 0.0};
        QVERIFY(!fit_spectral_decay(two.data(), 4));
        // a kinked spectrum: R^2 below 1, by the textbook formula
        std::vector<double> kink = {100, 10, 9, 8.5, 8};
        auto k = fit_spectral_decay(kink.data(), 5);
        double mx = 2, my = 0, sxy = 0, sxx = 0, syy = 0;
        for (double v : kink) my += std::log(v) / 5;
        for (int i = 0; i < 5; ++i) {
            sxy += (i - mx) * (std::log(kink[i]) - my);
            sxx += (i - mx) * (i - mx);
            syy += (std::log(kink[i]) - my) * (std::log(kink[i]) - my);
        }
        QVERIFY(std::fabs(k->r2 - sxy * sxy / (sxx * syy)) < 1e-12);
        QVERIFY(std::fabs(k->ratio - std::exp(sxy / sxx)) < 1e-12);
    }

    void jsonAndFileRoundTrip() {
        const Rknot r = sample();
        QVERIFY2(validate_rknot(r, "s").is_ok(), validate_rknot(r, "s").message().c_str());
        const std::string text = rknot_to_json(r);
        auto back = rknot_from_json(text, "s");
        QVERIFY2(back.is_ok(), back.message().c_str());
        QCOMPARE(rknot_to_json(*back), text);
        test::TempDir dir;
        const std::string path = dir.file("x.rknot");
        QVERIFY(write_rknot(path, r).is_ok());
        const auto bytes = test::read_file(path);
        QVERIFY(bytes.size() > 18 && bytes[0] == 0x1f && bytes[1] == 0x8b);  // a gzip member
        auto file = read_rknot(path);
        QVERIFY2(file.is_ok(), file.message().c_str());
        QCOMPARE(rknot_to_json(*file), text);
        // the source schema's field names are all there
        for (const char* k : {"\"model_name\"",
                              "\"version\"",
                              "\"spectral_ratio\"",
                              "\"hierarchical_ratio\"",
                              "\"total_compression\"",
                              "\"base_singular_values\"",
                              "\"spectral_decay_ratio\"",
                              "\"num_levels\"",
                              "\"level_residuals\"",
                              "\"is_self_similar\"",
                              "\"self_similarity_confidence\"",
                              "\"bit_width\"",
                              "\"expected_accuracy_loss\"",
                              "\"bitmask_hash\"",
                              "\"compressed_size_bytes\"",
                              "\"neuron_count\"",
                              "\"saturation_threshold\"",
                              "\"gnosis_efficiency\"",
                              "\"data_quality_score\"",
                              "\"learning_efficiency\"",
                              "\"resonance_stability\"",
                              "\"overall_quality\"",
                              "\"recommended_bit_width\"",
                              "\"safe_for_aggressive_quantization\"",
                              "\"optimal_learning_rate\"",
                              "\"resonance_frequency\"",
                              "\"spectral_lambda\"",
                              "\"l2_lambda\"",
                              "\"expected_cliff_emergence_epoch\""})
            VERIFY_CONTAINS(text, k);
        // without masks and eval
        Rknot bare = sample();
        bare.saturation_maps.reset();
        bare.measured.eval.reset();
        bare.quality_metrics.overall_quality.reset();
        QVERIFY(validate_rknot(bare, "b").is_ok());
        VERIFY_CONTAINS(rknot_to_json(bare), "\"saturation_maps\": null");
    }

    void validationErrorsNameTheirPath() {
        QCOMPARE(edit_error("folded_waves.layers[1].bit_width=9"),
                 std::string("x.rknot: folded_waves.layers[1].bit_width: 9 is out of range [2, 8]"));
        QCOMPARE(edit_error("folded_waves.layers[1].bit_width=7"),
                 std::string("x.rknot: folded_waves.layers[1].bit_width: 7 is not one of 2, 4, 8"));
        QCOMPARE(edit_error("folded_waves.layers[0].bit_width=\"4\""),
                 std::string("x.rknot: folded_waves.layers[0].bit_width: expected an integer or null, got string"));
        QCOMPARE(edit_error("model_name=5"), std::string("x.rknot: model_name: expected a string, got number"));
        QCOMPARE(edit_error("folded_waves.layers[0].rank=2.5"),
                 std::string("x.rknot: folded_waves.layers[0].rank: expected an integer, got number"));
        QCOMPARE(edit_error("folded_waves.layers[0].rank=-1"),
                 std::string("x.rknot: folded_waves.layers[0].rank: -1 is out of range [0, 1073741824]"));
        QCOMPARE(edit_error("resonance_tuning.optimal_learning_rate=2"),
                 std::string("x.rknot: resonance_tuning.optimal_learning_rate: 2 is out of range (0.0, 1.0]"));
        QCOMPARE(edit_error("resonance_tuning.expected_cliff_emergence_epoch=1.5"),
                 std::string("x.rknot: resonance_tuning.expected_cliff_emergence_epoch: expected an integer or null, "
                             "got number"));
        QCOMPARE(edit_error("folded_waves.layers[0].level_residuals=[0.5, 1.5]"),
                 std::string("x.rknot: folded_waves.layers[0].level_residuals[1]: 1.5 is out of range [0.0, 1.0]"));
        QCOMPARE(edit_error("folded_waves.layers[0].method=\"q7_k\""),
                 std::string("x.rknot: folded_waves.layers[0].method: 'q7_k' is not one of f32, f16, q8_0, q4_0, "
                             "lowrank, lowrank+residual, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k"));
        QCOMPARE(edit_error("folded_waves.layers[0].role=\"attn_norm\""),
                 std::string("x.rknot: folded_waves.layers[0].role: 'attn_norm' is not a matrix role"));
        VERIFY_CONTAINS(edit_error("folded_waves.layers[0]={\"layer_id\": 0}"),
                        "x.rknot: folded_waves.layers[0].tensor: missing required field\n"
                        "x.rknot: folded_waves.layers[0].role: missing required field\n");
        QCOMPARE(edit_error("quality_metrics.gnosis_efficiency=0.0042"),
                 std::string("x.rknot: quality_metrics.gnosis_efficiency: must be null (no definition over measured "
                             "values; see docs/rknot-format.md)"));
        VERIFY_CONTAINS(edit_error("quality_metrics.overall_quality=0.5"),
                        "x.rknot: quality_metrics.overall_quality: 0.5 is not exp(-measured.eval.kld_mean) = ");
        QCOMPARE(edit_error("compression.hierarchical_ratio=7.1"),
                 std::string("x.rknot: compression.hierarchical_ratio: must be null (the knot does not record unfolded "
                             "sizes)"));
        VERIFY_CONTAINS(edit_error("saturation_maps.layers[0].hot_count=4"),
                        "x.rknot: saturation_maps.layers[0].hot_count: 4, but the runs mark 3 neurons hot");
        VERIFY_CONTAINS(edit_error("saturation_maps.layers[0].runs=[2, 1, 1, 1]"),
                        "x.rknot: saturation_maps.layers[0].bitmask_hash: does not match the mask the runs give");
        QCOMPARE(edit_error("saturation_maps.layers[0].runs=[1, 2]"),
                 std::string("x.rknot: saturation_maps.layers[0].runs: the runs cover 3 neurons, not 5"));
        QCOMPARE(edit_error("version=\"2.0\""),
                 std::string("x.rknot: version: '2.0' is not a version this gkq reads (1.0)"));
        // paths that do not exist
        QCOMPARE(edit_error("folded_waves.layers[0].foo=1"),
                 std::string("x.rknot: folded_waves.layers[0].foo: no such field"));
        QCOMPARE(edit_error("folded_waves.layers[7].rank=1"),
                 std::string("x.rknot: folded_waves.layers[7]: index out of range (2 entries)"));
        QCOMPARE(edit_error("rank"), std::string("x.rknot: 'rank' is not PATH=VALUE"));

        // unknown and missing fields straight from JSON
        std::string text = rknot_to_json(sample());
        std::string unknown = text;
        unknown.replace(unknown.find("\"rank\": 8"), 9, "\"rank\": 8, \"foo\": 1");
        auto u = rknot_from_json(unknown, "u.rknot");
        QCOMPARE(u.message(), std::string("u.rknot: folded_waves.layers[0].foo: unknown field"));
        std::string missing = text;
        const size_t at = missing.find("\"n_params\": 1000,");
        missing.erase(at, std::string("\"n_params\": 1000,").size());
        auto mi = rknot_from_json(missing, "m.rknot");
        QCOMPARE(mi.message(), std::string("m.rknot: measured.n_params: missing required field"));
        auto top = rknot_from_json("[1, 2]", "t.rknot");
        QCOMPARE(top.message(), std::string("t.rknot: (root): expected an object, got array"));
        auto notjson = rknot_from_json("{\"model_name\": ", "j.rknot");
        VERIFY_CONTAINS(notjson.message(), "j.rknot: not valid JSON at byte 16");
    }

    void setEditsAtomicallyAndValidates() {
        Rknot r = sample();
        QVERIFY(
            rknot_set(r, {"folded_waves.layers[1].bit_width=2", "resonance_tuning.spectral_lambda=0.1"}, "x").is_ok());
        QCOMPARE(*r.layers[1].bit_width, 2);
        QCOMPARE(*r.resonance_tuning.spectral_lambda, 0.1);
        // the KLD and the quality formula change together, or not at all
        QVERIFY(!rknot_set(r, {"measured.eval.kld_mean=0.5"}, "x").is_ok());
        QCOMPARE(*r.measured.eval->kld_mean, 0.02);
        const std::string q = "quality_metrics.overall_quality=" + std::to_string(std::exp(-0.5));
        Status s = rknot_set(r, {"measured.eval.kld_mean=0.5", "quality_metrics.overall_quality=null"}, "x");
        VERIFY_CONTAINS(s.message(), "x: quality_metrics.overall_quality: must be exp(-measured.eval.kld_mean)");
        // a bad edit leaves everything unchanged
        const std::string before = rknot_to_json(r);
        QVERIFY(
            !rknot_set(r, {"folded_waves.layers[0].bit_width=4", "folded_waves.layers[1].bit_width=3"}, "x").is_ok());
        QCOMPARE(rknot_to_json(r), before);
        // null clears, a bare word is a string
        QVERIFY(rknot_set(r, {"folded_waves.layers[0].bit_width=null", "model_name=renamed"}, "x").is_ok());
        QVERIFY(!r.layers[0].bit_width.has_value());
        QCOMPARE(r.model_name, std::string("renamed"));
    }

    void badFilesNameTheFile() {
        test::TempDir dir;
        const std::string text = rknot_to_json(sample());
        const std::string plain = dir.file("plain.rknot");
        test::write_file(plain, text);
        QCOMPARE(read_rknot(plain).message(), plain + ": not a gzip file (bad magic at offset 0)");

        const std::string gz = gzip_bytes(text);
        const std::string trunc = dir.file("trunc.rknot");
        test::write_file(trunc, std::string_view(gz).substr(0, gz.size() - 10));
        VERIFY_CONTAINS(read_rknot(trunc).message(), trunc + ": truncated gzip stream (ends at byte ");
        const std::string half = dir.file("half.rknot");
        test::write_file(half, std::string_view(gz).substr(0, gz.size() / 2));
        VERIFY_CONTAINS(read_rknot(half).message(), half + ": truncated gzip stream");

        std::string bad_crc = gz;
        bad_crc[bad_crc.size() - 6] ^= 0x55;  // inside the CRC32 of the trailer
        const std::string crc = dir.file("crc.rknot");
        test::write_file(crc, bad_crc);
        VERIFY_CONTAINS(read_rknot(crc).message(), crc + ": corrupt gzip stream near byte ");
        VERIFY_CONTAINS(read_rknot(crc).message(), "incorrect data check");

        const std::string trailing = dir.file("trailing.rknot");
        test::write_file(trailing, gz + "xx");
        QCOMPARE(read_rknot(trailing).message(),
                 trailing + ": 2 trailing bytes after the gzip stream at byte " + std::to_string(gz.size()));

        const std::string notjson = dir.file("notjson.rknot");
        test::write_file(notjson, gzip_bytes("{\"model_name\": \"x\""));
        VERIFY_CONTAINS(read_rknot(notjson).message(), notjson + ": not valid JSON at byte ");

        const std::string schema = dir.file("schema.rknot");
        std::string t2 = text;
        t2.replace(t2.find("\"bit_width\": 4"), 14, "\"bit_width\": 16");
        test::write_file(schema, gzip_bytes(t2));
        QCOMPARE(read_rknot(schema).message(),
                 schema + ": folded_waves.layers[0].bit_width: 16 is out of range [2, 8]");

        QCOMPARE(read_rknot(dir.file("absent.rknot")).status().code(), StatusCode::NotFound);
    }

    void encodeFromAKnotIsMeasured() {
        test::TempDir dir;
        const std::string model_path = write_tiny_gguf(dir);
        auto model = ModelFile::open(model_path);
        QVERIFY(model.is_ok());
        QuantizeOptions qo;
        qo.preset = "paper";
        qo.n_threads = 2;
        const std::string knot_path = dir.file("tiny.knot");
        auto rep = quantize_model(*model, qo, knot_path);
        QVERIFY2(rep.is_ok(), rep.message().c_str());

        RknotEncodeOptions eo;
        eo.knot_path = knot_path;
        eo.model_path = model_path;
        eo.command = "test";
        auto r = encode_rknot(eo);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->model_name, std::string("tiny"));
        QCOMPARE(r->measured.spectrum_source, std::string("model"));
        QCOMPARE(r->measured.file_bytes, rep->file_bytes);
        QCOMPARE(r->measured.n_params, rep->n_params);
        QCOMPARE(r->compression.total_compression.value(), rep->ratio_vs_fp32());
        QVERIFY(!r->saturation_maps && !r->measured.eval && !r->quality_metrics.overall_quality);
        size_t n_matrices = 0;
        for (const QuantizedTensor& q : rep->tensors)
            if (q.codec.shape.size() == 2) n_matrices++;
        QCOMPARE(r->layers.size(), n_matrices);
        size_t li = 0;
        for (const QuantizedTensor& q : rep->tensors) {
            if (q.codec.shape.size() != 2) continue;
            const RknotLayer& l = r->layers[li++];
            QCOMPARE(l.tensor, q.codec.name);
            QCOMPARE(l.method, std::string(method_name(q.codec.method)));
            QCOMPARE(l.rank, q.codec.rank);
            const bool low_rank = q.codec.method == Method::LowRank || q.codec.method == Method::LowRankResidual;
            QCOMPARE(l.bit_width.has_value(), low_rank);
            if (low_rank) QCOMPARE(*l.bit_width, q.codec.factor_bits);
            QVERIFY(std::fabs(*l.rel_error - q.codec.rel_error) <= 1e-9 * std::max(1.0, q.codec.rel_error));
            // spectrum fields against the spectrum of the source matrix
            auto w = tensor_to_f32(*model->find(q.codec.name));
            std::vector<double> s;
            QVERIFY(singular_values(w->data(), q.codec.shape[0], q.codec.shape[1], s).is_ok());
            QCOMPARE(l.base_singular_values.size(), std::min<size_t>(8, s.size()));
            QCOMPARE(l.base_singular_values[0], s[0]);
            const int64_t n = static_cast<int64_t>(s.size());
            QCOMPARE(l.num_levels, static_cast<int32_t>(std::floor(std::log2(double(n)))) + 1);
            QCOMPARE(l.level_residuals[2], relative_error_at_rank(s.data(), n, 4));
            auto fit = fit_spectral_decay(s.data(), n);
            QCOMPARE(*l.self_similarity_confidence, fit->r2);
            QCOMPARE(*l.is_self_similar, fit->r2 >= kSelfSimilarR2);
            QVERIFY(!l.expected_accuracy_loss);
        }
        // eval report: mean KLD and friends are copied, overall_quality follows the formula
        const std::string eval = dir.file("eval.json");
        test::write_file(
            eval,
            std::string(
                "{\"base\": \"b.gguf\", \"candidate\": \"c.knot\", \"text\": \"t.txt\", \"ctx\": 64, \"stride\": 32, "
                "\"tokens\": 99, \"kld\": {\"mean\": 0.125, \"se\": 0.01, \"median\": 0.1, \"p99\": 1.5, \"p99_9\": "
                "2.5, "
                "\"max\": 3}, \"same_top\": {\"fraction\": 0.75, \"se\": 0.01}, \"ppl_ratio\": {\"value\": 1.25, "
                "\"se\": 0.01, \"ln\": 0.2, \"ln_se\": 0.01}, \"base_perplexity\": {\"tokens\": 99}}"));
        eo.eval_path = eval;
        auto with_eval = encode_rknot(eo);
        QVERIFY2(with_eval.is_ok(), with_eval.message().c_str());
        const RknotEval& ev = *with_eval->measured.eval;
        QCOMPARE(*ev.kld_mean, 0.125);
        QCOMPARE(*ev.kld_mean_se, 0.01);
        QCOMPARE(*ev.kld_p99, 1.5);
        QCOMPARE(*ev.kld_p999, 2.5);
        QCOMPARE(*ev.top1_agreement, 0.75);
        QCOMPARE(*ev.ppl_ratio, 1.25);
        QCOMPARE(*ev.n_tokens, int64_t{99});
        QCOMPARE(ev.command,
                 std::string("gkq eval --base b.gguf --candidate c.knot --text t.txt --ctx 64 --stride 32 --json"));
        QCOMPARE(*with_eval->quality_metrics.overall_quality, std::exp(-0.125));
        test::write_file(eval, std::string("{\"perplexity\": {\"perplexity\": 3.0}}"));
        auto no_kld = encode_rknot(eo);
        QCOMPARE(no_kld.message(), eval + ": no kld.mean: not a comparing `gkq eval --json` report");
    }

    // With the model's spectra cached beside it (gkq analyze, the workbench), encode takes each matrix's singular
    // values from the cache instead of decomposing it again: the same values as without the cache (to rounding), and
    // a doctored cache shows through (so the cache is what was read).
    void encodeReadsTheModelsSpectraCache() {
        test::TempDir dir;
        const std::string model_path = write_tiny_gguf(dir);
        auto model = ModelFile::open(model_path);
        QVERIFY(model.is_ok());
        const std::string knot_path = dir.file("tiny.knot");
        auto quantized = test::quantize_file(model_path, "q8_0", knot_path);
        QVERIFY2(quantized.is_ok(), quantized.message().c_str());
        RknotEncodeOptions eo;
        eo.knot_path = knot_path;
        eo.model_path = model_path;
        eo.command = "test";
        auto computed = encode_rknot(eo);
        QVERIFY2(computed.is_ok(), computed.message().c_str());

        auto spectra = analyze_model(*model, AnalyzeOptions{});
        QVERIFY2(spectra.is_ok(), spectra.message().c_str());
        auto key = spectrum_cache_key(*model, model->path(), AnalyzeOptions{});
        QVERIFY2(key.is_ok(), key.message().c_str());
        QVERIFY(write_spectrum_cache(model->path(), *key, *spectra).is_ok());
        auto from_cache = encode_rknot(eo);
        QVERIFY2(from_cache.is_ok(), from_cache.message().c_str());
        // The same exact SVD of the same floats, run with other BLAS threading: equal to rounding.
        const auto close = [](double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b)); };
        QCOMPARE(from_cache->layers.size(), computed->layers.size());
        for (size_t i = 0; i < computed->layers.size(); ++i) {
            const std::vector<double>& got = from_cache->layers[i].base_singular_values;
            const std::vector<double>& want = computed->layers[i].base_singular_values;
            QCOMPARE(got.size(), want.size());
            for (size_t j = 0; j < got.size(); ++j)
                QVERIFY2(close(got[j], want[j]), computed->layers[i].tensor.c_str());
        }

        // Every value of one matrix halved in the cache: its entry follows, the others do not move.
        const std::string doctored = computed->layers[0].tensor;
        for (TensorSpectrum& t : *spectra)
            if (t.name == doctored)
                for (double& v : t.singular_values) v *= 0.5;
        QVERIFY(write_spectrum_cache(model->path(), *key, *spectra).is_ok());
        auto halved = encode_rknot(eo);
        QVERIFY2(halved.is_ok(), halved.message().c_str());
        QCOMPARE(halved->layers.size(), computed->layers.size());
        for (size_t i = 0; i < halved->layers.size(); ++i) {
            const std::vector<double>& got = halved->layers[i].base_singular_values;
            const std::vector<double>& want = computed->layers[i].base_singular_values;
            QCOMPARE(got.size(), want.size());
            for (size_t j = 0; j < got.size(); ++j)
                QVERIFY2(close(got[j], halved->layers[i].tensor == doctored ? 0.5 * want[j] : want[j]),
                         halved->layers[i].tensor.c_str());
        }
    }

    void tuningChangesExactlyTheEditedMatrix() {
        test::TempDir dir;
        const std::string model_path = write_tiny_gguf(dir);
        auto model = ModelFile::open(model_path);
        QuantizeOptions qo;
        qo.preset = "paper";
        qo.n_threads = 2;
        QVERIFY(quantize_model(*model, qo, dir.file("a.knot")).is_ok());
        RknotEncodeOptions eo;
        eo.knot_path = dir.file("a.knot");
        auto r = encode_rknot(eo);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->measured.spectrum_source, std::string("knot"));
        // unchanged tuning: every record identical
        auto same = rknot_layer_overrides(*r, "a.rknot");
        QVERIFY(same.is_ok());
        qo.per_layer = *same;
        QVERIFY(quantize_model(*model, qo, dir.file("b.knot")).is_ok());
        // one low-rank matrix's bit width changed
        size_t target = r->layers.size();
        for (size_t i = 0; i < r->layers.size(); ++i)
            if (r->layers[i].bit_width && r->layers[i].layer_id == 1) {
                target = i;
                break;
            }
        QVERIFY(target < r->layers.size());
        const int new_bits = *r->layers[target].bit_width == 2 ? 4 : 2;
        QVERIFY(rknot_set(*r,
                          {"folded_waves.layers[" + std::to_string(target) + "].bit_width=" + std::to_string(new_bits)},
                          "a.rknot")
                    .is_ok());
        auto edited = rknot_layer_overrides(*r, "a.rknot");
        qo.per_layer = *edited;
        QVERIFY(quantize_model(*model, qo, dir.file("c.knot")).is_ok());
        auto a = KnotFile::open(dir.file("a.knot"));
        auto b = KnotFile::open(dir.file("b.knot"));
        auto c = KnotFile::open(dir.file("c.knot"));
        QVERIFY(a.is_ok() && b.is_ok() && c.is_ok());
        QCOMPARE(a->n_records(), c->n_records());
        int n_diff_b = 0, n_diff_c = 0;
        for (size_t i = 0; i < a->n_records(); ++i) {
            auto ra = a->read_raw(i), rb = b->read_raw(i), rc = c->read_raw(i);
            if (ra->bytes != rb->bytes) n_diff_b++;
            if (ra->bytes != rc->bytes) {
                n_diff_c++;
                QCOMPARE(a->entries()[i].name, r->layers[target].tensor);
                QCOMPARE(int(c->entries()[i].factor_bits), new_bits);
            }
        }
        QCOMPARE(n_diff_b, 0);
        QCOMPARE(n_diff_c, 1);
    }
};

QTEST_APPLESS_MAIN(TestRknot)
#include "test_rknot.moc"
