// The real gkq binary: quantize (table and JSON), verify, reconstruct and merge, their help, option errors and
// exit codes, on a tiny written model and on the shared checkpoint.
#include "cli_run.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize_fields.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QProcess>
#include <QtTest>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <limits>

using namespace gkq;
namespace fs = std::filesystem;

namespace {
using Run = gkq::test::CliRunT<std::string>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<std::string>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + (needle) + "]")))

std::string tiny_gguf(const test::TempDir& dir) {
    return test::write_tiny_gguf(dir.file("tiny.gguf"), false, 1, test::tiny_vocabulary());
}

// `v` as a llama2.c tokenizer.bin: int32 max_token_length, then per token f32 score, int32 length, bytes.
void write_llama2c_tokenizer(const std::string& path, const Vocabulary& v) {
    test::Bytes b;
    int32_t longest = 0;
    for (const std::string& t : v.tokens) longest = std::max(longest, static_cast<int32_t>(t.size()));
    b.i32(longest);
    for (size_t i = 0; i < v.tokens.size(); ++i)
        b.f32(v.scores[i]).i32(static_cast<int32_t>(v.tokens[i].size())).raw(v.tokens[i]);
    test::write_file(path, b.vec());
}

// The tiny model as a llama2.c checkpoint, which carries no vocabulary of its own.
std::string tiny_llama2c(const test::TempDir& dir) {
    const std::string path = dir.file("tiny.bin");
    auto m = test::make_tiny_model(test::tiny_config(true), 4);
    if (Status s = write_llama2c(path, m.config, m.tensors); !s) qFatal("%s", s.message().c_str());
    return path;
}

// A copy of `knot` with `edit` applied to its header, its records copied as they are.
template <class Edit>
void rewrite_knot(const std::string& knot, const std::string& out, Edit edit) {
    auto k = KnotFile::open(knot);
    if (!k) qFatal("%s", k.message().c_str());
    KnotHeader h = k->header();
    edit(h);
    auto w = KnotWriter::create(out, h);
    if (!w) qFatal("%s", w.message().c_str());
    for (size_t i = 0; i < k->n_records(); ++i) {
        auto r = k->read_raw(i);
        if (!r || !w->add(*r)) qFatal("record %zu", i);
    }
    if (Status s = w->finish(); !s) qFatal("%s", s.message().c_str());
}

size_t count_lines(const std::string& s) {
    return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}
}  // namespace

