// HttpCore: connection logic shared by the io_uring and epoll backends (see http_core.h).
#include "server/http_core.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace gkq::server {

namespace {

// Bytes a client may pipeline behind a request that is still running before we stop trusting it.
size_t pipeline_limit(const ParserLimits& l) {
    return 2 * (l.max_body_bytes + l.max_header_bytes + l.max_target_bytes);
}

// Output queued for a client that does not read: beyond this, its further pipelined requests wait.
constexpr size_t kMaxQueuedOutput = size_t{1} << 20;

bool output_full(const Connection& c) {
    return c.out.size() + (c.sending.size() - c.sending_off) > kMaxQueuedOutput;
}

// The peer's address without the port ("127.0.0.1", "::1"); "" when the socket cannot say.
std::string peer_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
    else if (ss.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
    return buf;
}

bool idle(const Connection& c) {
    return !c.abort && !c.released && !c.busy && !c.close_after_flush && c.out.empty() && c.sending.empty() &&
           c.in.empty() && c.parser.phase() == RequestParser::Phase::Idle;
}

}  // namespace

HttpCore::HttpCore(const ServerConfig& config, ApiContext& ctx, Metrics& metrics, SubmitFn submit)
    : m_config(config), m_ctx(ctx), m_metrics(metrics), m_submit(std::move(submit)) {
    m_limits.max_target_bytes = config.max_target_bytes;
    m_limits.max_header_bytes = config.max_header_bytes;
    m_limits.max_headers = config.max_headers;
    m_limits.max_body_bytes = config.max_body_bytes;
}

const std::string& HttpCore::over_capacity_response() {
    static const std::string bytes = [] {
        Response r = api_error(503, "too many connections; retry shortly", "server_error", "", "over_capacity");
        r.headers.emplace_back("Retry-After", "1");
        return serialize_response(r, false);
    }();
    return bytes;
}

Connection* HttpCore::oldest_idle(const std::string* peer) {
    Connection* best = nullptr;
    for (auto& [id, cp] : m_conns) {
        Connection& c = *cp;
        if (!idle(c) || (peer != nullptr && c.peer != *peer)) continue;
        if (best == nullptr || c.last_activity < best->last_activity ||
            (c.last_activity == best->last_activity && c.id < best->id))
            best = &c;
    }
    return best;
}

void HttpCore::release(Connection& c) {
    if (c.released) return;
    c.released = true;
    m_n_released++;
    auto it = m_per_peer.find(c.peer);
    if (it != m_per_peer.end() && --it->second == 0) m_per_peer.erase(it);
}

Connection* HttpCore::open(int fd, double now) {
    std::string peer = peer_address(fd);
    const size_t per_peer_cap = m_config.max_connections_per_address > 0
                                    ? static_cast<size_t>(m_config.max_connections_per_address)
                                    : ~size_t{0};
    // Room first at the address's own cap (its oldest idle connection goes), then at the server's.
    auto peer_count = [&] {
        auto it = m_per_peer.find(peer);
        return it == m_per_peer.end() ? size_t{0} : it->second;
    };
    const size_t cap = static_cast<size_t>(std::max(0, m_config.max_connections));
    for (int pass = 0; pass < 2; ++pass) {
        const bool at_peer_cap = peer_count() >= per_peer_cap;
        const bool at_cap = m_conns.size() - m_n_released >= cap;
        if (!at_peer_cap && !at_cap) break;
        Connection* victim = oldest_idle(at_peer_cap ? &peer : nullptr);
        if (victim == nullptr) {
            m_metrics.connection_rejected();
            return nullptr;
        }
        victim->abort = true;  // an idle keep-alive connection (or one that never sent a byte): closed quietly
        release(*victim);
        mark(*victim);
    }
    if (m_conns.size() - m_n_released >= cap || peer_count() >= per_peer_cap) {
        m_metrics.connection_rejected();
        return nullptr;
    }
    auto c = std::make_unique<Connection>(m_next_id++, fd, m_limits);
    c->peer = std::move(peer);
    m_per_peer[c->peer]++;
    c->opened_at = now;
    c->last_activity = now;
    c->last_send_progress = now;
    Connection* raw = c.get();
    m_conns.emplace(raw->id, std::move(c));
    m_metrics.connection_opened();
    if (m_draining) {
        raw->close_after_flush = true;
        mark(*raw);
    }
    return raw;
}

Connection* HttpCore::find(uint64_t id) {
    auto it = m_conns.find(id);
    return it == m_conns.end() ? nullptr : it->second.get();
}

void HttpCore::mark(Connection& c) {
    m_dirty.push_back(c.id);
}

