// `gkq analyze` through the real binary: options, exit codes, the per-tensor table and its JSON.
#include "cli_run.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QDateTime>
#include <QFile>
#include <QFileInfo>
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
        for (const char* opt : {"--topk", "--full", "--json", "--csv", "-o", "--no-cache"})
            QVERIFY2(h.out.contains(opt), opt);
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

    // The spectra cache: the second run with the same options reads it (and says so on stderr), with the same JSON
    // but for "from_cache" and the timings; --no-cache computes; other options, or a touched model, compute again.
    void secondRunReadsTheCache() {
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("m.gguf"));
        const QString m = QString::fromStdString(model);
        const QString cache = m + ".gkq-spectra";
        auto strip = [](nlohmann::json j) {
            j.erase("seconds");
            j.erase("from_cache");
            for (auto& t : j["tensors"]) t.erase("seconds");
            return j;
        };
        auto first = test::run_gkq_as<std::string>({"analyze", "--json", m});
        QCOMPARE(first.code, 0);
        QVERIFY2(first.err.find("read from the cache") == std::string::npos, first.err.c_str());
        QVERIFY(QFileInfo::exists(cache));
        auto second = test::run_gkq_as<std::string>({"analyze", "--json", m});
        QCOMPARE(second.code, 0);
        QVERIFY2(second.err.find("spectra read from the cache " + cache.toStdString()) != std::string::npos,
                 second.err.c_str());
        const auto j1 = nlohmann::json::parse(first.out), j2 = nlohmann::json::parse(second.out);
        QVERIFY(!j1.contains("from_cache"));
        QCOMPARE(QString::fromStdString(j2["from_cache"].get<std::string>()), cache);
        QVERIFY(strip(j1) == strip(j2));
        auto table = test::run_gkq_as({"analyze", m});
        QVERIFY(table.out.contains("read from the spectra cache " + cache));

        auto none = test::run_gkq_as<std::string>({"analyze", "--json", "--no-cache", m});
        QCOMPARE(none.code, 0);
        QVERIFY2(none.err.find("cache") == std::string::npos, none.err.c_str());
        QVERIFY(!nlohmann::json::parse(none.out).contains("from_cache"));

        // Other options: computed (and added to the same file); then read.
        auto topk = test::run_gkq_as<std::string>({"analyze", "--json", "--topk", "4", m});
        QCOMPARE(topk.code, 0);
        QVERIFY2(topk.err.find("read from the cache") == std::string::npos, topk.err.c_str());
        auto topk2 = test::run_gkq_as<std::string>({"analyze", "--json", "--topk", "4", m});
        QVERIFY2(topk2.err.find("read from the cache") != std::string::npos, topk2.err.c_str());
        QVERIFY(test::run_gkq_as<std::string>({"analyze", "--json", m}).err.find("read from the cache") !=
                std::string::npos);

        // A touched model: computed again, and the stale file named.
        QFile f(m);
        QVERIFY(f.open(QIODevice::ReadWrite));
        QVERIFY(f.setFileTime(QDateTime::currentDateTime().addSecs(-3600), QFileDevice::FileModificationTime));
        f.close();
        auto touched = test::run_gkq_as<std::string>({"analyze", "--json", m});
        QCOMPARE(touched.code, 0);
        QVERIFY2(touched.err.find("read from the cache") == std::string::npos, touched.err.c_str());
        QVERIFY2(touched.err.find("made for other data") != std::string::npos, touched.err.c_str());

        // A corrupt cache: ignored with a message naming it, and replaced.
        QVERIFY(QFile::resize(cache, 100));
        auto corrupt = test::run_gkq_as<std::string>({"analyze", "--json", m});
        QCOMPARE(corrupt.code, 0);
        QVERIFY2(corrupt.err.find(cache.toStdString() + ": ") != std::string::npos, corrupt.err.c_str());
        QVERIFY(test::run_gkq_as<std::string>({"analyze", "--json", m}).err.find("read from the cache") !=
                std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestCliAnalyze)
#include "test_cli_analyze.moc"
