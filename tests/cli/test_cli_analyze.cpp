// `gkq analyze` through the real binary: options, exit codes, the per-tensor table and its JSON.
#include "cli_run.h"
#include "test_support.h"

#include <QtTest>
#include <cmath>
#include <nlohmann/json.hpp>

using namespace gkq;

class TestCliAnalyze : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void helpAndBadOptions() {
        auto h = test::run_gkq_as({"analyze", "--help"});
        QCOMPARE(h.code, 0);
        QVERIFY(h.out.startsWith("usage: gkq analyze"));
        for (const char* opt : {"--topk", "--full", "--json", "--csv", "-o"}) QVERIFY2(h.out.contains(opt), opt);
        auto bad = test::run_gkq_as({"analyze", "--no-such-option"});
        QCOMPARE(bad.code, 2);
        QVERIFY(bad.err.contains("unknown option '--no-such-option'"));
        auto missing = test::run_gkq_as({"analyze", "/nonexistent/model.gguf"});
        QCOMPARE(missing.code, 2);
        QVERIFY(missing.err.contains("/nonexistent/model.gguf"));
    }

    void sharedCheckpointJsonAndTable() {
        auto path = test::shared_model("llama2xs-279K/model.bin");
        if (!path) QSKIP(test::shared_models_skip_reason("llama2xs-279K/model.bin").c_str());
        auto r = test::run_gkq_as<std::string>({"analyze", "--json", QString::fromStdString(*path)});
        QCOMPARE(r.code, 0);
        auto j = nlohmann::json::parse(r.out);
        // 36 matrices: token_embd + 5 layers x 7 projections (the classifier is shared)
        QCOMPARE(j["tensors"].size(), size_t(36));
        for (const auto& t : j["tensors"]) {
            const double sr = t["stable_rank"].get<double>();
            QVERIFY(std::isfinite(sr) && sr >= 1.0);
            const double e3 = t["relative_error_at_rank"]["3"].get<double>();
            QVERIFY(e3 > 0.0 && e3 < 1.0);
            QVERIFY(t["relative_error_at_rank"]["1"].get<double>() >= e3);
            QVERIFY(t.contains("singular_values"));
            const auto& sv = t["singular_values"];
            QCOMPARE(sv.size(), size_t(std::min(t["shape"][0].get<int>(), t["shape"][1].get<int>())));
            for (size_t i = 1; i < sv.size(); ++i) QVERIFY(sv[i - 1].get<double>() >= sv[i].get<double>());
        }
        auto table = test::run_gkq_as({"analyze", QString::fromStdString(*path)});
        QCOMPARE(table.code, 0);
        QVERIFY(table.out.contains("blk.0.attn_q.weight"));
        QVERIFY(table.out.contains(QRegularExpression("attn_q\\s+5 matrices\\s+mean stable rank")));
        QVERIFY(table.out.contains(QRegularExpression("ffn_down\\s+5 matrices\\s+mean stable rank")));
    }
};

QTEST_GUILESS_MAIN(TestCliAnalyze)
#include "test_cli_analyze.moc"