std::vector<uint64_t> HttpCore::take_dirty() {
    std::vector<uint64_t> d;
    d.swap(m_dirty);
    return d;
}

void HttpCore::closing(Connection& c) {
    if (c.closing) return;
    c.closing = true;
    release(c);
}

void HttpCore::destroy(uint64_t id) {
    auto it = m_conns.find(id);
    if (it == m_conns.end()) return;
    release(*it->second);
    m_n_released--;
    if (it->second->busy && it->second->cancel) it->second->cancel->store(true);
    m_conns.erase(it);
}

void HttpCore::data(Connection& c, const char* bytes, size_t n, double now) {
    if (c.abort || c.close_after_flush) return;  // the answer is decided; further bytes are not read as requests
    c.last_activity = now;
    c.received_any = true;
    if (c.busy || !c.in.empty() || output_full(c)) {
        if (c.in.size() + n > pipeline_limit(m_limits)) {
            c.abort = true;  // a client that pipelines this much behind a running request is not waiting for it
            mark(c);
            return;
        }
        c.in.append(bytes, n);
        if (!c.busy && !output_full(c)) process(c, now);
        return;
    }
    // Fast path: parse straight from the receive buffer; keep only what a paused parse left over.
    size_t used = 0;
    while (used < n && !c.busy && !c.close_after_flush && !c.abort && !output_full(c)) {
        if (c.parser.phase() == RequestParser::Phase::Idle) c.request_started = now;
        const RequestParser::Outcome o = c.parser.feed(bytes + used, n - used);
        used += o.consumed;
        if (c.parser.phase() == RequestParser::Phase::Body && c.headers_done == 0) c.headers_done = now;
        if (o.event == ParseEvent::NeedMore) break;
        if (o.event == ParseEvent::ExpectsContinue) {
            c.out += "HTTP/1.1 100 Continue\r\n\r\n";
            mark(c);
            continue;
        }
        if (o.event == ParseEvent::Error) {
            fail(c, c.parser.error_status(), c.parser.error_message(), now);
            return;
        }
        const double started = c.request_started;
        c.request_started = 0;
        c.headers_done = 0;
        handle(c, c.parser.take_request(), started, now);
    }
    if (used < n && !c.close_after_flush && !c.abort) c.in.append(bytes + used, n - used);
    if (c.parser.phase() == RequestParser::Phase::Idle) c.request_started = 0;
}

void HttpCore::process(Connection& c, double now) {
    std::string pending;
    pending.swap(c.in);
    data(c, pending.data(), pending.size(), now);
}

void HttpCore::sent(Connection& c, double now) {
    if (!c.busy && !c.in.empty() && !c.abort && !c.close_after_flush && !output_full(c)) process(c, now);
}

void HttpCore::eof(Connection& c, double now) {
    c.peer_eof = true;
    // A client that half-closes after its request still gets the answer; nothing else is worth keeping open.
    if (c.busy || !c.out.empty() || !c.sending.empty()) {
        c.close_after_flush = true;
        if (c.busy && c.cancel && c.job_streaming) c.cancel->store(true);
    } else {
        c.abort = true;
    }
    mark(c);
}

void HttpCore::respond(Connection& c, const Response& r, bool keep_alive, bool head_only) {
    const bool keep = keep_alive && !r.close && !m_draining && !c.peer_eof;
    c.out += serialize_response(r, keep, head_only);
    if (!keep) c.close_after_flush = true;
    c.last_activity = InferenceEngine::now_seconds();
    mark(c);
}

void HttpCore::finish_request(Connection& c, RouteId route, int status, double started) {
    m_metrics.request(route, status, std::max(0.0, InferenceEngine::now_seconds() - started));
}

void HttpCore::fail(Connection& c, int status, const std::string& message, double now) {
    if (status != 408) m_metrics.parse_error(status);
    Response r = api_error(status, message, error_type_for(status));
    r.close = true;
    respond(c, r, false, false);
    finish_request(c, RouteId::Other, status, c.request_started > 0 ? c.request_started : now);
    c.request_started = 0;
}

