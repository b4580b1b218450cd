// Starting a gkq::Server for a test on the backend named in the test's data row ("epoll", "io_uring",
// "io_uring_basic"), on 127.0.0.1 and a port the kernel picks; skipping when the kernel refuses io_uring.
#pragma once

#include "gkq/server.h"

#include <QtTest>

#include <memory>
#include <string>

namespace gkq::test {

inline void add_backend_rows() {
    QTest::addColumn<QString>("backend");
    QTest::newRow("epoll") << "epoll";
    QTest::newRow("io_uring") << "io_uring";
    QTest::newRow("io_uring_basic") << "io_uring_basic";
}

inline ServerConfig loopback_config(const QString& backend) {
    ServerConfig c;
    c.host = "127.0.0.1";
    c.port = 0;
    c.io_backend = *parse_io_backend(backend.toStdString());
    c.n_threads = 1;
    return c;
}

}  // namespace gkq::test

// Declares `name` (std::unique_ptr<gkq::Server>) started with `config`; QSKIPs when io_uring is refused.
#define GKQ_START_SERVER(name, config)                                                                             \
    auto name##_started = gkq::Server::start(config);                                                              \
    if (!name##_started.is_ok() && name##_started.status().code() == gkq::StatusCode::Unsupported)                 \
        QSKIP(qPrintable(QString::fromStdString("the kernel refuses this backend: " + name##_started.message()))); \
    QVERIFY2(name##_started.is_ok(), name##_started.message().c_str());                                            \
    std::unique_ptr<gkq::Server> name = std::move(*name##_started)

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + std::string(needle) + "]")))
