// The whole-model layer: quantize every preset into a knot, verify it, reconstruct it into each format and open the
// result; shards + merge equal one run byte for byte; cancellation, overrides and bad input; the shared checkpoint.
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <cmath>
#include <filesystem>
#include <map>

using namespace gkq;
namespace fs = std::filesystem;

namespace {

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + (needle) + "]")))

Vocabulary tiny_vocab(int n) {
    Vocabulary v;
    v.model = "llama";
    for (int i = 0; i < n; ++i) {
        v.tokens.push_back("tok" + std::to_string(i));
        v.scores.push_back(-static_cast<float>(i));
    }
    v.bos_id = 1;
    v.eos_id = 2;
    return v;
}

// A tiny model written as GGUF (with its vocabulary), and its path.
std::string write_tiny_gguf(const test::TempDir& dir, bool shared = false, uint64_t seed = 1) {
    const std::string path = dir.file(shared ? "tiny-shared.gguf" : "tiny.gguf");
    auto m = test::make_tiny_model(test::tiny_config(shared), seed);
    if (Status s = write_gguf(path, m.config, m.tensors, tiny_vocab(40)); !s) qFatal("%s", s.message().c_str());
    return path;
}

using Key = std::tuple<TensorRole, int32_t, std::vector<int64_t>>;

std::vector<Key> keys_of(const ModelFile& m) {
    std::vector<Key> k;
    for (const Tensor& t : m.tensors()) k.emplace_back(t.role, t.layer, t.shape);
    std::sort(k.begin(), k.end());
    return k;
}

double rel_error(const std::vector<float>& ref, const std::vector<float>& got) {
    double d = 0, r = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        d += (double(ref[i]) - got[i]) * (double(ref[i]) - got[i]);
        r += double(ref[i]) * ref[i];
    }
    return std::sqrt(d / r);
}

// HF safetensors store q/k rows of each head as (evens, odds) where llama2.c/GGUF interleave them.
std::vector<float> interleaved_to_half_split(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t head) {
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < rows / head; ++h)
        for (int64_t i = 0; i < head / 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
                std::copy_n(w.begin() + (h * head + 2 * i + j) * cols, cols,
                            out.begin() + (h * head + j * head / 2 + i) * cols);
    return out;
}

QuantizeOptions preset_options(const std::string& preset, int threads = 2) {
    QuantizeOptions o;
    o.preset = preset;
    o.n_threads = threads;
    return o;
}

}  // namespace

