// The official `openai` npm client (tests/server/openai-client, pinned by its package-lock.json) calling a gkq
// server's /v1/models and /v1/completions, streamed and not, with the answer compared against direct generation.
// The client is installed into the build folder by `npm ci` (the `openai_client_deps` target, or this test itself on
// its first run); the test skips with the reason when node is missing or npm cannot reach its registry.
#include "http_test_support.h"
#include "server_fixture.h"
#include "test_support.h"

#include <QDir>
#include <QProcess>
#include <QtTest>

using namespace gkq;

class TestOpenAiClient : public QObject {
    Q_OBJECT
private slots:
    void officialClientTalksToTheServer_data() {
        QTest::addColumn<QString>("backend");
        QTest::newRow("epoll") << "epoll";
        QTest::newRow("io_uring") << "io_uring";
    }
    void officialClientTalksToTheServer() {
        QFETCH(QString, backend);
        const QString dir = QStringLiteral(GKQ_OPENAI_CLIENT_DIR);
        QProcess version;
        version.start("node", {"--version"});
        if (!version.waitForFinished(30000) || version.exitCode() != 0) QSKIP("node is not installed");
        if (!QDir(dir + "/node_modules/openai").exists()) {
            // npm ci installs exactly the versions of package-lock.json; it needs the npm registry.
            QProcess npm;
            npm.setWorkingDirectory(dir);
            npm.setProcessChannelMode(QProcess::MergedChannels);
            npm.start("npm", {"ci", "--ignore-scripts", "--no-audit", "--no-fund"});
            const bool ran = npm.waitForFinished(240000);
            if (!ran || npm.exitCode() != 0 || !QDir(dir + "/node_modules/openai").exists())
                QSKIP(qPrintable("the openai npm client could not be installed into " + dir +
                                 " (`npm ci` failed: " + QString::fromUtf8(npm.readAll()).right(400).trimmed() + ")"));
        }

        test::TempDir tmp;
        auto tiny = test::make_tiny_knot(tmp);
        ServerConfig cfg = test::loopback_config(backend);
        cfg.weights_path = tiny.knot;
        GKQ_START_SERVER(server, cfg);
        QVERIFY(server->wait_loaded(30000));

        QProcess node;
        node.setWorkingDirectory(dir);
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("GKQ_URL", QString::fromStdString(server->url()));
        env.insert("GKQ_MODEL", "tiny");
        env.insert("GKQ_EXPECTED_TEXT", QString::fromStdString(test::reference_completion(tiny.knot, "ab cd", 6)));
        node.setProcessEnvironment(env);
        node.setProcessChannelMode(QProcess::MergedChannels);
        node.start("node", {"--test", "completions.test.mjs"});
        QVERIFY(node.waitForFinished(120000));
        const QString out = QString::fromUtf8(node.readAll());
        QVERIFY2(node.exitCode() == 0, qPrintable(out));
        QVERIFY2(out.contains("# pass 4") && out.contains("# fail 0"), qPrintable(out));
    }
};

QTEST_APPLESS_MAIN(TestOpenAiClient)
#include "test_openai_client.moc"
