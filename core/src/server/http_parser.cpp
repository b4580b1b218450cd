// RequestParser over llhttp (see http_parser.h).
#include "server/http_parser.h"

#include <llhttp.h>

#include <cctype>

namespace gkq::server {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

const std::string* HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return &v;
    return nullptr;
}

namespace {

// The path of a request target: origin-form up to '?', absolute-form without scheme and authority.
std::string path_of(std::string_view target) {
    if (target.size() > 7 &&
        (iequals(target.substr(0, 7), "http://") || (target.size() > 8 && iequals(target.substr(0, 8), "https://")))) {
        target.remove_prefix(target[4] == ':' ? 7 : 8);
        const size_t slash = target.find_first_of("/?#");
        target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
        if (!target.empty() && target.front() != '/') return "/";
    }
    const size_t q = target.find_first_of("?#");
    return std::string(target.substr(0, q));
}

bool is_token(std::string_view s) {
    if (s.empty()) return false;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos)
            return false;
    }
    return true;
}

// Visible characters, spaces and tabs, and bytes >= 0x80 (obs-text); no CR, LF or other controls.
bool is_field_value(std::string_view s) {
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
    }
    return true;
}

}  // namespace

struct RequestParser::Impl {
    llhttp_t parser{};
    RequestParser* owner = nullptr;
    ParserLimits limits;
    HttpRequest request;
    bool last_was_value = false;
    const char* feed_start = nullptr;  // the buffer of the feed() in progress
    bool prev_feed_ended_lf = false;   // the previous feed's last byte was '\n'
    size_t header_bytes = 0;
    bool pause_for_continue = false;
    bool complete = false;

    int fail(int status, std::string message) {
        owner->m_error_status = status;
        owner->m_error_message = std::move(message);
        return HPE_USER;
    }

    static Impl& of(llhttp_t* p) { return *static_cast<Impl*>(p->data); }

    static int on_message_begin(llhttp_t* p) {
        Impl& s = of(p);
        s.request = HttpRequest{};
        s.last_was_value = false;
        s.header_bytes = 0;
        s.complete = false;
        s.owner->m_phase = Phase::Headers;
        return 0;
    }
    static int on_url(llhttp_t* p, const char* at, size_t n) {
        Impl& s = of(p);
        if (s.request.target.size() + n > s.limits.max_target_bytes)
            return s.fail(414, "request target longer than " + std::to_string(s.limits.max_target_bytes) + " bytes");
        s.request.target.append(at, n);
        return 0;
    }
    static int on_header_field(llhttp_t* p, const char* at, size_t n) {
        Impl& s = of(p);
        if (s.request.headers.empty() || s.last_was_value) {
            if (s.request.headers.size() >= s.limits.max_headers)
                return s.fail(431, "more than " + std::to_string(s.limits.max_headers) + " header fields");
            s.request.headers.emplace_back();
            s.last_was_value = false;
        }
        return s.add_header_bytes(s.request.headers.back().first, at, n);
    }
    static int on_header_value(llhttp_t* p, const char* at, size_t n) {
        Impl& s = of(p);
        // A value chunk that starts right after a line break continues a value onto the next line: obsolete line
        // folding, which RFC 9112 lets a server reject (llhttp passes it on as a second chunk).
        const bool after_lf = at > s.feed_start ? at[-1] == '\n' : s.prev_feed_ended_lf;
        if (after_lf) return s.fail(400, "obsolete line folding in a header value");
        s.last_was_value = true;
        if (s.request.headers.empty()) return s.fail(400, "header value without a name");
        return s.add_header_bytes(s.request.headers.back().second, at, n);
    }
    int add_header_bytes(std::string& to, const char* at, size_t n) {
        header_bytes += n;
        if (header_bytes > limits.max_header_bytes)
            return fail(431, "header fields longer than " + std::to_string(limits.max_header_bytes) + " bytes in all");
        to.append(at, n);
        return 0;
    }
    static int on_headers_complete(llhttp_t* p) {
        Impl& s = of(p);
        HttpRequest& r = s.request;
        r.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
        r.http_major = p->http_major;
        r.http_minor = p->http_minor;
        r.keep_alive = llhttp_should_keep_alive(p) != 0;
        r.path = path_of(r.target);
        if (r.http_major != 1 || r.http_minor > 1) {
            s.fail(505, "HTTP/" + std::to_string(r.http_major) + "." + std::to_string(r.http_minor) +
                            " is not supported (HTTP/1.0 and 1.1 are)");
            return -1;
        }
        int hosts = 0;
        for (const auto& h : r.headers) {
            // RFC 9112: a name is a token, and whitespace before the colon must be rejected (request smuggling);
            // folded or control-character values too. llhttp's strict mode checks most of this; we check all.
            if (!is_token(h.first)) {
                s.fail(400, "header name '" + h.first.substr(0, 64) + "' is not a token");
                return -1;
            }
            if (!is_field_value(h.second)) {
                s.fail(400, "header '" + h.first.substr(0, 64) + "' has a control character or folded line");
                return -1;
            }
            hosts += iequals(h.first, "host");
        }
        if (hosts > 1 || (r.http_minor == 1 && hosts == 0)) {
            s.fail(400, hosts > 1 ? "several Host headers" : "HTTP/1.1 request without a Host header");
            return -1;
        }
        const bool has_length = (p->flags & F_CONTENT_LENGTH) != 0;
        const bool chunked = (p->flags & F_CHUNKED) != 0;
        if (has_length && p->content_length > s.limits.max_body_bytes) {
            s.fail(413, "request body of " + std::to_string(p->content_length) + " bytes; the limit is " +
                            std::to_string(s.limits.max_body_bytes));
            return -1;
        }
        s.owner->m_phase = Phase::Body;
        const std::string* expect = r.header("expect");
        if (expect != nullptr && iequals(*expect, "100-continue") &&
            (chunked || (has_length && p->content_length > 0))) {
            s.pause_for_continue = true;
            return HPE_PAUSED;
        }
        return 0;
    }
    static int on_body(llhttp_t* p, const char* at, size_t n) {
        Impl& s = of(p);
        if (s.request.body.size() + n > s.limits.max_body_bytes)
            return s.fail(413, "request body longer than " + std::to_string(s.limits.max_body_bytes) + " bytes");
        s.request.body.append(at, n);
        return 0;
    }
    static int on_message_complete(llhttp_t* p) {
        Impl& s = of(p);
        // An upgrade (or CONNECT) hands the connection to another protocol we do not speak: answer, then close.
        if (p->upgrade) s.request.keep_alive = false;
        s.complete = true;
        s.owner->m_phase = Phase::Idle;
        return HPE_PAUSED;
    }