class TestQuantize : public QObject {
    Q_OBJECT
private slots:
    void eachPresetQuantizeVerifyReconstruct_data() {
        QTest::addColumn<QString>("preset");
        for (const std::string& p : preset_names())  // the whitened presets need a Gram file: test_cli_imatrix
            if (!preset_needs_gram(*find_preset(p))) QTest::newRow(p.c_str()) << QString::fromStdString(p);
    }
    void eachPresetQuantizeVerifyReconstruct() {
        QFETCH(QString, preset);
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY2(model.is_ok(), model.message().c_str());
        const std::string knot_path = dir.file("tiny.knot");
        auto report = quantize_model(*model, preset_options(preset.toStdString()), knot_path);
        QVERIFY2(report.is_ok(), report.message().c_str());

        // The report: one entry per source tensor, sizes as the file has them.
        QCOMPARE(report->tensors.size(), model->tensors().size());
        QCOMPARE(report->file_bytes, uint64_t(fs::file_size(knot_path)));
        QCOMPARE(report->n_params, model->n_params());
        uint64_t sum = 0;
        for (const QuantizedTensor& q : report->tensors) sum += q.bytes_on_disk();
        QCOMPARE(sum + report->container_bytes, report->file_bytes);
        QCOMPARE(report->bits_per_weight(), 8.0 * double(report->file_bytes) / double(model->n_params()));
        QCOMPARE(report->ratio_vs_fp32(), 2.0 * report->ratio_vs_bf16());

        auto knot = KnotFile::open(knot_path);
        QVERIFY2(knot.is_ok(), knot.message().c_str());
        QCOMPARE(knot->header().config.dim, model->config().dim);
        QCOMPARE(knot->header().config.n_kv_heads, model->config().n_kv_heads);
        QCOMPARE(knot->header().config.shared_classifier, false);
        QVERIFY(knot->header().vocab.tokens == tiny_vocab(40).tokens);
        QCOMPARE(*knot->header().metadata.find("gkq.preset")->as_string(), preset.toStdString());
        QCOMPARE(knot->header().command, "quantize --preset " + preset.toStdString());
        for (size_t i = 0; i < knot->n_records(); ++i) {
            const KnotEntry& e = knot->entries()[i];
            const Tensor& t = model->tensors()[i];
            const QuantizedTensor& q = report->tensors[i];
            QCOMPARE(e.name, t.name);
            QCOMPARE(e.source_index, uint64_t(i));
            QCOMPARE(e.method, q.codec.method);
            QCOMPARE(e.record_bytes, q.record_bytes);
            if (t.n_dims() == 1) {  // norms are stored exactly
                QCOMPARE(e.method, Method::F32);
                QCOMPARE(q.codec.rel_error, 0.0);
            }
        }

        auto verified = verify_knot(knot_path, 2);
        QVERIFY2(verified.is_ok(), verified.message().c_str());
        QVERIFY(verified->ok());
        QCOMPARE(verified->n_ok, model->tensors().size());
        QCOMPARE(verified->n_params, model->n_params());

        // Reconstruct to each format: same tensors, roles and shapes; values = the decoded records, whose error
        // against the source is what the report said.
        for (const char* ext : {".safetensors", ".gguf", ".bin"}) {
            const std::string out = dir.file(std::string("re") + ext);
            auto r = reconstruct(knot_path, out, 2);
            QVERIFY2(r.is_ok(), r.message().c_str());
            auto re = ModelFile::open(out);
            QVERIFY2(re.is_ok(), re.message().c_str());
            QVERIFY(keys_of(*re) == keys_of(*model));
            QCOMPARE(re->config().dim, model->config().dim);
            QCOMPARE(re->config().n_kv_heads, model->config().n_kv_heads);
            QCOMPARE(re->config().shared_classifier, false);
            for (size_t i = 0; i < model->tensors().size(); ++i) {
                const Tensor& src = model->tensors()[i];
                const Tensor* dst = re->find(src.role, src.layer);
                QVERIFY(dst != nullptr);
                auto a = tensor_to_f32(src);
                auto b = tensor_to_f32(*dst);
                auto d = decode_tensor(*knot->read(i));
                QVERIFY(a.is_ok() && b.is_ok() && d.is_ok());
                const bool rotary = src.role == TensorRole::AttnQ || src.role == TensorRole::AttnK;
                if (rotary && re->config().rope_style != model->config().rope_style)
                    QVERIFY2(
                        *b == interleaved_to_half_split(*d, src.shape[0], src.shape[1], model->config().head_size()),
                        src.name.c_str());
                else
                    QVERIFY2(*b == *d, src.name.c_str());
                if (report->tensors[i].codec.rel_error == 0.0)
                    QVERIFY(*a == *d);
                else
                    QVERIFY(std::abs(rel_error(*a, *d) - report->tensors[i].codec.rel_error) < 1e-9);
            }
            if (std::string(ext) == ".gguf") QCOMPARE(re->vocabulary().tokens.size(), size_t(40));
        }
    }

    void presetMethodsPerRole() {
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        std::map<std::string, Method> want = {{"q8_0", Method::Q8_0}, {"q4_0", Method::Q4_0}};
        for (const auto& [preset, method] : want) {
            auto r = quantize_model(*model, preset_options(preset), dir.file(preset + ".knot"));
            QVERIFY2(r.is_ok(), r.message().c_str());
            for (const QuantizedTensor& q : r->tensors)
                QCOMPARE(q.codec.method, q.codec.shape.size() == 1 ? Method::F32 : method);
        }
        auto paper = quantize_model(*model, preset_options("paper"), dir.file("paper.knot"));
        QVERIFY(paper.is_ok());
        for (const QuantizedTensor& q : paper->tensors) {
            if (q.codec.role == TensorRole::AttnQ || q.codec.role == TensorRole::FfnUp) {
                QCOMPARE(q.codec.method, Method::LowRank);
                QVERIFY(q.codec.rank >= 1 && q.codec.rank <= 3);
                QCOMPARE(q.codec.factor_bits, q.codec.role == TensorRole::AttnQ ? 2 : 4);
                QVERIFY(q.codec.energy_kept.has_value());
            }
        }
    }

