// The I/O backends behind one interface: an event loop over the listening socket, an eventfd that other threads
// write to wake it, and the connections of an HttpCore. One dispatch point (make_io_loop) picks the backend.
#pragma once

#include "gkq/server.h"
#include "server/http_core.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace gkq::server {

struct LoopEnv {
    int listen_fd = -1;  // non-blocking; the loop closes it when draining starts or when it exits
    int wake_fd = -1;    // eventfd, non-blocking
    HttpCore* core = nullptr;
    std::function<void(double now)> on_wake;  // the wake fd fired: deliver worker events, apply drain/stop requests
    std::function<void(double now)> on_tick;  // every tick_ms
    std::function<bool()> should_exit;
    int tick_ms = 25;
};

class IoLoop {
public:
    virtual ~IoLoop() = default;
    virtual std::string_view name() const = 0;  // "io_uring" or "epoll"
    virtual std::string detail() const = 0;     // the features in use
    // Runs until env.should_exit(); then closes every connection and the listener.
    virtual void run() = 0;
};

// io_uring (`basic`: single-shot accept and recv, no buffer ring). Unsupported when the kernel refuses io_uring
// (EPERM, ENOSYS: seccomp, io_uring_disabled) or lacks an operation the loop needs.
Result<std::unique_ptr<IoLoop>> make_uring_loop(const LoopEnv& env, bool basic);
std::unique_ptr<IoLoop> make_epoll_loop(const LoopEnv& env);

// Drops what the peer sent and we will not read, then closes: closing with unread bytes would send an RST that can
// destroy the response still in flight to the client.
void close_quietly(int fd);

}  // namespace gkq::server
