// parallel_chunks: runs fn(worker, begin, end) over the chunks [c * chunk, min(n, (c + 1) * chunk)) of [0, n) on up
// to n_workers(n, chunk, n_threads) threads: the caller (worker 0) and freshly started std::threads 1, 2, ...
// Chunks are claimed from a shared counter rather than assigned, and the caller waits only for chunks that were
// claimed, not for helpers to start: on a shared machine a helper the scheduler runs late finds nothing left, and
// exits without touching fn (the shared counter lives in a block the helpers co-own). Each output element is
// computed inside one chunk, so the result does not depend on which thread ran it. fn must not throw (allocate
// per-worker scratch on the calling thread first, indexed by `worker`).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

namespace gkq::kernels::cpu {

inline int n_workers(int64_t n, int64_t chunk, int n_threads) {
    if (n <= 0) return 1;
    const int64_t n_chunks = (n + std::max<int64_t>(1, chunk) - 1) / std::max<int64_t>(1, chunk);
    return static_cast<int>(std::clamp<int64_t>(n_chunks, 1, std::max(1, n_threads)));
}

template <class Fn>
void parallel_chunks(int64_t n, int64_t chunk, int n_threads, const Fn& fn) {
    if (n <= 0) return;
    chunk = std::max<int64_t>(1, chunk);
    const int workers = n_workers(n, chunk, n_threads);
    if (workers == 1) {
        fn(0, int64_t{0}, n);
        return;
    }
    struct Shared {
        std::atomic<int64_t> next{0};
        std::atomic<int64_t> done{0};
        int64_t n_chunks = 0;
    };
    auto shared = std::make_shared<Shared>();
    shared->n_chunks = (n + chunk - 1) / chunk;
    const Fn* f = &fn;
    // Runs chunks while there are any; touches *f only for a chunk it claimed, which the caller waits for.
    auto claim = [shared, f, n, chunk](int worker) {
        for (int64_t c = shared->next.fetch_add(1); c < shared->n_chunks; c = shared->next.fetch_add(1)) {
            (*f)(worker, c * chunk, std::min(n, (c + 1) * chunk));
            if (shared->done.fetch_add(1) + 1 == shared->n_chunks) shared->done.notify_all();
        }
    };
    for (int t = 1; t < workers; ++t) {
        try {
            std::thread(claim, t).detach();
        } catch (...) {
            break;  // no thread to be had: the caller claims its chunks
        }
    }
    claim(0);
    for (int64_t d = shared->done.load(); d < shared->n_chunks; d = shared->done.load()) shared->done.wait(d);
}

// A chunk giving each thread about four chunks, a multiple of `align`, at least `min_chunk`.
inline int64_t chunk_for(int64_t n, int n_threads, int64_t align, int64_t min_chunk) {
    const int64_t per = (n + 4 * n_threads - 1) / (4 * static_cast<int64_t>(n_threads));
    const int64_t c = std::max(per, min_chunk);
    return (c + align - 1) / align * align;
}

}  // namespace gkq::kernels::cpu
