// The real gkq binary's `serve`: a tiny knot served on a free port, answered over loopback, drained by SIGTERM
// (exit 0); configuration errors from the environment and the flags.
#include "gkq/model_writer.h"
#include "http_test_support.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QProcess>
#include <QRegularExpression>
#include <QtTest>

#include <csignal>

using namespace gkq;

namespace {

QString cli() {
    return QString::fromLocal8Bit(qgetenv("GKQ_CLI"));
}

// Reads the child's stderr until `pattern` matches; the whole text so far, or empty on timeout/exit.
QString wait_for_stderr(QProcess& p, const QRegularExpression& pattern, QString& all) {
    p.setReadChannel(QProcess::StandardError);
    while (!pattern.match(all).hasMatch()) {
        if (p.state() == QProcess::NotRunning || !p.waitForReadyRead(30000)) return {};
        all += QString::fromUtf8(p.readAllStandardError());
    }
    return all;
}

}  // namespace

class TestCliServe : public QObject {
    Q_OBJECT
private slots:
    void init() {
        if (cli().isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void servesAndDrainsOnSigterm_data() {
        QTest::addColumn<QString>("backend");
        QTest::newRow("auto") << "auto";
        QTest::newRow("epoll") << "epoll";
    }
    void servesAndDrainsOnSigterm() {
        QFETCH(QString, backend);
        test::TempDir dir;
        auto tiny = test::make_tiny_knot(dir);
        QProcess p;
        p.setProcessChannelMode(QProcess::SeparateChannels);
        p.start(cli(), {"serve", "--weights", QString::fromStdString(tiny.knot), "--port", "0", "--threads", "1",
                        "--io-backend", backend});
        QVERIFY(p.waitForStarted());
        QString err;
        QVERIFY(!wait_for_stderr(p, QRegularExpression("weights loaded: .*\n"), err).isEmpty());
        const auto m = QRegularExpression(R"(listening on http://127\.0\.0\.1:(\d+) \()").match(err);
        QVERIFY2(m.hasMatch(), qPrintable(err));
        const auto port = static_cast<uint16_t>(m.captured(1).toUInt());
        if (backend == "epoll") QVERIFY2(err.contains("(epoll (level-triggered))"), qPrintable(err));
        auto health = test::http_request(port, "GET", "/health");
        QVERIFY(health);
        QCOMPARE(health->status, 200);
        auto infer = test::http_request(port, "POST", "/infer", R"({"prompt":"ab","max_tokens":3,"temperature":0})");
        QCOMPARE(infer->status, 200);
        ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
        QVERIFY(p.waitForFinished(30000));
        err += QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 0);
        QVERIFY2(err.contains("gkq serve: SIGTERM: draining\n"), qPrintable(err));
        QVERIFY2(err.contains("gkq serve: stopped\n"), qPrintable(err));
    }

    // A llama2.c checkpoint carries no vocabulary: serve finds the tok*.bin beside it, as generate does.
    void servesAModelWithTheTokenizerBesideIt() {
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 7);
        const std::string model = dir.file("model.bin");
        QVERIFY(write_llama2c(model, m.config, m.tensors));
        const Vocabulary v = test::tiny_vocabulary();
        test::Bytes b;
        b.i32(8);
        for (size_t i = 0; i < v.tokens.size(); ++i)
            b.f32(v.scores[i]).i32(static_cast<int32_t>(v.tokens[i].size())).raw(v.tokens[i]);
        test::write_file(dir.file("tok40.bin"), b.vec());
        QProcess p;
        p.setProcessChannelMode(QProcess::SeparateChannels);
        p.start(cli(), {"serve", "--weights", QString::fromStdString(model), "--port", "0", "--threads", "1"});
        QVERIFY(p.waitForStarted());
        QString err;
        QVERIFY2(!wait_for_stderr(p, QRegularExpression("weights loaded: .*\n"), err).isEmpty(), qPrintable(err));
        const auto port = static_cast<uint16_t>(
            QRegularExpression(R"(listening on http://127\.0\.0\.1:(\d+) \()").match(err).captured(1).toUInt());
        auto infer = test::http_request(port, "POST", "/infer", R"({"prompt":"ab","max_tokens":3,"temperature":0})");
        QVERIFY(infer);
        QCOMPARE(infer->status, 200);
        ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 0);
    }

    void environmentSelectsTheBackend() {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("IO_BACKEND", "epoll");
        p.setProcessEnvironment(env);
        p.start(cli(), {"serve", "--port", "0"});
        QString err;
        QVERIFY(!wait_for_stderr(p, QRegularExpression("no weights configured"), err).isEmpty());
        QVERIFY2(err.contains("(epoll (level-triggered))"), qPrintable(err));
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 0);
    }

    void configurationErrors() {
        struct Case {
            const char* var;
            const char* value;
            QStringList args;
            const char* message;
        };
        const Case cases[] = {
            {"GPU_CACHE_SIZE_MB", "lots", {}, "gkq serve: GPU_CACHE_SIZE_MB='lots': not a whole number of megabytes"},
            {"IO_BACKEND",
             "poll",
             {},
             "gkq serve: IO_BACKEND='poll': not one of auto, io_uring, io_uring_basic, epoll"},
            {"USE_CDN_FALLBACK", "true", {"--weights", "x.knot"}, "must be an http:// URL of a knot, not 'x.knot'"},
            {nullptr, nullptr, {"--io-backend", "kqueue"}, "gkq serve: --io-backend: 'kqueue' is not an I/O backend"},
            {nullptr, nullptr, {"--port", "70000"}, "--port"},
            {nullptr, nullptr, {"--cache-policy", "mru"}, "gkq serve: --cache-policy: cache policy 'mru': keep or lru"},
        };
        for (const Case& c : cases) {
            QProcess p;
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            if (c.var) env.insert(c.var, c.value);
            p.setProcessEnvironment(env);
            p.start(cli(), QStringList{"serve"} + c.args);
            QVERIFY(p.waitForFinished(30000));
            const QString err = QString::fromUtf8(p.readAllStandardError());
            QCOMPARE(p.exitCode(), 2);
            QVERIFY2(err.contains(c.message), qPrintable(err));
        }
        // Weights that cannot load: the error is logged and the process exits 2.
        QProcess bad;
        bad.start(cli(), {"serve", "--port", "0", "--weights", "/nonexistent/x.knot"});
        QVERIFY(bad.waitForFinished(30000));
        QCOMPARE(bad.exitCode(), 2);
        QVERIFY(QString::fromUtf8(bad.readAllStandardError()).contains("loading failed: /nonexistent/x.knot"));
    }
};

QTEST_APPLESS_MAIN(TestCliServe)
#include "test_cli_serve.moc"
