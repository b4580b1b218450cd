#include "http_test_support.h"

#include "gkq/generate.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/sampler.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtGlobal>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace gkq::test {

namespace {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool wait_fd(int fd, short events, int timeout_ms) {
    pollfd p{fd, events, 0};
    for (;;) {
        const int rc = ::poll(&p, 1, timeout_ms);
        if (rc >= 0) return rc > 0;
        if (errno != EINTR) return false;
    }
}

}  // namespace

// ---- models ----------------------------------------------------------------------------------------------------

TinyKnot make_tiny_knot(const TempDir& dir, const std::string& preset) {
    TinyKnot k;
    k.gguf = dir.file("tiny.gguf");
    k.knot = dir.file("tiny.knot");
    auto m = make_tiny_model(tiny_config(false), 7);
    k.config = m.config;
    if (Status s = write_gguf(k.gguf, m.config, m.tensors, tiny_vocabulary()); !s) qFatal("%s", s.message().c_str());
    auto model = ModelFile::open(k.gguf);
    if (!model) qFatal("%s", model.message().c_str());
    QuantizeOptions o;
    o.preset = preset;
    o.n_threads = 1;
    auto report = quantize_model(*model, o, k.knot);
    if (!report) qFatal("%s", report.message().c_str());
    return k;
}

ReferenceRun reference_run(const std::string& knot, const std::string& prompt, int64_t max_tokens) {
    auto weights = open_weights(knot);
    if (!weights) qFatal("%s", weights.message().c_str());
    TransformerOptions options;
    options.q8_activations = true;  // as the server runs them by default (ServerConfig::q8_activations)
    auto model = Transformer::load(**weights, options);
    if (!model) qFatal("%s", model.message().c_str());
    // the tokenizer the server takes: the model's own vocabulary, else the tokenizer.bin beside it
    auto tok = tokenizer_for_model(knot, (*weights)->vocabulary(), (*weights)->config().vocab_size);
    if (!tok) qFatal("%s", tok.message().c_str());
    ReferenceRun run;
    run.prompt_ids = tok->encode(prompt, true, false);
    const auto n_prompt = static_cast<int64_t>(run.prompt_ids.size());
    SamplerOptions so;
    so.temperature = 0;
    Sampler sampler(tok->vocab_size(), so);
    GenerateOptions go;
    go.steps = n_prompt + max_tokens - 1;
    int64_t n = 0;
    auto st = generate(
        *model, *tok, sampler, run.prompt_ids, go,
        [&](std::string_view piece) {
            if (n++ >= n_prompt - 1) run.text += piece;
            return true;
        },
        [&](int32_t id) { run.ids.push_back(id); });
    if (!st) qFatal("%s", st.message().c_str());
    return run;
}

std::string reference_completion(const std::string& knot, const std::string& prompt, int64_t max_tokens) {
    return reference_run(knot, prompt, max_tokens).text;
}

// ---- client ------------------------------------------------------------------------------------------------------

std::string HttpResponse::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return v;
    return {};
}

bool HttpResponse::has_header(std::string_view name) const {
    for (const auto& h : headers)
        if (iequals(h.first, name)) return true;
    return false;
}

TestConnection::TestConnection(uint16_t port, int timeout_ms) : m_timeout_ms(timeout_ms) {
    m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m_fd < 0) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(m_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(m_fd);
        m_fd = -1;
        return;
    }
    int one = 1;
    ::setsockopt(m_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TestConnection::TestConnection(TestConnection&& o) noexcept
    : m_fd(o.m_fd), m_timeout_ms(o.m_timeout_ms), m_buf(std::move(o.m_buf)), m_eof(o.m_eof) {
    o.m_fd = -1;
}

TestConnection::~TestConnection() {
    close();
}

void TestConnection::close() {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
}

bool TestConnection::send(std::string_view bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(m_fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return false;
        }
    }
    return true;
}

bool TestConnection::fill() {
    if (m_fd < 0 || m_eof) return false;
    if (!wait_fd(m_fd, POLLIN, m_timeout_ms)) return false;
    char buf[65536];
    const ssize_t n = ::recv(m_fd, buf, sizeof buf, 0);
    if (n <= 0) {
        m_eof = true;
        return false;
    }
    m_buf.append(buf, static_cast<size_t>(n));
    return true;
}

std::optional<std::string> TestConnection::read_line() {
    for (;;) {
        const size_t e = m_buf.find("\r\n");
        if (e != std::string::npos) {
            std::string line = m_buf.substr(0, e);
            m_buf.erase(0, e + 2);
            return line;
        }
        if (!fill()) return std::nullopt;
    }
}

std::optional<HttpResponse> TestConnection::read_head() {
    auto status = read_line();
    if (!status || status->size() < 12 || status->compare(0, 7, "HTTP/1.") != 0) return std::nullopt;
    HttpResponse r;
    r.status = std::atoi(status->c_str() + 9);
    r.reason = status->size() > 13 ? status->substr(13) : "";
    for (;;) {
        auto line = read_line();
        if (!line) return std::nullopt;
        if (line->empty()) break;
        const size_t colon = line->find(':');
        if (colon == std::string::npos) return std::nullopt;
        r.headers.emplace_back(std::string(trim(std::string_view(*line).substr(0, colon))),
                               std::string(trim(std::string_view(*line).substr(colon + 1))));
    }
    return r;
}

std::optional<std::string> TestConnection::read_chunk() {
    auto size_line = read_line();
    if (!size_line) return std::nullopt;
    const size_t n = std::strtoul(size_line->c_str(), nullptr, 16);
    while (m_buf.size() < n + 2)
        if (!fill()) return std::nullopt;
    std::string chunk = m_buf.substr(0, n);
    if (m_buf.compare(n, 2, "\r\n") != 0) return std::nullopt;
    m_buf.erase(0, n + 2);
    if (n == 0) return std::nullopt;  // the last chunk (no trailers are sent)
    return chunk;
}

