// gkq::Server with a model, over loopback, on each backend: inference routes against direct generation, streaming,
// the weight cache through the server, workers busy while /health answers, 429 when the queue is full, graceful
// drain, the loading and failed phases, CDN mode over range requests, configuration from the environment, and the
// step down to epoll when a seccomp filter refuses io_uring (as container runtimes do).
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "http_test_support.h"
#include "server_fixture.h"
#include "test_support.h"

#include <nlohmann/json.hpp>

#include <QtTest>

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstddef>
#include <mutex>

using namespace gkq;
using test::http_request;
using test::make_request;
using test::reference_completion;
using test::TestConnection;
using json = nlohmann::json;

namespace {

json parse(const std::string& s) {
    return json::parse(s, nullptr, false);
}

// A gate a worker waits at (ServerConfig::on_inference_start), so tests can hold a generation in progress.
struct Gate {
    std::mutex m;
    std::condition_variable cv;
    int entered = 0;
    bool open = false;
    void pass() {
        std::unique_lock lock(m);
        entered++;
        cv.notify_all();
        cv.wait(lock, [&] { return open; });
    }
    bool wait_entered(int n) {
        std::unique_lock lock(m);
        return cv.wait_for(lock, std::chrono::seconds(10), [&] { return entered >= n; });
    }
    void release() {
        std::lock_guard lock(m);
        open = true;
        cv.notify_all();
    }
};

}  // namespace

class TestServer : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    test::TinyKnot m_tiny;

    ServerConfig model_config(const QString& backend) {
        ServerConfig c = test::loopback_config(backend);
        c.weights_path = m_tiny.knot;
        return c;
    }

