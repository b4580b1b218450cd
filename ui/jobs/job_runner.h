// JobRunner: the one way the workbench runs long work (load, analyze, quantize, export) off the GUI thread.
// A job is a function of a gkq::ProgressFn that returns a Status and a value (std::any holding a shared_ptr, so
// only value types cross threads). It runs on the runner's QThreadPool and reports through a QPromise; a
// QFutureWatcher (GUI thread) reports progress. The ProgressFn returns false once the job's atomic stop flag is
// set (cancel(), or a newer job with the same key), which makes the core return Cancelled.
// Stale results are dropped: only the newest job of each key delivers its value; older ones end in
// staleDropped(). `done` callbacks and every signal run on the GUI thread. The destructor cancels and waits.
#pragma once

#include "gkq/progress.h"
#include "gkq/status.h"

#include <QFutureWatcher>
#include <QHash>
#include <QObject>
#include <QThreadPool>
#include <any>
#include <atomic>
#include <functional>
#include <memory>

namespace gkq::ui {

struct JobOutcome {
    Status status;
    std::any value;  // a std::shared_ptr<T> when status is ok
};

class JobRunner : public QObject {
    Q_OBJECT
public:
    using Work = std::function<JobOutcome(const ProgressFn&)>;
    using Done = std::function<void(const std::any&)>;

    explicit JobRunner(QObject* parent = nullptr);
    ~JobRunner() override;

    // Starts `work`; a running job with the same key is cancelled and its result will be dropped.
    quint64 start(const QString& key, const QString& label, Work work, Done done = {});

    // Typed convenience: work returns Result<T>; done gets the T (on the GUI thread, newest job of its key only).
    template <class T, class W, class D>
    quint64 run(const QString& key, const QString& label, W work, D done) {
        return start(
            key, label,
            [work = std::move(work)](const ProgressFn& progress) -> JobOutcome {
                Result<T> r = work(progress);
                if (!r) return {r.status(), {}};
                return {Status::ok(), std::make_shared<T>(std::move(r).value())};
            },
            [done = std::move(done)](const std::any& v) { done(*std::any_cast<std::shared_ptr<T>>(v)); });
    }

    void cancel(quint64 id);
    void cancelKey(const QString& key);
    void cancelAll();
    bool isRunning(quint64 id) const { return m_jobs.contains(id); }
    bool isBusy() const { return !m_jobs.isEmpty(); }
    bool isKeyBusy(const QString& key) const;
    // The newest job started for `key` (0 when none).
    quint64 currentJob(const QString& key) const { return m_current.value(key, 0); }
    // Blocks (for shutdown only) until every job has ended; their results are dropped.
    void waitForAll();

signals:
    void started(quint64 id, const QString& label);
    void progressChanged(quint64 id, double fraction, const QString& what);
    void finished(quint64 id);
    void failed(quint64 id, const QString& message);
    void cancelled(quint64 id);
    void staleDropped(quint64 id);
    void idle();  // the last running job ended

private:
    struct Job {
        QString key;
        QString label;
        std::shared_ptr<std::atomic<bool>> stop;
        QFutureWatcher<JobOutcome>* watcher = nullptr;
        Done done;
    };
    void onFinished(quint64 id);

    QThreadPool m_pool;
    quint64 m_nextId = 1;
    QHash<quint64, Job> m_jobs;
    QHash<QString, quint64> m_current;
};

}  // namespace gkq::ui
