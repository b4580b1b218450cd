// A small blocking HTTP/1.1 client for range requests to http:// URLs (the CDN fallback's record fetches): one
// connection per request (Connection: close), a timeout on connect and on every wait for bytes, and a response
// whose status, Content-Length and Content-Range are checked against what was asked before the body is trusted.
// Only plain http://; https:// is refused with a message saying so.
#pragma once

#include "gkq/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gkq::net {

struct HttpUrl {
    std::string host;
    uint16_t port = 80;
    std::string target = "/";  // path and query, as sent on the request line

    std::string authority() const;  // "host:port" (IPv6 literals bracketed)
};

// "http://host[:port][/path]". InvalidArgument naming the URL for anything else (https is Unsupported).
Result<HttpUrl> parse_http_url(std::string_view url);

struct RangeResponse {
    std::vector<uint8_t> body;
    uint64_t first = 0;       // first byte of the body in the resource
    uint64_t total_size = 0;  // whole resource, from Content-Range
};

// Bytes [first, first + length) of the resource (length > 0). Fails unless the server answers 206 with exactly
// that range; the error names the URL and what differed.
Result<RangeResponse> http_get_range(const HttpUrl& url, uint64_t first, uint64_t length, int timeout_ms);
// The last `length` bytes (a suffix range, "bytes=-N"): how a reader learns the size and reads a trailer at once.
Result<RangeResponse> http_get_suffix(const HttpUrl& url, uint64_t length, int timeout_ms);

}  // namespace gkq::net