    static const llhttp_settings_t& settings() {
        static const llhttp_settings_t s = [] {
            llhttp_settings_t x;
            llhttp_settings_init(&x);
            x.on_message_begin = on_message_begin;
            x.on_url = on_url;
            x.on_header_field = on_header_field;
            x.on_header_value = on_header_value;
            x.on_headers_complete = on_headers_complete;
            x.on_body = on_body;
            x.on_message_complete = on_message_complete;
            return x;
        }();
        return s;
    }
};

RequestParser::RequestParser(const ParserLimits& limits) : m_impl(std::make_unique<Impl>()) {
    m_impl->owner = this;
    m_impl->limits = limits;
    llhttp_init(&m_impl->parser, HTTP_REQUEST, &Impl::settings());
    m_impl->parser.data = m_impl.get();
}

RequestParser::~RequestParser() = default;

RequestParser::Outcome RequestParser::feed(const char* data, size_t n) {
    if (m_error_status != 0) return {ParseEvent::Error, 0};
    llhttp_t& p = m_impl->parser;
    m_impl->feed_start = data;
    const llhttp_errno_t err = llhttp_execute(&p, data, n);
    const char* pos = err == HPE_OK ? data + n : llhttp_get_error_pos(&p);
    const size_t consumed = pos != nullptr && pos >= data && pos <= data + n ? static_cast<size_t>(pos - data) : n;
    if (consumed > 0) m_impl->prev_feed_ended_lf = data[consumed - 1] == '\n';
    if (err == HPE_OK) return {ParseEvent::NeedMore, n};
    if (err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE) {
        if (err == HPE_PAUSED_UPGRADE) {
            // Nothing after an upgrade is HTTP; the request before it still gets its answer.
            m_impl->request.keep_alive = false;
            m_error_status = 400;
            m_error_message = "protocol upgrade is not supported";
            if (m_impl->complete) return {ParseEvent::Request, consumed};
            return {ParseEvent::Error, consumed};
        }
        llhttp_resume(&p);
        if (m_impl->pause_for_continue) {
            m_impl->pause_for_continue = false;
            return {ParseEvent::ExpectsContinue, consumed};
        }
        return {ParseEvent::Request, consumed};
    }
    if (err == HPE_PAUSED_H2_UPGRADE) {
        m_error_status = 505;
        m_error_message = "HTTP/2 is not supported (HTTP/1.0 and 1.1 are)";
        return {ParseEvent::Error, consumed};
    }
    if (m_error_status == 0) {
        m_error_status = 400;
        const char* reason = llhttp_get_error_reason(&p);
        m_error_message = std::string("malformed request: ") + llhttp_errno_name(err) +
                          (reason ? std::string(" (") + reason + ")" : "");
    }
    return {ParseEvent::Error, consumed};
}

HttpRequest RequestParser::take_request() {
    m_impl->complete = false;
    return std::move(m_impl->request);
}

}  // namespace gkq::server