    void shardsMergeToTheUnshardedKnot_data() {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<int>("n_shards");
        QTest::newRow("paper 2") << "paper" << 2;
        QTest::newRow("paper 3") << "paper" << 3;
        QTest::newRow("lowrank-q4 2") << "lowrank-q4" << 2;
        QTest::newRow("q4_0 4") << "q4_0" << 4;
    }
    void shardsMergeToTheUnshardedKnot() {
        QFETCH(QString, preset);
        QFETCH(int, n_shards);
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        const std::string whole = dir.file("whole.knot");
        QVERIFY(quantize_model(*model, preset_options(preset.toStdString(), 1), whole).is_ok());
        std::vector<std::string> shards;
        size_t n_records = 0;
        for (int i = n_shards - 1; i >= 0; --i) {  // any order
            QuantizeOptions o = preset_options(preset.toStdString(), 3);
            o.shard_index = static_cast<uint32_t>(i);
            o.shard_count = static_cast<uint32_t>(n_shards);
            shards.push_back(dir.file("s" + std::to_string(i) + ".knot"));
            auto r = quantize_model(*model, o, shards.back());
            QVERIFY2(r.is_ok(), r.message().c_str());
            for (const QuantizedTensor& q : r->tensors) QVERIFY(in_shard(q.codec.layer, o.shard_index, o.shard_count));
            n_records += r->tensors.size();
        }
        QCOMPARE(n_records, model->tensors().size());
        const std::string merged = dir.file("merged.knot");
        auto m = merge_knots(shards, merged);
        QVERIFY2(m.is_ok(), m.message().c_str());
        QCOMPARE(m->n_records, model->tensors().size());
        QVERIFY(test::read_file(merged) == test::read_file(whole));
    }

    // Reading rows a chunk at a time and holding fewer tensors in flight changes memory, not the knot: one-row
    // chunks with a one-byte budget (one tensor at a time) on three threads give the file and the report of the
    // default run on one.
    void chunksAndTheMemoryBudgetLeaveTheKnotAsIs_data() {
        QTest::addColumn<QString>("preset");
        QTest::newRow("q4_0") << "q4_0";
        QTest::newRow("q8_0") << "q8_0";
        QTest::newRow("q4_k_m") << "q4_k_m";
        QTest::newRow("paper") << "paper";
    }
    void chunksAndTheMemoryBudgetLeaveTheKnotAsIs() {
        QFETCH(QString, preset);
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        const std::string ref_path = dir.file("ref.knot"), small_path = dir.file("small.knot");
        auto ref = quantize_model(*model, preset_options(preset.toStdString(), 1), ref_path);
        QVERIFY2(ref.is_ok(), ref.message().c_str());
        QuantizeOptions o = preset_options(preset.toStdString(), 3);
        o.chunk_bytes = 1;
        o.in_flight_bytes = 1;
        auto small = quantize_model(*model, o, small_path);
        QVERIFY2(small.is_ok(), small.message().c_str());
        QVERIFY(test::read_file(small_path) == test::read_file(ref_path));
        QCOMPARE(small->tensors.size(), ref->tensors.size());
        for (size_t i = 0; i < ref->tensors.size(); ++i) {
            const TensorReport &a = small->tensors[i].codec, &b = ref->tensors[i].codec;
            QCOMPARE(a.rel_error, b.rel_error);
            QCOMPARE(a.max_abs_error, b.max_abs_error);
            QCOMPARE(a.payload_bytes, b.payload_bytes);
            QCOMPARE(a.fallback, b.fallback);
        }
        QCOMPARE(small->raw_payload_bytes(), ref->raw_payload_bytes());
        QVERIFY(ref->stored_payload_bytes() <= ref->raw_payload_bytes());
        QVERIFY(ref->bits_per_weight_uncompressed() >= ref->bits_per_weight());
    }

