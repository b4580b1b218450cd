// The cache budget bounds the serving process's memory. A knot whose weights, as the transformer holds them (Q4_0
// blocks, f32 norms), are about seven times the budget is served with that budget: the cache's own accounting stays
// within the budget, and the process's resident memory (VmHWM - VmRSS before the server started, from
// /proc/self/status) grows by less than the budget plus the largest step a transformer holds at once (one block) and
// a fixed allowance for the run state (not the knot's mapped pages: a record's leave the resident set once read) —
// while every completion is the very one an unlimited budget gives. The unlimited server, measured the same way, grows
// by more than that bound: the check tells the two apart.
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/server.h"
#include "http_test_support.h"
#include "server_fixture.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace gkq;
using json = nlohmann::json;

namespace {

// A field of /proc/self/status ("VmRSS", "VmHWM") in bytes; -1 when absent.
int64_t status_bytes(const std::string& field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(field + ":", 0) == 0) {
            std::istringstream v(line.substr(field.size() + 1));
            int64_t kb = -1;
            v >> kb;
            return kb < 0 ? -1 : kb * 1024;
        }
    return -1;
}

// Resets VmHWM to the current VmRSS (Linux >= 4.0); false when the kernel refuses.
bool reset_peak() {
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    out.flush();
    return static_cast<bool>(out);
}

struct Served {
    std::vector<std::string> texts;
    int64_t rss_growth = 0;  // peak resident bytes over those before the server started
    json cache;              // /stats "cache" after the requests
    uint64_t max_bytes_used = 0;
};

constexpr const char* kPrompts[] = {"ab cd", "ba", "hi ab"};

}  // namespace

class TestServerBudget : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (status_bytes("VmRSS") < 0 || status_bytes("VmHWM") < 0) QSKIP("no VmRSS / VmHWM in /proc/self/status");
        if (!reset_peak()) QSKIP("/proc/self/clear_refs cannot reset VmHWM here");
        // 16 blocks of dim 512, hidden 1536: 1.9 MB of Q4_0 blocks (13.6 MB of float32) per block, 31 MB in all; the
        // tiny vocabulary.
        ModelConfig c = test::tiny_config(true);
        c.dim = 512;
        c.hidden_dim = 1536;
        c.n_layers = 16;
        c.n_heads = 8;
        c.n_kv_heads = 8;
        m_gguf = m_dir.file("wide.gguf");
        m_knot = m_dir.file("wide.knot");
        {
            auto m = test::make_tiny_model(c, 5);
            QVERIFY(write_gguf(m_gguf, m.config, m.tensors, test::tiny_vocabulary()));
        }
        auto model = ModelFile::open(m_gguf);
        QVERIFY2(model, model.message().c_str());
        QuantizeOptions o;
        o.preset = "q4_0";
        o.n_threads = 1;
        auto report = quantize_model(*model, o, m_knot);
        QVERIFY2(report, report.message().c_str());

        // What the transformer holds: every record as stored (the matrices' Q4_0 blocks, the f32 norms).
        auto knot = KnotFile::open(m_knot);
        QVERIFY2(knot, knot.message().c_str());
        m_knot_bytes = knot->file_bytes();
        std::vector<uint64_t> per_layer(static_cast<size_t>(c.n_layers), 0);
        uint64_t final_step = 0;
        for (const KnotEntry& e : knot->entries()) {
            const auto n = static_cast<uint64_t>(e.n_elements());
            const uint64_t bytes = dtype_storage_bytes(e.dtype, n).value_or(n * sizeof(float));
            m_model_bytes += bytes;
            if (e.layer >= 0) per_layer[static_cast<size_t>(e.layer)] += bytes;
            if (e.layer < 0) final_step += bytes;  // output_norm and the (shared) token embedding
        }
        m_step_bytes = std::max(final_step, *std::max_element(per_layer.begin(), per_layer.end()));
    }

    void budgetBoundsResidentWeights() {
        const uint64_t budget = uint64_t{2} << 20;
        QVERIFY(m_model_bytes > 6 * budget);
        // KV cache and activations (< 2 MB here), thread stacks, one record inflated while it decodes, sockets.
        const uint64_t allowance = uint64_t{8} << 20;
        // The knot's mapped pages are not in it: a record's pages leave the resident set once it is read.
        const uint64_t bound = budget + m_step_bytes + allowance;

        Served small = serve(2);
        if (QTest::currentTestFailed()) return;
        Served unlimited = serve(1024);
        if (QTest::currentTestFailed()) return;

        // The same tokens, whatever the budget.
        QCOMPARE(small.texts.size(), std::size(kPrompts));
        QVERIFY(small.texts == unlimited.texts);
        for (const std::string& t : small.texts) QVERIFY(!t.empty());

        qInfo("budget %.1f MB: hit rate %.3f (%llu entries kept)", budget / 1e6, small.cache["hit_rate"].get<double>(),
              static_cast<unsigned long long>(small.cache["entries"].get<uint64_t>()));
        // The cache's own accounting: within the budget throughout; it had to page (load again the weights it could
        // not keep), and the weights it kept (the first that filled the budget: policy "keep") were hit on every
        // pass, where least-recently-used eviction would hit nothing in a forward pass's fixed order.
        QVERIFY(small.max_bytes_used <= budget);
        QCOMPARE(small.cache["budget_bytes"].get<uint64_t>(), budget);
        QCOMPARE(small.cache["policy"].get<std::string>(), std::string("keep"));
        QVERIFY(small.cache["not_kept"].get<uint64_t>() > 0);
        QCOMPARE(small.cache["evictions"]["budget"].get<uint64_t>(), uint64_t(0));
        QVERIFY(small.cache["reconstructions"].get<uint64_t>() > 2 * small.cache["entries"].get<uint64_t>());
        QVERIFY(small.cache["hits"].get<uint64_t>() > 0);
        QCOMPARE(unlimited.cache["bytes_used"].get<uint64_t>(), m_model_bytes);
        QCOMPARE(unlimited.cache["evictions"]["budget"].get<uint64_t>(), uint64_t(0));

        // The process: measured growth of its resident memory.
        const QString numbers = QString(
                                    "budget %1 MB, step %2 MB, knot %3 MB, model %4 MB: growth %5 MB with the "
                                    "budget, %6 MB unlimited; bound %7 MB")
                                    .arg(budget / 1e6)
                                    .arg(m_step_bytes / 1e6)
                                    .arg(m_knot_bytes / 1e6)
                                    .arg(m_model_bytes / 1e6)
                                    .arg(small.rss_growth / 1e6)
                                    .arg(unlimited.rss_growth / 1e6)
                                    .arg(bound / 1e6);
        qInfo("%s", qPrintable(numbers));
        QVERIFY2(small.rss_growth < static_cast<int64_t>(bound), qPrintable(numbers));
        QVERIFY2(unlimited.rss_growth > static_cast<int64_t>(bound), qPrintable(numbers));
    }

