// The io_uring backend, written to liburing 2.3: multishot accept, a provided-buffer ring (mmap'd here and registered
// with io_uring_register_buf_ring, since 2.3 has no io_uring_setup_buf_ring), multishot recv into it, one send in
// flight per connection. Steps down, per feature, to single-shot accept and recv when the kernel answers -EINVAL,
// and to per-connection receive buffers when the buffer ring cannot be registered.
//
// user_data = connection id << 4 | operation. A connection is freed only when none of its operations can still
// complete (pending_ops == 0): closing shuts the socket down and cancels the receive, then waits for their CQEs.
#include "server/io_loop.h"

#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gkq::server {

namespace {

enum Op : uint64_t { kAccept = 1, kRecv = 2, kSend = 3, kWake = 4, kCancel = 5 };

constexpr uint64_t user_data(uint64_t id, Op op) {
    return (id << 4) | op;
}

constexpr unsigned kQueueDepth = 1024;
constexpr unsigned kBufferCount = 256;  // power of two (ring mask)
constexpr unsigned kBufferBytes = 16384;
constexpr uint16_t kBufferGroup = 1;

class UringLoop final : public IoLoop {
public:
    UringLoop(const LoopEnv& env, bool basic) : m_env(env), m_core(*env.core), m_basic(basic) {}

    ~UringLoop() override {
        if (m_ring_ready) io_uring_queue_exit(&m_ring);
        if (m_br != nullptr) ::munmap(m_br, m_br_bytes);
        if (m_buffers != nullptr) ::munmap(m_buffers, size_t{kBufferCount} * kBufferBytes);
    }