    // A knot is Weights too: quantize_model decodes its records and encodes them again, refusing each lossy record
    // unless allow_requantize; kept as f32, every record decodes to exactly what the first knot's does, and the new
    // knot carries the first one's metadata with its own preset and source format. A shard is refused.
    void quantizesAKnotFromItsRecords() {
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        const std::string first = dir.file("q4.knot");
        QVERIFY(quantize_model(*model, preset_options("q4_0"), first).is_ok());
        auto knot = KnotFile::open(first);
        QVERIFY2(knot.is_ok(), knot.message().c_str());

        const std::string again = dir.file("again.knot");
        QuantizeOptions o = preset_options("q8_0");
        auto refused = quantize_model(*knot, o, again);
        QVERIFY(!refused.is_ok());
        VERIFY_CONTAINS(refused.message(), first + ": tensor '");
        VERIFY_CONTAINS(refused.message(), "is already quantized (q4_0)");
        QVERIFY(!fs::exists(again));

        o.allow_requantize = true;
        o.global.method = Method::F32;
        auto report = quantize_model(*knot, o, again);
        QVERIFY2(report.is_ok(), report.message().c_str());
        auto exact = KnotFile::open(again);
        QVERIFY2(exact.is_ok(), exact.message().c_str());
        QCOMPARE(exact->n_records(), knot->n_records());
        for (size_t i = 0; i < knot->n_records(); ++i) {
            QCOMPARE(exact->entries()[i].name, knot->entries()[i].name);
            QCOMPARE(exact->entries()[i].method, Method::F32);
            auto a = knot->read_f32(i);
            auto b = exact->read_f32(i);
            QVERIFY(a.is_ok() && b.is_ok());
            QVERIFY(*a == *b);
        }
        const MetaValue* preset = exact->header().metadata.find("gkq.preset");
        const MetaValue* source = exact->header().metadata.find("gkq.source_format");
        QVERIFY(preset && preset->as_string() && *preset->as_string() == "q8_0");
        QVERIFY(source && source->as_string() && *source->as_string() == "knot");
        QCOMPARE(exact->header().metadata.entries.size(), knot->header().metadata.entries.size());

        QuantizeOptions sharded = preset_options("q4_0");
        sharded.shard_count = 2;
        const std::string shard = dir.file("shard.knot");
        QVERIFY(quantize_model(*model, sharded, shard).is_ok());
        auto part = KnotFile::open(shard);
        QVERIFY(part.is_ok());
        auto whole = quantize_model(*part, o, dir.file("from-shard.knot"));
        QVERIFY(!whole.is_ok());
        VERIFY_CONTAINS(whole.message(), "merge the shards");
    }

    void shardGroups() {
        QCOMPARE(knot_group(-1), 0u);
        QCOMPARE(knot_group(0), 1u);
        QCOMPARE(knot_group(4), 5u);
        // 2 layers, 2 shards: shard 0 = non-block tensors + layer 1, shard 1 = layer 0
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        QuantizeOptions o = preset_options("q8_0");
        o.shard_count = 2;
        auto r0 = quantize_model(*model, o, dir.file("0.knot"));
        QVERIFY(r0.is_ok());
        std::vector<std::string> names;
        for (const auto& q : r0->tensors) names.push_back(q.codec.name);
        QCOMPARE(names.front(), std::string("token_embd.weight"));
        QCOMPARE(names[1], std::string("blk.1.attn_norm.weight"));
        QCOMPARE(names.size(), size_t(2 + 9 + 1));
        auto k = KnotFile::open(dir.file("0.knot"));
        QVERIFY(k.is_ok());
        QCOMPARE(k->header().shard_count, 2u);
        QCOMPARE(k->header().command, std::string("quantize --preset q8_0"));
        // a shard cannot be reconstructed on its own
        auto re = reconstruct(dir.file("0.knot"), dir.file("x.gguf"));
        QVERIFY(!re.is_ok());
        VERIFY_CONTAINS(re.message(), "shard 0/2 of a model; merge the shards first (gkq merge)");
    }

