// Server: configuration from the environment, the listening socket, the loop thread, weight loading, and the
// documents the loop answers itself (/ready, /stats, /metrics). See gkq/server.h.
#include "gkq/server.h"

#include "server/http_core.h"
#include "server/inference.h"
#include "server/io_loop.h"
#include "server/metrics.h"

#include <nlohmann/json.hpp>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

namespace gkq {

using json = nlohmann::json;

// ---- configuration ------------------------------------------------------------------------------------------------

int default_server_workers() {
    const unsigned cores = std::thread::hardware_concurrency();
    return static_cast<int>(std::clamp(cores / 2, 1u, 16u));
}

int default_server_queue(int n_workers) {
    return 32 * std::max(1, n_workers);
}

std::string_view io_backend_name(IoBackend b) {
    switch (b) {
        case IoBackend::Auto: return "auto";
        case IoBackend::IoUring: return "io_uring";
        case IoBackend::IoUringBasic: return "io_uring_basic";
        case IoBackend::Epoll: return "epoll";
    }
    return "?";
}

Result<IoBackend> parse_io_backend(std::string_view s) {
    for (IoBackend b : {IoBackend::Auto, IoBackend::IoUring, IoBackend::IoUringBasic, IoBackend::Epoll})
        if (s == io_backend_name(b)) return b;
    return error(StatusCode::InvalidArgument,
                 "'" + std::string(s) + "' is not an I/O backend (auto, io_uring, io_uring_basic, epoll)");
}

std::string_view server_phase_name(ServerPhase p) {
    switch (p) {
        case ServerPhase::Loading: return "loading";
        case ServerPhase::Ready: return "ready";
        case ServerPhase::Failed: return "failed";
        case ServerPhase::Draining: return "draining";
        case ServerPhase::Stopped: return "stopped";
    }
    return "?";
}

namespace {

Status bad_env(const char* name, const std::string& value, const std::string& why) {
    return error(StatusCode::InvalidArgument, std::string(name) + "='" + value + "': " + why);
}

bool parse_bool(std::string v, bool& out) {
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (v == "true" || v == "1" || v == "yes" || v == "on")
        out = true;
    else if (v == "false" || v == "0" || v == "no" || v == "off")
        out = false;
    else
        return false;
    return true;
}

}  // namespace

Result<ServerConfig> apply_server_env(ServerConfig c, const std::function<const char*(const char*)>& get) {
    auto value = [&](const char* name) -> std::optional<std::string> {
        const char* v = get ? get(name) : nullptr;
        if (v == nullptr) return std::nullopt;
        return std::string(v);
    };
    if (auto v = value("MEMORY_RESIDENT_MODE"); v && !parse_bool(*v, c.memory_resident))
        return bad_env("MEMORY_RESIDENT_MODE", *v, "not a boolean (true/false, 1/0, yes/no, on/off)");
    if (auto v = value("USE_CDN_FALLBACK"); v && !parse_bool(*v, c.use_cdn_fallback))
        return bad_env("USE_CDN_FALLBACK", *v, "not a boolean (true/false, 1/0, yes/no, on/off)");
    if (auto v = value("WEIGHTS_PATH")) c.weights_path = *v;
    if (auto v = value("GKQ_MODEL_ID")) c.model_id = *v;
    if (auto v = value("GPU_CACHE_SIZE_MB")) {
        char* end = nullptr;
        errno = 0;
        const unsigned long long mb = std::strtoull(v->c_str(), &end, 10);
        if (v->empty() || *end != '\0' || errno != 0 || (*v)[0] == '-' || mb > (1ull << 24))
            return bad_env("GPU_CACHE_SIZE_MB", *v, "not a whole number of megabytes from 0 to 16777216");
        c.cache_budget_mb = mb;
    }
    if (auto v = value("MAX_AGE_SECONDS")) {
        char* end = nullptr;
        errno = 0;
        const double s = std::strtod(v->c_str(), &end);
        if (v->empty() || *end != '\0' || errno != 0 || !(s >= 0) || s > 1e9)
            return bad_env("MAX_AGE_SECONDS", *v, "not a number of seconds from 0 (no limit) to 1e9");
        c.max_age_seconds = s;
    }
    if (auto v = value("GKQ_MAX_CONNECTIONS_PER_ADDRESS")) {
        char* end = nullptr;
        errno = 0;
        const long long n = std::strtoll(v->c_str(), &end, 10);
        if (v->empty() || *end != '\0' || errno != 0 || n < 0 || n > (1 << 20))
            return bad_env("GKQ_MAX_CONNECTIONS_PER_ADDRESS", *v, "not a whole number from 0 (no limit) to 1048576");
        c.max_connections_per_address = static_cast<int>(n);
    }
    if (auto v = value("IO_BACKEND")) {
        auto b = parse_io_backend(*v);
        if (!b) return bad_env("IO_BACKEND", *v, "not one of auto, io_uring, io_uring_basic, epoll");
        c.io_backend = *b;
    }
    return c;
}

// ---- the server ---------------------------------------------------------------------------------------------------

struct Server::Impl final : server::ApiContext {
    ServerConfig config;
    ServerLogFn log;
    server::Metrics metrics;
    std::unique_ptr<server::InferenceEngine> engine;
    std::unique_ptr<server::HttpCore> core;
    int listen_fd = -1;
    int wake_fd = -1;
    uint16_t port = 0;
    std::string backend;
    std::string detail;
    std::string id;
    double started_at = 0;
    int64_t created_at_unix = 0;

