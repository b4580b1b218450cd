// Blocking HTTP/1.1 range requests over a plain socket (see http_client.h).
#include "cache/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace gkq::net {

namespace {

constexpr size_t kMaxResponseHeaderBytes = 64 * 1024;

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

// Parses an unsigned decimal that fills `s` exactly; false on empty input, other characters or overflow.
bool parse_u64(std::string_view s, uint64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        if (__builtin_mul_overflow(v, uint64_t{10}, &v) || __builtin_add_overflow(v, uint64_t(c - '0'), &v))
            return false;
    }
    out = v;
    return true;
}

// A socket fd closed on scope exit.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(left);
}

// Waits for `events` on fd until the deadline; false on timeout or poll failure.
bool wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int rc = ::poll(&p, 1, remaining_ms(deadline));
        if (rc > 0) return true;
        if (rc == 0) return false;
        if (errno != EINTR) return false;
    }
}

Status connect_to(const HttpUrl& url, const std::string& label, int timeout_ms, Fd& out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const std::string port = std::to_string(url.port);
    if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &list); rc != 0)
        return error(StatusCode::IoError, label + ": cannot resolve host '" + url.host + "': " + gai_strerror(rc));
    std::string last_error = "no address";
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
        Fd fd{::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol)};
        if (fd.fd < 0) {
            last_error = std::strerror(errno);
            continue;
        }
        int rc = ::connect(fd.fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno != EINPROGRESS) {
            last_error = std::strerror(errno);
            continue;
        }
        if (rc != 0) {
            if (!wait_for(fd.fd, POLLOUT, deadline)) {
                last_error = "timed out after " + std::to_string(timeout_ms) + " ms";
                continue;
            }
            int so_error = 0;
            socklen_t len = sizeof so_error;
            ::getsockopt(fd.fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
            if (so_error != 0) {
                last_error = std::strerror(so_error);
                continue;
            }
        }
        out.fd = fd.fd;
        fd.fd = -1;
        ::freeaddrinfo(list);
        return Status::ok();
    }
    ::freeaddrinfo(list);
    return error(StatusCode::IoError, label + ": cannot connect to " + url.authority() + ": " + last_error);
}

struct Exchange {
    int status = 0;
    bool has_content_length = false;
    uint64_t content_length = 0;
    std::string content_range;
    bool chunked = false;
    std::vector<uint8_t> body;
};

// Status line and the headers this client needs.
Status parse_head(const std::string& head, const std::string& label, Exchange& ex) {
    size_t line_end = head.find("\r\n");
    std::string_view status_line = std::string_view(head).substr(0, line_end);
    if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ')
        return error(StatusCode::IoError,
                     label + ": not an HTTP/1.x response ('" + std::string(status_line.substr(0, 40)) + "')");
    uint64_t code = 0;
    if (!parse_u64(status_line.substr(9, 3), code))
        return error(StatusCode::IoError, label + ": bad status code in '" + std::string(status_line) + "'");
    ex.status = static_cast<int>(code);
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
        size_t e = head.find("\r\n", pos);
        if (e == std::string::npos) e = head.size();
        std::string_view line = std::string_view(head).substr(pos, e - pos);
        pos = e + 2;
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view name = trim(line.substr(0, colon));
        const std::string_view value = trim(line.substr(colon + 1));
        if (iequals(name, "content-length")) {
            if (ex.has_content_length || !parse_u64(value, ex.content_length))
                return error(StatusCode::IoError,
                             label + ": bad or repeated Content-Length '" + std::string(value) + "'");
            ex.has_content_length = true;
        } else if (iequals(name, "content-range")) {
            ex.content_range = std::string(value);
        } else if (iequals(name, "transfer-encoding") && !iequals(value, "identity")) {
            ex.chunked = true;
        }
    }
    return Status::ok();
}

