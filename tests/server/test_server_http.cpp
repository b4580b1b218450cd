// The HTTP layer of gkq::Server over loopback, without weights, on each backend: routes and status codes,
// keep-alive and pipelining, malformed requests (each answered and closed, the next connection served), size
// limits, slow-client timeouts (the header timeout from accept), the connection caps (the oldest idle connection
// makes room; 1,100 silent connections leave /health reachable), counters.
#include "http_test_support.h"
#include "server_fixture.h"

#include <nlohmann/json.hpp>

#include <QtTest>

#include <sys/resource.h>

#include <map>

using namespace gkq;
using test::http_request;
using test::make_request;
using test::TestConnection;
using json = nlohmann::json;

namespace {

struct BadCase {
    const char* name;
    std::string bytes;
    int status;
};

std::string host_get(std::string_view extra) {
    return "GET /health HTTP/1.1\r\nHost: a\r\n" + std::string(extra) + "\r\n";
}

std::string post_infer(std::string_view headers, std::string_view body) {
    return "POST /infer HTTP/1.1\r\nHost: a\r\n" + std::string(headers) + "\r\n" + std::string(body);
}

// Limits used by the server these cases run against (see limits_config()).
constexpr size_t kMaxTarget = 512;
constexpr size_t kMaxHeaderBytes = 2048;
constexpr size_t kMaxHeaders = 20;
constexpr size_t kMaxBody = 4096;

std::vector<BadCase> bad_cases() {
    std::vector<BadCase> c;
    auto add = [&](const char* name, std::string bytes, int status) { c.push_back({name, std::move(bytes), status}); };
    // request line
    add("garbage method", "GARBAGE / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    add("lowercase method", "get /health HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    add("method only", "GET\r\n\r\n", 400);
    add("no version (HTTP/0.9)", "GET /health\r\n\r\n", 505);
    add("version garbage", "GET /health HTTP/a.b\r\nHost: a\r\n\r\n", 400);
    add("HTTPS scheme in version", "GET /health HTTPS/1.1\r\nHost: a\r\n\r\n", 400);
    add("truncated version", "GET /health HTTP/1.\r\nHost: a\r\n\r\n", 400);
    add("text after version", "GET /health HTTP/1.1 x\r\nHost: a\r\n\r\n", 400);
    add("space in target", "GET /hea lth HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    add("control byte in target", "GET /he\x01lth HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    add("NUL bytes", std::string("\0\0\0\0\r\n\r\n", 8), 400);
    add("TLS client hello", std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11), 400);
    add("a response instead of a request", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 400);
    add("very long method token", std::string(4000, 'A') + " / HTTP/1.1\r\n\r\n", 400);
    add("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505);
    add("HTTP/1.2", "GET /health HTTP/1.2\r\nHost: a\r\n\r\n", 400);
    add("HTTP/2.0 request line", "GET /health HTTP/2.0\r\nHost: a\r\n\r\n", 505);
    add("target too long", "GET /" + std::string(kMaxTarget + 10, 'x') + " HTTP/1.1\r\nHost: a\r\n\r\n", 414);
    add("target too long, never finished", "GET /" + std::string(kMaxTarget + 10, 'x'), 414);
    // headers
    add("HTTP/1.1 without Host", "GET /health HTTP/1.1\r\n\r\n", 400);
    add("two Host headers", "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    add("header without colon", host_get("Bad header\r\n"), 400);
    add("space in header name", host_get("Bad Header: x\r\n"), 400);
    add("space before colon", host_get("X-A : x\r\n"), 400);
    add("empty header name", host_get(": x\r\n"), 400);
    add("non-token header name", host_get("X(a): x\r\n"), 400);
    add("UTF-8 header name", host_get("H\xC3\xA9st: x\r\n"), 400);
    add("control byte in header value",
        host_get("X-A: a\x01"
                 "b\r\n"),
        400);
    add("bare CR in header value", host_get("X-A: a\rb\r\n"), 400);
    add("obsolete line folding", host_get("X-A: a\r\n folded\r\n"), 400);
    add("leading whitespace header", "GET /health HTTP/1.1\r\n Host: a\r\n\r\n", 400);
    add("CR without LF ends headers", "GET /health HTTP/1.1\r\nHost: a\r\n\rX", 400);
    std::string many;
    for (size_t i = 0; i <= kMaxHeaders; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
    add("too many headers", host_get(many), 431);
    add("header bytes over the limit", host_get("X-Big: " + std::string(kMaxHeaderBytes + 1, 'v') + "\r\n"), 431);
    add("header bytes over the limit, never finished",
        "GET /health HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(kMaxHeaderBytes + 1, 'v'), 431);
    // body framing
    add("Content-Length not a number", post_infer("Content-Length: abc\r\n", ""), 400);
    add("negative Content-Length", post_infer("Content-Length: -1\r\n", ""), 400);
    add("Content-Length with a plus sign", post_infer("Content-Length: +5\r\n", "hello"), 400);
    add("hexadecimal Content-Length", post_infer("Content-Length: 0x10\r\n", ""), 400);
    add("Content-Length with inner space", post_infer("Content-Length: 1 2\r\n", ""), 400);
    add("Content-Length overflowing 64 bits", post_infer("Content-Length: 99999999999999999999999\r\n", ""), 400);
    add("two different Content-Lengths", post_infer("Content-Length: 5\r\nContent-Length: 6\r\n", "hello!"), 400);
    add("Content-Length and chunked", post_infer("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
        400);
    add("chunked not last", post_infer("Transfer-Encoding: chunked, gzip\r\n", "0\r\n\r\n"), 400);
    add("unknown transfer coding only", post_infer("Transfer-Encoding: gzip\r\n", ""), 400);
    add("chunk size not hex", post_infer("Transfer-Encoding: chunked\r\n", "zz\r\nhello\r\n0\r\n\r\n"), 400);
    add("chunk size overflow", post_infer("Transfer-Encoding: chunked\r\n", "fffffffffffffffffff\r\n"), 400);
    add("chunk without its CRLF", post_infer("Transfer-Encoding: chunked\r\n", "5\r\nhelloXX0\r\n\r\n"), 400);
    add("control byte in chunk extension", post_infer("Transfer-Encoding: chunked\r\n", "5;\x01\r\nhello\r\n"), 400);
    add("Content-Length over the body limit",
        post_infer("Content-Length: " + std::to_string(kMaxBody + 1) + "\r\n", ""), 413);
    add("chunked body over the limit",
        post_infer("Transfer-Encoding: chunked\r\n",
                   "1000\r\n" + std::string(4096, 'x') + "\r\n10\r\n" + std::string(16, 'x') + "\r\n0\r\n\r\n"),
        413);
    return c;
}

ServerConfig limits_config(const QString& backend) {
    ServerConfig c = test::loopback_config(backend);
    c.max_target_bytes = kMaxTarget;
    c.max_header_bytes = kMaxHeaderBytes;
    c.max_headers = kMaxHeaders;
    c.max_body_bytes = kMaxBody;
    return c;
}

json parse(const std::string& s) {
    return json::parse(s, nullptr, false);
}

// Sum of the samples of `metric` (lines "metric{...} value" or "metric value") in a Prometheus text.
double metric_sum(const std::string& text, const std::string& metric) {
    double sum = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        start = end + 1;
        if (line.compare(0, metric.size(), metric) != 0 || line.size() <= metric.size()) continue;
        if (line[metric.size()] != ' ' && line[metric.size()] != '{') continue;
        sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
}

}  // namespace

class TestServerHttp : public QObject {
    Q_OBJECT
private slots:
    void routesWithoutWeights_data() { test::add_backend_rows(); }
    void routesWithoutWeights() {
        QFETCH(QString, backend);
        GKQ_START_SERVER(server, test::loopback_config(backend));
        QCOMPARE(server->phase(), ServerPhase::Ready);
        QCOMPARE(std::string(server->backend()),
                 backend.startsWith("io_uring") ? std::string("io_uring") : std::string("epoll"));
        QCOMPARE(server->url(), "http://127.0.0.1:" + std::to_string(server->port()));
        const uint16_t port = server->port();

        auto health = http_request(port, "GET", "/health");
        QVERIFY(health);
        QCOMPARE(health->status, 200);
        QCOMPARE(health->body, std::string(R"({"status":"healthy","weights_loaded":0})"));
        QCOMPARE(health->header("Content-Type"), std::string("application/json"));
        QCOMPARE(health->header("Connection"), std::string("keep-alive"));
        QVERIFY(health->has_header("Date"));

        auto head = http_request(port, "HEAD", "/health");
        QCOMPARE(head->status, 200);
        QCOMPARE(head->header("Content-Length"), std::to_string(health->body.size()));

        auto ready = http_request(port, "GET", "/ready");
        QCOMPARE(ready->status, 200);
        json r = parse(ready->body);
        QCOMPARE(r["status"].get<std::string>(), std::string("ready"));
        QVERIFY(r["model"].is_null());
        QCOMPARE(r["backend"].get<std::string>(), std::string(server->backend()));

        auto models = http_request(port, "GET", "/v1/models");
        QCOMPARE(models->status, 200);
        QCOMPARE(models->body, std::string(R"({"data":[],"object":"list"})"));

        auto infer = http_request(port, "POST", "/infer", R"({"prompt":"ab","max_tokens":2})");
        QCOMPARE(infer->status, 503);
        json e = parse(infer->body);
        QCOMPARE(e["error"]["code"].get<std::string>(), std::string("model_not_loaded"));
        QCOMPARE(e["error"]["type"].get<std::string>(), std::string("server_error"));
        QVERIFY(e["error"]["param"].is_null());

        auto missing = http_request(port, "GET", "/nope?x=1");
        QCOMPARE(missing->status, 404);
        QCOMPARE(parse(missing->body)["error"]["message"].get<std::string>(), std::string("no route for GET /nope"));

        auto wrong = http_request(port, "POST", "/health", "{}");
        QCOMPARE(wrong->status, 405);
        QCOMPARE(wrong->header("Allow"), std::string("GET, HEAD"));
        QCOMPARE(parse(wrong->body)["error"]["code"].get<std::string>(), std::string("method_not_allowed"));
        auto wrong2 = http_request(port, "GET", "/v1/completions");
        QCOMPARE(wrong2->status, 405);
        QCOMPARE(wrong2->header("Allow"), std::string("POST"));

        auto absolute = http_request(port, "GET", "http://127.0.0.1/health");
        QCOMPARE(absolute->status, 200);

        auto stats = http_request(port, "GET", "/stats");
        QCOMPARE(stats->status, 200);
        json s = parse(stats->body);
        QCOMPARE(s["server"]["backend"].get<std::string>(), std::string(server->backend()));
        QCOMPARE(s["server"]["phase"].get<std::string>(), std::string("ready"));
        QVERIFY(s["weights"].is_null());

        auto metrics = http_request(port, "GET", "/metrics");
        QCOMPARE(metrics->status, 200);
        QCOMPARE(metrics->header("Content-Type"), std::string("text/plain; version=0.0.4; charset=utf-8"));
        VERIFY_CONTAINS(metrics->body, "# HELP gkq_http_requests_total ");
        VERIFY_CONTAINS(metrics->body, "# TYPE gkq_http_requests_total counter\n");
        VERIFY_CONTAINS(metrics->body, "# TYPE gkq_http_request_duration_seconds histogram\n");
        // GET, HEAD and the absolute-form GET of /health
        VERIFY_CONTAINS(metrics->body, "gkq_http_requests_total{route=\"/health\",code=\"200\"} 3\n");
        VERIFY_CONTAINS(metrics->body, "gkq_http_requests_total{route=\"other\",code=\"404\"} 1\n");
        VERIFY_CONTAINS(metrics->body, "gkq_http_request_duration_seconds_bucket{route=\"/health\",le=\"+Inf\"} 4\n");
        VERIFY_CONTAINS(metrics->body, "gkq_http_request_duration_seconds_count{route=\"/health\"} 4\n");
        VERIFY_CONTAINS(metrics->body, "gkq_server_info{backend=\"" + std::string(server->backend()));
    }

    void keepAliveAndPipelining_data() { test::add_backend_rows(); }
    void keepAliveAndPipelining() {
        QFETCH(QString, backend);
        GKQ_START_SERVER(server, test::loopback_config(backend));
        TestConnection c(server->port());
        QVERIFY(c.connected());
        for (int i = 0; i < 3; ++i) {
            QVERIFY(c.send(make_request("GET", "/health")));
            auto r = c.read_response();
            QVERIFY(r);
            QCOMPARE(r->status, 200);
        }
        // Five requests in one write, split mid-request across a second write: answered in order.
        std::string batch = make_request("GET", "/health") + make_request("GET", "/nope") +
                            make_request("HEAD", "/ready") + make_request("GET", "/v1/models") +
                            make_request("POST", "/health", "x");
        QVERIFY(c.send(batch.substr(0, batch.size() - 20)));
        QVERIFY(c.send(batch.substr(batch.size() - 20)));
        const int want[] = {200, 404, 200, 200, 405};
        for (int i = 0; i < 5; ++i) {
            auto r = c.read_response(i == 2);  // the HEAD
            QVERIFY(r);
            QCOMPARE(r->status, want[i]);
        }
        // A client that pipelines far more than it reads: past 1 MiB of unread output the server holds the rest
        // of the requests back, and answers every one as the client catches up.
        {
            TestConnection flood(server->port(), 10000);
            const std::string one = make_request("GET", "/health");
            std::string many;
            for (int i = 0; i < 20000; ++i) many += one;
            QVERIFY(flood.send(many));
            int n_ok = 0;
            for (int i = 0; i < 20000; ++i) {
                auto r = flood.read_response();
                if (!r) break;
                n_ok += r->status == 200;
            }
            QCOMPARE(n_ok, 20000);
        }
        // HTTP/1.0 closes unless asked to keep alive; Connection: close closes.
        TestConnection old(server->port());
        old.send("GET /health HTTP/1.0\r\n\r\n");
        auto r10 = old.read_response();
        QCOMPARE(r10->status, 200);
        QCOMPARE(r10->header("Connection"), std::string("close"));
        QVERIFY(old.closed_by_peer());
        TestConnection closing(server->port());
        closing.send(make_request("GET", "/health", {}, "Connection: close\r\n"));
        QCOMPARE(closing.read_response()->status, 200);
        QVERIFY(closing.closed_by_peer());
        // Expect: 100-continue gets its interim answer before the body is sent.
        TestConnection expect(server->port());
        expect.send("POST /infer HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
        auto interim = expect.read_head();
        QVERIFY(interim);
        QCOMPARE(interim->status, 100);
        expect.send("{}");
        auto final_response = expect.read_response();
        QCOMPARE(final_response->status, 400);
        QCOMPARE(parse(final_response->body)["error"]["param"].get<std::string>(), std::string("prompt"));
    }

    void malformedRequestsAreAnsweredAndClosed_data() { test::add_backend_rows(); }
    void malformedRequestsAreAnsweredAndClosed() {
        QFETCH(QString, backend);
        GKQ_START_SERVER(server, limits_config(backend));
        const std::vector<BadCase> cases = bad_cases();
        QVERIFY(cases.size() >= 50);
        std::string failures;
        for (const BadCase& bc : cases) {
            TestConnection c(server->port());
            c.send(bc.bytes);
            auto r = c.read_response();
            if (!r) {
                failures += std::string(bc.name) + ": no response\n";
                continue;
            }
            if (r->status != bc.status)
                failures += std::string(bc.name) + ": status " + std::to_string(r->status) + ", expected " +
                            std::to_string(bc.status) + " (" + r->body + ")\n";
            if (r->header("Connection") != "close" || !c.closed_by_peer())
                failures += std::string(bc.name) + ": connection left open\n";
            json e = parse(r->body);
            if (!e.is_object() || !e["error"]["message"].is_string())
                failures += std::string(bc.name) + ": no OpenAI error envelope\n";
            // The next connection is served.
            auto next = http_request(server->port(), "GET", "/health");
            if (!next || next->status != 200) failures += std::string(bc.name) + ": the next connection failed\n";
        }
        QVERIFY2(failures.empty(), failures.c_str());
        // Every rejection was counted: one parse error per case (408 is not among them).
        auto stats = http_request(server->port(), "GET", "/stats");
        json s = parse(stats->body);
        QCOMPARE(s["server"]["parse_errors"].get<uint64_t>(), uint64_t(cases.size()));
        QCOMPARE(s["server"]["requests_by_status"]["200"].get<uint64_t>(), uint64_t(cases.size()));
    }

    void validRequestsBesideBadOnes_data() { test::add_backend_rows(); }
    void validRequestsBesideBadOnes() {
        QFETCH(QString, backend);
        GKQ_START_SERVER(server, limits_config(backend));
        // Accepted: leading empty lines, exactly the limits, a chunked body within the limit.
        TestConnection c(server->port());
        c.send("\r\n\r\nGET /health HTTP/1.1\r\nHost: a\r\n\r\n");
        QCOMPARE(c.read_response()->status, 200);
        c.send("GET /" + std::string(kMaxTarget - 1, 'x') + " HTTP/1.1\r\nHost: a\r\n\r\n");
        QCOMPARE(c.read_response()->status, 404);
        c.send(post_infer("Transfer-Encoding: chunked\r\n", "4\r\n{\"pr\r\n8\r\nompt\":1}\r\n0\r\n\r\n"));
        auto chunked = c.read_response();
        QCOMPARE(chunked->status, 400);
        QCOMPARE(parse(chunked->body)["error"]["message"].get<std::string>(), std::string("'prompt' must be a string"));
        QCOMPARE(chunked->header("Connection"), std::string("keep-alive"));
        // A good request followed by a bad one in the same write: the first is answered, then the error.
        c.send(make_request("GET", "/health") + "BAD\r\n\r\n");
        QCOMPARE(c.read_response()->status, 200);
        QCOMPARE(c.read_response()->status, 400);
        QVERIFY(c.closed_by_peer());
        // A protocol upgrade gets its answer, then the connection closes.
        TestConnection up(server->port());
        up.send("GET /health HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
        QCOMPARE(up.read_response()->status, 200);
        QVERIFY(up.closed_by_peer());
    }

    void jsonValidation_data() { test::add_backend_rows(); }
    void jsonValidation() {
        QFETCH(QString, backend);
        ServerConfig cfg = test::loopback_config(backend);
        cfg.max_tokens_limit = 64;
        GKQ_START_SERVER(server, cfg);
        struct JsonCase {
            const char* route;
            std::string body;
            const char* param;  // "" for none
            const char* message_part;
        };
        const std::string deep = std::string(40, '[') + std::string(40, ']');
        const JsonCase cases[] = {
            {"/infer", "", "", "not valid JSON"},
            {"/infer", "{", "", "not valid JSON"},
            {"/infer", "[1]", "", "must be a JSON object"},
            {"/infer", R"({"prompt":"a","x":)" + deep + "}", "", "nests deeper than 32 levels"},
            {"/infer", "{}", "prompt", "'prompt' is required"},
            {"/infer", R"({"prompt":5})", "prompt", "'prompt' must be a string"},
            {"/infer", "{\"prompt\":\"\xff\xfe\"}", "", "not valid JSON"},
            {"/infer", R"({"prompt":"a","max_tokens":0})", "max_tokens", "between 1 and 64"},
            {"/infer", R"({"prompt":"a","max_tokens":65})", "max_tokens", "between 1 and 64"},
            {"/infer", R"({"prompt":"a","max_tokens":2.5})", "max_tokens", "must be an integer"},
            {"/infer", R"({"prompt":"a","max_tokens":"3"})", "max_tokens", "must be an integer"},
            {"/infer", R"({"prompt":"a","max_tokens":18446744073709551615})", "max_tokens", "between 1 and 64"},
            {"/infer", R"({"prompt":"a","temperature":-1})", "temperature", "between 0 and 2"},
            {"/infer", R"({"prompt":"a","temperature":"hot"})", "temperature", "must be a number"},
            {"/infer", R"({"prompt":"a","top_p":1.5})", "top_p", "between 0 and 1"},
            {"/infer", R"({"prompt":"a","seed":-3})", "seed", "non-negative integer"},
            {"/infer", R"({"prompt":"a","stream":true})", "stream", "use /v1/completions"},
            {"/infer", R"({"prompt":"a","return_tokens":1})", "return_tokens", "must be true or false"},
            {"/v1/completions", R"({"prompt":"a"})", "model", "'model' is required"},
            {"/v1/completions", R"({"model":"gkq-model","prompt":["a","b"]})", "prompt", "array of one string"},
            {"/v1/completions", R"({"model":"gkq-model","prompt":[1,2]})", "prompt", "array of one string"},
            {"/v1/completions", R"({"model":"gkq-model","prompt":"a","stream":"yes"})", "stream", "must be a boolean"},
            {"/v1/completions", R"({"model":"gkq-model","prompt":"a","n":2})", "n", "must be 1"},
            {"/v1/completions", R"({"model":"gkq-model","prompt":"a","stop":["x"]})", "stop", "not supported"},
            {"/v1/completions", R"({"model":"gkq-model","prompt":"a","echo":true})", "echo", "not supported"},
            {"/v1/completions", R"({"model":"gkq-model","prompt":"a","logprobs":2})", "logprobs", "not supported"},
        };
        TestConnection c(server->port());
        for (const JsonCase& jc : cases) {
            c.send(make_request("POST", jc.route, jc.body));
            auto r = c.read_response();
            QVERIFY2(r, jc.message_part);
            QVERIFY2(r->status == 400, qPrintable(QString::fromStdString(jc.body + " -> " + r->body)));
            json e = parse(r->body);
            QCOMPARE(e["error"]["type"].get<std::string>(), std::string("invalid_request_error"));
            VERIFY_CONTAINS(e["error"]["message"].get<std::string>(), jc.message_part);
            if (*jc.param)
                QCOMPARE(e["error"]["param"].get<std::string>(), std::string(jc.param));
            else
                QVERIFY(e["error"]["param"].is_null());
            QCOMPARE(r->header("Connection"), std::string("keep-alive"));  // an API error leaves HTTP intact
        }
        c.send(make_request("POST", "/v1/completions", R"({"model":"other","prompt":"a"})"));
        auto r = c.read_response();
        QCOMPARE(r->status, 404);
        QCOMPARE(parse(r->body)["error"]["code"].get<std::string>(), std::string("model_not_found"));
    }

    void slowClientsTimeOut_data() { test::add_backend_rows(); }
    void slowClientsTimeOut() {
        QFETCH(QString, backend);
        ServerConfig cfg = test::loopback_config(backend);
        cfg.header_timeout_ms = 150;
        cfg.body_timeout_ms = 150;
        cfg.idle_timeout_ms = 300;
        GKQ_START_SERVER(server, cfg);
        QElapsedTimer t;
        t.start();
        TestConnection headers(server->port());
        headers.send("GET /health HTTP/1.1\r\nHost: a\r\n");  // no blank line: the headers never end
        auto r1 = headers.read_response();
        QVERIFY(r1);
        QCOMPARE(r1->status, 408);
        VERIFY_CONTAINS(r1->body, "the request headers did not arrive within 150 ms");
        QVERIFY(t.elapsed() >= 150);
        QVERIFY(headers.closed_by_peer());

        t.restart();
        TestConnection body(server->port());
        body.send("POST /infer HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n{\"p");
        auto r2 = body.read_response();
        QCOMPARE(r2->status, 408);
        VERIFY_CONTAINS(r2->body, "the request body did not arrive within 150 ms");
        QVERIFY(t.elapsed() >= 150);
        QVERIFY(body.closed_by_peer());

        // An idle keep-alive connection is closed without a response.
        t.restart();
        TestConnection idle(server->port());
        idle.send(make_request("GET", "/health"));
        QCOMPARE(idle.read_response()->status, 200);
        QVERIFY(idle.closed_by_peer());
        QVERIFY(t.elapsed() >= 300);

        auto stats = http_request(server->port(), "GET", "/metrics");
        VERIFY_CONTAINS(stats->body, "gkq_http_timeouts_total{phase=\"headers\"} 1\n");
        VERIFY_CONTAINS(stats->body, "gkq_http_timeouts_total{phase=\"body\"} 1\n");
        VERIFY_CONTAINS(stats->body, "gkq_http_requests_total{route=\"other\",code=\"408\"} 2\n");
    }

    void connectionCap_data() { test::add_backend_rows(); }
    void connectionCap() {
        QFETCH(QString, backend);
        ServerConfig cfg = test::loopback_config(backend);
        cfg.max_connections = 2;
        GKQ_START_SERVER(server, cfg);
        TestConnection a(server->port()), b(server->port());
        // A request, then the start of the next in the same segment: once the first is answered, the core has
        // parsed the second's request line too, so both connections are mid-request (not idle) and counted.
        const std::string partial = "GET /health HTTP/1.1\r\n";
        a.send(make_request("GET", "/health") + partial);
        b.send(make_request("GET", "/health") + partial);
        QCOMPARE(a.read_response()->status, 200);
        QCOMPARE(b.read_response()->status, 200);
        TestConnection over(server->port());
        auto r = over.read_response();  // answered without being asked
        QVERIFY(r);
        QCOMPARE(r->status, 503);
        QCOMPARE(r->header("Retry-After"), std::string("1"));
        QCOMPARE(json::parse(r->body)["error"]["code"].get<std::string>(), std::string("over_capacity"));
        QVERIFY(over.closed_by_peer());
        // The server closes `a` itself (Connection: close) and so has counted it out before `a` sees EOF.
        a.send("Host: a\r\nConnection: close\r\n\r\n");
        QCOMPARE(a.read_response()->status, 200);
        QVERIFY(a.closed_by_peer());
        auto again = http_request(server->port(), "GET", "/health");
        QVERIFY(again);
        QCOMPARE(again->status, 200);
        b.send("Host: a\r\n\r\n");
        QCOMPARE(b.read_response()->status, 200);
        b.send(make_request("GET", "/metrics"));
        auto m = b.read_response();
        VERIFY_CONTAINS(m->body, "gkq_http_connections_rejected_total 1\n");
        VERIFY_CONTAINS(m->body, "gkq_http_connections_total 3\n");
    }

    // At the cap, the oldest idle connection makes room for a new one: /health gets in.
    void idleConnectionMakesRoom_data() { test::add_backend_rows(); }
    void idleConnectionMakesRoom() {
        QFETCH(QString, backend);
        ServerConfig cfg = test::loopback_config(backend);
        cfg.max_connections = 2;
        GKQ_START_SERVER(server, cfg);
        TestConnection a(server->port()), b(server->port());
        a.send(make_request("GET", "/health"));
        QCOMPARE(a.read_response()->status, 200);  // a: idle since its answer
        b.send(make_request("GET", "/health"));
        QCOMPARE(b.read_response()->status, 200);  // b: idle, more recently
        auto h = http_request(server->port(), "GET", "/health");
        QVERIFY(h);
        QCOMPARE(h->status, 200);
        QVERIFY(a.closed_by_peer());  // the oldest idle one went
        b.send(make_request("GET", "/health"));
        QCOMPARE(b.read_response()->status, 200);
    }

    // A connection that never sends a byte is closed when the header timeout, counted from accept, runs out.
    void silentConnectionTimesOutFromAccept_data() { test::add_backend_rows(); }
    void silentConnectionTimesOutFromAccept() {
        QFETCH(QString, backend);
        ServerConfig cfg = test::loopback_config(backend);
        cfg.header_timeout_ms = 150;
        cfg.idle_timeout_ms = 60000;
        GKQ_START_SERVER(server, cfg);
        QElapsedTimer t;
        t.start();
        TestConnection silent(server->port(), 5000);
        QVERIFY(silent.closed_by_peer());  // well before the 60 s idle timeout
        QVERIFY(t.elapsed() >= 150);
        QVERIFY(t.elapsed() < 5000);
    }

    // 1,100 connections from one address that never send a byte (more than the 1,024 cap) do not lock anyone out:
    // /health still answers 200 within a second, under the default limits, and with no per-address cap as well.
    void idleFloodLeavesHealthReachable_data() {
        QTest::addColumn<QString>("backend");
        QTest::addColumn<int>("per_address");
        for (const char* b : {"epoll", "io_uring", "io_uring_basic"}) {
            QTest::newRow((std::string(b) + " default per-address cap").c_str()) << b << -1;
            QTest::newRow((std::string(b) + " no per-address cap").c_str()) << b << 0;
        }
    }
    void idleFloodLeavesHealthReachable() {
        QFETCH(QString, backend);
        QFETCH(int, per_address);
        constexpr int kFlood = 1100;
        rlimit rl{};
        getrlimit(RLIMIT_NOFILE, &rl);
        const rlim_t need = 2 * kFlood + 256;  // the clients' sockets and the server's, in this one process
        if (rl.rlim_cur < need) {
            rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, need);
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
            if (rl.rlim_cur < need)
                QSKIP(qPrintable(QString("RLIMIT_NOFILE is %1 (hard %2), the test needs %3 descriptors")
                                     .arg(rl.rlim_cur)
                                     .arg(rl.rlim_max)
                                     .arg(need)));
        }
        ServerConfig cfg = test::loopback_config(backend);
        if (per_address >= 0) cfg.max_connections_per_address = per_address;
        QCOMPARE(cfg.max_connections, 1024);
        GKQ_START_SERVER(server, cfg);
        std::vector<TestConnection> flood;
        flood.reserve(kFlood);
        for (int i = 0; i < kFlood; ++i) {
            flood.emplace_back(server->port(), 2000);
            QVERIFY2(flood.back().connected(), qPrintable(QString("connection %1 failed").arg(i)));
        }
        QElapsedTimer t;
        t.start();
        TestConnection health(server->port(), 1000);
        QVERIFY(health.connected());
        health.send(make_request("GET", "/health"));
        auto r = health.read_response();
        QVERIFY2(r, "no answer to /health within 1 s");
        QCOMPARE(r->status, 200);
        QVERIFY(t.elapsed() < 1000);
        auto m = http_request(server->port(), "GET", "/metrics");
        QVERIFY(m);
        VERIFY_CONTAINS(m->body, "gkq_http_connections_rejected_total 0\n");
    }

    void countersAddUp_data() { test::add_backend_rows(); }
    void countersAddUp() {
        QFETCH(QString, backend);
        GKQ_START_SERVER(server, limits_config(backend));
        std::map<int, int> sent;
        int n = 0;
        TestConnection c(server->port());
        for (int i = 0; i < 7; ++i) {
            const char* paths[] = {"/health", "/ready", "/stats", "/v1/models", "/nope", "/metrics", "/v1/models/x"};
            c.send(make_request("GET", paths[i]));
            auto r = c.read_response();
            sent[r->status]++;
            n++;
        }
        for (int i = 0; i < 3; ++i) {
            TestConnection bad(server->port());
            bad.send("BAD\r\n\r\n");
            sent[bad.read_response()->status]++;
            n++;
        }
        c.send(make_request("GET", "/metrics"));
        auto m = c.read_response();
        QCOMPARE(metric_sum(m->body, "gkq_http_requests_total"), double(n));
        QCOMPARE(metric_sum(m->body, "gkq_http_parse_errors_total"), 3.0);
        QCOMPARE(metric_sum(m->body, "gkq_http_connections_total"), 4.0);
        QCOMPARE(metric_sum(m->body, "gkq_http_request_duration_seconds_count"), double(n));
        c.send(make_request("GET", "/stats"));
        json s = parse(c.read_response()->body);
        QCOMPARE(s["server"]["requests_total"].get<int>(), n + 1);  // the /metrics request counts by now
        for (const auto& [status, count] : sent)
            QCOMPARE(s["server"]["requests_by_status"][std::to_string(status)].get<int>(),
                     count + (status == 200 ? 1 : 0));
    }
};

QTEST_APPLESS_MAIN(TestServerHttp)
#include "test_server_http.moc"