    std::atomic<ServerPhase> phase_now{ServerPhase::Loading};
    std::atomic<bool> loaded{false};  // the engine's store and cache exist (set once, by the loader)
    std::atomic<bool> drain_requested{false};
    std::atomic<bool> stop_requested{false};
    double drain_deadline = 0;

    mutable std::mutex mutex;  // guards load_status, events; with cv, the phase waits
    mutable std::condition_variable cv;
    Status load_status;
    std::vector<server::InferenceEvent> events;
    std::thread loop_thread;
    std::thread loader_thread;
    std::unique_ptr<server::IoLoop> loop;

    void say(const std::string& line) const {
        if (log) log(line);
    }

    void set_phase(ServerPhase p) {
        {
            std::lock_guard lock(mutex);
            phase_now = p;
        }
        cv.notify_all();
    }

    void wake() const {
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(wake_fd, &one, sizeof one);
    }

    void post(server::InferenceEvent e) {
        {
            std::lock_guard lock(mutex);
            events.push_back(std::move(e));
        }
        wake();
    }

    // -- loop callbacks (loop thread)
    void on_wake(double now) {
        std::vector<server::InferenceEvent> batch;
        {
            std::lock_guard lock(mutex);
            batch.swap(events);
        }
        for (auto& e : batch) core->deliver(e, now);
        if (drain_requested && !core->draining()) {
            core->begin_drain();
            drain_deadline = now + config.drain_timeout_ms / 1e3;
            set_phase(ServerPhase::Draining);
            say("draining: " + std::to_string(core->n_connections()) + " connection(s) open");
        }
    }

    void on_tick(double now) {
        if (core->draining() && now > drain_deadline && core->n_connections() > 0) {
            say("drain timeout: closing " + std::to_string(core->n_connections()) + " connection(s)");
            core->abort_all();
        }
    }

    // -- ApiContext (loop thread)
    std::string_view phase() const override {
        if (core->draining()) return "draining";
        return server_phase_name(phase_now.load());
    }
    bool has_model() const override { return !config.weights_path.empty(); }
    size_t weights_loaded() const override { return engine->weights_loaded(); }
    std::string model_id() const override { return id; }
    int64_t max_tokens_limit() const override { return config.max_tokens_limit; }
    int64_t created_unix() const override { return created_at_unix; }