    void mergeRejectsMismatchedShards() {
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        auto shard = [&](const std::string& preset, uint32_t i, uint32_t n, const std::string& name) {
            QuantizeOptions o = preset_options(preset);
            o.shard_index = i;
            o.shard_count = n;
            if (!quantize_model(*model, o, dir.file(name)).is_ok()) qFatal("quantize failed");
            return dir.file(name);
        };
        const std::string a0 = shard("q8_0", 0, 2, "a0.knot"), a1 = shard("q8_0", 1, 2, "a1.knot");
        const std::string b1 = shard("q4_0", 1, 2, "b1.knot"), c0 = shard("q8_0", 0, 3, "c0.knot");
        const std::string out = dir.file("out.knot");
        auto missing = merge_knots({a0}, out);
        VERIFY_CONTAINS(missing.message(), "merge: shard 1/2 is missing (1 of 2 shards given)");
        auto twice = merge_knots({a0, a0}, out);
        VERIFY_CONTAINS(twice.message(), a0 + ": shard 0/2 is also " + a0);
        auto other = merge_knots({a0, b1}, out);
        VERIFY_CONTAINS(other.message(), b1 + ": not a shard of the same run as " + a0 +
                                             " (command 'quantize --preset q8_0' vs 'quantize --preset q4_0')");
        auto count = merge_knots({a0, c0}, out);
        VERIFY_CONTAINS(count.message(), "shard count 2 vs 3");
        QVERIFY(!fs::exists(out));
        QVERIFY(merge_knots({a1, a0}, out).is_ok());
    }

    void overridesApplyAndAreRecorded() {
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        QuantizeOptions o = preset_options("svd-energy");
        o.global.rank = 5;
        o.global.factor_bits = 4;
        LayerOverride lo;
        lo.layer = 1;
        lo.role = TensorRole::AttnK;
        lo.params.rank = 2;
        o.per_layer.push_back(lo);
        QCOMPARE(quantize_command(o),
                 std::string("quantize --preset svd-energy --rank 5 --bits 4; layer 1 attn_k: --rank 2"));
        auto r = quantize_model(*model, o, dir.file("o.knot"));
        QVERIFY2(r.is_ok(), r.message().c_str());
        int n_checked = 0;
        for (const QuantizedTensor& q : r->tensors) {
            if (q.codec.method != Method::LowRank) continue;
            const bool special = q.codec.layer == 1 && q.codec.role == TensorRole::AttnK;
            QCOMPARE(q.codec.rank, special ? 2 : 5);
            QCOMPARE(q.codec.factor_bits, 4);
            ++n_checked;
        }
        QCOMPARE(n_checked, 2 * 7);
        auto k = KnotFile::open(dir.file("o.knot"));
        QCOMPARE(k->header().command, quantize_command(o));
    }

    void badOptionsFailBeforeWriting() {
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        const std::string out = dir.file("bad.knot");
        auto unknown = quantize_model(*model, preset_options("turbo"), out);
        QCOMPARE(unknown.status().code(), StatusCode::NotFound);
        VERIFY_CONTAINS(unknown.message(), "unknown preset 'turbo'");
        QuantizeOptions shard = preset_options("q8_0");
        shard.shard_index = 2;
        shard.shard_count = 2;
        VERIFY_CONTAINS(quantize_model(*model, shard, out).message(), "shard 2/2: the index must be below the count");
        QuantizeOptions bits = preset_options("paper");
        bits.global.factor_bits = 3;
        auto b = quantize_model(*model, bits, out);
        QCOMPARE(b.status().code(), StatusCode::InvalidArgument);
        VERIFY_CONTAINS(
            b.message(),
            model->path() + ": tensor 'token_embd.weight': codec parameter factor_bits: 3 is not 2, 4 or 8");
        QVERIFY(!fs::exists(out));
        auto ext = reconstruct(dir.file("none.knot"), dir.file("x.onnx"));
        VERIFY_CONTAINS(ext.message(),
                        "x.onnx: unknown output format (the name must end in .safetensors, .gguf or .bin)");
    }

    void cancelLeavesNoFile() {
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        const std::string out = dir.file("c.knot");
        int calls = 0;
        double last = 0;
        auto r = quantize_model(*model, preset_options("paper"), out, [&](double f, std::string_view) {
            last = f;
            return ++calls < 3;
        });
        QCOMPARE(r.status().code(), StatusCode::Cancelled);
        QCOMPARE(calls, 3);
        QVERIFY(last > 0 && last < 1);
        QVERIFY(!fs::exists(out));
        for (const auto& e : fs::directory_iterator(dir.path()))
            QVERIFY2(e.path().extension() != ".knot" && e.path().string().find(".tmp-") == std::string::npos,
                     e.path().c_str());
    }