    Status init() {
        io_uring_params p{};
        // SINGLE_ISSUER (6.0) and COOP_TASKRUN (5.19): the loop thread is the only submitter; older kernels say
        // -EINVAL and get a plain ring.
        p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
        int rc = io_uring_queue_init_params(kQueueDepth, &m_ring, &p);
        if (rc == -EINVAL) {
            p = io_uring_params{};
            rc = io_uring_queue_init_params(kQueueDepth, &m_ring, &p);
        }
        if (rc < 0)
            return error(StatusCode::Unsupported,
                         std::string("io_uring is refused by this kernel or sandbox (") + std::strerror(-rc) + ")");
        m_ring_ready = true;
        io_uring_probe* probe = io_uring_get_probe_ring(&m_ring);
        if (probe == nullptr) return error(StatusCode::Unsupported, "io_uring: cannot probe the supported operations");
        const std::pair<int, const char*> needed[] = {{IORING_OP_ACCEPT, "ACCEPT"},
                                                      {IORING_OP_RECV, "RECV"},
                                                      {IORING_OP_SEND, "SEND"},
                                                      {IORING_OP_READ, "READ"},
                                                      {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"}};
        for (const auto& [op, name] : needed)
            if (!io_uring_opcode_supported(probe, op)) {
                io_uring_free_probe(probe);
                return error(StatusCode::Unsupported, std::string("io_uring: the kernel lacks IORING_OP_") + name);
            }
        io_uring_free_probe(probe);
        m_multishot_accept = !m_basic;
        m_multishot_recv = !m_basic;
        if (!m_basic) setup_buffer_ring();
        return Status::ok();
    }

    std::string_view name() const override { return "io_uring"; }
    std::string detail() const override {
        std::string d = "io_uring (";
        d += m_multishot_accept ? "multishot accept" : "single-shot accept";
        d += m_buffer_ring
                 ? (m_multishot_recv ? ", multishot recv, provided buffer ring" : ", recv from provided buffer ring")
                 : ", recv into connection buffers";
        if (!m_step_down.empty()) d += "; stepped down: " + m_step_down;
        return d + ")";
    }

    void run() override {
        arm_accept();
        arm_wake();
        double next_tick = InferenceEngine::now_seconds() + m_env.tick_ms / 1e3;
        while (!m_env.should_exit()) {
            const double before = InferenceEngine::now_seconds();
            const double wait = std::max(0.0, next_tick - before);
            __kernel_timespec ts{};
            ts.tv_sec = static_cast<long long>(wait);
            ts.tv_nsec = static_cast<long long>((wait - static_cast<double>(ts.tv_sec)) * 1e9);
            io_uring_cqe* cqe = nullptr;
            io_uring_submit_and_wait_timeout(&m_ring, &cqe, 1, &ts, nullptr);
            const double now = InferenceEngine::now_seconds();
            unsigned head = 0, seen = 0;
            io_uring_for_each_cqe(&m_ring, head, cqe) {
                handle(*cqe, now);
                seen++;
            }
            io_uring_cq_advance(&m_ring, seen);
            if (now >= next_tick) {
                m_core.tick(now);
                m_env.on_tick(now);
                next_tick = now + m_env.tick_ms / 1e3;
            }
            if (m_core.draining() && m_listening) stop_listening();
            for (uint64_t id : m_core.take_dirty()) m_touched.push_back(id);
            std::vector<uint64_t> touched;
            touched.swap(m_touched);
            for (uint64_t id : touched)
                if (Connection* c = m_core.find(id)) service(*c, now);
        }
        // Exit: the kernel drops every pending operation with the ring; then the sockets go.
        io_uring_queue_exit(&m_ring);
        m_ring_ready = false;
        std::vector<uint64_t> ids;
        for (auto& [id, c] : m_core.connections()) ids.push_back(id);
        for (uint64_t id : ids) {
            Connection* c = m_core.find(id);
            close_quietly(c->fd);
            m_core.destroy(id);
        }
        if (m_listening) ::close(m_env.listen_fd);
        m_listening = false;
    }

private:
    // ---- set-up -------------------------------------------------------------------------------------------------

    void setup_buffer_ring() {
        m_br_bytes = size_t{kBufferCount} * sizeof(io_uring_buf);
        void* ring = ::mmap(nullptr, m_br_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
        void* bufs = ::mmap(nullptr, size_t{kBufferCount} * kBufferBytes, PROT_READ | PROT_WRITE,
                            MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
        if (ring == MAP_FAILED || bufs == MAP_FAILED) {
            if (ring != MAP_FAILED) ::munmap(ring, m_br_bytes);
            if (bufs != MAP_FAILED) ::munmap(bufs, size_t{kBufferCount} * kBufferBytes);
            m_step_down = "no memory for the buffer ring";
            m_multishot_recv = false;
            return;
        }
        m_br = static_cast<io_uring_buf_ring*>(ring);
        m_buffers = static_cast<char*>(bufs);
        io_uring_buf_ring_init(m_br);
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<uint64_t>(m_br);
        reg.ring_entries = kBufferCount;
        reg.bgid = kBufferGroup;
        const int rc = io_uring_register_buf_ring(&m_ring, &reg, 0);
        if (rc < 0) {
            m_step_down = std::string("buffer ring refused (") + std::strerror(-rc) + ")";
            m_multishot_recv = false;  // multishot recv needs a buffer ring
            ::munmap(m_br, m_br_bytes);
            ::munmap(m_buffers, size_t{kBufferCount} * kBufferBytes);
            m_br = nullptr;
            m_buffers = nullptr;
            return;
        }
        m_mask = io_uring_buf_ring_mask(kBufferCount);
        for (unsigned i = 0; i < kBufferCount; ++i)
            io_uring_buf_ring_add(m_br, m_buffers + size_t{i} * kBufferBytes, kBufferBytes, static_cast<uint16_t>(i),
                                  m_mask, static_cast<int>(i));
        io_uring_buf_ring_advance(m_br, kBufferCount);
        m_buffer_ring = true;
    }

    io_uring_sqe* sqe() {
        io_uring_sqe* s = io_uring_get_sqe(&m_ring);
        while (s == nullptr) {  // the submission queue is full: hand it to the kernel and retry
            io_uring_submit(&m_ring);
            s = io_uring_get_sqe(&m_ring);
        }
        return s;
    }

    void arm_accept() {
        io_uring_sqe* s = sqe();
        if (m_multishot_accept)
            io_uring_prep_multishot_accept(s, m_env.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        else
            io_uring_prep_accept(s, m_env.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        io_uring_sqe_set_data64(s, user_data(0, kAccept));
    }

    void arm_wake() {
        io_uring_sqe* s = sqe();
        io_uring_prep_read(s, m_env.wake_fd, &m_wake_count, sizeof m_wake_count, 0);
        io_uring_sqe_set_data64(s, user_data(0, kWake));
    }

    void arm_recv(Connection& c) {
        io_uring_sqe* s = sqe();
        if (m_buffer_ring) {
            if (m_multishot_recv)
                io_uring_prep_recv_multishot(s, c.fd, nullptr, 0, 0);
            else
                io_uring_prep_recv(s, c.fd, nullptr, kBufferBytes, 0);
            s->flags |= IOSQE_BUFFER_SELECT;
            s->buf_group = kBufferGroup;
        } else {
            if (!c.recv_buf) c.recv_buf = std::make_unique<char[]>(kBufferBytes);
            io_uring_prep_recv(s, c.fd, c.recv_buf.get(), kBufferBytes, 0);
        }
        io_uring_sqe_set_data64(s, user_data(c.id, kRecv));
        c.pending_ops++;
        c.recv_armed = true;
    }

    void stop_listening() {
        io_uring_sqe* s = sqe();
        io_uring_prep_cancel64(s, user_data(0, kAccept), 0);
        io_uring_sqe_set_data64(s, user_data(0, kCancel));
        // The ring holds its own reference to the socket until the accept is cancelled; closing our fd now stops
        // the port from taking more connections once that happens.
        ::close(m_env.listen_fd);
        m_listening = false;
    }

    // ---- completions ----------------------------------------------------------------------------------------------

    void handle(const io_uring_cqe& cqe, double now) {
        const uint64_t ud = cqe.user_data;
        const auto op = static_cast<Op>(ud & 0xF);
        const uint64_t id = ud >> 4;
        const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
        switch (op) {
            case kAccept: on_accept(cqe.res, more, now); break;
            case kWake:
                m_env.on_wake(now);
                arm_wake();
                break;
            case kRecv: on_recv(id, cqe, more, now); break;
            case kSend: on_send(id, cqe.res, now); break;
            case kCancel: break;
        }
    }

    void on_accept(int res, bool more, double now) {
        if (res >= 0) {
            int one = 1;
            ::setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            Connection* c = m_core.open(res, now);
            if (c == nullptr) {
                const std::string& r = HttpCore::over_capacity_response();
                [[maybe_unused]] ssize_t w = ::send(res, r.data(), r.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
                ::shutdown(res, SHUT_WR);
                close_quietly(res);
            } else {
                arm_recv(*c);
            }
        } else if (res == -EINVAL && m_multishot_accept) {
            m_multishot_accept = false;
            m_step_down += std::string(m_step_down.empty() ? "" : ", ") + "multishot accept refused";
            more = false;
        }
        if (!more && m_listening) arm_accept();
    }

    void recycle(uint16_t bid) {
        io_uring_buf_ring_add(m_br, m_buffers + size_t{bid} * kBufferBytes, kBufferBytes, bid, m_mask, 0);
        io_uring_buf_ring_advance(m_br, 1);
    }

    void on_recv(uint64_t id, const io_uring_cqe& cqe, bool more, double now) {
        const int res = cqe.res;
        const bool has_buffer = (cqe.flags & IORING_CQE_F_BUFFER) != 0;
        const auto bid = static_cast<uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
        Connection* c = m_core.find(id);
        if (c == nullptr) {  // cannot happen while pending_ops counts this receive; the buffer still goes back
            if (has_buffer) recycle(bid);
            return;
        }
        if (!more) {
            c->pending_ops--;
            c->recv_armed = false;
        }
        if (!c->closing) {
            if (res > 0) {
                const char* data = has_buffer ? m_buffers + size_t{bid} * kBufferBytes : c->recv_buf.get();
                m_core.data(*c, data, static_cast<size_t>(res), now);
            } else if (res == 0) {
                m_core.eof(*c, now);
            } else if (res == -EINVAL && m_multishot_recv) {
                m_multishot_recv = false;  // a kernel without multishot recv (< 6.0): one receive per submission
                m_step_down += std::string(m_step_down.empty() ? "" : ", ") + "multishot recv refused";
            } else if (res != -ENOBUFS && res != -EINTR && res != -EAGAIN) {
                c->abort = true;  // ECONNRESET and the like
            }
            // Out of buffers (ENOBUFS) or a single-shot receive done: ask again.
            if (!more && res != 0 && !c->abort && !c->peer_eof && !c->recv_armed) arm_recv(*c);
        }
        if (has_buffer) recycle(bid);
        m_touched.push_back(id);
    }

    void on_send(uint64_t id, int res, double now) {
        Connection* c = m_core.find(id);
        if (c == nullptr) return;
        c->pending_ops--;
        c->send_in_flight = false;
        if (res > 0) {
            c->sending_off += static_cast<size_t>(res);
            c->last_send_progress = now;
            if (c->sending_off >= c->sending.size()) {
                c->sending.clear();
                c->sending_off = 0;
            }
        } else if (res < 0 && res != -EINTR && res != -EAGAIN) {
            c->abort = true;
        }
        if (res > 0 && !c->closing) m_core.sent(*c, now);
        m_touched.push_back(id);
    }

    // ---- per connection ---------------------------------------------------------------------------------------------

    void service(Connection& c, double now) {
        if (c.closing) return finish_close(c);
        if (c.abort) return start_close(c);
        if (!c.send_in_flight) {
            if (c.sending.empty() && !c.out.empty()) {
                c.sending.swap(c.out);
                c.sending_off = 0;
            }
            if (c.sending_off < c.sending.size()) {
                io_uring_sqe* s = sqe();
                io_uring_prep_send(s, c.fd, c.sending.data() + c.sending_off, c.sending.size() - c.sending_off,
                                   MSG_NOSIGNAL);
                io_uring_sqe_set_data64(s, user_data(c.id, kSend));
                c.pending_ops++;
                c.send_in_flight = true;
                return;
            }
        }
        if (!c.send_in_flight && c.sending.empty() && c.out.empty() && c.close_after_flush) start_close(c);
    }

    void start_close(Connection& c) {
        m_core.closing(c);
        ::shutdown(c.fd, SHUT_RDWR);  // completes the receive (0) and any send (error)
        if (c.recv_armed) {
            io_uring_sqe* s = sqe();
            io_uring_prep_cancel64(s, user_data(c.id, kRecv), 0);
            io_uring_sqe_set_data64(s, user_data(c.id, kCancel));
        }
        finish_close(c);
    }

    void finish_close(Connection& c) {
        if (c.pending_ops > 0) return;
        close_quietly(c.fd);
        m_core.destroy(c.id);
    }

    LoopEnv m_env;
    HttpCore& m_core;
    bool m_basic;
    io_uring m_ring{};
    bool m_ring_ready = false;
    bool m_listening = true;
    bool m_multishot_accept = false;
    bool m_multishot_recv = false;
    bool m_buffer_ring = false;
    std::string m_step_down;
    io_uring_buf_ring* m_br = nullptr;
    size_t m_br_bytes = 0;
    char* m_buffers = nullptr;
    int m_mask = 0;
    uint64_t m_wake_count = 0;
    std::vector<uint64_t> m_touched;
};

}  // namespace

Result<std::unique_ptr<IoLoop>> make_uring_loop(const LoopEnv& env, bool basic) {
    auto loop = std::make_unique<UringLoop>(env, basic);
    if (Status s = loop->init(); !s) return s;
    return std::unique_ptr<IoLoop>(std::move(loop));
}

}  // namespace gkq::server
