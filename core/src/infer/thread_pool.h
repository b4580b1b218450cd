// ThreadPool: a small persistent pool for the forward pass's data-parallel loops.
// parallel_for(n, chunk, fn) cuts [0, n) into chunks that the caller and the workers claim one at a time from
// a shared counter, so every index is processed exactly once — by whichever thread claims it. Callers make
// results independent of that choice (each output element is computed entirely within one chunk).
// Claiming rather than assigning keeps a loaded machine from stalling the caller: a worker the scheduler has
// not run yet simply claims nothing. Workers spin briefly, then sleep on a futex (std::atomic::wait), since the
// forward pass dispatches thousands of short loops per second.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace gkq {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // n_threads >= 1 participants, including the caller
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int n_threads() const { return m_n_threads; }

    // Runs fn(begin, end) for the chunks [k * chunk, min(n, (k + 1) * chunk)) of [0, n) and returns when all
    // are done. With `parallel` false, or a single chunk, fn(0, n) runs on the caller. Not reentrant.
    void parallel_for(int64_t n, int64_t chunk, bool parallel, const std::function<void(int64_t, int64_t)>& fn);

    // A chunk size giving each participant about four chunks, rounded up to a multiple of `align`.
    int64_t chunk_for(int64_t n, int64_t align) const;

private:
    void worker_loop();
    void claim_chunks();

    int m_n_threads = 1;
    bool m_spin = true;  // poll before sleeping (only when every participant can have a core)
    std::vector<std::thread> m_workers;

    // the current job, written by the caller before m_open is set
    const std::function<void(int64_t, int64_t)>* m_fn = nullptr;
    int64_t m_n = 0;
    int64_t m_chunk = 1;
    int64_t m_n_chunks = 0;

    std::atomic<uint64_t> m_generation{0};  // bumped once per job; sleeping workers wait for a change
    std::atomic<bool> m_open{false};        // workers may claim chunks of the current job
    std::atomic<int64_t> m_next{0};         // next chunk to claim
    std::atomic<int64_t> m_done{0};         // chunks finished
    std::atomic<int> m_active{0};           // workers inside the current job
    std::atomic<bool> m_stop{false};
};

}  // namespace gkq
