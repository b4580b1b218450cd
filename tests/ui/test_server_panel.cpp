// The Serve panel: the in-process server on a knot of the demo model (the tiny test knot when the demo is absent),
// /health reached, a prompt answered exactly as a direct /infer call with the same greedy settings answers it, the
// live charts fed from /metrics, the Prometheus text parser exact on a real /metrics body and on handcrafted text,
// and stop() freeing the port. Everything runs on 127.0.0.1.
#include "charts/live_series_chart.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/server.h"
#include "http_test_support.h"
#include "models/prometheus_text.h"
#include "test_support.h"
#include "widgets/main_window.h"
#include "widgets/server_panel.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QtTest>
#include <cmath>
#include <cstdio>

using namespace gkq;
using ui::ServerPanel;

class TestServerPanel : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_knot;
    QString m_tokenizer;  // for a knot without a vocabulary

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_server_panel"));
        QSettings().clear();
        const QString demo = ui::MainWindow::demoModelPath();
        if (demo.isEmpty()) {
            m_knot = QString::fromStdString(test::make_tiny_knot(m_dir).knot);
        } else {
            auto model = ModelFile::open(demo.toStdString());
            QVERIFY2(model.is_ok(), model.message().c_str());
            QuantizeOptions options;
            options.preset = "q8_0";
            auto report = quantize_model(*model, options, m_dir.file("demo.knot"));
            QVERIFY2(report.is_ok(), report.message().c_str());
            m_knot = QString::fromStdString(report->path);
            // The demo model carries its vocabulary as a llama2.c tokenizer.bin beside it, not in the knot.
            m_tokenizer = QDir(demo).filePath(QStringLiteral("tokenizer.bin"));
        }
        std::printf("serving %s\n", qPrintable(m_knot));
    }

    void servesAPromptAndChartsItsMetrics() {
        ServerPanel panel;
        QVERIFY(!panel.startButton()->isEnabled());  // nothing to serve yet
        panel.setKnotPath(m_knot);
        panel.setTokenizerPath(m_tokenizer);
        panel.setPort(0);
        QSignalSpy started(&panel, &ServerPanel::started);
        QSignalSpy healthy(&panel, &ServerPanel::healthy);
        QVERIFY2(panel.start(), qPrintable(panel.statusText()));
        QCOMPARE(started.count(), 1);
        const quint16 port = panel.port();
        QVERIFY(port > 0);
        QCOMPARE(panel.url(), QStringLiteral("http://127.0.0.1:%1").arg(port));
        QVERIFY(!panel.sendButton()->isEnabled());
        QTRY_VERIFY_WITH_TIMEOUT(panel.isHealthy() || panel.statusText().startsWith(QStringLiteral("Loading failed")),
                                 120000);
        QVERIFY2(panel.isHealthy(), qPrintable(panel.statusText()));
        QCOMPARE(healthy.count(), 1);
        QVERIFY(panel.sendButton()->isEnabled());
        const auto health = test::http_request(port, "GET", "/health");
        QVERIFY(health.has_value());
        QCOMPARE(health->status, 200);

        // The panel's answer against a direct call with the same body (greedy: temperature 0).
        panel.setPrompt(QStringLiteral("Once upon a time"));
        panel.setMaxTokens(24);
        panel.setTemperature(0.0);
        panel.setSeed(42);
        QSignalSpy answered(&panel, &ServerPanel::answerReceived);
        panel.sendPrompt();
        QVERIFY(answered.wait(120000));
        QVERIFY(panel.lastAnswer().has_value());
        const ServerPanel::Answer& a = *panel.lastAnswer();
        const QByteArray body = panel.inferBody();
        QCOMPARE(body, QByteArray(R"({"max_tokens":24,"prompt":"Once upon a time","seed":42,"temperature":0})"));
        const auto direct =
            test::http_request(port, "POST", "/infer", body.toStdString(), "Content-Type: application/json\r\n");
        QVERIFY(direct.has_value());
        QCOMPARE(direct->status, 200);
        const QJsonObject d = QJsonDocument::fromJson(QByteArray::fromStdString(direct->body)).object();
        QCOMPARE(panel.answerViewText(), d.value(QStringLiteral("text")).toString());
        QCOMPARE(a.text, d.value(QStringLiteral("text")).toString());
        QVERIFY(!a.text.isEmpty());
        QCOMPARE(a.promptTokens, d.value(QStringLiteral("prompt_tokens")).toInteger());
        QCOMPARE(a.completionTokens, d.value(QStringLiteral("completion_tokens")).toInteger());
        QVERIFY2(panel.answerDetailsText().startsWith(QStringLiteral("%1 prompt tokens, %2 completion tokens (%3)")
                                                          .arg(a.promptTokens)
                                                          .arg(a.completionTokens)
                                                          .arg(a.finishReason)),
                 qPrintable(panel.answerDetailsText()));
        std::printf("answer (%lld + %lld tokens): %s\n%s\n", static_cast<long long>(a.promptTokens),
                    static_cast<long long>(a.completionTokens), qPrintable(a.text),
                    qPrintable(panel.answerDetailsText()));

        // A real /metrics body: exact counters.
        const auto metrics = test::http_request(port, "GET", "/metrics");
        QVERIFY(metrics.has_value());
        QCOMPARE(metrics->status, 200);
        auto parsed = ui::parse_prometheus_text(metrics->body);
        QVERIFY2(parsed.is_ok(), parsed.message().c_str());
        QCOMPARE(parsed->sum("gkq_inference_requests_total", {{"result", "ok"}}), std::optional<double>(2.0));
        QCOMPARE(parsed->sum("gkq_inference_requests_total", {{"result", "error"}}), std::optional<double>(0.0));
        QCOMPARE(parsed->sum("gkq_http_requests_total", {{"route", "/infer"}, {"code", "200"}}),
                 std::optional<double>(2.0));
        QCOMPARE(parsed->sum("gkq_inference_tokens_total", {{"kind", "completion"}}),
                 std::optional<double>(static_cast<double>(2 * a.completionTokens)));
        QCOMPARE(parsed->sum("gkq_inference_tokens_total", {{"kind", "prompt"}}),
                 std::optional<double>(static_cast<double>(2 * a.promptTokens)));
        QCOMPARE(parsed->sum("gkq_server_ready"), std::optional<double>(1.0));
        QCOMPARE(parsed->sum("gkq_inference_duration_seconds_count"), std::optional<double>(2.0));
        QCOMPARE(parsed->sum("gkq_inference_duration_seconds_bucket", {{"le", "+Inf"}}), std::optional<double>(2.0));
        const auto lookups = parsed->sum("gkq_cache_lookups_total");
        QVERIFY(lookups.has_value() && *lookups > 0.0);
        QCOMPARE(*lookups, *parsed->sum("gkq_cache_hits_total") + *parsed->sum("gkq_cache_misses_total"));
        const ui::ServerScrape scrape = ui::summarize_scrape(*parsed);
        QVERIFY(scrape.backend == "io_uring" || scrape.backend == "epoll");
        QCOMPARE(panel.backendText(), QString::fromStdString(scrape.backend_detail));
        QCOMPARE(scrape.tokens_completion, static_cast<double>(2 * a.completionTokens));
        std::printf("backend: %s\n", scrape.backend_detail.c_str());

        // The charts follow the scrapes: one point per interval after the first scrape. The second scrape from now
        // was sent after every request above.
        const int scrapesBefore = panel.scrapeCount();
        QTRY_VERIFY_WITH_TIMEOUT(panel.scrapeCount() >= scrapesBefore + 2, 20000);
        QVERIFY(panel.lastRates().has_value());
        QCOMPARE(panel.requestsChart()->pointCount(), panel.scrapeCount() - 1);
        QCOMPARE(panel.lastScrape()->requests, scrape.requests);  // nothing but /metrics was asked since
        QCOMPARE(panel.lastScrape()->cache_lookups, *lookups);

        // Stop frees the port: another server binds it.
        QSignalSpy stopped(&panel, &ServerPanel::stopped);
        panel.stopButton()->click();
        QCOMPARE(stopped.count(), 1);
        QVERIFY(!panel.isRunning());
        QVERIFY(panel.startButton()->isEnabled());
        // On io_uring the kernel drops the ring's last reference to the listening socket in deferred work after
        // the ring is closed, so the port can stay taken for a moment after stop() returns; epoll frees it at once.
        ServerConfig again;
        again.port = port;
        QElapsedTimer sinceStop;
        sinceStop.start();
        std::unique_ptr<Server> second;
        std::string lastError;
        const auto bindAgain = [&] {
            auto s = Server::start(again);
            if (s)
                second = std::move(s).value();
            else
                lastError = s.message();
            return second != nullptr;
        };
        QTRY_VERIFY2_WITH_TIMEOUT(bindAgain(), lastError.c_str(), 10000);
        QCOMPARE(second->port(), port);
        std::printf("port %u bound again %lld ms after stop() returned (%s)\n", unsigned(port),
                    static_cast<long long>(sinceStop.elapsed()), scrape.backend.c_str());
    }

    void startFailureSaysWhy() {
        ServerConfig c;
        c.port = 0;
        auto holder = Server::start(c);  // holds a port
        QVERIFY(holder.is_ok());
        ServerPanel panel;
        panel.setKnotPath(m_knot);
        panel.setPort((*holder)->port());
        QSignalSpy failed(&panel, &ServerPanel::errorOccurred);
        QVERIFY(!panel.start());
        QVERIFY(!panel.isRunning());
        QCOMPARE(failed.count(), 1);
        QVERIFY2(panel.statusText().contains(QString::number((*holder)->port())), qPrintable(panel.statusText()));
    }

    void parsesHandcraftedText() {
        const std::string text =
            "# HELP a_total Things.\n"
            "# TYPE a_total counter\n"
            "a_total{route=\"/infer\",code=\"200\"} 3\n"
            "a_total{route=\"/metrics\",code=\"200\"} 7 1700000000000\n"
            "a_total{route=\"/infer\",code=\"400\"} 1e0\n"
            "\n"
            "b{msg=\"say \\\"hi\\\"\\\\n\\n\"} -2.5\r\n"
            "h_bucket{le=\"0.5\"} 4\n"
            "h_bucket{le=\"+Inf\"} 5\n"
            "up +Inf\n";
        auto p = ui::parse_prometheus_text(text);
        QVERIFY2(p.is_ok(), p.message().c_str());
        QCOMPARE(p->samples.size(), size_t{7});
        QCOMPARE(p->sum("a_total"), std::optional<double>(11.0));
        QCOMPARE(p->sum("a_total", {{"route", "/infer"}}), std::optional<double>(4.0));
        QCOMPARE(p->sum("a_total", {{"route", "/infer"}, {"code", "400"}}), std::optional<double>(1.0));
        QCOMPARE(p->sum("a_total", {{"route", "other"}}), std::nullopt);
        QCOMPARE(p->sum("absent"), std::nullopt);
        QCOMPARE(p->samples[3].label("msg"), std::optional<std::string>("say \"hi\"\\n\n"));
        QCOMPARE(p->samples[3].value, -2.5);
        QCOMPARE(p->sum("h_bucket", {{"le", "+Inf"}}), std::optional<double>(5.0));
        QVERIFY(std::isinf(p->samples[6].value));
        QCOMPARE(p->types.size(), size_t{1});
        QCOMPARE(p->types[0].second, std::string("counter"));

        struct Bad {
            const char* text;
            const char* error;
        };
        const Bad bad[] = {
            {"ok 1\n{x=\"1\"} 2\n", "metrics line 2: a sample must start with a metric name"},
            {"x{a=1} 2\n", "metrics line 1: label 'a' of 'x' needs =\"value\""},
            {"x{a=\"1} 2\n", "metrics line 1: unterminated value of label 'a'"},
            {"x{a=\"\\t\"} 2\n", "metrics line 1: bad escape \\t in label 'a'"},
            {"x 2 3 4\n", "metrics line 1: unexpected '3 4' after the value of 'x'"},
            {"x twelve\n", "metrics line 1: value 'twelve' of 'x' is not a number"},
            {"x\n", "metrics line 1: expected a space and a value after 'x'"},
            {"# TYPE x\n", "metrics line 1: TYPE without a type"},
        };
        for (const Bad& b : bad) {
            auto r = ui::parse_prometheus_text(b.text);
            QVERIFY2(!r.is_ok(), b.text);
            QCOMPARE(r.message(), std::string(b.error));
        }
    }

    void ratesBetweenTwoScrapes() {
        // Two scrapes 2 s apart: 6 requests besides /metrics (whose own counts are left out), 0.3 s of latency,
        // 5 of 6 within 0.1 s and the sixth within 0.5 s; 8 lookups, 6 hits.
        const std::string before =
            "gkq_http_requests_total{route=\"/infer\",code=\"200\"} 4\n"
            "gkq_http_requests_total{route=\"/metrics\",code=\"200\"} 10\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/infer\",le=\"0.1\"} 4\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/infer\",le=\"0.5\"} 4\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/infer\",le=\"+Inf\"} 4\n"
            "gkq_http_request_duration_seconds_sum{route=\"/infer\"} 0.2\n"
            "gkq_http_request_duration_seconds_count{route=\"/infer\"} 4\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/metrics\",le=\"0.1\"} 10\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/metrics\",le=\"+Inf\"} 10\n"
            "gkq_http_request_duration_seconds_sum{route=\"/metrics\"} 9\n"
            "gkq_http_request_duration_seconds_count{route=\"/metrics\"} 10\n"
            "gkq_cache_lookups_total 10\n"
            "gkq_cache_hits_total 2\n"
            "gkq_server_info{backend=\"epoll\",detail=\"epoll\",mode=\"resident\"} 1\n";
        const std::string after =
            "gkq_http_requests_total{route=\"/infer\",code=\"200\"} 8\n"
            "gkq_http_requests_total{route=\"/health\",code=\"200\"} 2\n"
            "gkq_http_requests_total{route=\"/metrics\",code=\"200\"} 12\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/infer\",le=\"0.1\"} 7\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/infer\",le=\"0.5\"} 8\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/infer\",le=\"+Inf\"} 8\n"
            "gkq_http_request_duration_seconds_sum{route=\"/infer\"} 0.45\n"
            "gkq_http_request_duration_seconds_count{route=\"/infer\"} 8\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/health\",le=\"0.1\"} 2\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/health\",le=\"0.5\"} 2\n"
            "gkq_http_request_duration_seconds_bucket{route=\"/health\",le=\"+Inf\"} 2\n"
            "gkq_http_request_duration_seconds_sum{route=\"/health\"} 0.05\n"
            "gkq_http_request_duration_seconds_count{route=\"/health\"} 2\n"
            "gkq_http_request_duration_seconds_sum{route=\"/metrics\"} 100\n"
            "gkq_http_request_duration_seconds_count{route=\"/metrics\"} 12\n"
            "gkq_cache_lookups_total 18\n"
            "gkq_cache_hits_total 8\n"
            "gkq_server_info{backend=\"epoll\",detail=\"epoll\",mode=\"resident\"} 1\n";
        auto b = ui::parse_prometheus_text(before);
        auto a = ui::parse_prometheus_text(after);
        QVERIFY(b.is_ok() && a.is_ok());
        const ui::ServerScrape s0 = ui::summarize_scrape(*b), s1 = ui::summarize_scrape(*a);
        QCOMPARE(s0.requests, 4.0);
        QCOMPARE(s1.requests, 10.0);
        QCOMPARE(s1.backend, std::string("epoll"));
        QCOMPARE(s1.latency_buckets.size(), size_t{3});
        QCOMPARE(s1.latency_buckets[1], (std::pair<double, double>(0.5, 10.0)));
        const ui::ServerRates r = ui::rates_between(s0, s1, 2.0);
        QCOMPARE(r.requests_per_second, 3.0);
        QVERIFY(r.mean_latency_seconds.has_value());
        QCOMPARE(*r.mean_latency_seconds, (0.5 - 0.2) / 6.0);
        QCOMPARE(r.p99_latency_bound_seconds, std::optional<double>(0.5));
        QCOMPARE(r.cache_hit_rate, std::optional<double>(6.0 / 8.0));
        const ui::ServerRates idle = ui::rates_between(s1, s1, 1.0);
        QCOMPARE(idle.requests_per_second, 0.0);
        QVERIFY(!idle.mean_latency_seconds.has_value());
        QVERIFY(!idle.cache_hit_rate.has_value());
    }
};

QTEST_MAIN(TestServerPanel)
#include "test_server_panel.moc"
