// The real gkq binary: help, option errors, exit codes, and `inspect` (table and JSON) on real files.
#include "child_run.h"
#include "cli_run.h"
#include "gkq/model_writer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QProcess>
#include <QtTest>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 60000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// The non-empty lines of a program's stderr.
QStringList lines(const QString& err) {
    return err.split('\n', Qt::SkipEmptyParts);
}
}  // namespace

class TestCliInspect : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void helpListsCommandsAndExitsZero() {
        Run r = run_gkq({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("inspect"));
        Run ri = run_gkq({"inspect", "--help"});
        QCOMPARE(ri.code, 0);
        QVERIFY(ri.out.startsWith("usage: gkq inspect [FILE] [--json]"));
        QVERIFY(ri.out.contains("--json"));
    }

    void badUsageExitsTwo_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("no command") << QStringList{} << "";
        QTest::newRow("unknown command") << QStringList{"frobnicate"} << "unknown command 'frobnicate'";
        QTest::newRow("unknown option") << QStringList{"inspect", "--bogus", "x"} << "unknown option '--bogus'";
        QTest::newRow("flag with value") << QStringList{"inspect", "--json=1", "x"} << "takes no value";
        QTest::newRow("extra argument") << QStringList{"inspect", "a", "b"} << "unexpected argument 'b'";
        QTest::newRow("nonexistent file") << QStringList{"inspect", "/nonexistent/model.gguf"}
                                          << "/nonexistent/model.gguf: no such file or directory";
    }
    void badUsageExitsTwo() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        Run r = run_gkq(args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }

    void corruptFileNamesFileAndExitsTwo() {
        test::TempDir dir;
        const std::string path = dir.file("broken.gguf");
        test::Bytes b;
        b.raw("GGUF").u32(3).u64(1).u64(0x7fffffffffffull);  // absurd metadata count
        test::write_file(path, b.vec());
        Run r = run_gkq({"inspect", QString::fromStdString(path)});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QString::fromStdString(path)), qPrintable(r.err));
        QVERIFY(r.out.isEmpty());
    }

    void jsonOfWrittenGguf() {
        test::TempDir dir;
        const std::string path = dir.file("tiny.gguf");
        auto m = test::make_tiny_model(test::tiny_config(false));
        QVERIFY(write_gguf(path, m.config, m.tensors).is_ok());
        Run r = run_gkq({"inspect", "--json", QString::fromStdString(path)});
        QCOMPARE(r.code, 0);
        auto j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["format"].get<std::string>(), std::string("gguf"));
        QCOMPARE(j["config"]["dim"].get<int>(), 64);
        QCOMPARE(j["config"]["n_kv_heads"].get<int>(), 2);
        QCOMPARE(j["config"]["shared_classifier"].get<bool>(), false);
        // 1 embedding + 2 layers x 9 + output norm + output
        QCOMPARE(j["tensors"].size(), size_t(21));
        int64_t n = 0;
        for (const auto& t : m.tensors)
            n += static_cast<int64_t>(t.shape.size() == 1 ? t.shape[0] : t.shape[0] * t.shape[1]);
        QCOMPARE(j["n_params"].get<int64_t>(), n);
        QCOMPARE(j["n_bytes"].get<int64_t>(), 4 * n);
        const auto& q = j["tensors"][2];
        QCOMPARE(q["name"].get<std::string>(), std::string("blk.0.attn_q.weight"));
        QCOMPARE(q["role"].get<std::string>(), std::string("attn_q"));
        QCOMPARE(q["layer"].get<int>(), 0);
        QCOMPARE(q["shape"], nlohmann::json({64, 64}));
        QCOMPARE(q["dtype"].get<std::string>(), std::string("f32"));
        QCOMPARE(q["bytes"].get<int>(), 64 * 64 * 4);
    }

    void sharedCheckpointTableAndJson_data() {
        QTest::addColumn<QString>("rel");
        QTest::addColumn<QList<int>>("config");  // dim hidden layers heads kv vocab ctx
        QTest::addColumn<qint64>("params");
        QTest::newRow("llama2xs") << "llama2xs-279K/model.bin" << QList<int>{64, 192, 5, 8, 4, 512, 256}
                                  << qint64(279232);
        QTest::newRow("babyllama") << "babyllama-tok105/model5000.bin" << QList<int>{128, 352, 5, 8, 4, 105, 256}
                                   << qint64(936448);
    }
    void sharedCheckpointTableAndJson() {
        QFETCH(QString, rel);
        QFETCH(QList<int>, config);
        QFETCH(qint64, params);
        auto path = test::shared_model(rel.toStdString());
        if (!path) QSKIP(test::shared_models_skip_reason(rel.toStdString()).c_str());
        Run r = run_gkq({"inspect", "--json", QString::fromStdString(*path)});
        QCOMPARE(r.code, 0);
        auto j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["format"].get<std::string>(), std::string("llama2c"));
        const char* keys[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "context_length"};
        for (int i = 0; i < 7; ++i) QCOMPARE(j["config"][keys[i]].get<int>(), config[i]);
        QCOMPARE(j["n_params"].get<qint64>(), params);
        QCOMPARE(j["n_bytes"].get<qint64>(), params * 4);
        QCOMPARE(j["tensors"].size(), size_t(1 + 5 * 9 + 1));
        Run t = run_gkq({"inspect", QString::fromStdString(*path)});
        QCOMPARE(t.code, 0);
        QVERIFY(t.out.contains("llama2c v0 (legacy)"));
        const QString grouped = params == 279232 ? QStringLiteral("279,232") : QStringLiteral("936,448");
        QVERIFY2(t.out.contains(grouped + " parameters"), qPrintable(t.out.right(300)));
        QVERIFY(t.out.contains("32.00 bits per weight"));
    }

    // The architecture at the top of --json: a row other than llama's runs (no warning); Mixtral, which llama.cpp runs
    // and gkq cannot, gets one warning line saying so and why, and generate, eval and serve refuse it in one line
    // naming the architecture and what it lacks. Mixtral's GGUF (architecture llama with llama.expert_count) too.
    void architectureReportedAndUnsupportedRefused() {
        test::TempDir dir;
        ModelConfig qc = test::tiny_config(true);
        qc.architecture = "qwen2";
        const auto qm = test::make_tiny_model(qc, 3);
        const std::string qwen = dir.file("qwen2.gguf");
        QVERIFY(write_gguf(qwen, qm.config, qm.tensors).is_ok());
        Run r = run_gkq({"inspect", "--json", q(qwen)});
        QCOMPARE(r.code, 0);
        auto j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["architecture"].get<std::string>(), std::string("qwen2"));
        QVERIFY2(j["warnings"].empty(), qPrintable(r.err));

        const std::filesystem::path moe = std::filesystem::path(dir.path()) / "mixtral";
        std::filesystem::create_directories(moe);
        const auto m = test::make_tiny_model(test::tiny_config(true), 4);
        const ModelConfig& c = m.config;
        WriteOptions o;
        o.config_json = nlohmann::json{
            {"architectures", {"MixtralForCausalLM"}},
            {"model_type", "mixtral"},
            {"hidden_size", c.dim},
            {"intermediate_size", c.hidden_dim},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads},
            {"vocab_size", c.vocab_size},
            {"max_position_embeddings", c.context_length},
            {"tie_word_embeddings", true},
            {"num_local_experts",
             8}}.dump();
        const std::string weights = (moe / "model.safetensors").string();
        QVERIFY(write_safetensors(weights, c, m.tensors, o).is_ok());
        test::write_llama2c_tokenizer((moe / "tokenizer.bin").string(), 40);
        const QString why =
            "architecture 'mixtral' needs a mixture-of-experts feed-forward (a router and experts), "
            "which gkq does not run";
        r = run_gkq({"inspect", "--json", q(weights)});
        QCOMPARE(r.code, 0);
        j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["architecture"].get<std::string>(), std::string("mixtral"));
        QVERIFY(!j["warnings"].empty());
        QVERIFY2(q(j["warnings"][0].get<std::string>()).startsWith("cannot run: " + why), j["warnings"].dump().c_str());
        r = run_gkq({"inspect", q(weights)});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.err.contains("gkq inspect: warning: " + q(weights) + ": cannot run: " + why), qPrintable(r.err));

        const std::string text = dir.file("text.txt");
        test::write_file(text, std::string_view("abc def ghi"));
        for (const QStringList& args : {QStringList{"generate", q(weights), "-p", "abc", "-n", "4"},
                                        QStringList{"eval", "--model", q(weights), "--text", q(text)}}) {
            Run refused = run_gkq(args);
            QCOMPARE(refused.code, 2);
            QVERIFY2(lines(refused.err).size() == 1 && refused.err.contains(q(weights) + ": " + why),
                     qPrintable(refused.err));
        }
        // serve logs its start; the loading failure is one line of it
        Run served = run_gkq({"serve", "--weights", q(weights), "--port", "0", "--threads", "1"});
        QCOMPARE(served.code, 2);
        QVERIFY2(served.err.contains("gkq serve: loading failed: " + q(weights) + ": " + why + " ("),
                 qPrintable(served.err));

        WriteOptions experts;
        experts.extra_metadata.set("llama.expert_count", MetaValue::of_uint(8, MetaType::U32));
        const std::string gguf = dir.file("moe.gguf");
        QVERIFY(write_gguf(gguf, c, m.tensors, {}, experts).is_ok());
        r = run_gkq({"inspect", "--json", q(gguf)});
        QCOMPARE(r.code, 0);
        j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["architecture"].get<std::string>(), std::string("llama"));
        QCOMPARE(j["warnings"][0].get<std::string>(),
                 std::string("cannot run: architecture 'llama' needs a mixture-of-experts feed-forward (8 experts), "
                             "which gkq does not run"));
    }
};

QTEST_GUILESS_MAIN(TestCliInspect)
#include "test_cli_inspect.moc"
