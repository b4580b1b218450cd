// RequestParser: HTTP/1.x requests from a byte stream, one at a time, with llhttp doing the parsing (keep-alive,
// pipelining, chunked bodies, request-smuggling checks) and this class enforcing our limits on top:
//   request target longer than max_target_bytes -> 414, header bytes or count over the limit -> 431,
//   body over max_body_bytes (declared or received) -> 413, HTTP/1.1 without exactly one Host -> 400,
//   a version other than 1.0/1.1 -> 505, anything llhttp rejects -> 400.
// feed() stops after each complete request (llhttp paused in on_message_complete), so pipelined bytes after it are
// left for the caller to feed once it has answered; an error is final (the caller answers and closes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gkq::server {

struct ParserLimits {
    size_t max_target_bytes = 8192;
    size_t max_header_bytes = 16384;  // sum of header names and values
    size_t max_headers = 100;
    size_t max_body_bytes = 1 << 20;
};

struct HttpRequest {
    std::string method;  // "GET", "POST", ...
    std::string target;  // as sent
    std::string path;    // target without query; absolute-form ("http://h/p") reduced to its path
    std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
    std::string body;                                          // de-chunked
    int http_major = 1;
    int http_minor = 1;
    bool keep_alive = true;  // llhttp's verdict (version and Connection header)

    // First header named `name` (case-insensitive), or nullptr.
    const std::string* header(std::string_view name) const;
};

enum class ParseEvent {
    NeedMore,         // every byte consumed, no complete request yet
    Request,          // a request is complete: take_request()
    ExpectsContinue,  // headers with "Expect: 100-continue" and a body to come: answer 100, feed the rest
    Error,            // error_status()/error_message(); the connection must close
};

class RequestParser {
public:
    explicit RequestParser(const ParserLimits& limits);
    ~RequestParser();
    RequestParser(const RequestParser&) = delete;
    RequestParser& operator=(const RequestParser&) = delete;

    struct Outcome {
        ParseEvent event = ParseEvent::NeedMore;
        size_t consumed = 0;  // bytes of the input used; the rest belongs to the next call
    };
    Outcome feed(const char* data, size_t n);

    HttpRequest take_request();
    int error_status() const { return m_error_status; }
    const std::string& error_message() const { return m_error_message; }

    // Where the current request is: no byte of it yet, in the request line/headers, in the body.
    enum class Phase { Idle, Headers, Body };
    Phase phase() const { return m_phase; }

    struct Impl;

private:
    std::unique_ptr<Impl> m_impl;
    Phase m_phase = Phase::Idle;
    int m_error_status = 0;
    std::string m_error_message;
    friend struct Impl;
};

// Case-insensitive ASCII comparison.
bool iequals(std::string_view a, std::string_view b);

}  // namespace gkq::server