private:
    Served serve(uint64_t budget_mb) {
        Served out;
        ServerConfig cfg = test::loopback_config("epoll");
        cfg.weights_path = m_knot;
        cfg.memory_resident = false;
        cfg.cache_budget_mb = budget_mb;
        cfg.max_context = 32;
        const int64_t before = status_bytes("VmRSS");
        if (!reset_peak()) {
            QTest::qFail("clear_refs refused", __FILE__, __LINE__);
            return out;
        }
        {
            auto started = Server::start(cfg);
            if (!started) {
                QTest::qFail(started.message().c_str(), __FILE__, __LINE__);
                return out;
            }
            std::unique_ptr<Server> server = std::move(*started);
            if (!server->wait_loaded(120000)) {
                QTest::qFail("the server did not load", __FILE__, __LINE__);
                return out;
            }
            for (const char* prompt : kPrompts) {
                const std::string body =
                    "{\"prompt\":\"" + std::string(prompt) + "\",\"max_tokens\":6,\"temperature\":0}";
                test::TestConnection conn(server->port(), 300000);  // a paging server is slow, not stuck
                conn.send(test::make_request("POST", "/infer", body));
                auto r = conn.read_response();
                if (!r || r->status != 200) {
                    QTest::qFail(r ? r->body.c_str() : "no response", __FILE__, __LINE__);
                    return out;
                }
                out.texts.push_back(json::parse(r->body)["text"].get<std::string>());
                json st = json::parse(test::http_request(server->port(), "GET", "/stats")->body);
                out.max_bytes_used = std::max(out.max_bytes_used, st["cache"]["bytes_used"].get<uint64_t>());
                out.cache = st["cache"];
            }
            out.rss_growth = status_bytes("VmHWM") - before;
        }
        return out;
    }

    test::TempDir m_dir;
    std::string m_gguf;
    std::string m_knot;
    uint64_t m_knot_bytes = 0;
    uint64_t m_model_bytes = 0;
    uint64_t m_step_bytes = 0;
};

QTEST_APPLESS_MAIN(TestServerBudget)
#include "test_server_budget.moc"