// Sends `request` and reads the whole response (Connection: close), the body capped at `max_body` bytes.
Status exchange(const HttpUrl& url, const std::string& label, const std::string& request, uint64_t max_body,
                int timeout_ms, Exchange& ex) {
    Fd fd;
    if (Status s = connect_to(url, label, timeout_ms, fd); !s) return s;
    auto deadline = [&] { return Clock::now() + std::chrono::milliseconds(timeout_ms); };
    size_t sent = 0;
    while (sent < request.size()) {
        const ssize_t n = ::send(fd.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_for(fd.fd, POLLOUT, deadline()))
                return error(StatusCode::IoError, label + ": timed out sending the request");
        } else {
            return error(StatusCode::IoError, label + ": send failed: " + std::strerror(errno));
        }
    }

    std::string head;
    std::vector<uint8_t> body;
    bool head_done = false;
    char buf[16384];
    for (;;) {
        const ssize_t n = ::recv(fd.fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_for(fd.fd, POLLIN, deadline()))
                return error(StatusCode::IoError, label + ": timed out after " + std::to_string(timeout_ms) +
                                                      " ms waiting for the response");
            continue;
        }
        if (n < 0) return error(StatusCode::IoError, label + ": recv failed: " + std::strerror(errno));
        if (n == 0) break;
        const char* p = buf;
        size_t len = static_cast<size_t>(n);
        if (!head_done) {
            const size_t before = head.size();
            head.append(p, len);
            const size_t end = head.find("\r\n\r\n");
            if (end == std::string::npos) {
                if (head.size() > kMaxResponseHeaderBytes)
                    return error(StatusCode::IoError, label + ": response headers exceed " +
                                                          std::to_string(kMaxResponseHeaderBytes) + " bytes");
                continue;
            }
            head_done = true;
            const size_t body_start = end + 4;
            head.resize(end);
            p += body_start - before;
            len -= body_start - before;
            if (Status s = parse_head(head, label, ex); !s) return s;
            // Only a 206 body is wanted; for anything else the status says enough.
            if (ex.status != 206) return Status::ok();
        }
        if (body.size() + len > max_body)
            return error(StatusCode::IoError, label + ": the response body is longer than the " +
                                                  std::to_string(max_body) + " bytes asked for");
        body.insert(body.end(), reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + len);
    }
    if (!head_done) return error(StatusCode::IoError, label + ": the connection closed before the response headers");
    if (ex.chunked)
        return error(StatusCode::Unsupported, label +
                                                  ": the server sent a Transfer-Encoding body; range responses "
                                                  "must carry Content-Length");
    if (ex.has_content_length && ex.content_length != body.size())
        return error(StatusCode::IoError,
                     label + ": the response says Content-Length " + std::to_string(ex.content_length) + " but " +
                         std::to_string(body.size()) + " bytes arrived before the connection closed");
    ex.body = std::move(body);
    return Status::ok();
}

// "bytes FIRST-LAST/TOTAL" -> its three numbers.
bool parse_content_range(std::string_view v, uint64_t& first, uint64_t& last, uint64_t& total) {
    if (v.substr(0, 6) != "bytes ") return false;
    v.remove_prefix(6);
    const size_t dash = v.find('-'), slash = v.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return false;
    return parse_u64(v.substr(0, dash), first) && parse_u64(v.substr(dash + 1, slash - dash - 1), last) &&
           parse_u64(v.substr(slash + 1), total) && first <= last && last < total;
}