    json cache_json() const {
        const WeightCache* cache = loaded ? engine->cache() : nullptr;
        if (cache == nullptr) return nullptr;
        const WeightCacheStats s = cache->stats();
        return {
            {"lookups", s.lookups},
            {"hits", s.hits},
            {"misses", s.misses},
            {"hit_rate", s.lookups ? double(s.hits) / double(s.lookups) : 0.0},
            {"reconstructions", s.reconstructions},
            {"reconstruction_failures", s.reconstruction_failures},
            {"evictions", {{"budget", s.evictions_budget}, {"age", s.evictions_age}, {"cleared", s.evictions_cleared}}},
            {"not_kept", s.not_kept},
            {"bytes_used", s.bytes_used},
            {"budget_bytes", s.budget_bytes},
            {"entries", s.n_entries},
            {"max_age_seconds", cache->options().max_age_seconds},
            {"policy", std::string(cache_policy_name(cache->options().policy))},
            {"keep_reconstructions", cache->options().keep_reconstructions},
            {"reconstruct_seconds_total", s.reconstruct_seconds},
            {"reconstructed_bytes_total", s.reconstructed_bytes}};
    }

    std::string load_error() const {
        std::lock_guard lock(mutex);
        return load_status.message();
    }

    std::string ready_json() const override {
        json j = {{"status", std::string(phase())},
                  {"weights_loaded", engine->weights_loaded()},
                  {"model", has_model() ? json(id) : json(nullptr)},
                  {"backend", backend},
                  {"cache", cache_json()}};
        if (phase_now == ServerPhase::Failed) j["error"] = load_error();
        return j.dump(-1, ' ', false, json::error_handler_t::replace);
    }

    std::string stats_json() const override {
        const server::MetricTotals t = metrics.totals();
        json by_status = json::object();
        for (const auto& [status, n] : t.by_status) by_status[std::to_string(status)] = n;
        json weights = nullptr;
        if (const Weights* s = loaded ? engine->weights() : nullptr) {
            const ModelConfig& mc = engine->model_config();
            weights = {{"path", s->label()},
                       {"mode", s->kind()},
                       {"weights_loaded", s->n_tensors()},
                       {"resident_bytes", s->resident_bytes()},
                       {"model",
                        {{"id", id},
                         {"dim", mc.dim},
                         {"n_layers", mc.n_layers},
                         {"n_heads", mc.n_heads},
                         {"vocab_size", mc.vocab_size},
                         {"context_length", mc.context_length}}}};
        }
        json j = {{"server",
                   {{"backend", backend},
                    {"backend_detail", loop->detail()},
                    {"phase", std::string(phase())},
                    {"uptime_seconds", server::InferenceEngine::now_seconds() - started_at},
                    {"connections_active", core->n_connections()},
                    {"connections_total", t.connections},
                    {"connections_rejected", t.connections_rejected},
                    {"requests_total", t.requests},
                    {"requests_by_status", by_status},
                    {"parse_errors", t.parse_errors},
                    {"timeouts", t.timeouts}}},
                  {"weights", weights},
                  {"cache", cache_json()},
                  {"inference",
                   {{"ok", t.inference_ok},
                    {"failed", t.inference_failed},
                    {"cancelled", t.inference_cancelled},
                    {"rejected", t.inference_rejected},
                    {"queued", engine->queue_depth()},
                    {"in_flight", engine->in_flight()},
                    {"prompt_tokens", t.prompt_tokens},
                    {"completion_tokens", t.completion_tokens}}}};
        if (phase_now == ServerPhase::Failed) j["error"] = load_error();
        return j.dump(-1, ' ', false, json::error_handler_t::replace);
    }

