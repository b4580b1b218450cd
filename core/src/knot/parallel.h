// Ordered parallel map for the whole-model operations: produce(i) runs on worker threads, consume(i, result) on the
// calling thread in order i = 0, 1, ..., with at most `window` results produced ahead of consumption (memory
// bound); run_ordered_within also holds the summed cost(i) of the items claimed and not yet consumed to `budget`
// (an item claimed while nothing is in flight may exceed it alone). The first failure of either side, or a consume()
// that returns non-OK (e.g. Cancelled), stops the workers.
#pragma once

#include "gkq/status.h"

#include "common/blas_threads.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace gkq::knot {

// Threads to use for n items when the caller asked for `requested` (0: one per hardware thread).
inline int worker_count(int requested, size_t n_items) {
    int n = requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
    n = std::max(1, n);
    return static_cast<int>(std::min<size_t>(static_cast<size_t>(n), std::max<size_t>(n_items, 1)));
}

template <class R, class Cost, class Produce, class Consume>
Status run_ordered_within(size_t n, int n_threads, size_t window, Cost cost, uint64_t budget, Produce produce,
                          Consume consume) {
    auto guarded = [&](size_t i) -> Result<R> {
        try {
            return produce(i);
        } catch (const std::exception& e) {  // bad_alloc and the like: a Status, never an exception out of gkq
            return error(StatusCode::Internal, std::string("out of memory or internal error: ") + e.what());
        }
    };
    if (n_threads <= 1 || n <= 1) {
        for (size_t i = 0; i < n; ++i) {
            Result<R> r = guarded(i);
            if (!r) return r.status();
            if (Status s = consume(i, std::move(r).value()); !s) return s;
        }
        return Status::ok();
    }
    window = std::max<size_t>(window, 1);
    std::mutex m;
    std::condition_variable cv_claim, cv_done;
    std::vector<std::optional<Result<R>>> slots(n);
    size_t next_claim = 0, next_consume = 0;
    uint64_t in_flight = 0;  // cost of the items claimed and not yet consumed
    bool stop = false;
    auto may_claim = [&] {
        return next_claim < next_consume + window && (in_flight == 0 || in_flight + cost(next_claim) <= budget);
    };
    auto worker = [&] {
        while (true) {
            size_t i = 0;
            {
                std::unique_lock<std::mutex> lock(m);
                cv_claim.wait(lock, [&] { return stop || next_claim >= n || may_claim(); });
                if (stop || next_claim >= n) return;
                in_flight += cost(next_claim);
                i = next_claim++;
            }
            Result<R> r = guarded(i);
            std::lock_guard<std::mutex> lock(m);
            slots[i].emplace(std::move(r));
            cv_done.notify_all();
        }
    };
    std::vector<std::thread> threads;
    Status status;
    try {
        for (int t = 0; t < n_threads; ++t) threads.emplace_back(worker);
    } catch (const std::exception& e) {
        status = error(StatusCode::Internal, std::string("cannot start worker threads: ") + e.what());
    }
    for (size_t i = 0; status.is_ok() && i < n; ++i) {
        std::optional<Result<R>> r;
        {
            std::unique_lock<std::mutex> lock(m);
            if (threads.empty()) break;
            cv_done.wait(lock, [&] { return slots[i].has_value(); });
            r = std::move(slots[i]);
            slots[i].reset();
            next_consume = i + 1;
        }
        cv_claim.notify_all();  // the window moved on; the budget follows once the result is gone
        if (!*r)
            status = r->status();
        else
            status = consume(i, std::move(*r).value());
        r.reset();
        {
            std::lock_guard<std::mutex> lock(m);
            in_flight -= cost(i);
        }
        cv_claim.notify_all();
    }
    {
        std::lock_guard<std::mutex> lock(m);
        stop = true;
    }
    cv_claim.notify_all();
    for (auto& t : threads) t.join();
    return status;
}

template <class R, class Produce, class Consume>
Status run_ordered(size_t n, int n_threads, size_t window, Produce produce, Consume consume) {
    return run_ordered_within<R>(
        n, n_threads, window, [](size_t) { return uint64_t{0}; }, 0, produce, consume);
}

}  // namespace gkq::knot
