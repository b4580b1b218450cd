#include "jobs/job_runner.h"

#include <QPromise>
#include <algorithm>
#include <cerrno>

#ifdef __linux__
#include <sys/resource.h>
#endif

namespace gkq::ui {

namespace {
constexpr int kProgressSteps = 1000;

// Workers (and the threads the core starts from them, which inherit it) run at a lower priority than the GUI
// thread, so that a busy machine delays the work rather than the event loop. On Linux, setpriority(PRIO_PROCESS,
// 0, ...) applies to the calling thread only.
void lowerWorkerPriority() {
#ifdef __linux__
    thread_local bool lowered = false;
    if (lowered) return;
    lowered = true;
    errno = 0;
    const int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0) (void)setpriority(PRIO_PROCESS, 0, std::min(19, nice + 5));
#endif
}
}  // namespace

JobRunner::JobRunner(QObject* parent) : QObject(parent) {
    // The core parallelizes inside one job; a few jobs at once (load + analyze + quantize) is the most we need.
    m_pool.setMaxThreadCount(4);
}

JobRunner::~JobRunner() {
    waitForAll();
}

quint64 JobRunner::start(const QString& key, const QString& label, Work work, Done done) {
    cancelKey(key);
    const quint64 id = m_nextId++;
    auto stop = std::make_shared<std::atomic<bool>>(false);
    auto* watcher = new QFutureWatcher<JobOutcome>(this);
    watcher->setPendingResultsLimit(1);
    connect(watcher, &QFutureWatcherBase::progressValueChanged, this, [this, id, watcher](int value) {
        if (m_jobs.contains(id))
            emit progressChanged(id, static_cast<double>(value) / kProgressSteps, watcher->progressText());
    });
    connect(watcher, &QFutureWatcherBase::finished, this, [this, id] { onFinished(id); });
    m_jobs.insert(id, Job{key, label, stop, watcher, std::move(done)});
    m_current.insert(key, id);

    // QPromise is move-only and QThreadPool::start takes a copyable function: share it.
    auto promise = std::make_shared<QPromise<JobOutcome>>();
    QFuture<JobOutcome> future = promise->future();
    promise->setProgressRange(0, kProgressSteps);
    m_pool.start([work = std::move(work), stop, promise] {
        promise->start();
        lowerWorkerPriority();
        const ProgressFn progress = [&promise, &stop](double fraction, std::string_view what) {
            const int value = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kProgressSteps);
            promise->setProgressValueAndText(value,
                                             QString::fromUtf8(what.data(), static_cast<qsizetype>(what.size())));
            return !stop->load() && !promise->isCanceled();
        };
        JobOutcome outcome = (stop->load() || promise->isCanceled())
                                 ? JobOutcome{Status(StatusCode::Cancelled, "cancelled before it started"), {}}
                                 : work(progress);
        promise->addResult(std::move(outcome));
        promise->finish();
    });
    watcher->setFuture(future);
    emit started(id, label);
    return id;
}

void JobRunner::cancel(quint64 id) {
    auto it = m_jobs.find(id);
    if (it == m_jobs.end()) return;
    it->stop->store(true);
}

void JobRunner::cancelKey(const QString& key) {
    for (auto it = m_jobs.begin(); it != m_jobs.end(); ++it)
        if (it->key == key) it->stop->store(true);
}

void JobRunner::cancelAll() {
    for (auto& job : m_jobs) job.stop->store(true);
}

bool JobRunner::isKeyBusy(const QString& key) const {
    for (const auto& job : m_jobs)
        if (job.key == key) return true;
    return false;
}

void JobRunner::waitForAll() {
    cancelAll();
    for (auto& job : m_jobs) {
        job.watcher->disconnect(this);
        job.watcher->waitForFinished();
        job.watcher->deleteLater();
    }
    m_jobs.clear();
    m_pool.waitForDone();
}

void JobRunner::onFinished(quint64 id) {
    auto it = m_jobs.find(id);
    if (it == m_jobs.end()) return;
    Job job = std::move(*it);
    m_jobs.erase(it);
    job.watcher->deleteLater();

    JobOutcome outcome;
    if (job.watcher->future().resultCount() > 0)
        outcome = job.watcher->future().result();
    else
        outcome.status = Status(StatusCode::Cancelled, "cancelled");

    const bool stale = m_current.value(job.key) != id;
    if (m_current.value(job.key) == id) m_current.remove(job.key);
    if (stale) {
        emit staleDropped(id);
    } else if (outcome.status.code() == StatusCode::Cancelled || job.stop->load()) {
        emit cancelled(id);
    } else if (!outcome.status.is_ok()) {
        emit failed(id, QString::fromStdString(outcome.status.message()));
    } else {
        if (job.done) job.done(outcome.value);
        emit finished(id);
    }
    if (m_jobs.isEmpty()) emit idle();
}

}  // namespace gkq::ui
