// The job runner: progress, finish, failure, cancel (through the ProgressFn), stale results dropped by job id,
// and shutdown with a job in flight. Signals are checked with QSignalSpy; waits are QTRY_* with timeouts.
#include "jobs/job_runner.h"

#include <QSignalSpy>
#include <QtTest>
#include <atomic>
#include <thread>

using namespace gkq;
using gkq::ui::JobRunner;

class TestJobRunner : public QObject {
    Q_OBJECT
private slots:
    void progressThenFinishDeliversTheValue() {
        JobRunner runner;
        QSignalSpy started(&runner, &JobRunner::started);
        QSignalSpy progress(&runner, &JobRunner::progressChanged);
        QSignalSpy finished(&runner, &JobRunner::finished);
        QSignalSpy idle(&runner, &JobRunner::idle);
        int delivered = 0;
        const quint64 id = runner.run<int>(
            QStringLiteral("k"), QStringLiteral("count"),
            [](const ProgressFn& p) -> Result<int> {
                for (int i = 1; i <= 4; ++i)
                    if (!p(i / 4.0, "step")) return Status(StatusCode::Cancelled, "stopped");
                return 42;
            },
            [&delivered](int& v) { delivered = v; });
        QVERIFY(id > 0);
        QCOMPARE(started.count(), 1);
        QCOMPARE(started.at(0).at(0).toULongLong(), id);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 10000);
        QCOMPARE(finished.at(0).at(0).toULongLong(), id);
        QCOMPARE(delivered, 42);
        QCOMPARE(idle.count(), 1);
        QVERIFY(!runner.isBusy());
        // Qt throttles intermediate progress, never the last value: at least one report, ending at exactly 1.
        QVERIFY(progress.count() >= 1);
        double last = -1.0;
        for (const auto& args : progress) {
            QCOMPARE(args.at(0).toULongLong(), id);
            QVERIFY(args.at(1).toDouble() >= last);
            last = args.at(1).toDouble();
        }
        QCOMPARE(last, 1.0);
        QCOMPARE(progress.last().at(2).toString(), QStringLiteral("step"));
    }

    void failureCarriesTheMessage() {
        JobRunner runner;
        QSignalSpy failed(&runner, &JobRunner::failed);
        QSignalSpy finished(&runner, &JobRunner::finished);
        bool called = false;
        const quint64 id = runner.run<int>(
            QStringLiteral("k"), QStringLiteral("fail"),
            [](const ProgressFn&) -> Result<int> { return Status(StatusCode::IoError, "/x/model.bin: cannot open"); },
            [&called](int&) { called = true; });
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
        QCOMPARE(failed.at(0).at(0).toULongLong(), id);
        QCOMPARE(failed.at(0).at(1).toString(), QStringLiteral("/x/model.bin: cannot open"));
        QCOMPARE(finished.count(), 0);
        QVERIFY(!called);
    }

    void cancelStopsTheWorkThroughProgress() {
        JobRunner runner;
        QSignalSpy cancelled(&runner, &JobRunner::cancelled);
        QSignalSpy finished(&runner, &JobRunner::finished);
        auto entered = std::make_shared<std::atomic<bool>>(false);
        auto calls = std::make_shared<std::atomic<long>>(0);
        bool called = false;
        const quint64 id = runner.run<int>(
            QStringLiteral("k"), QStringLiteral("spin"),
            [entered, calls](const ProgressFn& p) -> Result<int> {
                entered->store(true);
                // Runs until the progress callback says stop (bounded so a broken cancel fails, not hangs).
                for (long i = 0; i < 2000000000L; ++i) {
                    calls->fetch_add(1);
                    if (!p(0.5, "spinning")) return Status(StatusCode::Cancelled, "stopped");
                    std::this_thread::yield();
                }
                return 1;
            },
            [&called](int&) { called = true; });
        QTRY_VERIFY_WITH_TIMEOUT(entered->load(), 10000);
        QVERIFY(runner.isRunning(id));
        runner.cancel(id);
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 10000);
        QCOMPARE(cancelled.at(0).at(0).toULongLong(), id);
        QCOMPARE(finished.count(), 0);
        QVERIFY(!called);
        QVERIFY(calls->load() >= 1);
        QVERIFY(!runner.isRunning(id));
    }

    void staleResultsAreDropped() {
        JobRunner runner;
        QSignalSpy stale(&runner, &JobRunner::staleDropped);
        QSignalSpy finished(&runner, &JobRunner::finished);
        auto gate = std::make_shared<std::atomic<bool>>(false);
        auto entered = std::make_shared<std::atomic<bool>>(false);
        QList<int> delivered;
        // The first job never looks at its progress callback: it completes "successfully" after being superseded.
        const quint64 first = runner.run<int>(
            QStringLiteral("spectrum"), QStringLiteral("old"),
            [gate, entered](const ProgressFn&) -> Result<int> {
                entered->store(true);
                while (!gate->load()) std::this_thread::yield();
                return 1;
            },
            [&delivered](int& v) { delivered << v; });
        QTRY_VERIFY_WITH_TIMEOUT(entered->load(), 10000);
        const quint64 second = runner.run<int>(
            QStringLiteral("spectrum"), QStringLiteral("new"), [](const ProgressFn&) -> Result<int> { return 2; },
            [&delivered](int& v) { delivered << v; });
        QCOMPARE(runner.currentJob(QStringLiteral("spectrum")), second);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 10000);
        gate->store(true);
        QTRY_COMPARE_WITH_TIMEOUT(stale.count(), 1, 10000);
        QCOMPARE(stale.at(0).at(0).toULongLong(), first);
        QCOMPARE(finished.at(0).at(0).toULongLong(), second);
        QCOMPARE(delivered, QList<int>{2});
    }

    void jobsOfOtherKeysRunSideBySide() {
        JobRunner runner;
        QSignalSpy finished(&runner, &JobRunner::finished);
        int sum = 0;
        runner.run<int>(
            QStringLiteral("a"), QStringLiteral("a"), [](const ProgressFn&) -> Result<int> { return 3; },
            [&sum](int& v) { sum += v; });
        runner.run<int>(
            QStringLiteral("b"), QStringLiteral("b"), [](const ProgressFn&) -> Result<int> { return 4; },
            [&sum](int& v) { sum += v; });
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 10000);
        QCOMPARE(sum, 7);
    }

    void destroyingTheRunnerCancelsAndWaits() {
        auto entered = std::make_shared<std::atomic<bool>>(false);
        auto stopped = std::make_shared<std::atomic<bool>>(false);
        {
            JobRunner runner;
            runner.run<int>(
                QStringLiteral("k"), QStringLiteral("long"),
                [entered, stopped](const ProgressFn& p) -> Result<int> {
                    entered->store(true);
                    while (p(0.1, "x")) std::this_thread::yield();
                    stopped->store(true);
                    return Status(StatusCode::Cancelled, "stopped");
                },
                [](int&) { QFAIL("a cancelled job delivered a value"); });
            QTRY_VERIFY_WITH_TIMEOUT(entered->load(), 10000);
        }
        QVERIFY(stopped->load());  // the destructor waited for the work to see the stop flag
    }
};

QTEST_GUILESS_MAIN(TestJobRunner)
#include "test_job_runner.moc"
