// Response serialization (see http_response.h).
#include "server/http_response.h"

#include <cstdio>
#include <ctime>

namespace gkq::server {

std::string_view status_reason(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 422: return "Unprocessable Content";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        case 505: return "HTTP Version Not Supported";
        default: return "Unknown";
    }
}

std::string http_date_now() {
    // Per thread: the event loop formats a date once a second, without a lock.
    thread_local time_t cached_second = 0;
    thread_local std::string cached;
    const time_t now = std::time(nullptr);
    if (now != cached_second) {
        std::tm tm{};
        gmtime_r(&now, &tm);
        char buf[64];
        std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached = buf;
        cached_second = now;
    }
    return cached;
}

namespace {

void append_head(std::string& out, int status, bool keep_alive) {
    out += "HTTP/1.1 ";
    out += std::to_string(status);
    out += ' ';
    out += status_reason(status);
    out += "\r\nServer: gkq\r\nDate: ";
    out += http_date_now();
    out += keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n";
}

}  // namespace

std::string serialize_response(const Response& r, bool keep_alive, bool head_only) {
    std::string out;
    out.reserve(160 + r.body.size());
    append_head(out, r.status, keep_alive && !r.close);
    if (!r.content_type.empty()) {
        out += "Content-Type: ";
        out += r.content_type;
        out += "\r\n";
    }
    for (const auto& [k, v] : r.headers) {
        out += k;
        out += ": ";
        out += v;
        out += "\r\n";
    }
    out += "Content-Length: ";
    out += std::to_string(r.body.size());
    out += "\r\n\r\n";
    if (!head_only) out += r.body;
    return out;
}

std::string serialize_stream_head(std::string_view content_type, bool keep_alive, int status) {
    std::string out;
    append_head(out, status, keep_alive);
    out += "Content-Type: ";
    out += content_type;
    out += "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
    return out;
}

std::string chunk(std::string_view data) {
    char size[20];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string out = size;
    out += data;
    out += "\r\n";
    return out;
}

}  // namespace gkq::server