Result<RangeResponse> fetch(const HttpUrl& url, const std::string& range, uint64_t max_body, int timeout_ms,
                            uint64_t want_first /* UINT64_MAX for a suffix */, uint64_t want_length) {
    const std::string label = "http://" + url.authority() + url.target;
    const std::string request = "GET " + url.target + " HTTP/1.1\r\nHost: " + url.authority() +
                                "\r\nRange: bytes=" + range +
                                "\r\nAccept-Encoding: identity\r\nUser-Agent: gkq\r\nConnection: close\r\n\r\n";
    Exchange ex;
    if (Status s = exchange(url, label, request, max_body, timeout_ms, ex); !s) return s;
    const std::string what = label + " (Range: bytes=" + range + ")";
    if (ex.status == 200)
        return error(StatusCode::Unsupported, what +
                                                  ": the server answered 200 with the whole resource instead of "
                                                  "206: it does not support range requests, which the CDN fallback "
                                                  "needs");
    if (ex.status != 206)
        return error(StatusCode::IoError, what + ": HTTP status " + std::to_string(ex.status) + ", expected 206");
    if (!ex.has_content_length) return error(StatusCode::IoError, what + ": 206 without Content-Length");
    RangeResponse r;
    uint64_t first = 0, last = 0, total = 0;
    if (!parse_content_range(ex.content_range, first, last, total))
        return error(StatusCode::IoError, what + ": bad or missing Content-Range '" + ex.content_range + "'");
    if (last - first + 1 != ex.body.size())
        return error(StatusCode::IoError, what + ": Content-Range '" + ex.content_range + "' does not match the " +
                                              std::to_string(ex.body.size()) + " bytes of body");
    if (want_first == UINT64_MAX) {
        if (last != total - 1 || ex.body.size() != std::min(want_length, total))
            return error(StatusCode::IoError, what + ": Content-Range '" + ex.content_range + "' is not the last " +
                                                  std::to_string(want_length) + " bytes");
    } else if (first != want_first || ex.body.size() != want_length) {
        return error(StatusCode::IoError,
                     what + ": Content-Range '" + ex.content_range + "' is not the range asked for");
    }
    r.body = std::move(ex.body);
    r.first = first;
    r.total_size = total;
    return r;
}

}  // namespace

std::string HttpUrl::authority() const {
    const bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HttpUrl> parse_http_url(std::string_view url) {
    const std::string label = "URL '" + std::string(url.substr(0, 200)) + "'";
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
            return error(StatusCode::InvalidArgument, label + ": contains a space or control character");
    if (url.size() >= 8 && iequals(url.substr(0, 8), "https://"))
        return error(StatusCode::Unsupported, label +
                                                  ": https is not supported; serve the knot over plain http "
                                                  "(a local CDN edge or a sidecar)");
    if (url.size() < 7 || !iequals(url.substr(0, 7), "http://"))
        return error(StatusCode::InvalidArgument, label + ": not an http:// URL");
    std::string_view rest = url.substr(7);
    const size_t end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, end);
    std::string_view target = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (const size_t hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
    if (authority.find('@') != std::string_view::npos)
        return error(StatusCode::InvalidArgument, label + ": user information in URLs is not supported");
    HttpUrl u;
    std::string_view port;
    bool has_port = false;
    if (!authority.empty() && authority.front() == '[') {
        const size_t close = authority.find(']');
        if (close == std::string_view::npos) return error(StatusCode::InvalidArgument, label + ": unclosed '['");
        u.host = std::string(authority.substr(1, close - 1));
        std::string_view after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return error(StatusCode::InvalidArgument, label + ": bad port");
            port = after.substr(1);
            has_port = true;
        }
    } else {
        const size_t colon = authority.rfind(':');
        u.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) {
            port = authority.substr(colon + 1);
            has_port = true;
        }
    }
    if (u.host.empty()) return error(StatusCode::InvalidArgument, label + ": no host");
    if (has_port) {
        uint64_t p = 0;
        if (!parse_u64(port, p) || p == 0 || p > 65535)
            return error(StatusCode::InvalidArgument, label + ": port '" + std::string(port) + "' is not 1-65535");
        u.port = static_cast<uint16_t>(p);
    }
    if (target.empty()) target = "/";
    u.target = target.front() == '?' ? "/" + std::string(target) : std::string(target);
    return u;
}

Result<RangeResponse> http_get_range(const HttpUrl& url, uint64_t first, uint64_t length, int timeout_ms) {
    uint64_t last = 0;
    if (length == 0 || __builtin_add_overflow(first, length - 1, &last))
        return error(StatusCode::InvalidArgument, "http_get_range: empty or overflowing range");
    return fetch(url, std::to_string(first) + "-" + std::to_string(last), length, timeout_ms, first, length);
}

Result<RangeResponse> http_get_suffix(const HttpUrl& url, uint64_t length, int timeout_ms) {
    if (length == 0) return error(StatusCode::InvalidArgument, "http_get_suffix: empty range");
    return fetch(url, "-" + std::to_string(length), length, timeout_ms, UINT64_MAX, length);
}

}  // namespace gkq::net