class TestCliQuantize : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void helpIsTruthful() {
        Run top = run_gkq({"--help"});
        QCOMPARE(top.code, 0);
        for (const char* c : {"quantize", "verify", "reconstruct", "merge"}) VERIFY_CONTAINS(top.out, c);
        Run h = run_gkq({"quantize", "--help"});
        QCOMPARE(h.code, 0);
        QVERIFY(h.out.rfind("usage: gkq quantize [MODEL] -o OUT.knot [--preset P] [--rank K] [--energy E] [--bits B] "
                            "[--shard i/N] [--json]",
                            0) == 0);
        for (const char* o :
             {"--rank K", "--energy E", "--bits B", "--shard i/N", "--json", "--tokenizer FILE", "--threads N",
              "-o, --output OUT.knot", "paper", "q8_0", "q4_0", "lowrank-q4", "svd-energy"})
            VERIFY_CONTAINS(h.out, o);
        Run v = run_gkq({"verify", "--help"});
        QCOMPARE(v.code, 0);
        QVERIFY(v.out.rfind("usage: gkq verify IN.knot [--json]", 0) == 0);
        Run r = run_gkq({"reconstruct", "--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.rfind("usage: gkq reconstruct IN.knot -o OUT.{safetensors,gguf,bin}", 0) == 0);
        Run m = run_gkq({"merge", "--help"});
        QCOMPARE(m.code, 0);
        QVERIFY(m.out.rfind("usage: gkq merge -o OUT.knot SHARD...", 0) == 0);
        VERIFY_CONTAINS(m.out, "SHARD...");
    }

    void badUsageExitsTwo_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("no output") << QStringList{"quantize", "m.gguf", "--preset", "q8_0"} << "missing -o OUT.knot";
        QTest::newRow("unknown preset") << QStringList{"quantize", "m.gguf", "-o", "x.knot", "--preset", "turbo"}
                                        << "unknown preset 'turbo'";
        QTest::newRow("bits 3") << QStringList{"quantize", "m.gguf", "-o", "x.knot", "--preset", "paper", "--bits", "3"}
                                << "option '--bits': 3 is not 2, 4 or 8";
        QTest::newRow("bits 9") << QStringList{"quantize", "m.gguf", "-o", "x.knot", "--preset", "paper", "--bits", "9"}
                                << "option '--bits': 9 is out of range [2, 8]";
        QTest::newRow("energy 0") << QStringList{"quantize", "m.gguf", "-o",       "x.knot",
                                                 "--preset", "paper",  "--energy", "0"}
                                  << "option '--energy': 0 is out of range";
        QTest::newRow("shard 2/2") << QStringList{"quantize", "m.gguf", "-o",      "x.knot",
                                                  "--preset", "q8_0",   "--shard", "2/2"}
                                   << "option '--shard': '2/2' is not i/N with 0 <= i < N";
        QTest::newRow("shard text") << QStringList{"quantize", "m.gguf", "-o",      "x.knot",
                                                   "--preset", "q8_0",   "--shard", "a/b"}
                                    << "'a/b' is not i/N";
        QTest::newRow("unknown option") << QStringList{"quantize", "--frob", "m.gguf"} << "unknown option '--frob'";
        QTest::newRow("missing model") << QStringList{"quantize", "/nonexistent/m.gguf", "-o", "x.knot", "--preset",
                                                      "q8_0"}
                                       << "gkq quantize: /nonexistent/m.gguf: no such file or directory";
        QTest::newRow("verify missing") << QStringList{"verify", "/nonexistent/a.knot"}
                                        << "gkq verify: /nonexistent/a.knot: cannot open";
        QTest::newRow("verify no file") << QStringList{"verify"} << "missing IN.knot";
        QTest::newRow("reconstruct no output")
            << QStringList{"reconstruct", "a.knot"} << "missing -o OUT.{safetensors,gguf,bin}";
        QTest::newRow("reconstruct extension")
            << QStringList{"reconstruct", "a.knot", "-o", "m.onnx"} << "m.onnx: unknown output format";
        QTest::newRow("merge no shards") << QStringList{"merge", "-o", "x.knot"} << "missing SHARD";
        QTest::newRow("merge no output") << QStringList{"merge", "a.knot"} << "missing -o OUT.knot";
    }
    void badUsageExitsTwo() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        Run r = run_gkq(args);
        QCOMPARE(r.code, 2);
        VERIFY_CONTAINS(r.err, message.toStdString());
        QVERIFY(r.out.empty());
    }

    void quantizeJsonVerifyReconstruct() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), knot = dir.file("t.knot");
        Run r =
            run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "paper", "--rank", "2", "--bits", "8", "--json"});
        QCOMPARE(r.code, 0);
        auto j = nlohmann::json::parse(r.out);
        QCOMPARE(j["command"].get<std::string>(), std::string("quantize --preset paper --rank 2 --bits 8"));
        QCOMPARE(j["tensors"].size(), size_t(21));
        uint64_t sum = 0, raw = 0, stored = 0;
        size_t deflated = 0;
        for (const auto& t : j["tensors"]) {
            sum += t["bytes_on_disk"].get<uint64_t>();
            raw += t["payload_bytes"].get<uint64_t>();
            stored += t["stored_bytes"].get<uint64_t>();
            deflated += t["compression"] == "zlib" ? 1 : 0;
            QCOMPARE(t["bytes_on_disk"].get<uint64_t>(),
                     t["record_bytes"].get<uint64_t>() + t["index_entry_bytes"].get<uint64_t>());
            if (t["shape"].size() == 1) {
                QCOMPARE(t["method"].get<std::string>(), std::string("f32"));
                QCOMPARE(t["rel_error"].get<double>(), 0.0);
                QVERIFY(t["energy_kept"].is_null());
            }
            if (t["role"] == "attn_q") {
                QCOMPARE(t["method"].get<std::string>(), std::string("lowrank"));
                QCOMPARE(t["rank"].get<int>(), 2);
                QCOMPARE(t["factor_bits"].get<int>(), 8);
                QVERIFY(t["energy_kept"].get<double>() > 0.0 && t["energy_kept"].get<double>() < 1.0);
            }
        }
        const auto& tot = j["totals"];
        QCOMPARE(tot["file_bytes"].get<uint64_t>(), uint64_t(fs::file_size(knot)));
        QCOMPARE(sum + tot["container_bytes"].get<uint64_t>(), tot["file_bytes"].get<uint64_t>());
        QCOMPARE(tot["bits_per_weight"].get<double>(),
                 8.0 * tot["file_bytes"].get<double>() / tot["n_params"].get<double>());
        // The entropy coding's saving: the records' payloads raw and as stored, and the file with them all raw.
        const auto& ec = tot["entropy_coding"];
        QCOMPARE(ec["n_deflated"].get<size_t>(), deflated);
        QCOMPARE(ec["raw_payload_bytes"].get<uint64_t>(), raw);
        QCOMPARE(ec["stored_payload_bytes"].get<uint64_t>(), stored);
        QCOMPARE(ec["saved_bytes"].get<uint64_t>(), raw - stored);
        QVERIFY(stored <= raw);
        QCOMPARE(ec["bits_per_weight_uncompressed"].get<double>(),
                 8.0 * static_cast<double>(tot["file_bytes"].get<uint64_t>() + raw - stored) /
                     tot["n_params"].get<double>());
        QCOMPARE(ec["bits_per_weight"].get<double>(), tot["bits_per_weight"].get<double>());

        Run v = run_gkq({"verify", q(knot)});
        QCOMPARE(v.code, 0);
        VERIFY_CONTAINS(v.out, "records  21, 21 ok:");
        VERIFY_CONTAINS(v.out, "result   ok");
        QVERIFY(v.err.empty());
        Run vj = run_gkq({"verify", "--json", q(knot)});
        QCOMPARE(vj.code, 0);
        auto jv = nlohmann::json::parse(vj.out);
        QCOMPARE(jv["ok"].get<bool>(), true);
        QCOMPARE(jv["records_by_method"]["f32"].get<int>(), 2 * 2 + 1);

        for (const char* ext : {".safetensors", ".gguf", ".bin"}) {
            const std::string out = dir.file(std::string("re") + ext);
            Run rc = run_gkq({"reconstruct", q(knot), "-o", q(out)});
            QCOMPARE(rc.code, 0);
            VERIFY_CONTAINS(rc.out, "wrote " + out);
            auto m = ModelFile::open(out);
            QVERIFY2(m.is_ok(), m.message().c_str());
            QCOMPARE(m->tensors().size(), size_t(21));
        }
    }

    void tableOutput() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), knot = dir.file("t.knot");
        Run r = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q4_0"});
        QCOMPARE(r.code, 0);
        VERIFY_CONTAINS(r.out, "command  quantize --preset q4_0\n");
        VERIFY_CONTAINS(r.out, "\nname ");
        VERIFY_CONTAINS(r.out,
                        "  method            rank   bits         bytes      bpw     rel_err     max_abs    energy\n");
        VERIFY_CONTAINS(r.out, "\ntotal    21 tensors, ");
        std::string size = std::to_string(fs::file_size(knot));
        for (int i = static_cast<int>(size.size()) - 3; i > 0; i -= 3) size.insert(static_cast<size_t>(i), ",");
        VERIFY_CONTAINS(r.out, "; knot " + size + " bytes (");
        VERIFY_CONTAINS(r.out, "\nzlib     ");
        VERIFY_CONTAINS(r.out, " bits per weight uncompressed, ");
        // + the f32 vectors line, + the overhead line, + the zlib line
        QCOMPARE(count_lines(r.out), size_t(3 + 2 + 21 + 1 + 5));
        QVERIFY(r.err.empty());  // no progress bar when stderr is not a terminal
    }

    // ffn_down of a model with hidden_dim 80 has rows of 80: not whole q4_0 blocks, so it is stored f16. The
    // report flags each such tensor with its cost, and says how much of the total bits per weight is overhead.
    void fallbacksAreFlaggedWithTheirCost() {
        test::TempDir dir;
        ModelConfig c = test::tiny_config(true);
        c.hidden_dim = 80;
        auto m = test::make_tiny_model(c, 3);
        const std::string model = dir.file("odd.gguf"), knot = dir.file("o.knot");
        QVERIFY(write_gguf(model, m.config, m.tensors, test::tiny_vocabulary()));
        Run t = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q4_0"});
        QCOMPARE(t.code, 0);
        VERIFY_CONTAINS(t.out,
                        "fallback: blk.0.ffn_down.weight: row length 80 is not a multiple of 32: stored f16 "
                        "instead of q4_0 (");
        VERIFY_CONTAINS(t.out, "fallback: blk.1.ffn_down.weight: ");
        VERIFY_CONTAINS(t.out, "f32:      5 tensors of fewer than 2 dimensions (norms) are stored f32: ");
        VERIFY_CONTAINS(t.out, " bits per weight: ");
        VERIFY_CONTAINS(t.out, " fallbacks (2 tensors), ");
        Run r = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q4_0", "--json"});
        QCOMPARE(r.code, 0);
        auto j = nlohmann::json::parse(r.out);
        uint64_t fallback_bytes = 0, vector_bytes = 0;
        int64_t fallback_params = 0;
        for (const auto& x : j["tensors"]) {
            const bool flagged = x["stored_as_fallback"].get<bool>();
            QCOMPARE(flagged, x["role"] == "ffn_down");
            if (flagged) {
                QCOMPARE(x["method"].get<std::string>(), std::string("f16"));
                fallback_bytes += x["bytes_on_disk"].get<uint64_t>();
                fallback_params += x["n_elements"].get<int64_t>();
            }
            if (x["shape"].size() == 1) vector_bytes += x["bytes_on_disk"].get<uint64_t>();
        }
        const auto& o = j["totals"]["overhead"];
        const double n = j["totals"]["n_params"].get<double>();
        QCOMPARE(o["fallback"]["n_tensors"].get<int>(), 2);
        QCOMPARE(o["fallback"]["bytes"].get<uint64_t>(), fallback_bytes);
        QCOMPARE(o["fallback"]["bits_per_weight"].get<double>(),
                 8.0 * static_cast<double>(fallback_bytes) / static_cast<double>(fallback_params));
        QCOMPARE(o["fallback"]["share_of_total_bits_per_weight"].get<double>(),
                 8.0 * static_cast<double>(fallback_bytes) / n);
        QCOMPARE(o["vectors_f32"]["n_tensors"].get<int>(), 5);
        QCOMPARE(o["vectors_f32"]["bytes"].get<uint64_t>(), vector_bytes);
        QCOMPARE(o["container"]["bytes"].get<uint64_t>(), j["totals"]["container_bytes"].get<uint64_t>());
    }

    void corruptKnotIsNamed() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), knot = dir.file("c.knot");
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q8_0"}).code, 0);
        KnotEntry e;
        {
            auto k = KnotFile::open(knot);
            QVERIFY(k.is_ok());
            e = k->entries()[7];
        }
        auto bytes = test::read_file(knot);
        bytes[e.record_offset + e.record_bytes - 20] ^= 1;
        test::write_file(knot, bytes);
        Run v = run_gkq({"verify", q(knot)});
        QCOMPARE(v.code, 2);
        QCOMPARE(count_lines(v.err), size_t(1));
        VERIFY_CONTAINS(v.err, "gkq verify: " + knot + ": record 7 '" + e.name + "'");
        VERIFY_CONTAINS(v.out, "result   1 bad records");
        Run rc = run_gkq({"reconstruct", q(knot), "-o", q(dir.file("x.gguf"))});
        QCOMPARE(rc.code, 2);
        QCOMPARE(count_lines(rc.err), size_t(1));
        VERIFY_CONTAINS(rc.err, knot + ": record 7 '" + e.name + "'");
        QVERIFY(!fs::exists(dir.file("x.gguf")));
        // cut in half: not a knot any more
        bytes.resize(bytes.size() / 2);
        test::write_file(knot, bytes);
        Run t = run_gkq({"verify", q(knot)});
        QCOMPARE(t.code, 2);
        QCOMPARE(count_lines(t.err), size_t(1));
        VERIFY_CONTAINS(t.err, "gkq verify: " + knot + ": no knot trailer");
    }

    // Every row of the override table is a flag of `gkq quantize`, listed by --help with its value name, and
    // reaches the recorded command line as it was given.
    void everyOverrideFieldIsAFlag() {
        Run h = run_gkq({"quantize", "--help"});
        QCOMPARE(h.code, 0);
        test::TempDir dir;
        const std::string model = tiny_gguf(dir);
        for (const OverrideField& f : override_fields()) {
            const std::string flag = "--" + std::string(f.flag);
            VERIFY_CONTAINS(h.out, flag + " " + std::string(f.metavar));
            VERIFY_CONTAINS(h.out, std::string(f.help));
            const std::string knot = dir.file(std::string(f.flag) + ".knot");
            Run r = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "lowrank-q4", "--threads", "1", q(flag),
                             q(std::string(f.example)), "--json"});
            QVERIFY2(r.code == 0, r.err.c_str());
            QCOMPARE(nlohmann::json::parse(r.out)["command"].get<std::string>(),
                     "quantize --preset lowrank-q4 " + flag + " " + std::string(f.example));
        }
    }

    // The command line a knot records re-runs: `gkq quantize MODEL -o OUT` + its words after "quantize" writes the
    // same knot byte for byte (--residual, recorded by the workbench, included).
    void recordedCommandReRuns() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), first = dir.file("first.knot"), again = dir.file("again.knot");
        Run r = run_gkq({"quantize",  q(model),      "-o",
                         q(first),    "--preset",    "svd-energy",
                         "--threads", "1",           "--rank",
                         "3",         "--bits",      "4",
                         "--delta",   "on",          "--sigma-quantized",
                         "on",        "--residual",  "q8_0",
                         "--target",  "quant-error", "--fold-tolerance",
                         "0.05",      "--json"});
        QVERIFY2(r.code == 0, r.err.c_str());
        const std::string command = nlohmann::json::parse(r.out)["command"].get<std::string>();
        QCOMPARE(command, std::string("quantize --preset svd-energy --rank 3 --bits 4 --delta on --fold-tolerance "
                                      "0.05 --sigma-quantized on --residual q8_0 --target quant-error"));
        QStringList words = q(command).split(QLatin1Char(' '), Qt::SkipEmptyParts);
        QCOMPARE(words.takeFirst(), QStringLiteral("quantize"));
        Run re = run_gkq(QStringList{"quantize", q(model), "-o", q(again), "--threads", "2"} + words);
        QVERIFY2(re.code == 0, re.err.c_str());
        QVERIFY(test::read_file(again) == test::read_file(first));
    }

    void shardMergeEqualsOneRun() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), whole = dir.file("whole.knot");
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(whole), "--preset", "paper", "--threads", "1"}).code, 0);
        QStringList shards;
        for (int i = 0; i < 3; ++i) {
            const std::string s = dir.file("s" + std::to_string(i) + ".knot");
            Run r = run_gkq(
                {"quantize", q(model), "-o", q(s), "--preset", "paper", "--shard", QString("%1/3").arg(i), "--json"});
            QCOMPARE(r.code, 0);
            QCOMPARE(nlohmann::json::parse(r.out)["shard"]["count"].get<int>(), 3);
            shards.prepend(q(s));
        }
        const std::string merged = dir.file("merged.knot");
        Run m = run_gkq(QStringList{"merge", "-o", q(merged)} + shards);
        QCOMPARE(m.code, 0);
        VERIFY_CONTAINS(m.out, "wrote " + merged + ": 21 records from 3 shards");
        QVERIFY(test::read_file(merged) == test::read_file(whole));
        Run bad = run_gkq({"merge", "-o", q(dir.file("bad.knot")), shards[0], shards[1]});
        QCOMPARE(bad.code, 2);
        VERIFY_CONTAINS(bad.err, "gkq merge: merge: shard 0/3 is missing (2 of 3 shards given)");
        QVERIFY(!fs::exists(dir.file("bad.knot")));
        Run shard_alone = run_gkq({"reconstruct", shards[0], "-o", q(dir.file("x.bin"))});
        QCOMPARE(shard_alone.code, 2);
        VERIFY_CONTAINS(shard_alone.err, "merge the shards first (gkq merge)");
    }

    void sharedCheckpoint_data() {
        QTest::addColumn<QString>("preset");
        for (const char* p : {"paper", "q8_0", "q4_0", "lowrank-q4", "svd-energy"}) QTest::newRow(p) << p;
    }
    void sharedCheckpoint() {
        QFETCH(QString, preset);
        const std::string rel = "llama2xs-279K/model.bin";
        auto model = test::shared_model(rel);
        if (!model) QSKIP(test::shared_models_skip_reason(rel).c_str());
        const std::string tok = *test::shared_model("llama2xs-279K/tok512.bin");
        test::TempDir dir;
        const std::string knot = dir.file("m.knot");
        Run r = run_gkq({"quantize", q(*model), "-o", q(knot), "--preset", preset, "--tokenizer", q(tok), "--json"});
        QCOMPARE(r.code, 0);
        auto j = nlohmann::json::parse(r.out);
        QCOMPARE(j["tensors"].size(), size_t(47));
        QCOMPARE(j["totals"]["n_params"].get<int64_t>(), int64_t(279232));
        QCOMPARE(run_gkq({"verify", q(knot)}).code, 0);
        const std::string out = dir.file("re.bin");
        QCOMPARE(run_gkq({"reconstruct", q(knot), "-o", q(out)}).code, 0);
        auto m = ModelFile::open(out);
        QVERIFY2(m.is_ok(), m.message().c_str());
        QCOMPARE(m->n_params(), int64_t(279232));
        QCOMPARE(fs::file_size(out), fs::file_size(*model));  // same llama2.c layout, same size
        auto k = KnotFile::open(knot);
        QVERIFY(k.is_ok());
        QCOMPARE(k->header().vocab.tokens.size(), size_t(512));
    }

    // Without --tokenizer: the tok512.bin beside the model is found and stored, as generate would find it.
    void sharedCheckpointFindsItsTokenizer() {
        const std::string rel = "llama2xs-279K/model.bin";
        auto model = test::shared_model(rel);
        if (!model) QSKIP(test::shared_models_skip_reason(rel).c_str());
        test::TempDir dir;
        const std::string knot = dir.file("m.knot");
        QCOMPARE(run_gkq({"quantize", q(*model), "-o", q(knot), "--preset", "q8_0"}).code, 0);
        auto k = KnotFile::open(knot);
        QVERIFY(k.is_ok());
        QCOMPARE(k->header().vocab.tokens.size(), size_t(512));
    }

    // ---- a knot holds everything it needs ------------------------------------------------------------------------

    void knotCarriesTheTokenizerBesideTheModel() {
        test::TempDir dir;
        const std::string model = tiny_llama2c(dir), knot = dir.file("t.knot");
        write_llama2c_tokenizer(dir.file("tok40.bin"), test::tiny_vocabulary());
        Run r = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q8_0"});
        QCOMPARE(r.code, 0);
        {
            auto k = KnotFile::open(knot);
            QVERIFY2(k.is_ok(), k.message().c_str());
            QCOMPARE(k->header().vocab.model, std::string("llama2.c"));
            QCOMPARE(k->header().vocab.tokens.size(), size_t(40));
            QCOMPARE(k->header().vocab.tokens[5], std::string("b"));
        }
        // The knot alone generates: nothing beside it to find.
        fs::remove(dir.file("tok40.bin"));
        fs::rename(knot, dir.file("alone.knot"));
        Run g = run_gkq({"generate", q(dir.file("alone.knot")), "-n", "4", "--temp", "0"});
        QVERIFY2(g.code == 0, g.err.c_str());

        // No tokenizer anywhere: refused with the reason, nothing written; --no-tokenizer writes one without.
        Run none = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q8_0"});
        QCOMPARE(none.code, 2);
        VERIFY_CONTAINS(none.err, "gkq quantize: " + model +
                                      " has no vocabulary and no tokenizer.bin or tok*.bin is next to it: pass "
                                      "--tokenizer FILE, or --no-tokenizer");
        QVERIFY(!fs::exists(knot));
        Run without = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q8_0", "--no-tokenizer"});
        QCOMPARE(without.code, 0);
        auto k = KnotFile::open(knot);
        QVERIFY(k.is_ok());
        QVERIFY(k->header().vocab.empty());
        Run both = run_gkq({"quantize", q(model), "-o", q(knot), "--no-tokenizer", "--tokenizer", "x.bin"});
        QCOMPARE(both.code, 2);
        VERIFY_CONTAINS(both.err, "--tokenizer and --no-tokenizer exclude each other");
    }

    void inspectDescribesAKnot() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), knot = dir.file("t.knot");
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "paper", "--rank", "2"}).code, 0);
        Run r = run_gkq({"inspect", "--json", q(knot)});
        QVERIFY2(r.code == 0, r.err.c_str());
        QVERIFY(r.err.empty());
        auto j = nlohmann::json::parse(r.out);
        QCOMPARE(j["format"].get<std::string>(), std::string("knot"));
        QCOMPARE(j["config"]["dim"].get<int>(), 64);
        QCOMPARE(j["config"]["n_kv_heads"].get<int>(), 2);
        QCOMPARE(j["vocabulary"]["n_tokens"].get<int>(), 40);
        QCOMPARE(j["vocabulary"]["model"].get<std::string>(), std::string("llama"));
        QCOMPARE(j["records"].size(), size_t(21));
        QCOMPARE(j["file_bytes"].get<uint64_t>(), uint64_t(fs::file_size(knot)));
        QVERIFY(j["warnings"].empty());
        auto k = KnotFile::open(knot);
        QVERIFY(k.is_ok());
        for (size_t i = 0; i < k->n_records(); ++i) {
            const KnotEntry& e = k->entries()[i];
            const auto& rec = j["records"][i];
            QCOMPARE(rec["name"].get<std::string>(), e.name);
            QCOMPARE(rec["method"].get<std::string>(), std::string(method_name(e.method)));
            QCOMPARE(rec["rank"].get<int>(), e.rank);
            QCOMPARE(rec["record_bytes"].get<uint64_t>(), e.record_bytes);
            QCOMPARE(rec["bits_per_weight"].get<double>(),
                     8.0 * static_cast<double>(e.record_bytes) / static_cast<double>(e.n_elements()));
            if (e.role == TensorRole::AttnQ) {
                QCOMPARE(rec["method"].get<std::string>(), std::string("lowrank"));
                QCOMPARE(rec["rank"].get<int>(), 2);
            }
        }
        Run t = run_gkq({"inspect", q(knot)});
        QCOMPARE(t.code, 0);
        VERIFY_CONTAINS(t.out, "format   knot v1");
        VERIFY_CONTAINS(t.out, "vocab    40 tokens (llama)");
        VERIFY_CONTAINS(t.out, "\ntotal    21 records, ");
        VERIFY_CONTAINS(t.out, "blk.0.attn_q.weight");
    }

    // ---- refuse what cannot run, early ---------------------------------------------------------------------------

    void modelsThatCannotRunAreRefused_data() {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("message");
        QTest::newRow("gguf head_count 0") << "heads0"
                                           << "config has a non-positive size (dim 64, hidden_dim 96, "
                                              "n_layers 2, n_heads 0, n_kv_heads 2";
        QTest::newRow("gguf head_count_kv 3 of 8") << "kv3"
                                                   << "n_heads 8 is not a multiple of n_kv_heads 3";
        QTest::newRow("gguf block_count 1000") << "blocks1000"
                                               << "no tensor blk.2.attn_norm.weight (role attn_norm)";
        QTest::newRow("gguf embedding_length")
            << "dim32"
            << "tensor token_embd.weight has shape 40 x 64, the config needs 40 x 32";
        QTest::newRow("gguf missing attn_q") << "gguf-no-q"
                                             << "no tensor blk.0.attn_q.weight (role attn_q)";
        QTest::newRow("safetensors missing q_proj") << "st-no-q"
                                                    << "no tensor blk.0.attn_q.weight (role attn_q)";
        QTest::newRow("lone 4x4 tensor") << "lone"
                                         << "config has a non-positive size";
    }
    void modelsThatCannotRunAreRefused() {
        QFETCH(QString, kind);
        QFETCH(QString, message);
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 5);
        ModelConfig c = m.config;
        std::vector<WriteTensor> tensors = m.tensors;
        std::string path = dir.file("m.gguf");
        std::vector<float> lone(16, 0.5f);
        if (kind == "heads0") c.n_heads = 0;
        if (kind == "kv3") c.n_heads = 8, c.n_kv_heads = 3;
        if (kind == "blocks1000") c.n_layers = 1000;
        if (kind == "dim32") c.dim = 32;
        if (kind == "gguf-no-q" || kind == "st-no-q")
            std::erase_if(tensors, [](const WriteTensor& t) { return t.role == TensorRole::AttnQ && t.layer == 0; });
        if (kind == "st-no-q" || kind == "lone") {
            path = dir.file("model.safetensors");
            if (kind == "lone")
                tensors = {WriteTensor{{"w", TensorRole::Other, -1, {4, 4}, DType::F32}, lone.data(), {}}};
            QVERIFY(write_safetensors(path, c, tensors));
            if (kind == "lone") fs::remove(dir.file("config.json"));
            write_llama2c_tokenizer(dir.file("tok40.bin"), test::tiny_vocabulary());
        } else {
            QVERIFY(write_gguf(path, c, tensors, test::tiny_vocabulary()));
        }
        const std::string knot = dir.file("x.knot");
        Run r = run_gkq({"quantize", q(path), "-o", q(knot), "--preset", "q8_0"});
        QCOMPARE(r.code, 2);
        VERIFY_CONTAINS(r.err, "gkq quantize: " + path + ": " + message.toStdString());
        QVERIFY(!fs::exists(knot));
        // inspect still lists the file, and says what keeps it from running
        Run i = run_gkq({"inspect", q(path)});
        QCOMPARE(i.code, 0);
        VERIFY_CONTAINS(i.err, "gkq inspect: warning: " + path + ": " + message.toStdString());
        VERIFY_CONTAINS(i.err, "the model cannot run");
        VERIFY_CONTAINS(i.out, "\ntotal    ");
        // with a tokenizer that loads (generate reads it before the weights): the model's problem is what stops it
        QStringList gen = {"generate", q(path), "-n", "2"};
        if (path != dir.file("m.gguf")) gen << "--tokenizer" << q(dir.file("tok40.bin"));
        Run g = run_gkq(gen);
        QCOMPARE(g.code, 2);
        VERIFY_CONTAINS(g.err, path + ": " + message.toStdString());
    }

    // A record that decodes to inf or nan is bad even with intact bytes: verify no longer says ok.
    void verifyFindsNonFiniteValues() {
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 8);
        for (size_t i = 0; i < m.tensors.size(); ++i)
            if (m.tensors[i].role == TensorRole::AttnNorm && m.tensors[i].layer == 0)
                m.storage[i][3] = std::numeric_limits<float>::infinity();
        const std::string model = dir.file("inf.gguf"), knot = dir.file("inf.knot");
        QVERIFY(write_gguf(model, m.config, m.tensors, test::tiny_vocabulary()));
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q8_0"}).code, 0);
        Run v = run_gkq({"verify", q(knot)});
        QCOMPARE(v.code, 2);
        VERIFY_CONTAINS(v.err, "'blk.0.attn_norm.weight': decodes to inf at element 3");
        VERIFY_CONTAINS(v.out, "result   1 bad records");
    }

    void requantizingNeedsToBeAsked() {
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 8);
        WriteOptions o;
        o.dtype = DType::Q8_0;
        const std::string model = dir.file("q8.gguf"), knot = dir.file("x.knot");
        QVERIFY(write_gguf(model, m.config, m.tensors, test::tiny_vocabulary(), o));
        Run r = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q4_0"});
        QCOMPARE(r.code, 2);
        VERIFY_CONTAINS(r.err, "gkq quantize: " + model +
                                   ": tensor 'token_embd.weight' is already quantized (Q8_0): encoding it again adds "
                                   "a second rounding error to the first; pass --allow-requantize to do it anyway");
        QVERIFY(!fs::exists(knot));
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q4_0", "--allow-requantize"}).code, 0);
    }

    void tuningIsCheckedAgainstTheModel() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), knot = dir.file("t.knot");
        Run big = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "paper", "--rank", "999"});
        QCOMPARE(big.code, 2);
        VERIFY_CONTAINS(big.err, "gkq quantize: " + model +
                                     ": tensor 'blk.0.attn_q.weight' (64 x 64): rank 999 exceeds its smallest "
                                     "dimension 64; pass --force to cap it there");
        QVERIFY(!fs::exists(knot));
        Run forced = run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "paper", "--rank", "999", "--force"});
        QVERIFY2(forced.code == 0, forced.err.c_str());

        // An rknot of this model tunes it; applied to another model it is refused, unless --force.
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "paper"}).code, 0);
        const std::string rk = dir.file("t.rknot");
        Run enc = run_gkq({"rknot", "encode", "--knot", q(knot), "-o", q(rk)});
        QVERIFY2(enc.code == 0, enc.err.c_str());
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(dir.file("same.knot")), "--tuning", q(rk)}).code, 0);
        ModelConfig wider = test::tiny_config(false);
        wider.hidden_dim = 128;
        auto other = test::make_tiny_model(wider, 9);
        const std::string other_path = dir.file("other.gguf");
        QVERIFY(write_gguf(other_path, other.config, other.tensors, test::tiny_vocabulary()));
        Run wrong = run_gkq({"quantize", q(other_path), "-o", q(dir.file("o.knot")), "--tuning", q(rk)});
        QCOMPARE(wrong.code, 2);
        VERIFY_CONTAINS(wrong.err, "gkq quantize: " + rk + ": measured.n_params ");
        VERIFY_CONTAINS(wrong.err, " but " + other_path + " has ");
        VERIFY_CONTAINS(wrong.err, "(the rknot was made for 't'; --force applies it anyway)");
        QVERIFY(!fs::exists(dir.file("o.knot")));
        Run applied = run_gkq({"quantize", q(other_path), "-o", q(dir.file("o.knot")), "--tuning", q(rk), "--force"});
        QVERIFY2(applied.code == 0, applied.err.c_str());
    }

    void verifyRefusesAKnotThatCannotRun() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir), good = dir.file("good.knot"), bad = dir.file("bad.knot");
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(good), "--preset", "q8_0"}).code, 0);
        rewrite_knot(good, bad, [](KnotHeader& h) { h.config.n_heads = 8, h.config.n_kv_heads = 3; });
        Run v = run_gkq({"verify", q(bad)});
        QCOMPARE(v.code, 2);
        VERIFY_CONTAINS(v.err, "gkq verify: " + bad + ": model: n_heads 8 is not a multiple of n_kv_heads 3");
        VERIFY_CONTAINS(v.out, "records  21, 21 ok:");
        VERIFY_CONTAINS(v.out, "result   the model cannot run (1 problem)");
        rewrite_knot(good, bad, [](KnotHeader& h) { h.config.n_layers = 1000; });
        Run v2 = run_gkq({"verify", "--json", q(bad)});
        QCOMPARE(v2.code, 2);
        QCOMPARE(nlohmann::json::parse(v2.out)["ok"].get<bool>(), false);
        VERIFY_CONTAINS(v2.err, bad + ": model: no tensor blk.2.attn_norm.weight (role attn_norm)");
        Run i = run_gkq({"inspect", q(bad)});
        QCOMPARE(i.code, 0);
        VERIFY_CONTAINS(i.err, "gkq inspect: warning: " + bad + ": no tensor blk.2.attn_norm.weight");
        Run g = run_gkq({"generate", q(bad), "-n", "2"});
        QCOMPARE(g.code, 2);
        VERIFY_CONTAINS(g.err, bad + ": no tensor blk.2.attn_norm.weight (role attn_norm)");
        Run rc = run_gkq({"reconstruct", q(bad), "-o", q(dir.file("re.gguf"))});
        QCOMPARE(rc.code, 2);
        VERIFY_CONTAINS(rc.err, bad + ": no tensor blk.2.attn_norm.weight (role attn_norm)");
        QVERIFY(!fs::exists(dir.file("re.gguf")));
        QCOMPARE(run_gkq({"verify", q(good)}).code, 0);
    }
};

QTEST_GUILESS_MAIN(TestCliQuantize)
#include "test_cli_quantize.moc"
