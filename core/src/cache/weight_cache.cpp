// WeightCache: loaded weights under a byte budget (keep what fits, or least recently used out) and a maximum age
// (see weight_cache.h).
#include "gkq/weight_cache.h"

#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <unordered_map>

namespace gkq {

std::string_view eviction_reason_name(EvictionReason r) {
    switch (r) {
        case EvictionReason::Budget: return "budget";
        case EvictionReason::Age: return "age";
        case EvictionReason::Cleared: return "cleared";
    }
    return "?";
}

std::string_view cache_policy_name(CachePolicy p) {
    return p == CachePolicy::Lru ? "lru" : "keep";
}

Result<CachePolicy> parse_cache_policy(std::string_view name) {
    if (name == "keep") return CachePolicy::Keep;
    if (name == "lru") return CachePolicy::Lru;
    return error(StatusCode::InvalidArgument, "cache policy '" + std::string(name) + "': keep or lru");
}

namespace {

double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct WeightCache::State {
    struct Entry {
        std::shared_ptr<const LoadedTensor> values;
        uint64_t bytes = 0;
        double born = 0;  // clock time of its reconstruction
        uint64_t serial = 0;
        std::list<size_t>::iterator lru;  // position in `lru`
    };
    // A reconstruction in progress that other lookups of the same weight wait for instead of repeating it.
    struct InFlight {
        bool done = false;
        Status status;
        CachedWeight result;
    };

    mutable std::mutex mutex;
    std::condition_variable done_cv;
    std::unordered_map<size_t, Entry> entries;
    std::list<size_t> lru;  // most recently used first
    std::unordered_map<size_t, std::shared_ptr<InFlight>> in_flight;
    WeightCacheStats stats;
    uint64_t next_serial = 1;

    void remove(std::unordered_map<size_t, Entry>::iterator it, EvictionReason why) {
        stats.bytes_used -= it->second.bytes;
        lru.erase(it->second.lru);
        entries.erase(it);
        switch (why) {
            case EvictionReason::Budget: stats.evictions_budget++; break;
            case EvictionReason::Age: stats.evictions_age++; break;
            case EvictionReason::Cleared: stats.evictions_cleared++; break;
        }
    }

    size_t expire(double now, double max_age) {
        if (max_age <= 0) return 0;
        size_t n = 0;
        for (auto it = entries.begin(); it != entries.end();) {
            auto next = std::next(it);
            if (now - it->second.born > max_age) {
                remove(it, EvictionReason::Age);
                n++;
            }
            it = next;
        }
        return n;
    }
};

WeightCache::WeightCache(std::shared_ptr<const Weights> weights, WeightCacheOptions options)
    : m_weights(std::move(weights)), m_options(std::move(options)), m_state(std::make_unique<State>()) {
    if (!m_options.clock) m_options.clock = steady_seconds;
    m_state->stats.budget_bytes = m_options.budget_bytes;
}

WeightCache::~WeightCache() = default;

Result<CachedWeight> WeightCache::get(size_t index) {
    State& st = *m_state;
    const size_t n_weights = m_weights->n_tensors();
    if (index >= n_weights)
        return error(StatusCode::InvalidArgument, m_weights->label() + ": weight " + std::to_string(index) +
                                                      " requested, the store holds " + std::to_string(n_weights));
    std::shared_ptr<State::InFlight> mine;
    {
        std::unique_lock lock(st.mutex);
        st.stats.lookups++;
        st.expire(m_options.clock(), m_options.max_age_seconds);
        if (auto it = st.entries.find(index); it != st.entries.end()) {
            st.stats.hits++;
            st.lru.splice(st.lru.begin(), st.lru, it->second.lru);
            return CachedWeight{it->second.values, it->second.serial, true};
        }
        st.stats.misses++;
        if (m_options.keep_reconstructions) {
            if (auto it = st.in_flight.find(index); it != st.in_flight.end()) {
                std::shared_ptr<State::InFlight> other = it->second;
                st.done_cv.wait(lock, [&] { return other->done; });
                if (!other->status) return other->status;
                CachedWeight w = other->result;
                w.hit = false;
                return w;
            }
            mine = std::make_shared<State::InFlight>();
            st.in_flight.emplace(index, mine);
        }
    }

    // Reconstruct outside the lock: other weights' lookups proceed meanwhile.
    const double t0 = steady_seconds();
    LoadTensorOptions load_options;  // stored rows stay mapped (model files) or in their blocks (knot records)
    load_options.allow_factored = m_options.allow_factored;
    load_options.owner = m_weights;
    auto values = load_tensor(*m_weights, index, load_options);
    const double seconds = steady_seconds() - t0;
    CachedWeight result;
    uint64_t bytes = 0;
    if (values) {
        bytes = values->bytes();
        result.values = std::make_shared<const LoadedTensor>(std::move(*values));
    }

    {
        std::lock_guard lock(st.mutex);
        st.stats.reconstructions++;
        st.stats.reconstruct_seconds += seconds;
        result.serial = st.next_serial++;
        if (!values) {
            st.stats.reconstruction_failures++;
        } else {
            st.stats.reconstructed_bytes += bytes;
            const bool room = st.stats.bytes_used + bytes <= m_options.budget_bytes;
            if (!m_options.keep_reconstructions || bytes > m_options.budget_bytes ||
                (!room && m_options.policy == CachePolicy::Keep)) {
                st.stats.not_kept++;
            } else {
                // Least recently used entries leave until the new one fits.
                while (st.stats.bytes_used + bytes > m_options.budget_bytes && !st.lru.empty())
                    st.remove(st.entries.find(st.lru.back()), EvictionReason::Budget);
                st.lru.push_front(index);
                State::Entry e;
                e.values = result.values;
                e.bytes = bytes;
                e.born = m_options.clock();
                e.serial = result.serial;
                e.lru = st.lru.begin();
                st.entries.emplace(index, std::move(e));
                st.stats.bytes_used += bytes;
            }
        }
        if (mine) {
            mine->done = true;
            mine->status = values ? Status::ok() : values.status();
            mine->result = result;
            st.in_flight.erase(index);
        }
    }
    if (mine) st.done_cv.notify_all();
    if (values && m_options.on_reconstruct) m_options.on_reconstruct(seconds, bytes);
    if (!values) return values.status();
    return result;
}

size_t WeightCache::evict_expired() {
    std::lock_guard lock(m_state->mutex);
    return m_state->expire(m_options.clock(), m_options.max_age_seconds);
}

void WeightCache::clear() {
    std::lock_guard lock(m_state->mutex);
    while (!m_state->entries.empty()) m_state->remove(m_state->entries.begin(), EvictionReason::Cleared);
}

WeightCacheStats WeightCache::stats() const {
    std::lock_guard lock(m_state->mutex);
    WeightCacheStats s = m_state->stats;
    s.n_entries = m_state->entries.size();
    return s;
}

Result<std::shared_ptr<const LoadedTensor>> CacheLender::lend(size_t index) {
    auto got = m_cache.get(index);
    lookups++;
    if (!got) return got.status();
    hits += got->hit ? 1 : 0;
    return got->values;
}

}  // namespace gkq