void HttpCore::handle(Connection& c, HttpRequest&& req, double started, double now) {
    RouteResult rr = route(req, m_ctx);
    if (!rr.infer) {
        respond(c, rr.response, req.keep_alive, req.method == "HEAD");
        finish_request(c, rr.route, rr.response.status, started);
        return;
    }
    InferenceJob job;
    job.conn_id = c.id;
    job.job_id = m_next_job++;
    job.params = std::move(rr.params);
    job.enqueued_at = now;
    job.cancelled = std::make_shared<std::atomic<bool>>(false);
    const bool streaming = job.params.stream;
    auto cancel = job.cancelled;
    const uint64_t job_id = job.job_id;
    if (m_draining || !m_submit(std::move(job))) {
        Response r = m_draining ? api_error(503, "the server is draining; retry on another instance", "server_error",
                                            "", "draining")
                                : api_error(429, "too many generations are waiting; retry shortly", "rate_limit_error",
                                            "", "queue_full");
        r.headers.emplace_back("Retry-After", "1");
        if (!m_draining) m_metrics.inference_rejected();
        respond(c, r, req.keep_alive, false);
        finish_request(c, rr.route, r.status, started);
        return;
    }
    c.busy = true;
    c.job_id = job_id;
    c.cancel = std::move(cancel);
    c.job_keep_alive = req.keep_alive;
    c.job_streaming = streaming;
    c.job_route = rr.route;
    c.job_started = started;
}

void HttpCore::deliver(InferenceEvent& e, double now) {
    Connection* c = find(e.conn_id);
    if (c == nullptr || !c->busy || c->job_id != e.job_id || c->abort) return;  // the client has gone
    const bool keep = c->job_keep_alive && !m_draining && !c->peer_eof;
    switch (e.kind) {
        case InferenceEvent::Kind::StreamHead:
            c->out += serialize_stream_head("text/event-stream", keep);
            mark(*c);
            return;
        case InferenceEvent::Kind::StreamData:
            c->out += chunk(e.data);
            mark(*c);
            return;
        case InferenceEvent::Kind::StreamEnd:
            c->out += kLastChunk;
            if (!keep) c->close_after_flush = true;
            finish_request(*c, c->job_route, 200, c->job_started);
            break;
        case InferenceEvent::Kind::Response:
            respond(*c, e.response, keep, false);
            finish_request(*c, c->job_route, e.response.status, c->job_started);
            break;
    }
    c->busy = false;
    c->cancel.reset();
    c->last_activity = now;
    mark(*c);
    if (!c->in.empty() && !c->close_after_flush) process(*c, now);
}

void HttpCore::tick(double now) {
    const double header_limit = m_config.header_timeout_ms / 1e3;
    const double body_limit = m_config.body_timeout_ms / 1e3;
    const double idle_limit = m_config.idle_timeout_ms / 1e3;
    for (auto& [id, cp] : m_conns) {
        Connection& c = *cp;
        if (c.abort || c.busy) continue;
        const bool sending = !c.out.empty() || !c.sending.empty();
        if (sending) {
            if (now - c.last_send_progress > idle_limit) {  // a client that stopped reading
                c.abort = true;
                mark(c);
            }
            continue;
        }
        if (c.close_after_flush) {
            mark(c);
            continue;
        }
        const RequestParser::Phase phase = c.parser.phase();
        if (phase == RequestParser::Phase::Headers && now - c.request_started > header_limit) {
            m_metrics.timeout(false);
            fail(c, 408,
                 "the request headers did not arrive within " + std::to_string(m_config.header_timeout_ms) + " ms",
                 now);
        } else if (phase == RequestParser::Phase::Body && now - c.headers_done > body_limit) {
            m_metrics.timeout(true);
            fail(c, 408, "the request body did not arrive within " + std::to_string(m_config.body_timeout_ms) + " ms",
                 now);
        } else if (phase == RequestParser::Phase::Idle && !c.received_any && now - c.opened_at > header_limit) {
            // Connected but never sent a byte: the header timeout runs from accept, so such connections cannot
            // hold slots for the idle timeout. Closed without a response (there is no request to answer).
            m_metrics.timeout(false);
            c.abort = true;
            mark(c);
        } else if (phase == RequestParser::Phase::Idle && (m_draining || now - c.last_activity > idle_limit)) {
            c.abort = true;  // idle keep-alive connection: closed without a response, as nginx does
            mark(c);
        }
    }
}

void HttpCore::begin_drain() {
    if (m_draining) return;
    m_draining = true;
    // Idle connections close now; a response being sent closes after it; a request being received or run gets its
    // answer, with Connection: close.
    for (auto& [id, c] : m_conns) {
        if (!c->busy && c->parser.phase() == RequestParser::Phase::Idle) {
            if (c->out.empty() && c->sending.empty())
                c->abort = true;
            else
                c->close_after_flush = true;
        }
        mark(*c);
    }
}

void HttpCore::abort_all() {
    for (auto& [id, c] : m_conns) {
        c->abort = true;
        if (c->cancel) c->cancel->store(true);
        mark(*c);
    }
}

}  // namespace gkq::server