    std::string metrics_text() const override {
        server::MetricGauges g;
        g.backend = backend;
        g.backend_detail = loop->detail();
        g.ready = phase() == "ready";
        g.weights_loaded = engine->weights_loaded();
        g.connections_active = core->n_connections();
        g.queue_depth = engine->queue_depth();
        g.in_flight = engine->in_flight();
        g.uptime_seconds = server::InferenceEngine::now_seconds() - started_at;
        g.weights_mode = "none";
        if (const Weights* s = loaded ? engine->weights() : nullptr) {
            g.weights_mode = std::string(s->kind());
            g.resident_bytes = s->resident_bytes();
        }
        if (const WeightCache* c = loaded ? engine->cache() : nullptr) {
            g.has_cache = true;
            g.cache = c->stats();
        }
        return metrics.render(g);
    }
};

namespace {

Result<int> listen_on(const ServerConfig& c, uint16_t& bound_port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* list = nullptr;
    const std::string where = c.host + ":" + std::to_string(c.port);
    if (int rc = ::getaddrinfo(c.host.c_str(), std::to_string(c.port).c_str(), &hints, &list); rc != 0)
        return error(StatusCode::InvalidArgument, "--host '" + c.host + "': " + gai_strerror(rc));
    std::string why = "no address";
    for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            why = std::strerror(errno);
            continue;
        }
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
            why = std::strerror(errno);
            ::close(fd);
            continue;
        }
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
        bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                    : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
        ::freeaddrinfo(list);
        return fd;
    }
    ::freeaddrinfo(list);
    return error(StatusCode::IoError, "cannot listen on " + where + ": " + why);
}

bool is_url(const std::string& s) {
    return s.find("://") != std::string::npos;
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Result<std::unique_ptr<Server>> Server::start(const ServerConfig& config, ServerLogFn log) {
    if (config.use_cdn_fallback && !is_url(config.weights_path))
        return error(StatusCode::InvalidArgument,
                     "USE_CDN_FALLBACK is on, so WEIGHTS_PATH (--weights) must be an "
                     "http:// URL of a knot, not '" +
                         config.weights_path + "'");
    if (!config.use_cdn_fallback && is_url(config.weights_path))
        return error(StatusCode::InvalidArgument, "WEIGHTS_PATH (--weights) '" + config.weights_path +
                                                      "' is a URL: set USE_CDN_FALLBACK=true (--cdn) to stream it");
    if (config.max_connections < 1 || config.max_connections_per_address < 0 || config.n_workers < 1 ||
        config.max_queue < 0 || config.header_timeout_ms < 1 || config.body_timeout_ms < 1 ||
        config.idle_timeout_ms < 1 || config.max_tokens_limit < 1)
        return error(StatusCode::InvalidArgument,
                     "server limits must be positive (connections, workers, timeouts, "
                     "max tokens)");

    auto impl = std::make_unique<Impl>();
    Impl& s = *impl;
    s.config = config;
    // Threads per generation left at 0 (all cores): the cores are shared among the workers instead, so that
    // default_server_workers() generations at once do not oversubscribe the machine.
    if (s.config.n_threads == 0 && s.config.n_workers > 1)
        s.config.n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / s.config.n_workers);
    s.log = std::move(log);
    s.started_at = server::InferenceEngine::now_seconds();
    s.created_at_unix =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    s.id = config.model_id.empty() ? server::default_model_id(config.weights_path) : config.model_id;
    s.engine = std::make_unique<server::InferenceEngine>(s.config, s.metrics,
                                                         [&s](server::InferenceEvent e) { s.post(std::move(e)); });
    auto fd = listen_on(config, s.port);
    if (!fd) return fd.status();
    s.listen_fd = *fd;
    s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s.wake_fd < 0) {
        ::close(s.listen_fd);
        return error(StatusCode::IoError, std::string("eventfd: ") + std::strerror(errno));
    }
    s.core = std::make_unique<server::HttpCore>(
        s.config, s, s.metrics, [&s](server::InferenceJob j) { return s.engine->submit(std::move(j)); });

    server::LoopEnv env;
    env.listen_fd = s.listen_fd;
    env.wake_fd = s.wake_fd;
    env.core = s.core.get();
    env.on_wake = [&s](double now) { s.on_wake(now); };
    env.on_tick = [&s](double now) { s.on_tick(now); };
    env.should_exit = [&s] { return s.stop_requested.load() || s.core->drained(); };

    // The loop is created on its own thread: an io_uring set up with SINGLE_ISSUER belongs to that thread.
    std::promise<Status> started;
    auto started_future = started.get_future();
    s.loop_thread = std::thread([&s, env, &started] {
        Result<std::unique_ptr<server::IoLoop>> loop = error(StatusCode::Internal, "no backend");
        const IoBackend want = s.config.io_backend;
        if (want == IoBackend::Epoll) {
            loop = server::make_epoll_loop(env);
        } else {
            loop = server::make_uring_loop(env, want == IoBackend::IoUringBasic);
            if (!loop && want == IoBackend::Auto) {
                s.say(loop.message() + "; using epoll");
                loop = server::make_epoll_loop(env);
            }
        }
        if (!loop) {
            started.set_value(loop.status().with_context("IO_BACKEND=" + std::string(io_backend_name(want))));
            return;
        }
        s.loop = std::move(*loop);
        s.backend = std::string(s.loop->name());
        s.detail = s.loop->detail();
        started.set_value(Status::ok());
        s.loop->run();
        s.say("stopped");
        s.set_phase(ServerPhase::Stopped);
    });
    if (Status st = started_future.get(); !st) {
        s.loop_thread.join();
        ::close(s.listen_fd);
        ::close(s.wake_fd);
        return st;
    }
    auto server = std::unique_ptr<Server>(new Server(std::move(impl)));
    s.say("listening on " + server->url() + " (" + s.detail + ")");
    if (config.weights_path.empty()) {
        s.set_phase(ServerPhase::Ready);
        s.say("no weights configured: the HTTP routes answer, inference returns 503");
    } else {
        s.say("loading weights from " + config.weights_path);
        s.loader_thread = std::thread([&s] {
            const double t0 = server::InferenceEngine::now_seconds();
            Status st = s.engine->load();
            {
                std::lock_guard lock(s.mutex);
                s.load_status = st;
            }
            if (!st) {
                s.say("loading failed: " + st.message());
                if (s.phase_now == ServerPhase::Loading) s.set_phase(ServerPhase::Failed);
                return;
            }
            char buf[256];
            std::snprintf(buf, sizeof buf, "weights loaded: %zu tensors (%s, %.1f MB resident) in %.2f s; model '%s'",
                          s.engine->weights_loaded(), std::string(s.engine->weights()->kind()).c_str(),
                          double(s.engine->weights()->resident_bytes()) / 1e6,
                          server::InferenceEngine::now_seconds() - t0, s.id.c_str());
            s.loaded = true;
            if (s.phase_now == ServerPhase::Loading) s.set_phase(ServerPhase::Ready);
            s.say(buf);  // after the phase: whoever reads this line finds the server ready
        });
    }
    return server;
}

