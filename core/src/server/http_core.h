// HttpCore: everything about connections that does not depend on how bytes move — parsing, routing, queueing
// inference, timeouts, draining, and what to send. The two I/O backends (io_uring, epoll) own the sockets and
// call in with events (open, data, eof, tick, worker events); the core appends output to Connection::out and
// lists the connections that need the backend's attention in dirty(), which the backend services after each
// batch of events: send what is queued, and close once `close_after_flush` is set and everything went out, or
// at once when `abort` is set. The core never closes a socket and never frees a connection the backend still
// uses; the backend calls destroy() once it has closed the fd and its operations are finished.
#pragma once

#include "gkq/server.h"
#include "server/api.h"
#include "server/http_parser.h"
#include "server/inference.h"
#include "server/metrics.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace gkq::server {

struct Connection {
    Connection(uint64_t id_, int fd_, const ParserLimits& limits) : id(id_), fd(fd_), parser(limits) {}

    uint64_t id;
    int fd;
    RequestParser parser;
    std::string in;       // received bytes not parsed yet (pipelined while a request runs on a worker)
    std::string out;      // queued for sending
    std::string sending;  // being sent (a buffer the kernel may read: never touched until the send completes)
    size_t sending_off = 0;
    bool close_after_flush = false;  // close once out and sending are empty
    bool abort = false;              // close now, unsent bytes dropped
    bool peer_eof = false;

    // the request in progress on a worker
    bool busy = false;
    uint64_t job_id = 0;
    std::shared_ptr<std::atomic<bool>> cancel;
    bool job_keep_alive = true;
    bool job_streaming = false;
    RouteId job_route = RouteId::Other;
    double job_started = 0;

    std::string peer;            // the client's address (no port): what the per-address limit counts
    double opened_at = 0;        // accepted: the header timeout runs from here until the first byte
    bool received_any = false;   // a byte has arrived on this connection
    bool released = false;       // no longer counted against the connection limits (closing or evicted)
    double request_started = 0;  // first byte of the request being parsed (0: none)
    double headers_done = 0;     // its headers complete (0: not yet)
    double last_activity = 0;    // last byte received or response finished
    double last_send_progress = 0;

    // backend-owned
    int pending_ops = 0;  // io_uring operations that may still touch this connection
    bool recv_armed = false;
    bool send_in_flight = false;
    bool closing = false;
    uint32_t poll_events = 0;  // epoll interest
    std::unique_ptr<char[]> recv_buf;
};

class HttpCore {
public:
    using SubmitFn = std::function<bool(InferenceJob)>;
    HttpCore(const ServerConfig& config, ApiContext& ctx, Metrics& metrics, SubmitFn submit);

    // A new socket. At the connection cap (or its address's cap) the oldest idle connection (of that address) is
    // closed to make room, so that /health, /ready and /metrics always get in; only when none is idle is the new
    // one refused: nullptr, and a rejection counted.
    Connection* open(int fd, double now);
    void data(Connection& c, const char* bytes, size_t n, double now);
    void eof(Connection& c, double now);
    void deliver(InferenceEvent& e, double now);
    // Bytes of `c` went out: requests held back while its output was over the limit are parsed now.
    void sent(Connection& c, double now);
    void tick(double now);
    void begin_drain();
    void abort_all();
    // The backend has started closing `c` (its socket is shut down; operations may still complete): it no longer
    // counts against the connection caps.
    void closing(Connection& c);
    void destroy(uint64_t id);

    Connection* find(uint64_t id);
    std::vector<uint64_t> take_dirty();
    size_t n_connections() const { return m_conns.size(); }
    bool draining() const { return m_draining; }
    // Draining and nothing left to wait for.
    bool drained() const { return m_draining && m_conns.empty(); }
    std::unordered_map<uint64_t, std::unique_ptr<Connection>>& connections() { return m_conns; }

    // The bytes sent to a connection over the cap before it is closed.
    static const std::string& over_capacity_response();

private:
    void process(Connection& c, double now);
    void handle(Connection& c, HttpRequest&& req, double started, double now);
    void respond(Connection& c, const Response& r, bool keep_alive, bool head_only);
    void finish_request(Connection& c, RouteId route, int status, double started);
    void fail(Connection& c, int status, const std::string& message, double now);
    void mark(Connection& c);
    void release(Connection& c);
    // The idle connection (nothing received in part, nothing running or being sent) with the oldest activity, among
    // those of `peer` (all when empty); nullptr when there is none.
    Connection* oldest_idle(const std::string* peer);

    const ServerConfig& m_config;
    ParserLimits m_limits;
    ApiContext& m_ctx;
    Metrics& m_metrics;
    SubmitFn m_submit;
    std::unordered_map<uint64_t, std::unique_ptr<Connection>> m_conns;
    std::vector<uint64_t> m_dirty;
    size_t m_n_released = 0;                             // connections in m_conns no longer counted
    std::unordered_map<std::string, size_t> m_per_peer;  // counted connections per client address
    uint64_t m_next_id = 1;
    uint64_t m_next_job = 1;
    bool m_draining = false;
};

}  // namespace gkq::server
