// Weight cache: the single owner of a served model's runnable weights — an LRU cache, with a byte budget and a maximum
// age (the source documents' GPU_CACHE_SIZE_MB and MAX_AGE_SECONDS), of tensors loaded from Weights (weights.h) into
// the form the transformer computes with (load_tensor: float32, or low-rank factors). The server's transformers
// borrow them from here step by step (WeightLender), so the budget bounds the weights the process holds: the
// entries, plus what its transformers hold at that moment (one step of a forward pass each, or the whole model for
// the length of a request when it fits the budget).
//
// Weights served: a model file or a knot (open_weights: mapped, or memory-resident with every record read,
// CRC-checked and kept compressed at open), or a knot streamed from an http:// URL by range requests (CDN fallback:
// trailer, header and index once, then each record when it is needed).
//
// Contract: the remote knot and the cache are thread-safe. A lookup is a hit (a live entry) or a miss; a miss
// loads (or waits for the one load already running for that tensor), so hits + misses == lookups and
// reconstructions <= misses. When a new load does not fit the budget, the policy decides (CachePolicy): Keep (the
// default) keeps the entries there are — the weights that filled the budget first stay resident, the documents'
// "hot layers" — and hands the new load out without keeping it (not_kept); Lru evicts the least recently used
// entries until it fits. A forward pass asks for every weight in the same order each token, so under a budget below
// the model Lru evicts exactly the weight needed next and hits nothing, while Keep hits the kept share of every pass
// (test_weight_cache measures both). An entry also leaves by age (its load is older than max_age_seconds: checked
// on every lookup and by evict_expired()) or by clear(). A value handed out stays valid while
// the caller holds it, evicted or not; bytes_used counts entries in the cache only. With keep_reconstructions off
// (CDN fallback) nothing is kept: every lookup loads.
#pragma once

#include "gkq/status.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

// ---- a knot behind an http:// URL --------------------------------------------------------------------------------

struct RemoteKnotOptions {
    int timeout_ms = 10000;  // connect, and each wait for bytes
};

// A knot at an http:// URL whose server honours Range requests (206 with Content-Range), as Weights of kind "cdn".
// Fetches the trailer, file header, header block and index at open; each record per read. Gzipped knots and shards
// are refused.
Result<std::unique_ptr<Weights>> open_remote_knot(const std::string& url, const RemoteKnotOptions& options = {});

// ---- cache -------------------------------------------------------------------------------------------------------

enum class EvictionReason : uint8_t { Budget, Age, Cleared };
std::string_view eviction_reason_name(EvictionReason r);  // "budget", "age", "cleared"

enum class CachePolicy : uint8_t { Keep, Lru };
std::string_view cache_policy_name(CachePolicy p);  // "keep", "lru"
// "keep" / "lru"; InvalidArgument naming the choices otherwise.
Result<CachePolicy> parse_cache_policy(std::string_view name);

struct WeightCacheOptions {
    uint64_t budget_bytes = uint64_t{1024} << 20;  // of LoadedTensor::bytes()
    CachePolicy policy = CachePolicy::Keep;        // what a load that does not fit the budget does (see above)
    bool allow_factored = true;                    // load_tensor's: low-rank records stay factored where cheaper
    double max_age_seconds = 0;                    // 0: reconstructions do not expire
    bool keep_reconstructions = true;              // false: nothing is cached (CDN fallback)
    // Monotonic seconds; empty: std::chrono::steady_clock. Tests inject their own to age entries without sleeping.
    std::function<double()> clock;
    // Called after each load (outside the cache's lock) with its wall time and loaded bytes.
    std::function<void(double seconds, uint64_t bytes)> on_reconstruct;
};

struct WeightCacheStats {
    uint64_t lookups = 0;
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t reconstructions = 0;  // reconstructions run (successful or not)
    uint64_t reconstruction_failures = 0;
    uint64_t evictions_budget = 0;
    uint64_t evictions_age = 0;
    uint64_t evictions_cleared = 0;
    // reconstructions not stored: larger than the budget, no room under CachePolicy::Keep, or keeping is off
    uint64_t not_kept = 0;
    uint64_t bytes_used = 0;  // loaded bytes (LoadedTensor::bytes) of the entries in the cache
    uint64_t budget_bytes = 0;
    uint64_t n_entries = 0;
    double reconstruct_seconds = 0;    // total wall time of reconstructions
    uint64_t reconstructed_bytes = 0;  // total loaded bytes produced

    uint64_t evictions() const { return evictions_budget + evictions_age + evictions_cleared; }
};

struct CachedWeight {
    std::shared_ptr<const LoadedTensor> values;
    uint64_t serial = 0;  // distinct for every reconstruction: equal serials mean the very same values
    bool hit = false;
};

class WeightCache {
public:
    WeightCache(std::shared_ptr<const Weights> weights, WeightCacheOptions options = {});
    ~WeightCache();
    WeightCache(const WeightCache&) = delete;
    WeightCache& operator=(const WeightCache&) = delete;

    const Weights& weights() const { return *m_weights; }
    const WeightCacheOptions& options() const { return m_options; }

    // Tensor `index` of the weights (InvalidArgument when out of range; a failed load's Status).
    Result<CachedWeight> get(size_t index);
    // Drops entries older than max_age_seconds; returns how many.
    size_t evict_expired();
    void clear();
    WeightCacheStats stats() const;

private:
    struct State;
    std::shared_ptr<const Weights> m_weights;
    WeightCacheOptions m_options;
    std::unique_ptr<State> m_state;
};

// One borrower's view of a cache (a server worker's transformer): lends through WeightCache::get and counts its own
// lookups and hits. Used by one transformer at a time.
class CacheLender final : public WeightLender {
public:
    explicit CacheLender(WeightCache& cache) : m_cache(cache) {}
    const Weights& weights() const override { return m_cache.weights(); }
    Result<std::shared_ptr<const LoadedTensor>> lend(size_t index) override;

    uint64_t lookups = 0;
    uint64_t hits = 0;

private:
    WeightCache& m_cache;
};

}  // namespace gkq
