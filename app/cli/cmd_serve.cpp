// gkq serve [--weights X.knot] [--host 127.0.0.1] [--port 8080] ...: the HTTP inference endpoint, in the foreground.
// Configured by the documents' environment variables, overridden by the flags; SIGTERM/SIGINT drain gracefully
// (a second signal stops at once).
#include "cli/args.h"
#include "cli/commands.h"

#include "gkq/server.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace gkq::cli {

#ifdef GKQ_WITH_SERVER

namespace {

Server* volatile g_server = nullptr;
std::atomic<int> g_signals{0};
volatile sig_atomic_t g_last_signal = 0;

void on_signal(int sig) {
    g_last_signal = sig;
    const int n = g_signals.fetch_add(1);
    Server* s = g_server;
    if (s == nullptr) return;  // still starting: main() acts on the count once the server exists
    if (n == 0)
        s->drain();
    else
        s->stop();
}

void log_line(std::string_view line) {
    std::fprintf(stderr, "gkq serve: %.*s\n", static_cast<int>(line.size()), line.data());
    std::fflush(stderr);
}

}  // namespace

int cmd_serve(int argc, char** argv) {
    std::string weights, host, tokenizer, backend, model_id, policy;
    int64_t port = 8080, cache_mb = 0, workers = 0, threads = 0, max_connections = 0, max_queue = 0, max_context = 0,
            per_address = 0;
    int64_t header_ms = 0, body_ms = 0, idle_ms = 0, drain_ms = 0;
    double max_age = 0;
    bool cdn = false, on_disk = false;
    std::string activations = "q8";
    ArgParser p(
        "gkq serve [--weights FILE|URL] [--host ADDR] [--port N] [options]",
        "Serves a model over HTTP: GET /health /ready /metrics /stats /v1/models, POST /infer /v1/completions.\n"
        "Environment (flags override): WEIGHTS_PATH, MEMORY_RESIDENT_MODE (true), GPU_CACHE_SIZE_MB (1024),\n"
        "MAX_AGE_SECONDS (3600), USE_CDN_FALLBACK (false), IO_BACKEND (auto|io_uring|io_uring_basic|epoll),\n"
        "GKQ_MODEL_ID, GKQ_MAX_CONNECTIONS_PER_ADDRESS (256). Binds 127.0.0.1 unless --host says otherwise.\n"
        "Generations: " +
            std::to_string(default_server_workers()) + " at once on this machine (half its " +
            std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
            " cores, 1 to 16), each on cores/workers threads;\n" +
            std::to_string(default_server_queue(default_server_workers())) +
            " more wait (32 per worker); beyond that /infer answers 429 + Retry-After.\n"
            "Connections: a request's headers must arrive within --header-timeout-ms of the accept or of its first\n"
            "byte; at --max-connections (or --max-connections-per-address for one client) the oldest idle connection\n"
            "is closed for the new one, so /health, /ready and /metrics still get in; with none idle, 503.\n"
            "SIGTERM or SIGINT drains: the listener closes, requests in progress finish, then the process exits 0; a\n"
            "second signal stops at once.");
    p.option("--weights", "FILE|URL", "knot, model file, or (with --cdn) http:// URL of a knot", &weights);
    p.option("--host", "ADDR", "address to bind (default 127.0.0.1)", &host);
    p.option_int("--port", "N", "port (default 8080; 0 picks a free one, printed on stderr)", &port, 0, 65535);
    p.option("--tokenizer", "FILE", "llama2.c tokenizer.bin for a model without a vocabulary", &tokenizer);
    p.flag("--cdn", "stream the knot from the --weights URL by range requests (USE_CDN_FALLBACK=true)", &cdn);
    p.flag("--on-disk", "read knot records from the file when needed (MEMORY_RESIDENT_MODE=false)", &on_disk);
    p.option_int("--cache-mb", "MB", "reconstructed-weight cache budget (GPU_CACHE_SIZE_MB)", &cache_mb, 0, 1 << 24);
    p.option("--cache-policy", "P",
             "keep (default): the weights that fill the budget stay, the rest are loaded for each use; lru: least "
             "recently used out (under a budget below the model a forward pass then hits nothing)",
             &policy);
    p.option_double("--max-age", "S", "seconds a reconstruction stays cached, 0: no limit (MAX_AGE_SECONDS)", &max_age,
                    0, 1e9);
    p.option("--io-backend", "B", "auto, io_uring, io_uring_basic or epoll (IO_BACKEND)", &backend);
    p.option("--model-id", "NAME", "model name in /v1/models (default: the weights file's name)", &model_id);
    p.option_int("--workers", "N", "generations run at once (default: half the cores, 1 to 16)", &workers, 1, 256);
    p.option_int("--threads", "N", "threads per generation (default 0: the cores shared among the workers)", &threads,
                 0, 1024);
    p.option_choice("--activations", "A", kActivationsQ8Help, &activations, {"q8", "f32"});
    p.option_int("--max-connections", "N", "connection cap (default 1024)", &max_connections, 1, 1 << 20);
    p.option_int("--max-connections-per-address", "N",
                 "connection cap per client address, 0: none (default 256; GKQ_MAX_CONNECTIONS_PER_ADDRESS)",
                 &per_address, 0, 1 << 20);
    p.option_int("--max-queue", "N", "generations waiting before 429 (default 32 per worker)", &max_queue, 0, 1 << 20);
    p.option_int("--max-context", "N", "positions per generation (default: the model's, at most 4096)", &max_context, 0,
                 1 << 24);
    p.option_int("--header-timeout-ms", "MS", "time for a request's headers (default 10000)", &header_ms, 1, 1 << 30);
    p.option_int("--body-timeout-ms", "MS", "time for a request's body (default 30000)", &body_ms, 1, 1 << 30);
    p.option_int("--idle-timeout-ms", "MS", "idle keep-alive connections close after (default 60000)", &idle_ms, 1,
                 1 << 30);
    p.option_int("--drain-timeout-ms", "MS", "longest graceful drain (default 30000)", &drain_ms, 1, 1 << 30);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }

    auto env = apply_server_env(ServerConfig{}, [](const char* name) { return std::getenv(name); });
    if (!env) {
        std::fprintf(stderr, "gkq serve: %s\n", env.message().c_str());
        return exit_code(env.status());
    }
    ServerConfig c = *env;
    if (p.given("--weights")) c.weights_path = weights;
    if (p.given("--host")) c.host = host;
    c.port = static_cast<uint16_t>(port);
    if (p.given("--tokenizer")) c.tokenizer_path = tokenizer;
    if (cdn) c.use_cdn_fallback = true;
    if (on_disk) c.memory_resident = false;
    if (p.given("--cache-mb")) c.cache_budget_mb = static_cast<uint64_t>(cache_mb);
    if (p.given("--max-age")) c.max_age_seconds = max_age;
    if (p.given("--cache-policy")) {
        auto pol = parse_cache_policy(policy);
        if (!pol) {
            std::fprintf(stderr, "gkq serve: --cache-policy: %s\n", pol.message().c_str());
            return exit_code(pol.status());
        }
        c.cache_policy = *pol;
    }
    if (p.given("--io-backend")) {
        auto b = parse_io_backend(backend);
        if (!b) {
            std::fprintf(stderr, "gkq serve: --io-backend: %s\n", b.message().c_str());
            return exit_code(b.status());
        }
        c.io_backend = *b;
    }
    if (p.given("--model-id")) c.model_id = model_id;
    if (p.given("--workers")) {
        c.n_workers = static_cast<int>(workers);
        c.max_queue = default_server_queue(c.n_workers);
    }
    c.n_threads = static_cast<int>(threads);
    c.q8_activations = activations == "q8";
    if (p.given("--max-connections")) c.max_connections = static_cast<int>(max_connections);
    if (p.given("--max-connections-per-address")) c.max_connections_per_address = static_cast<int>(per_address);
    if (p.given("--max-queue")) c.max_queue = static_cast<int>(max_queue);
    if (p.given("--max-context")) c.max_context = max_context;
    if (p.given("--header-timeout-ms")) c.header_timeout_ms = static_cast<int>(header_ms);
    if (p.given("--body-timeout-ms")) c.body_timeout_ms = static_cast<int>(body_ms);
    if (p.given("--idle-timeout-ms")) c.idle_timeout_ms = static_cast<int>(idle_ms);
    if (p.given("--drain-timeout-ms")) c.drain_timeout_ms = static_cast<int>(drain_ms);

    // Server::drain() and stop() are async-signal-safe, so the handlers call them directly; this thread only
    // watches and logs. (Handlers rather than a blocked mask: threads started before main, such as OpenBLAS's,
    // would otherwise receive the signal and take its default action.)
    std::signal(SIGPIPE, SIG_IGN);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    auto server = Server::start(c, log_line);
    if (!server) {
        std::fprintf(stderr, "gkq serve: %s\n", server.message().c_str());
        return exit_code(server.status());
    }
    g_server = server->get();
    // A signal that came while the server was starting found no server to tell.
    if (const int n = g_signals.load(); n >= 1) (n == 1 ? (*server)->drain() : (*server)->stop());
    int logged = 0;
    for (;;) {
        const ServerPhase phase = (*server)->phase();
        const int n = g_signals.load();
        if (n > logged) {
            log_line(logged == 0 ? std::string(g_last_signal == SIGTERM ? "SIGTERM" : "SIGINT") + ": draining"
                                 : std::string("second signal: stopping now"));
            logged = n > 1 ? n : 1;
        }
        if (phase == ServerPhase::Stopped) break;
        if (phase == ServerPhase::Failed) {
            (*server)->stop();
            (*server)->wait_stopped(5000);
            g_server = nullptr;
            return kExitBadInput;  // the load error is already logged
        }
        (*server)->wait_stopped(100);
    }
    // Signals from here on end the process the default way; the server is gone with this scope.
    std::signal(SIGTERM, SIG_DFL);
    std::signal(SIGINT, SIG_DFL);
    g_server = nullptr;
    return kExitOk;
}

#else

int cmd_serve(int, char**) {
    std::fprintf(stderr, "gkq serve: this gkq was built without the server (GKQ_WITH_SERVER=OFF)\n");
    return kExitFailure;
}

#endif

}  // namespace gkq::cli