std::optional<HttpResponse> TestConnection::read_response(bool head_request) {
    auto r = read_head();
    if (!r) return std::nullopt;
    if (r->status == 100) return read_response(head_request);
    if (head_request) return r;
    if (iequals(r->header("Transfer-Encoding"), "chunked")) {
        for (;;) {
            auto size_line = read_line();
            if (!size_line) return std::nullopt;
            const size_t n = std::strtoul(size_line->c_str(), nullptr, 16);
            while (m_buf.size() < n + 2)
                if (!fill()) return std::nullopt;
            r->body += m_buf.substr(0, n);
            m_buf.erase(0, n + 2);
            if (n == 0) break;
        }
        return r;
    }
    if (r->has_header("Content-Length")) {
        const size_t n = std::strtoul(r->header("Content-Length").c_str(), nullptr, 10);
        while (m_buf.size() < n)
            if (!fill()) return std::nullopt;
        r->body = m_buf.substr(0, n);
        m_buf.erase(0, n);
        return r;
    }
    while (fill()) {
    }
    r->body = std::move(m_buf);
    m_buf.clear();
    return r;
}

bool TestConnection::closed_by_peer() {
    if (!m_buf.empty()) return false;
    if (m_eof) return true;
    if (m_fd < 0 || !wait_fd(m_fd, POLLIN, m_timeout_ms)) return false;
    char c;
    const ssize_t n = ::recv(m_fd, &c, 1, 0);
    if (n <= 0) {
        m_eof = true;
        return true;
    }
    m_buf.push_back(c);
    return false;
}

std::string TestConnection::read_until_close() {
    while (fill()) {
    }
    std::string all = std::move(m_buf);
    m_buf.clear();
    return all;
}

std::string make_request(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view extra) {
    std::string r = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    r += extra;
    if (!body.empty() || method == "POST")
        r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    r += "\r\n";
    r += body;
    return r;
}

std::optional<HttpResponse> http_request(uint16_t port, std::string_view method, std::string_view target,
                                         std::string_view body, std::string_view extra) {
    TestConnection c(port);
    if (!c.connected() || !c.send(make_request(method, target, body, extra))) return std::nullopt;
    return c.read_response(method == "HEAD");
}

// ---- range file server -------------------------------------------------------------------------------------------

RangeFileServer::RangeFileServer(std::vector<uint8_t> bytes) : m_bytes(std::move(bytes)) {
    m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(m_listen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(m_listen, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(m_listen, 16) != 0)
        qFatal("RangeFileServer: bind/listen failed: %s", std::strerror(errno));
    socklen_t len = sizeof a;
    ::getsockname(m_listen, reinterpret_cast<sockaddr*>(&a), &len);
    m_port = ntohs(a.sin_port);
    m_thread = std::thread([this] { run(); });
}

RangeFileServer::~RangeFileServer() {
    m_stop = true;
    ::shutdown(m_listen, SHUT_RDWR);
    m_thread.join();
    ::close(m_listen);
}

std::string RangeFileServer::url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(m_port) + std::string(path);
}

void RangeFileServer::set_bytes(std::vector<uint8_t> bytes) {
    std::lock_guard lock(m_mutex);
    m_bytes = std::move(bytes);
}

void RangeFileServer::run() {
    while (!m_stop) {
        const int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            return;  // shut down
        }
        serve(fd);
        ::close(fd);
    }
}

void RangeFileServer::serve(int fd) {
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos) {
        if (!wait_fd(fd, POLLIN, 5000)) return;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0 || head.size() > 65536) return;
        head.append(buf, static_cast<size_t>(n));
    }
    m_requests++;
    std::vector<uint8_t> bytes;
    {
        std::lock_guard lock(m_mutex);
        bytes = m_bytes;
    }
    const uint64_t size = bytes.size();
    // Range: bytes=A-B or bytes=-N
    uint64_t first = 0, last = size == 0 ? 0 : size - 1;
    bool ranged = false, satisfiable = true;
    const size_t at = head.find("\r\nRange: bytes=");
    if (at != std::string::npos) {
        ranged = true;
        const std::string spec = head.substr(at + 15, head.find("\r\n", at + 2) - at - 15);
        const size_t dash = spec.find('-');
        if (dash == 0) {
            const uint64_t n = std::stoull(spec.substr(1));
            first = n >= size ? 0 : size - n;
        } else {
            first = std::stoull(spec.substr(0, dash));
            if (dash + 1 < spec.size()) last = std::min<uint64_t>(std::stoull(spec.substr(dash + 1)), size - 1);
        }
        satisfiable = first < size && first <= last;
    }
    const Mode mode = m_mode.load();
    std::string out;
    std::string_view body;
    if (ranged && !satisfiable && mode != Mode::IgnoreRange) {
        out = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" + std::to_string(size) +
              "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    } else if (!ranged || mode == Mode::IgnoreRange) {
        out = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size) + "\r\nConnection: close\r\n\r\n";
        body = std::string_view(reinterpret_cast<const char*>(bytes.data()), size);
    } else {
        const uint64_t n = last - first + 1;
        out = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(first) + "-" +
              std::to_string(last) + "/" + std::to_string(size) + "\r\nContent-Length: " + std::to_string(n) +
              "\r\nConnection: close\r\n\r\n";
        body =
            std::string_view(reinterpret_cast<const char*>(bytes.data()) + first, mode == Mode::Truncate ? n / 2 : n);
    }
    out += body;
    size_t sent = 0;
    while (sent < out.size()) {
        const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return;
        sent += static_cast<size_t>(n);
    }
}

}  // namespace gkq::test