    void verifyReportsEveryBadRecord() {
        test::TempDir dir;
        auto model = ModelFile::open(write_tiny_gguf(dir));
        QVERIFY(model.is_ok());
        const std::string path = dir.file("v.knot");
        QVERIFY(quantize_model(*model, preset_options("q8_0"), path).is_ok());
        KnotEntry e2, e5;
        {
            auto k = KnotFile::open(path);
            QVERIFY(k.is_ok());
            e2 = k->entries()[2];
            e5 = k->entries()[5];
        }
        auto bytes = test::read_file(path);
        bytes[e2.record_offset + e2.record_bytes - 9] ^= 0x40;
        bytes[e5.record_offset + e5.record_bytes - 9] ^= 0x40;
        test::write_file(path, bytes);
        auto v = verify_knot(path, 2);
        QVERIFY2(v.is_ok(), v.message().c_str());
        QVERIFY(!v->ok());
        QCOMPARE(v->n_ok, model->tensors().size() - 2);
        QCOMPARE(v->failures.size(), size_t(2));
        VERIFY_CONTAINS(v->failures[0], path + ": record 2 '" + e2.name + "'");
        VERIFY_CONTAINS(v->failures[0], "CRC32 mismatch");
        VERIFY_CONTAINS(v->failures[1], path + ": record 5 '" + e5.name + "'");
        auto re = reconstruct(path, dir.file("r.gguf"));
        QVERIFY(!re.is_ok());
        VERIFY_CONTAINS(re.message(), path + ": record 2 '" + e2.name + "'");
        QVERIFY(!fs::exists(dir.file("r.gguf")));
    }

    void sharedCheckpoint_data() {
        QTest::addColumn<QString>("preset");
        for (const std::string& p : preset_names())  // the whitened presets need a Gram file: test_cli_imatrix
            if (!preset_needs_gram(*find_preset(p))) QTest::newRow(p.c_str()) << QString::fromStdString(p);
    }
    void sharedCheckpoint() {
        QFETCH(QString, preset);
        const std::string rel = "llama2xs-279K/model.bin";
        auto path = test::shared_model(rel);
        if (!path) QSKIP(test::shared_models_skip_reason(rel).c_str());
        auto model = ModelFile::open(*path);
        QVERIFY2(model.is_ok(), model.message().c_str());
        auto tok = read_llama2c_tokenizer(*test::shared_model("llama2xs-279K/tok512.bin"), model->config().vocab_size);
        QVERIFY2(tok.is_ok(), tok.message().c_str());
        test::TempDir dir;
        QuantizeOptions o = preset_options(preset.toStdString());
        o.vocab = *tok;
        const std::string knot = dir.file("m.knot");
        auto r = quantize_model(*model, o, knot);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->n_params, int64_t(279232));
        QCOMPARE(r->tensors.size(), size_t(47));
        auto v = verify_knot(knot);
        QVERIFY2(v.is_ok() && v->ok(), v.is_ok() ? "" : v.message().c_str());
        auto k = KnotFile::open(knot);
        QCOMPARE(k->header().vocab.tokens.size(), size_t(512));
        const std::string out = dir.file("re.bin");
        auto re = reconstruct(knot, out);
        QVERIFY2(re.is_ok(), re.message().c_str());
        auto m2 = ModelFile::open(out);
        QVERIFY2(m2.is_ok(), m2.message().c_str());
        QVERIFY(keys_of(*m2) == keys_of(*model));
        QCOMPARE(m2->config().vocab_size, int64_t(512));
        QCOMPARE(m2->config().n_kv_heads, int64_t(4));
        // the honest table: q8_0's error is small, the paper preset's is whatever it is but reported
        for (const QuantizedTensor& q : r->tensors) {
            QVERIFY(std::isfinite(q.codec.rel_error));
            if (preset == "q8_0") QVERIFY2(q.codec.rel_error < 0.01, q.codec.name.c_str());
        }
    }
};

QTEST_APPLESS_MAIN(TestQuantize)
#include "test_quantize.moc"