private slots:
    // First, while this process has few threads: the child forks from it.
    void autoStepsDownToEpollWhenIoUringIsRefused() {
        const pid_t pid = fork();
        QVERIFY(pid >= 0);
        if (pid == 0) {
            // The child: refuse io_uring_setup with EPERM, as Docker's and containerd's default profiles do.
            sock_filter filter[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
                _exit(10);
            std::string log;
            ServerConfig c = test::loopback_config("auto");
            auto s = Server::start(c, [&](std::string_view l) { log += std::string(l) + "\n"; });
            if (!s) _exit(11);
            if ((*s)->backend() != "epoll") _exit(12);
            if (log.find("io_uring is refused by this kernel or sandbox (Operation not permitted); using epoll") ==
                std::string::npos)
                _exit(13);
            auto h = http_request((*s)->port(), "GET", "/health");
            if (!h || h->status != 200) _exit(14);
            ServerConfig forced = test::loopback_config("io_uring");
            auto f = Server::start(forced);
            if (f || f.status().code() != StatusCode::Unsupported ||
                f.message().find("IO_BACKEND=io_uring: io_uring is refused") != 0)
                _exit(15);
            _exit(0);
        }
        int status = 0;
        QCOMPARE(waitpid(pid, &status, 0), pid);
        QVERIFY(WIFEXITED(status));
        QCOMPARE(WEXITSTATUS(status), 0);
    }

    void initTestCase() { m_tiny = test::make_tiny_knot(m_dir); }

    void inferenceRoutes_data() { test::add_backend_rows(); }
    void inferenceRoutes() {
        QFETCH(QString, backend);
        GKQ_START_SERVER(server, model_config(backend));
        QVERIFY(server->wait_loaded(30000));
        QCOMPARE(server->phase(), ServerPhase::Ready);
        auto knot = KnotFile::open(m_tiny.knot);
        const size_t n_records = knot->n_records();
        const uint16_t port = server->port();

        auto health = http_request(port, "GET", "/health");
        QCOMPARE(health->body, R"({"status":"healthy","weights_loaded":)" + std::to_string(n_records) + "}");
        auto models = parse(http_request(port, "GET", "/v1/models")->body);
        QCOMPARE(models["data"][0]["id"].get<std::string>(), std::string("tiny"));
        QCOMPARE(models["data"][0]["object"].get<std::string>(), std::string("model"));
        QCOMPARE(http_request(port, "GET", "/v1/models/tiny")->status, 200);
        QCOMPARE(http_request(port, "GET", "/v1/models/other")->status, 404);

        const std::string want = reference_completion(m_tiny.knot, "ab cd", 6);
        auto infer = http_request(port, "POST", "/infer", R"({"prompt":"ab cd","max_tokens":6,"temperature":0})");
        QCOMPARE(infer->status, 200);
        json j = parse(infer->body);
        QCOMPARE(j["text"].get<std::string>(), want);
        QCOMPARE(j["model"].get<std::string>(), std::string("tiny"));
        QVERIFY(j["completion_tokens"].get<int>() <= 6);
        QVERIFY(j["prompt_tokens"].get<int>() >= 2);
        QVERIFY(j["timings"]["total_ms"].get<double>() >= j["timings"]["generate_ms"].get<double>());
        // The model was built at load time from the same cache entries: this request only hit.
        QCOMPARE(j["cache"]["misses"].get<int>(), 0);
        QCOMPARE(j["cache"]["model_rebuilt"].get<bool>(), false);
        QCOMPARE(j["cache"]["lookups"].get<size_t>(), n_records);
        QVERIFY(!j.contains("tokens") && !j.contains("prompt_ids"));

        auto completion =
            http_request(port, "POST", "/v1/completions",
                         R"({"model":"tiny","prompt":["ab cd"],"max_tokens":6,"temperature":0,"stream":false})");
        QCOMPARE(completion->status, 200);
        json c = parse(completion->body);
        QCOMPARE(c["object"].get<std::string>(), std::string("text_completion"));
        QCOMPARE(c["choices"][0]["text"].get<std::string>(), want);
        QCOMPARE(c["usage"]["completion_tokens"].get<int>(), j["completion_tokens"].get<int>());
        QCOMPARE(c["usage"]["total_tokens"].get<int>(),
                 c["usage"]["prompt_tokens"].get<int>() + c["usage"]["completion_tokens"].get<int>());
        const std::string finish = c["choices"][0]["finish_reason"].get<std::string>();
        QVERIFY(finish == "length" || finish == "stop");

        // Streaming: server-sent events over chunked encoding, the same text, then data: [DONE].
        TestConnection s(port);
        s.send(make_request("POST", "/v1/completions",
                            R"({"model":"tiny","prompt":"ab cd","max_tokens":6,"temperature":0,"stream":true})"));
        auto head = s.read_head();
        QCOMPARE(head->status, 200);
        QCOMPARE(head->header("Content-Type"), std::string("text/event-stream"));
        QCOMPARE(head->header("Transfer-Encoding"), std::string("chunked"));
        std::string events;
        while (auto chunk = s.read_chunk()) events += *chunk;
        QVERIFY(events.size() > 20);
        QVERIFY(events.ends_with("data: [DONE]\n\n"));
        std::string streamed;
        std::string last_finish;
        size_t pos = 0;
        int n_events = 0;
        while ((pos = events.find("data: ", pos)) != std::string::npos) {
            const size_t end = events.find("\n\n", pos);
            const std::string payload = events.substr(pos + 6, end - pos - 6);
            pos = end + 2;
            if (payload == "[DONE]") break;
            json e = parse(payload);
            QVERIFY2(e.is_object(), payload.c_str());
            streamed += e["choices"][0]["text"].get<std::string>();
            if (!e["choices"][0]["finish_reason"].is_null())
                last_finish = e["choices"][0]["finish_reason"].get<std::string>();
            n_events++;
        }
        QCOMPARE(streamed, want);
        QCOMPARE(last_finish, finish);
        QVERIFY(n_events >= 2);
        // The connection stays usable after the stream.
        s.send(make_request("GET", "/health"));
        QCOMPARE(s.read_response()->status, 200);

        // Counters: every lookup a hit or a miss; inference counted; tokens counted.
        json st = parse(http_request(port, "GET", "/stats")->body);
        QCOMPARE(st["cache"]["lookups"].get<uint64_t>(),
                 st["cache"]["hits"].get<uint64_t>() + st["cache"]["misses"].get<uint64_t>());
        QCOMPARE(st["cache"]["misses"].get<uint64_t>(), uint64_t(n_records));  // the load, once
        QCOMPARE(st["cache"]["reconstructions"].get<uint64_t>(), uint64_t(n_records));
        QCOMPARE(st["cache"]["lookups"].get<uint64_t>(), uint64_t(4 * n_records));
        QCOMPARE(st["inference"]["ok"].get<int>(), 3);
        QCOMPARE(st["weights"]["mode"].get<std::string>(), std::string("memory-resident"));
        auto metrics = http_request(port, "GET", "/metrics")->body;
        VERIFY_CONTAINS(metrics, "gkq_inference_requests_total{result=\"ok\"} 3\n");
        VERIFY_CONTAINS(metrics, "gkq_cache_lookups_total " + std::to_string(4 * n_records) + "\n");
        VERIFY_CONTAINS(metrics, "gkq_cache_hits_total " + std::to_string(3 * n_records) + "\n");
        VERIFY_CONTAINS(metrics, "gkq_cache_misses_total " + std::to_string(n_records) + "\n");
        VERIFY_CONTAINS(metrics, "gkq_http_requests_total{route=\"/v1/completions\",code=\"200\"} 2\n");
        VERIFY_CONTAINS(metrics, "gkq_cache_reconstruction_seconds_count " + std::to_string(n_records) + "\n");

        // the ids, with return_tokens: the prompt as the tokenizer encodes it, and the greedy ids
        const test::ReferenceRun ref = test::reference_run(m_tiny.knot, "ab cd", 6);
        auto ids = http_request(port, "POST", "/infer",
                                R"({"prompt":"ab cd","max_tokens":6,"temperature":0,"return_tokens":true})");
        QCOMPARE(ids->status, 200);
        json k = parse(ids->body);
        QCOMPARE(k["prompt_ids"].get<std::vector<int32_t>>(), ref.prompt_ids);
        QCOMPARE(k["tokens"].get<std::vector<int32_t>>(), ref.ids);
        QCOMPARE(k["tokens"].size(), k["completion_tokens"].get<size_t>());
        QCOMPARE(k["text"].get<std::string>(), want);

        // A prompt longer than the context (32 positions) is refused before generating.
        auto too_long = http_request(port, "POST", "/infer", R"({"prompt":")" + std::string(80, 'z') + R"("})");
        QCOMPARE(too_long->status, 400);
        QCOMPARE(parse(too_long->body)["error"]["code"].get<std::string>(), std::string("context_length_exceeded"));
    }

    void healthAnswersWhileWorkersAreBusy_data() { test::add_backend_rows(); }
    void healthAnswersWhileWorkersAreBusy() {
        QFETCH(QString, backend);
        Gate gate;
        ServerConfig cfg = model_config(backend);
        cfg.n_workers = 1;  // one generation at a time, whatever the cores
        cfg.max_queue = 1;
        cfg.on_inference_start = [&] { gate.pass(); };
        GKQ_START_SERVER(server, cfg);
        QVERIFY(server->wait_loaded(30000));
        const std::string body = R"({"prompt":"ab","max_tokens":3,"temperature":0})";
        TestConnection running(server->port()), queued(server->port());
        running.send(make_request("POST", "/infer", body));
        QVERIFY(gate.wait_entered(1));  // the worker holds the first generation
        queued.send(make_request("POST", "/infer", body));
        // The loop still answers while the worker is held; the queue (1) fills, so a third generation is refused.
        for (int i = 0; i < 5; ++i) QCOMPARE(http_request(server->port(), "GET", "/health")->status, 200);
        auto stats = parse(http_request(server->port(), "GET", "/stats")->body);
        QCOMPARE(stats["inference"]["in_flight"].get<int>(), 1);
        QCOMPARE(stats["inference"]["queued"].get<int>(), 1);
        auto refused = http_request(server->port(), "POST", "/infer", body);
        QCOMPARE(refused->status, 429);
        QCOMPARE(refused->header("Retry-After"), std::string("1"));
        QCOMPARE(parse(refused->body)["error"]["type"].get<std::string>(), std::string("rate_limit_error"));
        gate.release();
        QCOMPARE(running.read_response()->status, 200);
        QCOMPARE(queued.read_response()->status, 200);
        auto metrics = http_request(server->port(), "GET", "/metrics")->body;
        VERIFY_CONTAINS(metrics, "gkq_inference_rejected_total 1\n");
        VERIFY_CONTAINS(metrics, "gkq_http_requests_total{route=\"/infer\",code=\"429\"} 1\n");
    }

    // With the default workers and queue (sized from the cores), a burst of 32 concurrent small /infer requests on
    // the demo model's knot is served: every one 200, none refused with 429.
    void burstOf32WithTheDefaults() {
        const std::string demo = GKQ_DEMO_MODEL_DIR;
        auto model = ModelFile::open(demo);
        QVERIFY2(model.is_ok(), model.message().c_str());
        auto vocab = read_llama2c_tokenizer(demo + "/tokenizer.bin", model->config().vocab_size);
        QVERIFY2(vocab.is_ok(), vocab.message().c_str());
        QuantizeOptions o;
        o.preset = "q8_0";
        o.vocab = *vocab;
        const std::string knot = m_dir.file("demo.knot");
        auto quantized = quantize_model(*model, o, knot);
        QVERIFY2(quantized.is_ok(), quantized.message().c_str());
        ServerConfig cfg = test::loopback_config("epoll");  // the queue is under test here, not the backend
        cfg.weights_path = knot;
        const ServerConfig defaults;
        QCOMPARE(cfg.n_workers, default_server_workers());
        QCOMPARE(cfg.max_queue, defaults.max_queue);
        GKQ_START_SERVER(server, cfg);
        QVERIFY(server->wait_loaded(30000));
        QElapsedTimer t;
        t.start();
        std::vector<TestConnection> clients;
        for (int i = 0; i < 32; ++i) clients.emplace_back(server->port(), 60000);
        const std::string body = R"({"prompt":"Once upon a time","max_tokens":4,"temperature":0})";
        for (TestConnection& c : clients) QVERIFY(c.send(make_request("POST", "/infer", body)));
        int ok = 0;
        for (TestConnection& c : clients) {
            auto r = c.read_response();
            QVERIFY2(r, "no answer within 60 s");
            QVERIFY2(r->status == 200, (std::to_string(r->status) + " " + r->body).c_str());
            ++ok;
        }
        QCOMPARE(ok, 32);
        QVERIFY(t.elapsed() < 60000);
        VERIFY_CONTAINS(http_request(server->port(), "GET", "/metrics")->body, "gkq_inference_rejected_total 0\n");
    }

    void pipelinedBehindAGeneration_data() { test::add_backend_rows(); }
    void pipelinedBehindAGeneration() {
        QFETCH(QString, backend);
        GKQ_START_SERVER(server, model_config(backend));
        QVERIFY(server->wait_loaded(30000));
        TestConnection c(server->port());
        c.send(make_request("POST", "/infer", R"({"prompt":"ab","max_tokens":2,"temperature":0})") +
               make_request("GET", "/health") + make_request("POST", "/infer", R"({"prompt":"cd","max_tokens":2})"));
        auto a = c.read_response();
        auto b = c.read_response();
        auto d = c.read_response();
        QCOMPARE(a->status, 200);
        QVERIFY(parse(a->body).contains("text"));
        QCOMPARE(b->status, 200);
        QCOMPARE(b->body.substr(0, 20), std::string(R"({"status":"healthy",)"));
        QCOMPARE(d->status, 200);
        QVERIFY(parse(d->body).contains("text"));
    }

    void drainFinishesWhatIsInProgress_data() { test::add_backend_rows(); }
    void drainFinishesWhatIsInProgress() {
        QFETCH(QString, backend);
        Gate gate;
        ServerConfig cfg = model_config(backend);
        cfg.on_inference_start = [&] { gate.pass(); };
        std::string log;
        std::mutex log_mutex;
        auto started = Server::start(cfg, [&](std::string_view l) {
            std::lock_guard lock(log_mutex);
            log += std::string(l) + "\n";
        });
        if (!started && started.status().code() == StatusCode::Unsupported) QSKIP("the kernel refuses io_uring");
        QVERIFY2(started.is_ok(), started.message().c_str());
        auto& server = *started;
        QVERIFY(server->wait_loaded(30000));
        TestConnection busy(server->port()), idle(server->port()), partial(server->port());
        idle.send(make_request("GET", "/health"));
        QCOMPARE(idle.read_response()->status, 200);
        busy.send(make_request("POST", "/infer", R"({"prompt":"ab","max_tokens":2})"));
        QVERIFY(gate.wait_entered(1));
        partial.send("GET /ready HTTP/1.1\r\nHost: a\r\n");  // a request half-way through its headers
        QCOMPARE(http_request(server->port(), "GET", "/health")->status, 200);  // (the half request was read)
        server->drain();
        QVERIFY(idle.closed_by_peer());  // idle keep-alive connections close at once
        QCOMPARE(server->phase(), ServerPhase::Draining);
        // A request in progress when the drain began still gets its answer: not ready, and the connection closes.
        partial.send("\r\n");
        auto not_ready = partial.read_response();
        QCOMPARE(not_ready->status, 503);
        QCOMPARE(parse(not_ready->body)["status"].get<std::string>(), std::string("draining"));
        QCOMPARE(not_ready->header("Retry-After"), std::string("1"));
        QCOMPARE(not_ready->header("Connection"), std::string("close"));
        QVERIFY(partial.closed_by_peer());
        // New connections are refused once the listener is closed.
        TestConnection late(server->port(), 1000);
        QVERIFY(!late.connected() || !late.read_response());
        gate.release();
        auto r = busy.read_response();
        QCOMPARE(r->status, 200);
        QCOMPARE(r->header("Connection"), std::string("close"));
        QVERIFY(busy.closed_by_peer());
        QVERIFY(server->wait_stopped(10000));
        QCOMPARE(server->phase(), ServerPhase::Stopped);
        std::lock_guard lock(log_mutex);
        VERIFY_CONTAINS(log, "draining: ");
        VERIFY_CONTAINS(log, "stopped\n");
    }

    void loadingThenFailed_data() { test::add_backend_rows(); }
    void loadingThenFailed() {
        QFETCH(QString, backend);
        // A FIFO as the weights: opening it for reading blocks until the test opens it for writing, which holds the
        // server in its loading phase for as long as the test needs.
        const std::string fifo = m_dir.file("weights-" + backend.toStdString() + ".fifo");
        QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
        ServerConfig cfg = test::loopback_config(backend);
        cfg.weights_path = fifo;
        GKQ_START_SERVER(server, cfg);
        QCOMPARE(server->phase(), ServerPhase::Loading);
        auto health = http_request(server->port(), "GET", "/health");
        QCOMPARE(health->status, 503);
        QCOMPARE(health->body, std::string(R"({"status":"loading"})"));
        QCOMPARE(health->header("Retry-After"), std::string("1"));
        auto ready = http_request(server->port(), "GET", "/ready");
        QCOMPARE(ready->status, 503);
        QCOMPARE(parse(ready->body)["status"].get<std::string>(), std::string("loading"));
        auto infer = http_request(server->port(), "POST", "/infer", R"({"prompt":"ab"})");
        QCOMPARE(infer->status, 503);
        QCOMPARE(parse(infer->body)["error"]["code"].get<std::string>(), std::string("not_ready"));
        QCOMPARE(infer->header("Retry-After"), std::string("1"));
        // Feed the reader nothing, as often as it opens the FIFO, until loading gives up.
        while (!server->wait_loaded(50)) {
            const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
            if (w >= 0) ::close(w);
        }
        QCOMPARE(server->phase(), ServerPhase::Failed);
        QVERIFY(!server->load_status().is_ok());
        auto failed = http_request(server->port(), "GET", "/ready");
        QCOMPARE(failed->status, 503);
        json f = parse(failed->body);
        QCOMPARE(f["status"].get<std::string>(), std::string("failed"));
        QCOMPARE(f["error"].get<std::string>(), server->load_status().message());
        QCOMPARE(http_request(server->port(), "GET", "/health")->status, 503);
    }

    void cdnModeStreamsRecordsPerRequest() {
        test::RangeFileServer cdn(test::read_file(m_tiny.knot));
        ServerConfig cfg = test::loopback_config("epoll");
        cfg.weights_path = cdn.url("/weights/tiny.knot");
        cfg.use_cdn_fallback = true;
        GKQ_START_SERVER(server, cfg);
        QVERIFY(server->wait_loaded(30000));
        QCOMPARE(server->phase(), ServerPhase::Ready);
        auto knot = KnotFile::open(m_tiny.knot);
        const int n = static_cast<int>(knot->n_records());
        QCOMPARE(cdn.n_requests(), 4 + n);  // trailer, header, block, index; every record for the first build
        const std::string want = reference_completion(m_tiny.knot, "ab", 4);
        for (int i = 0; i < 2; ++i) {
            auto r =
                http_request(server->port(), "POST", "/infer", R"({"prompt":"ab","max_tokens":4,"temperature":0})");
            QCOMPARE(r->status, 200);
            json j = parse(r->body);
            QCOMPARE(j["text"].get<std::string>(), want);
            QCOMPARE(j["cache"]["hits"].get<int>(), 0);  // nothing is kept in CDN mode
            QCOMPARE(j["cache"]["model_rebuilt"].get<bool>(), true);
        }
        QCOMPARE(cdn.n_requests(), 4 + 3 * n);
        json st = parse(http_request(server->port(), "GET", "/stats")->body);
        QCOMPARE(st["weights"]["mode"].get<std::string>(), std::string("cdn"));
        QCOMPARE(st["cache"]["keep_reconstructions"].get<bool>(), false);
        QCOMPARE(st["cache"]["entries"].get<int>(), 0);
        QCOMPARE(st["cache"]["not_kept"].get<int>(), 3 * n);
        QCOMPARE(st["weights"]["path"].get<std::string>(), cdn.url("/weights/tiny.knot"));
        QCOMPARE(parse(http_request(server->port(), "GET", "/v1/models")->body)["data"][0]["id"].get<std::string>(),
                 std::string("tiny"));
    }

    void smallCacheAndModelFiles() {
        // A cache budget of 0 keeps nothing: every request reconstructs and rebuilds. The GGUF is served directly.
        ServerConfig cfg = test::loopback_config("epoll");
        cfg.weights_path = m_tiny.gguf;
        cfg.cache_budget_mb = 0;
        GKQ_START_SERVER(server, cfg);
        QVERIFY(server->wait_loaded(30000));
        auto r = http_request(server->port(), "POST", "/infer", R"({"prompt":"ab","max_tokens":2,"seed":5})");
        QCOMPARE(r->status, 200);
        json j = parse(r->body);
        QCOMPARE(j["seed"].get<int>(), 5);
        QCOMPARE(j["cache"]["model_rebuilt"].get<bool>(), true);
        json st = parse(http_request(server->port(), "GET", "/stats")->body);
        QCOMPARE(st["weights"]["mode"].get<std::string>(), std::string("model-file"));
        QCOMPARE(st["cache"]["budget_bytes"].get<int>(), 0);
        QCOMPARE(st["cache"]["bytes_used"].get<int>(), 0);
        QCOMPARE(st["cache"]["reconstructions"].get<uint64_t>(), st["cache"]["misses"].get<uint64_t>());
    }

    void configurationFromTheEnvironment() {
        std::map<std::string, std::string> env = {{"MEMORY_RESIDENT_MODE", "false"}, {"WEIGHTS_PATH", "/w/m.knot"},
                                                  {"GPU_CACHE_SIZE_MB", "64"},       {"MAX_AGE_SECONDS", "2.5"},
                                                  {"USE_CDN_FALLBACK", "no"},        {"IO_BACKEND", "epoll"}};
        auto get = [&](const char* name) -> const char* {
            auto it = env.find(name);
            return it == env.end() ? nullptr : it->second.c_str();
        };
        auto c = apply_server_env(ServerConfig{}, get);
        QVERIFY2(c.is_ok(), c.message().c_str());
        QCOMPARE(c->memory_resident, false);
        QCOMPARE(c->weights_path, std::string("/w/m.knot"));
        QCOMPARE(c->cache_budget_mb, uint64_t(64));
        QCOMPARE(c->max_age_seconds, 2.5);
        QCOMPARE(c->use_cdn_fallback, false);
        QCOMPARE(c->io_backend, IoBackend::Epoll);
        QCOMPARE(c->host, std::string("127.0.0.1"));
        const std::pair<const char*, const char*> bad[] = {
            {"MEMORY_RESIDENT_MODE", "maybe"}, {"GPU_CACHE_SIZE_MB", "-1"}, {"GPU_CACHE_SIZE_MB", "8GB"},
            {"MAX_AGE_SECONDS", "soon"},       {"USE_CDN_FALLBACK", ""},    {"IO_BACKEND", "kqueue"}};
        for (const auto& [name, value] : bad) {
            auto saved = env;
            env[name] = value;
            auto r = apply_server_env(ServerConfig{}, get);
            QVERIFY(!r.is_ok());
            QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
            QVERIFY2(r.message().rfind(std::string(name) + "='" + value + "': ", 0) == 0, r.message().c_str());
            env = saved;
        }
        ServerConfig cdn_without_url = test::loopback_config("epoll");
        cdn_without_url.use_cdn_fallback = true;
        cdn_without_url.weights_path = m_tiny.knot;
        auto s1 = Server::start(cdn_without_url);
        QCOMPARE(s1.status().code(), StatusCode::InvalidArgument);
        VERIFY_CONTAINS(s1.message(), "USE_CDN_FALLBACK is on, so WEIGHTS_PATH (--weights) must be an http:// URL");
        ServerConfig url_without_cdn = test::loopback_config("epoll");
        url_without_cdn.weights_path = "http://127.0.0.1:1/m.knot";
        auto s2 = Server::start(url_without_cdn);
        VERIFY_CONTAINS(s2.message(), "is a URL: set USE_CDN_FALLBACK=true");
        // A port in use is an error naming it.
        GKQ_START_SERVER(first, test::loopback_config("epoll"));
        ServerConfig same = test::loopback_config("epoll");
        same.port = first->port();
        auto s3 = Server::start(same);
        QCOMPARE(s3.status().code(), StatusCode::IoError);
        VERIFY_CONTAINS(s3.message(),
                        "cannot listen on 127.0.0.1:" + std::to_string(first->port()) + ": Address already in use");
    }
};

QTEST_APPLESS_MAIN(TestServer)
#include "test_server.moc"
