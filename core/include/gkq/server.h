// Server: the embedded HTTP inference endpoint (`gkq serve`, and the workbench's live-testing panel).
//
// One event-loop thread owns the listening socket and every connection: io_uring (multishot accept, a provided
// buffer ring, multishot recv) where the kernel allows it, plain single-shot io_uring where those features are
// missing, epoll where io_uring is refused (EPERM/ENOSYS, as under default container seccomp profiles). HTTP/1.1
// with keep-alive and pipelining, parsed by llhttp. Inference runs on worker threads, so the loop keeps answering
// /health while a generation runs. Weights load on a background thread after start(); until then /health and
// /ready answer 503 {"status":"loading"}.
//
// Routes: GET /health, /ready, /metrics (Prometheus text), /stats (JSON), /v1/models; POST /infer,
// /v1/completions (OpenAI-compatible, `stream: true` as server-sent events ending `data: [DONE]`). Errors use the
// OpenAI error envelope {"error":{"message","type","param","code"}}.
//
// Contract: start() fails (a Status naming the setting) when the address cannot be bound or a forced backend is
// unavailable; everything after that is reported through the routes, the log callback and phase(). drain()
// may be called from any thread (and is async-signal-safe): the listener closes, requests in progress finish,
// idle keep-alive connections close, and the loop exits. Nothing here binds anything but `host` (127.0.0.1 by
// default).
#pragma once

#include "gkq/status.h"
#include "gkq/weight_cache.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace gkq {

enum class IoBackend {
    Auto,          // io_uring with its newer features, stepping down to plain io_uring, then to epoll
    IoUring,       // io_uring only (fails to start when refused); steps down to plain io_uring if features lack
    IoUringBasic,  // plain io_uring: single-shot accept and recv into per-connection buffers
    Epoll,
};
std::string_view io_backend_name(IoBackend b);  // "auto", "io_uring", "io_uring_basic", "epoll"
Result<IoBackend> parse_io_backend(std::string_view s);

// Defaults sized from the machine (std::thread::hardware_concurrency, 1 when unknown): generations run at once,
// half the cores (each generation's matrix products use threads too), 1 to 16; waiting generations 32 per worker,
// so that a burst of 32 clients on one worker waits instead of getting 429.
int default_server_workers();
int default_server_queue(int n_workers);

struct ServerConfig {
    std::string host = "127.0.0.1";
    uint16_t port = 8080;  // 0: any free port (read it back with Server::port())

    // Weights: a knot, a model file (safetensors / GGUF / llama2.c), or with use_cdn_fallback an http:// URL of a
    // knot read by range requests. Empty: no model (the HTTP routes work, inference answers 503).
    std::string weights_path;
    std::string tokenizer_path;     // llama2.c tokenizer.bin for a model without a vocabulary
    bool memory_resident = true;    // knot records held in RAM (false: read from the mapped file when needed)
    bool use_cdn_fallback = false;  // weights_path is an http:// URL; reconstructions are not cached
    uint64_t cache_budget_mb = 1024;
    // What a reconstruction that does not fit the budget does (weight_cache.h): keep the weights there are (the hot
    // layers; the rest loaded for each use), or evict the least recently used.
    CachePolicy cache_policy = CachePolicy::Keep;
    double max_age_seconds = 3600;  // 0: reconstructions never expire
    std::string model_id;           // name in /v1/models; empty: the weights file's name without extension

    IoBackend io_backend = IoBackend::Auto;

    // limits
    size_t max_target_bytes = 8192;         // 414 beyond
    size_t max_header_bytes = 16384;        // 431 beyond
    size_t max_headers = 100;               // 431 beyond
    size_t max_body_bytes = 1 << 20;        // 413 beyond
    int header_timeout_ms = 10000;          // accept or first byte of a request to the end of its headers (408; a
                                            // connection that sends nothing is closed when it runs out)
    int body_timeout_ms = 30000;            // end of headers to the end of the body (408)
    int idle_timeout_ms = 60000;            // keep-alive connection with nothing in progress: closed
    int max_connections = 1024;             // at the cap the oldest idle connection is closed for a new one; with none
                                            // idle, new ones get 503 + Retry-After and are closed
    int max_connections_per_address = 256;  // the same per client address (0: no per-address cap)
    int drain_timeout_ms = 30000;           // drain(): connections still open after this are closed
    int64_t max_tokens_limit = 4096;        // largest max_tokens a request may ask for

    // inference
    int n_workers = default_server_workers();         // concurrent generations (each holds its own KV cache)
    int n_threads = 0;                                // threads per generation's matrix products; 0: all cores
    bool q8_activations = true;                       // TransformerOptions::q8_activations
    int max_queue = default_server_queue(n_workers);  // waiting generations beyond the running ones; more: 429
    int64_t max_context = 0;  // positions per generation; 0: the model's context, capped at 4096

    // For tests: called on the worker thread as it starts each generation (blocking here holds the worker).
    std::function<void()> on_inference_start;
};

// Reads MEMORY_RESIDENT_MODE, WEIGHTS_PATH, GPU_CACHE_SIZE_MB, MAX_AGE_SECONDS, USE_CDN_FALLBACK, IO_BACKEND
// (and GKQ_MODEL_ID, GKQ_MAX_CONNECTIONS_PER_ADDRESS) through `get` (nullptr: unset) on top of `base`. An invalid value
// is InvalidArgument naming the variable and the value.
Result<ServerConfig> apply_server_env(ServerConfig base, const std::function<const char*(const char*)>& get);

enum class ServerPhase { Loading, Ready, Failed, Draining, Stopped };
std::string_view server_phase_name(ServerPhase p);  // "loading", "ready", "failed", "draining", "stopped"

using ServerLogFn = std::function<void(std::string_view line)>;

class Server {
public:
    // Binds, starts the event loop and the weight loading; returns once the socket listens.
    static Result<std::unique_ptr<Server>> start(const ServerConfig& config, ServerLogFn log = {});
    ~Server();  // stop() and join
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    uint16_t port() const;
    std::string url() const;                    // "http://127.0.0.1:8080"
    std::string_view backend() const;           // "io_uring" or "epoll"
    const std::string& backend_detail() const;  // "io_uring (multishot accept, multishot recv, buffer ring)"
    ServerPhase phase() const;
    Status load_status() const;  // why loading failed (Ok otherwise)
    size_t weights_loaded() const;

    // Waits until the weights are loaded (or failed); false on timeout.
    bool wait_loaded(int timeout_ms) const;
    // Graceful: stop accepting, finish what is in progress, close. Async-signal-safe.
    void drain();
    // Immediate: close everything now.
    void stop();
    // Waits for the event loop to exit (after drain() or stop()); false on timeout.
    bool wait_stopped(int timeout_ms) const;

    struct Impl;

private:
    explicit Server(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace gkq
