// Weight cache: where a served model's quantized weights live (a WeightStore) and an LRU cache of their float32
// reconstructions with a byte budget and a maximum age (the source documents' GPU_CACHE_SIZE_MB and
// MAX_AGE_SECONDS; here the reconstructions live in host memory, since the CPU transformer runs there).
//
// Stores: a knot held in RAM (memory-resident mode: every record read, CRC-checked and kept compressed at open),
// a knot read record by record from its mapped file, a knot streamed per request from an http:// URL by range
// requests (CDN fallback: trailer, header and index once, then each record when it is needed), or a plain model
// file (safetensors / GGUF / llama2.c, mapped; "reconstruction" is the conversion to float32).
//
// Contract: every store and the cache are thread-safe. A lookup is a hit (a live entry) or a miss; a miss
// reconstructs (or waits for the one reconstruction already running for that weight), so hits + misses ==
// lookups and reconstructions <= misses. An entry leaves by budget (least recently used first), by age (its
// reconstruction is older than max_age_seconds: checked on every lookup and by evict_expired()) or by clear().
// A value handed out stays valid while the caller holds it, evicted or not; bytes_used counts entries in the
// cache only. With keep_reconstructions off (CDN fallback) nothing is kept: every lookup reconstructs.
#pragma once

#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

// ---- stores ------------------------------------------------------------------------------------------------------

struct WeightInfo {
    std::string name;
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;
    std::vector<int64_t> shape;  // row-major, outermost first
    uint64_t stored_bytes = 0;   // as the store holds or fetches it (a knot record, a tensor's data)

    uint64_t n_elements() const;
};

class WeightStore {
public:
    virtual ~WeightStore() = default;

    // "memory-resident", "on-disk", "cdn" or "model-file".
    virtual std::string_view mode() const = 0;
    // The path or URL, as errors name it.
    virtual const std::string& label() const = 0;
    virtual const ModelConfig& config() const = 0;
    virtual const Vocabulary& vocabulary() const = 0;
    virtual const std::vector<WeightInfo>& weights() const = 0;
    // Quantized bytes held in this process's memory (0 for mapped or remote stores).
    virtual uint64_t resident_bytes() const = 0;
    // Weight i as float32 in its shape, row-major. Errors name the store and the weight.
    virtual Result<std::vector<float>> reconstruct(size_t i) const = 0;

    // Index of the weight of `role` in block `layer` (-1 for non-block weights), or -1.
    int64_t find(TensorRole role, int32_t layer) const;
};

struct RemoteStoreOptions {
    int timeout_ms = 10000;  // connect, and each wait for bytes
};

// A knot file; memory_resident reads every record into RAM at open (checking each CRC), otherwise records are
// read from the mapped file when reconstructed.
Result<std::unique_ptr<WeightStore>> open_knot_store(const std::string& path, bool memory_resident);
// A knot at an http:// URL whose server honours Range requests (206 with Content-Range). Fetches the trailer,
// file header, header block and index at open; each record per reconstruction. Gzipped knots are refused.
Result<std::unique_ptr<WeightStore>> open_remote_knot_store(const std::string& url,
                                                            const RemoteStoreOptions& options = {});
// A safetensors / GGUF / llama2.c model, mapped.
Result<std::unique_ptr<WeightStore>> open_model_file_store(const std::string& path);
// True when the file at `path` starts with the knot magic or the gzip magic (a .knot.gz).
bool looks_like_knot(const std::string& path);

// ---- cache -------------------------------------------------------------------------------------------------------

enum class EvictionReason : uint8_t { Budget, Age, Cleared };
std::string_view eviction_reason_name(EvictionReason r);  // "budget", "age", "cleared"

struct WeightCacheOptions {
    uint64_t budget_bytes = uint64_t{1024} << 20;
    double max_age_seconds = 0;        // 0: reconstructions do not expire
    bool keep_reconstructions = true;  // false: nothing is cached (CDN fallback)
    // Monotonic seconds; empty: std::chrono::steady_clock. Tests inject their own to age entries without sleeping.
    std::function<double()> clock;
    // Called after each reconstruction (outside the cache's lock) with its wall time and float32 bytes.
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
    uint64_t not_kept = 0;    // reconstructions not stored: larger than the budget, or keeping is off
    uint64_t bytes_used = 0;  // float32 bytes of the entries in the cache
    uint64_t budget_bytes = 0;
    uint64_t n_entries = 0;
    double reconstruct_seconds = 0;    // total wall time of reconstructions
    uint64_t reconstructed_bytes = 0;  // total float32 bytes produced

    uint64_t evictions() const { return evictions_budget + evictions_age + evictions_cleared; }
};

struct CachedWeight {
    std::shared_ptr<const std::vector<float>> values;
    uint64_t serial = 0;  // distinct for every reconstruction: equal serials mean the very same values
    bool hit = false;
};

class WeightCache {
public:
    WeightCache(std::shared_ptr<const WeightStore> store, WeightCacheOptions options = {});
    ~WeightCache();
    WeightCache(const WeightCache&) = delete;
    WeightCache& operator=(const WeightCache&) = delete;

    const WeightStore& store() const { return *m_store; }
    const WeightCacheOptions& options() const { return m_options; }

    // Weight `index` of the store (InvalidArgument when out of range; a failed reconstruction's Status).
    Result<CachedWeight> get(size_t index);
    // Drops entries older than max_age_seconds; returns how many.
    size_t evict_expired();
    void clear();
    WeightCacheStats stats() const;

private:
    struct State;
    std::shared_ptr<const WeightStore> m_store;
    WeightCacheOptions m_options;
    std::unique_ptr<State> m_state;
};

}  // namespace gkq
