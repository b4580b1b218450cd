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
    return test::write_tiny_gguf(dir.file("tiny.gguf"), false);
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
        uint64_t sum = 0;
        for (const auto& t : j["tensors"]) {
            sum += t["bytes_on_disk"].get<uint64_t>();
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
        QCOMPARE(count_lines(r.out), size_t(3 + 2 + 21 + 3));
        QVERIFY(r.err.empty());  // no progress bar when stderr is not a terminal
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
};

QTEST_GUILESS_MAIN(TestCliQuantize)
#include "test_cli_quantize.moc"
