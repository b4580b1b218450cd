// The epoll backend: level-triggered readiness, reads into one loop-wide buffer, writes straight from the
// connection's queue, EPOLLOUT only while a send is blocked. For kernels and containers that refuse io_uring.
#include "server/io_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace gkq::server {

void close_quietly(int fd) {
    char sink[16384];
    for (int i = 0; i < 16; ++i)
        if (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
    ::close(fd);
}

namespace {

constexpr uint64_t kListenTag = ~uint64_t{0};
constexpr uint64_t kWakeTag = ~uint64_t{0} - 1;

class EpollLoop final : public IoLoop {
public:
    explicit EpollLoop(const LoopEnv& env) : m_env(env), m_core(*env.core), m_buf(64 * 1024) {}
    ~EpollLoop() override {
        if (m_ep >= 0) ::close(m_ep);
    }

    std::string_view name() const override { return "epoll"; }
    std::string detail() const override { return "epoll (level-triggered)"; }

    void run() override {
        m_ep = ::epoll_create1(EPOLL_CLOEXEC);
        add(m_env.listen_fd, EPOLLIN, kListenTag);
        add(m_env.wake_fd, EPOLLIN, kWakeTag);
        std::vector<epoll_event> events(256);
        double next_tick = InferenceEngine::now_seconds() + m_env.tick_ms / 1e3;
        while (!m_env.should_exit()) {
            const double before = InferenceEngine::now_seconds();
            const int timeout = std::max(0, static_cast<int>((next_tick - before) * 1e3) + 1);
            const int n = ::epoll_wait(m_ep, events.data(), static_cast<int>(events.size()), timeout);
            const double now = InferenceEngine::now_seconds();
            std::vector<uint64_t> touched;
            for (int i = 0; i < n; ++i) {
                const uint64_t tag = events[i].data.u64;
                if (tag == kListenTag) {
                    accept_all(now);
                } else if (tag == kWakeTag) {
                    uint64_t count = 0;
                    [[maybe_unused]] ssize_t r = ::read(m_env.wake_fd, &count, sizeof count);
                    m_env.on_wake(now);
                } else if (Connection* c = m_core.find(tag)) {
                    if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) read_from(*c, now);
                    touched.push_back(tag);
                }
            }
            if (now >= next_tick) {
                m_core.tick(now);
                m_env.on_tick(now);
                next_tick = now + m_env.tick_ms / 1e3;
            }
            if (m_core.draining() && m_listening) {
                ::epoll_ctl(m_ep, EPOLL_CTL_DEL, m_env.listen_fd, nullptr);
                ::close(m_env.listen_fd);
                m_listening = false;
            }
            for (uint64_t id : m_core.take_dirty()) touched.push_back(id);
            for (uint64_t id : touched)
                if (Connection* c = m_core.find(id)) service(*c, now);
        }
        std::vector<uint64_t> ids;
        for (auto& [id, c] : m_core.connections()) ids.push_back(id);
        for (uint64_t id : ids) close_connection(*m_core.find(id));
        if (m_listening) ::close(m_env.listen_fd);
        m_listening = false;
    }

private:
    void add(int fd, uint32_t events, uint64_t tag) {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = tag;
        ::epoll_ctl(m_ep, EPOLL_CTL_ADD, fd, &ev);
    }

    void accept_all(double now) {
        for (int i = 0; i < 64; ++i) {
            const int fd = ::accept4(m_env.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;  // EAGAIN, or an error the next readiness will show again
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            Connection* c = m_core.open(fd, now);
            if (c == nullptr) {
                const std::string& r = HttpCore::over_capacity_response();
                [[maybe_unused]] ssize_t w = ::send(fd, r.data(), r.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
                ::shutdown(fd, SHUT_WR);
                close_quietly(fd);
                continue;
            }
            c->poll_events = EPOLLIN | EPOLLRDHUP;
            add(fd, c->poll_events, c->id);
        }
    }

    void read_from(Connection& c, double now) {
        // A few reads per wakeup: level-triggered readiness brings us back for the rest, and others get a turn.
        for (int i = 0; i < 4; ++i) {
            const ssize_t n = ::recv(c.fd, m_buf.data(), m_buf.size(), 0);
            if (n > 0) {
                m_core.data(c, m_buf.data(), static_cast<size_t>(n), now);
                if (static_cast<size_t>(n) < m_buf.size() || c.abort || c.close_after_flush) return;
                continue;
            }
            if (n == 0) {
                m_core.eof(c, now);
            } else if (errno != EAGAIN && errno != EINTR) {
                c.abort = true;
            }
            return;
        }
    }

    void service(Connection& c, double now) {
        if (c.abort) return close_connection(c);
        for (;;) {
            if (c.sending_off >= c.sending.size()) {
                c.sending.clear();
                c.sending_off = 0;
                if (c.out.empty()) break;
                c.sending.swap(c.out);
            }
            const ssize_t n =
                ::send(c.fd, c.sending.data() + c.sending_off, c.sending.size() - c.sending_off, MSG_NOSIGNAL);
            if (n > 0) {
                c.sending_off += static_cast<size_t>(n);
                c.last_send_progress = now;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
            return close_connection(c);  // EPIPE, ECONNRESET
        }
        if (!c.in.empty() && !c.busy) {
            m_core.sent(c, now);  // may queue more output: flush it on the next pass
            if (!c.out.empty() && c.sending.empty()) return service(c, now);
        }
        const bool pending = !c.sending.empty();
        if (!pending && c.close_after_flush) return close_connection(c);
        // Once the peer closed its side there is nothing more to read: stop listening for it (EOF stays readable).
        const uint32_t want = (c.peer_eof ? 0u : uint32_t(EPOLLIN | EPOLLRDHUP)) | (pending ? uint32_t(EPOLLOUT) : 0u);
        if (want != c.poll_events) {
            epoll_event ev{};
            ev.events = want;
            ev.data.u64 = c.id;
            ::epoll_ctl(m_ep, EPOLL_CTL_MOD, c.fd, &ev);
            c.poll_events = want;
        }
    }

    void close_connection(Connection& c) {
        ::epoll_ctl(m_ep, EPOLL_CTL_DEL, c.fd, nullptr);
        close_quietly(c.fd);
        m_core.destroy(c.id);
    }

    LoopEnv m_env;
    HttpCore& m_core;
    int m_ep = -1;
    bool m_listening = true;
    std::vector<char> m_buf;
};

}  // namespace

std::unique_ptr<IoLoop> make_epoll_loop(const LoopEnv& env) {
    return std::make_unique<EpollLoop>(env);
}

}  // namespace gkq::server
