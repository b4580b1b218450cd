// The real gkq binary: `gkq bench reconstruct` — option errors, and the --quick --json report's shape: every shape
// and rank, every dequantizer, each with its baseline, and the GPU section saying why it did not run here.
#include "gkq/kernels.h"

#include <QProcess>
#include "cli_run.h"

#include <QtTest>
#include <nlohmann/json.hpp>

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 240000);
}
}  // namespace

class TestCliBench : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void badUsageExitsTwo() {
        Run r = run_gkq({"bench", "matmul"});
        QCOMPARE(r.code, 2);
        QCOMPARE(r.err, QString("gkq bench: unknown benchmark 'matmul' (benchmarks: reconstruct)\n"));
        r = run_gkq({"bench", "reconstruct", "--cpu-only", "--gpu-only"});
        QCOMPARE(r.code, 2);
        QCOMPARE(r.err, QString("gkq bench: --cpu-only and --gpu-only exclude each other\n"));
        r = run_gkq({"bench", "reconstruct", "--runs", "0"});
        QCOMPARE(r.code, 2);
    }

    void quickJsonReport() {
        if (!gkq::kernels::backend_available(gkq::kernels::Backend::CpuSimd)) QSKIP("cpu-simd unavailable on this CPU");
        Run r = run_gkq({"bench", "reconstruct", "--quick", "--runs", "1", "--threads", "2", "--json"});
        QCOMPARE(r.code, 0);
        const nlohmann::json j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j["threads"].get<int>(), 2);
        QCOMPARE(j["runs"].get<int>(), 1);
        QCOMPARE(j["quick"].get<bool>(), true);
        QCOMPARE(j["cpu"].get<std::string>(), std::string("CPU, AVX2/FMA (2 threads)"));
        const std::vector<std::array<int64_t, 2>> shapes = {{512, 512}, {512, 1376}, {1024, 1024}};
        QCOMPARE(j["reconstruct"].size(), size_t(12));
        for (size_t i = 0; i < 12; ++i) {
            const auto& row = j["reconstruct"][i];
            QCOMPARE(row["rows"].get<int64_t>(), shapes[i / 4][0]);
            QCOMPARE(row["cols"].get<int64_t>(), shapes[i / 4][1]);
            QCOMPARE(row["rank"].get<int64_t>(), (std::array<int64_t, 4>{3, 16, 64, 256})[i % 4]);
            for (const char* t : {"seconds", "memset_seconds", "sgemm_seconds", "decode_seconds"})
                QVERIFY2(row[t].get<double>() > 0.0, t);
            QCOMPARE(row["vs_sgemm"].get<double>(), row["sgemm_seconds"].get<double>() / row["seconds"].get<double>());
        }
        const std::vector<std::string> what = {"factors 2-bit",       "factors 2-bit delta", "factors 4-bit",
                                               "factors 4-bit delta", "factors 8-bit",       "factors 8-bit delta",
                                               "q8_0 blocks",         "q4_0 blocks",         "f16 values"};
        QCOMPARE(j["dequantize"].size(), what.size());
        for (size_t i = 0; i < what.size(); ++i) {
            QCOMPARE(j["dequantize"][i]["what"].get<std::string>(), what[i]);
            QCOMPARE(j["dequantize"][i]["n"].get<uint64_t>(), uint64_t{1} << 20);
        }
        const std::string why = gkq::kernels::backend_unavailable_reason(gkq::kernels::Backend::Cuda);
        QCOMPARE(j["gpu_ran"].get<bool>(), why.empty());
        if (!why.empty()) QCOMPARE(j["gpu"].get<std::string>(), "not run: " + why);
    }
};

QTEST_APPLESS_MAIN(TestCliBench)
#include "test_cli_bench.moc"