Server::~Server() {
    stop();
    Impl& s = *m_impl;
    if (s.loop_thread.joinable()) s.loop_thread.join();
    if (s.loader_thread.joinable()) s.loader_thread.join();
    s.engine->stop();
    s.loop.reset();
    ::close(s.wake_fd);
}

uint16_t Server::port() const {
    return m_impl->port;
}

std::string Server::url() const {
    const std::string& h = m_impl->config.host;
    return "http://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(m_impl->port);
}

std::string_view Server::backend() const {
    return m_impl->backend;
}
const std::string& Server::backend_detail() const {
    return m_impl->detail;
}
ServerPhase Server::phase() const {
    return m_impl->phase_now.load();
}

Status Server::load_status() const {
    std::lock_guard lock(m_impl->mutex);
    return m_impl->load_status;
}

size_t Server::weights_loaded() const {
    return m_impl->engine->weights_loaded();
}

bool Server::wait_loaded(int timeout_ms) const {
    std::unique_lock lock(m_impl->mutex);
    return m_impl->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                               [&] { return m_impl->phase_now != ServerPhase::Loading; });
}

void Server::drain() {
    m_impl->drain_requested = true;
    m_impl->wake();
}

void Server::stop() {
    m_impl->stop_requested = true;
    m_impl->wake();
}

bool Server::wait_stopped(int timeout_ms) const {
    std::unique_lock lock(m_impl->mutex);
    return m_impl->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                               [&] { return m_impl->phase_now == ServerPhase::Stopped; });
}

}  // namespace gkq
