// Metrics: the server's counters and latency histograms, rendered in the Prometheus text format (HELP and TYPE
// lines, `_total` counters, `_bucket`/`_sum`/`_count` histograms) and read back as numbers for /stats.
// Thread-safe: the loop records HTTP events, workers record inference, the cache records reconstructions.
// Every response the server writes counts once in gkq_http_requests_total (route "other" for requests that never
// reached a route: malformed, too large, timed out).
#pragma once

#include "gkq/weight_cache.h"
#include "server/api.h"

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace gkq::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double value);

    std::vector<double> bounds;    // upper bounds, increasing; +Inf implied
    std::vector<uint64_t> counts;  // per bucket (not cumulative), one more than bounds
    double sum = 0;
    uint64_t count = 0;
};

// Values that live elsewhere, sampled when rendering.
struct MetricGauges {
    std::string backend;
    std::string backend_detail;
    std::string weights_mode;  // store mode, or "none"
    bool ready = false;
    size_t weights_loaded = 0;
    uint64_t resident_bytes = 0;
    size_t connections_active = 0;
    size_t queue_depth = 0;
    size_t in_flight = 0;
    double uptime_seconds = 0;
    bool has_cache = false;
    WeightCacheStats cache;
};

struct MetricTotals {
    uint64_t requests = 0;
    uint64_t connections = 0;
    uint64_t connections_rejected = 0;
    uint64_t parse_errors = 0;
    uint64_t timeouts = 0;
    uint64_t inference_ok = 0;
    uint64_t inference_failed = 0;
    uint64_t inference_cancelled = 0;
    uint64_t inference_rejected = 0;
    uint64_t prompt_tokens = 0;
    uint64_t completion_tokens = 0;
    std::map<int, uint64_t> by_status;  // all routes
};

class Metrics {
public:
    Metrics();

    void request(RouteId route, int status, double seconds);
    void connection_opened();
    void connection_rejected();
    void parse_error(int status);
    void timeout(bool in_body);
    enum class InferenceResult { Ok, Failed, Cancelled };
    void inference(InferenceResult result, double queue_seconds, double run_seconds, int64_t prompt_tokens,
                   int64_t completion_tokens);
    void inference_rejected();
    void reconstruction(double seconds);

    std::string render(const MetricGauges& g) const;
    MetricTotals totals() const;

private:
    mutable std::mutex m_mutex;
    std::array<std::map<int, uint64_t>, kRouteCount> m_requests;  // route -> status -> count
    std::vector<Histogram> m_request_seconds;                     // per route
    uint64_t m_connections = 0;
    uint64_t m_rejected = 0;
    std::map<int, uint64_t> m_parse_errors;
    uint64_t m_timeouts_headers = 0;
    uint64_t m_timeouts_body = 0;
    uint64_t m_inference[3] = {0, 0, 0};
    uint64_t m_inference_rejected = 0;
    uint64_t m_prompt_tokens = 0;
    uint64_t m_completion_tokens = 0;
    Histogram m_queue_seconds;
    Histogram m_run_seconds;
    Histogram m_reconstruct_seconds;
};

}  // namespace gkq::server
