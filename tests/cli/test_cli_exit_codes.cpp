// One Status-to-exit-code mapping (app/cli/exit_code.h) behind every command, checked through real gkq runs against
// what `gkq --help` and the README promise: 0 success, 1 failure, 2 bad options or bad input file, 130 cancelled.
#include "cli/exit_code.h"
#include "cli_run.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}
}  // namespace

class TestCliExitCodes : public QObject {
    Q_OBJECT

    test::TempDir m_dir;
    std::string m_model;    // a valid tiny GGUF
    std::string m_corrupt;  // GGUF magic, then an absurd metadata count
    std::string m_garbage;  // neither a model nor a knot

private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
        m_model = test::write_tiny_gguf(m_dir.file("tiny.gguf"));
        m_corrupt = m_dir.file("corrupt.gguf");
        test::Bytes b;
        b.u32(0x46554747).u32(3).u64(1).u64(0x7fffffffffffull);  // "GGUF", version 3, absurd metadata count
        test::write_file(m_corrupt, b.vec());
        m_garbage = m_dir.file("garbage.knot");
        test::write_file(m_garbage, std::string(64, 'x'));
    }

    void mappingIsTheDocumentedOne() {
        QCOMPARE(cli::exit_code(Status::ok()), 0);
        QCOMPARE(cli::exit_code(StatusCode::InvalidArgument), 2);
        QCOMPARE(cli::exit_code(StatusCode::NotFound), 2);
        QCOMPARE(cli::exit_code(StatusCode::Corrupt), 2);
        QCOMPARE(cli::exit_code(StatusCode::Unsupported), 2);
        QCOMPARE(cli::exit_code(StatusCode::IoError), 1);
        QCOMPARE(cli::exit_code(StatusCode::Internal), 1);
        QCOMPARE(cli::exit_code(error(StatusCode::Cancelled, "stopped")), 130);
        Run r = run_gkq({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("exit codes: 0 success, 1 failure, 2 bad options or bad input file, 130 cancelled"),
                 qPrintable(r.out));
    }

    void badInputExitsTwo_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        const QString out = q(m_dir.file("out.knot"));
        const QString missing = "/nonexistent/model.gguf";
        QTest::newRow("inspect missing") << QStringList{"inspect", missing} << missing;
        QTest::newRow("analyze missing") << QStringList{"analyze", missing} << missing;
        QTest::newRow("quantize missing") << QStringList{"quantize", missing, "-o", out} << missing;
        QTest::newRow("generate missing") << QStringList{"generate", missing, "-n", "1"} << missing;
        QTest::newRow("verify missing") << QStringList{"verify", "/nonexistent/in.knot"} << "/nonexistent/in.knot";
        QTest::newRow("inspect corrupt") << QStringList{"inspect", q(m_corrupt)} << q(m_corrupt);
        QTest::newRow("analyze corrupt") << QStringList{"analyze", q(m_corrupt)} << q(m_corrupt);
        QTest::newRow("quantize corrupt") << QStringList{"quantize", q(m_corrupt), "-o", out} << q(m_corrupt);
        QTest::newRow("verify not a knot") << QStringList{"verify", q(m_garbage)} << q(m_garbage);
        QTest::newRow("reconstruct not a knot")
            << QStringList{"reconstruct", q(m_garbage), "-o", q(m_dir.file("out.gguf"))} << q(m_garbage);
        QTest::newRow("unknown preset") << QStringList{"quantize", q(m_model), "-o", out, "--preset", "nonesuch"}
                                        << "nonesuch";
        QTest::newRow("unknown option") << QStringList{"verify", "--bogus", "x"} << "unknown option '--bogus'";
    }
    void badInputExitsTwo() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        Run r = run_gkq(args);
        QVERIFY2(r.code == 2, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }

    // The operating system refusing to write the output is a failure (1), not bad input: analyze said 2 before.
    void writeFailureExitsOne_data() {
        QTest::addColumn<QStringList>("args");
        QTest::newRow("analyze -o") << QStringList{"analyze", q(m_model), "-o", "/nonexistent/dir/spectra.txt"};
        QTest::newRow("quantize -o") << QStringList{"quantize", q(m_model), "-o", "/nonexistent/dir/out.knot"};
    }
    void writeFailureExitsOne() {
        QFETCH(QStringList, args);
        Run r = run_gkq(args);
        QVERIFY2(r.code == 1, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.err.contains("/nonexistent/dir/"), qPrintable(r.err));
    }

    void successExitsZero() {
        const QString knot = q(m_dir.file("ok.knot"));
        Run quantized = run_gkq({"quantize", q(m_model), "-o", knot, "--preset", "q8_0"});
        QVERIFY2(quantized.code == 0, qPrintable(quantized.err));
        Run verified = run_gkq({"verify", knot});
        QVERIFY2(verified.code == 0, qPrintable(verified.err));
        Run inspected = run_gkq({"inspect", q(m_model)});
        QVERIFY2(inspected.code == 0, qPrintable(inspected.err));
    }
};

QTEST_GUILESS_MAIN(TestCliExitCodes)
#include "test_cli_exit_codes.moc"
