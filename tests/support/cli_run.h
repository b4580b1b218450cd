// Runs the real gkq binary (path in $GKQ_CLI, set by CTest) and collects its exit code and output, for the CLI
// test suites. Header-only: it needs Qt, which the Qt-free test support library does not link.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>
#include <string>

namespace gkq::test {

template <class S>
struct CliRunT {
    int code = -1;  // -1: did not finish in time; -2: crashed
    S out;
    S err;
};

template <class S = QString>
CliRunT<S> run_gkq_as(const QStringList& args, int timeout_ms = 120000) {
    QProcess p;
    p.start(QString::fromLocal8Bit(qgetenv("GKQ_CLI")), args);
    CliRunT<S> r;
    if (!p.waitForFinished(timeout_ms)) return r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
    if constexpr (std::is_same_v<S, std::string>) {
        r.out = p.readAllStandardOutput().toStdString();
        r.err = p.readAllStandardError().toStdString();
    } else {
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
    }
    return r;
}

}  // namespace gkq::test
