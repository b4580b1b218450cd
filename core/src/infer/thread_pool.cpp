#include "infer/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace gkq {

namespace {

// Polling before sleeping: long enough to bridge the gap between two matrix products of one forward pass,
// short enough not to burn a core between tokens of an interactive session. Bounded by time because the
// cost of a pause instruction differs tenfold between CPUs.
constexpr auto kSpinTime = std::chrono::microseconds(30);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Polls `done` for up to kSpinTime (not at all when `spin` is false); true once it holds.
template <class Pred>
bool spin_until(bool spin, Pred done) {
    if (done()) return true;
    if (!spin) return false;
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (;;) {
        for (int i = 0; i < 32; ++i) {
            cpu_relax();
            if (done()) return true;
        }
        if (std::chrono::steady_clock::now() >= deadline) return false;
    }
}

// Waits until a.load() == want: spinning first, then sleeping on the value seen.
template <class T>
void wait_for(std::atomic<T>& a, T want, bool spin) {
    if (spin_until(spin, [&] { return a.load() == want; })) return;
    for (T v = a.load(); v != want; v = a.load()) a.wait(v);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : m_n_threads(std::max(1, n_threads)) {
    // More participants than cores: a spinning thread would take the core from one with work to do.
    m_spin = m_n_threads <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    m_workers.reserve(static_cast<size_t>(m_n_threads - 1));
    for (int i = 1; i < m_n_threads; ++i) m_workers.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    m_stop.store(true);
    m_generation.fetch_add(1);
    m_generation.notify_all();
    for (std::thread& t : m_workers) t.join();
}

int64_t ThreadPool::chunk_for(int64_t n, int64_t align) const {
    const int64_t parts = 4 * static_cast<int64_t>(m_n_threads);
    const int64_t chunk = (n + parts - 1) / parts;
    return std::max<int64_t>(align, (chunk + align - 1) / align * align);
}

void ThreadPool::claim_chunks() {
    for (;;) {
        const int64_t k = m_next.fetch_add(1);
        if (k >= m_n_chunks) return;
        const int64_t begin = k * m_chunk;
        (*m_fn)(begin, std::min(m_n, begin + m_chunk));
        if (m_done.fetch_add(1) + 1 == m_n_chunks) m_done.notify_all();
    }
}

void ThreadPool::worker_loop() {
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(m_spin, [&] { return m_generation.load() != seen; })) {
            m_generation.wait(seen);
            continue;
        }
        seen = m_generation.load();
        if (m_stop.load()) return;
        // Entering before looking at m_open (both sequentially consistent) means the caller, which closes the
        // job before waiting for m_active to drain, either waits for us or we see the job closed.
        m_active.fetch_add(1);
        if (m_open.load()) claim_chunks();
        if (m_active.fetch_sub(1) == 1) m_active.notify_all();
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t chunk, bool parallel,
                              const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    chunk = std::max<int64_t>(1, chunk);
    if (!parallel || m_n_threads == 1 || chunk >= n) {
        fn(0, n);
        return;
    }
    m_fn = &fn;
    m_n = n;
    m_chunk = chunk;
    m_n_chunks = (n + chunk - 1) / chunk;
    m_next.store(0);
    m_done.store(0);
    m_open.store(true);
    m_generation.fetch_add(1);
    m_generation.notify_all();

    claim_chunks();
    wait_for(m_done, m_n_chunks, m_spin);  // every chunk finished, by whoever claimed it
    m_open.store(false);
    wait_for(m_active, 0, m_spin);  // no worker still looks at this job
    m_fn = nullptr;
}

}  // namespace gkq
