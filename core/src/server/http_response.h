// HTTP/1.1 responses as bytes: a whole response with Content-Length, or a chunked stream (server-sent events)
// as head, chunks and end. Every response carries Date, Server, Connection and, for errors that a client should
// retry, Retry-After.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gkq::server {

struct Response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // extra: Allow, Retry-After, ...
    bool close = false;                                        // the server closes the connection after it
};

std::string_view status_reason(int status);  // "OK", "Not Found", ...

// The Date header's value for the current second (cached per second per thread).
std::string http_date_now();

// A complete response. `head_only` (HEAD) sends the headers with the body's Content-Length but no body.
std::string serialize_response(const Response& r, bool keep_alive, bool head_only = false);

// A chunked response's head (status 200 unless given).
std::string serialize_stream_head(std::string_view content_type, bool keep_alive, int status = 200);
// One chunk of `data` (non-empty) in chunked framing.
std::string chunk(std::string_view data);
// The last chunk.
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace gkq::server
