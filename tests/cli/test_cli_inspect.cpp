// The real gkq binary: help, option errors, exit codes, and `inspect` (table and JSON) on real files.
#include "cli_run.h"
#include "gkq/model_writer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QProcess>
#include <QtTest>
#include <nlohmann/json.hpp>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 60000);
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
};

QTEST_GUILESS_MAIN(TestCliInspect)
#include "test_cli_inspect.moc"
