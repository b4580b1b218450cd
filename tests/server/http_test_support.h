// Test support for the weight cache and the HTTP server: a tiny knot on disk, a blocking loopback HTTP client
// over plain sockets that can send any bytes (malformed, partial, pipelined) and parse what comes back, and a
// minimal file server with Range support (the "CDN" the remote knot store reads from).
#pragma once

#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "tiny_model.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace gkq::test {

class TempDir;

struct TinyKnot {
    std::string gguf;  // the tiny model as GGUF with tiny_vocabulary()
    std::string knot;  // that model quantized with `preset`
    ModelConfig config;
};
// Writes both files into `dir`; aborts the test program (qFatal) when the engine refuses.
TinyKnot make_tiny_knot(const TempDir& dir, const std::string& preset = "q8_0");

// The completion text greedy generation gives for `prompt` and `max_tokens`, run directly on the knot or model
// (without the server; the tokenizer found as the server finds it; the server's default activations): the reference
// the server's answers are compared with. The bytes as generated: the server's JSON carries invalid UTF-8 (a byte
// token's piece) as U+FFFD. reference_run() gives the ids too: the prompt as the tokenizer encodes it (BOS included)
// and the generated ids, what /infer's "prompt_ids" and "tokens" carry with "return_tokens".
struct ReferenceRun {
    std::string text;
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> ids;
};
ReferenceRun reference_run(const std::string& knot, const std::string& prompt, int64_t max_tokens);
std::string reference_completion(const std::string& knot, const std::string& prompt, int64_t max_tokens);

// ---- client ------------------------------------------------------------------------------------------------------

struct HttpResponse {
    int status = 0;
    std::string reason;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;  // de-chunked

    // First header named `name` (case-insensitive), or "" when absent.
    std::string header(std::string_view name) const;
    bool has_header(std::string_view name) const;
};

// One client connection to 127.0.0.1:port. Every wait is bounded by `timeout_ms`; nothing sleeps.
class TestConnection {
public:
    explicit TestConnection(uint16_t port, int timeout_ms = 5000);
    ~TestConnection();
    TestConnection(TestConnection&& o) noexcept;
    TestConnection(const TestConnection&) = delete;
    TestConnection& operator=(const TestConnection&) = delete;

    bool connected() const { return m_fd >= 0; }
    bool send(std::string_view bytes);
    // Reads one response (Content-Length, chunked, or to EOF; headers only for a HEAD request's); nullopt on
    // timeout, EOF first, or garbage.
    std::optional<HttpResponse> read_response(bool head_request = false);
    // The raw body bytes of a chunked response as they arrive, one chunk per call (for SSE); nullopt at the end.
    // Call after read_head().
    std::optional<HttpResponse> read_head();
    std::optional<std::string> read_chunk();
    // True when the server closed the connection (EOF or reset) with no further bytes within the timeout.
    bool closed_by_peer();
    // Everything until EOF (bounded by the timeout).
    std::string read_until_close();
    void close();
    int fd() const { return m_fd; }

private:
    bool fill();  // reads more bytes into m_buf; false on EOF, error or timeout
    std::optional<std::string> read_line();

    int m_fd = -1;
    int m_timeout_ms;
    std::string m_buf;
    bool m_eof = false;
};

// Builds a request with Host and (for a body) Content-Length; `extra` lines end in \r\n.
std::string make_request(std::string_view method, std::string_view target, std::string_view body = {},
                         std::string_view extra = {});
// Connect, send, read one response.
std::optional<HttpResponse> http_request(uint16_t port, std::string_view method, std::string_view target,
                                         std::string_view body = {}, std::string_view extra = {});

// ---- a file server with Range support -----------------------------------------------------------------------------

class RangeFileServer {
public:
    enum class Mode {
        Normal,       // 206 with Content-Range, 416 outside the file
        IgnoreRange,  // 200 with the whole file
        Truncate,     // 206 headers promising the range, half the bytes, then close
    };
    explicit RangeFileServer(std::vector<uint8_t> bytes);
    ~RangeFileServer();

    uint16_t port() const { return m_port; }
    std::string url(std::string_view path = "/model.knot") const;
    void set_mode(Mode m) { m_mode = m; }
    void set_bytes(std::vector<uint8_t> bytes);  // serve another file from now on
    int n_requests() const { return m_requests.load(); }

private:
    void run();
    void serve(int fd);

    int m_listen = -1;
    uint16_t m_port = 0;
    std::atomic<Mode> m_mode{Mode::Normal};
    std::atomic<int> m_requests{0};
    std::atomic<bool> m_stop{false};
    std::mutex m_mutex;  // guards m_bytes
    std::vector<uint8_t> m_bytes;
    std::thread m_thread;
};

}  // namespace gkq::test
