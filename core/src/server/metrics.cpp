// Prometheus text rendering of the server's metrics (see metrics.h).
#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace gkq::server {

namespace {

const std::vector<double> kLatencyBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                            0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

std::string num(double v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

// Label values escape backslash, quote and newline.
std::string label_value(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

void head(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
    out += name;
    if (!labels.empty()) out += "{" + labels + "}";
    out += ' ';
    out += num(v);
    out += '\n';
}

void scalar(std::string& out, const char* name, const char* type, const char* help, double v) {
    head(out, name, type, help);
    sample(out, name, "", v);
}

void histogram_samples(std::string& out, const std::string& name, const std::string& labels, const Histogram& h) {
    const std::string sep = labels.empty() ? "" : labels + ",";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
        cumulative += h.counts[i];
        sample(out, name + "_bucket", sep + "le=\"" + num(h.bounds[i]) + "\"", double(cumulative));
    }
    sample(out, name + "_bucket", sep + "le=\"+Inf\"", double(h.count));
    sample(out, name + "_sum", labels, h.sum);
    sample(out, name + "_count", labels, double(h.count));
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
    const size_t i = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
    counts[i]++;
    sum += value;
    count++;
}

Metrics::Metrics()
    : m_request_seconds(kRouteCount, Histogram(kLatencyBounds)),
      m_queue_seconds(kLatencyBounds),
      m_run_seconds(kLatencyBounds),
      m_reconstruct_seconds(kLatencyBounds) {}

void Metrics::request(RouteId route, int status, double seconds) {
    std::lock_guard lock(m_mutex);
    m_requests[static_cast<size_t>(route)][status]++;
    m_request_seconds[static_cast<size_t>(route)].observe(seconds);
}

void Metrics::connection_opened() {
    std::lock_guard lock(m_mutex);
    m_connections++;
}

void Metrics::connection_rejected() {
    std::lock_guard lock(m_mutex);
    m_rejected++;
}

void Metrics::parse_error(int status) {
    std::lock_guard lock(m_mutex);
    m_parse_errors[status]++;
}

void Metrics::timeout(bool in_body) {
    std::lock_guard lock(m_mutex);
    (in_body ? m_timeouts_body : m_timeouts_headers)++;
}

void Metrics::inference(InferenceResult result, double queue_seconds, double run_seconds, int64_t prompt_tokens,
                        int64_t completion_tokens) {
    std::lock_guard lock(m_mutex);
    m_inference[static_cast<int>(result)]++;
    m_queue_seconds.observe(queue_seconds);
    m_run_seconds.observe(run_seconds);
    m_prompt_tokens += static_cast<uint64_t>(std::max<int64_t>(0, prompt_tokens));
    m_completion_tokens += static_cast<uint64_t>(std::max<int64_t>(0, completion_tokens));
}

void Metrics::inference_rejected() {
    std::lock_guard lock(m_mutex);
    m_inference_rejected++;
}

void Metrics::reconstruction(double seconds) {
    std::lock_guard lock(m_mutex);
    m_reconstruct_seconds.observe(seconds);
}

MetricTotals Metrics::totals() const {
    std::lock_guard lock(m_mutex);
    MetricTotals t;
    for (const auto& per_route : m_requests)
        for (const auto& [status, n] : per_route) {
            t.requests += n;
            t.by_status[status] += n;
        }
    t.connections = m_connections;
    t.connections_rejected = m_rejected;
    for (const auto& [status, n] : m_parse_errors) t.parse_errors += n;
    t.timeouts = m_timeouts_headers + m_timeouts_body;
    t.inference_ok = m_inference[0];
    t.inference_failed = m_inference[1];
    t.inference_cancelled = m_inference[2];
    t.inference_rejected = m_inference_rejected;
    t.prompt_tokens = m_prompt_tokens;
    t.completion_tokens = m_completion_tokens;
    return t;
}

std::string Metrics::render(const MetricGauges& g) const {
    std::lock_guard lock(m_mutex);
    std::string out;
    out.reserve(16384);

    head(out, "gkq_server_info", "gauge", "Constant 1, labelled with the I/O backend and the weight store's mode.");
    sample(out, "gkq_server_info",
           "backend=\"" + label_value(g.backend) + "\",detail=\"" + label_value(g.backend_detail) + "\",mode=\"" +
               label_value(g.weights_mode) + "\"",
           1);
    scalar(out, "gkq_server_ready", "gauge", "1 when weights are loaded and the server takes inference requests.",
           g.ready ? 1 : 0);
    scalar(out, "gkq_server_uptime_seconds", "gauge", "Seconds since the server started.", g.uptime_seconds);

    head(out, "gkq_http_requests_total", "counter",
         "Responses written, by route and status code (route \"other\": no route was reached).");
    for (int r = 0; r < kRouteCount; ++r)
        for (const auto& [status, n] : m_requests[static_cast<size_t>(r)])
            sample(out, "gkq_http_requests_total",
                   "route=\"" + std::string(route_label(static_cast<RouteId>(r))) + "\",code=\"" +
                       std::to_string(status) + "\"",
                   double(n));
    head(out, "gkq_http_request_duration_seconds", "histogram",
         "From a request's first byte to its response being queued for sending (inference: its last byte).");
    for (int r = 0; r < kRouteCount; ++r)
        if (m_request_seconds[static_cast<size_t>(r)].count > 0)
            histogram_samples(out, "gkq_http_request_duration_seconds",
                              "route=\"" + std::string(route_label(static_cast<RouteId>(r))) + "\"",
                              m_request_seconds[static_cast<size_t>(r)]);
    scalar(out, "gkq_http_connections_total", "counter", "Connections accepted and served.", double(m_connections));
    scalar(out, "gkq_http_connections_rejected_total", "counter",
           "Connections refused with 503 because the connection cap was reached.", double(m_rejected));
    scalar(out, "gkq_http_connections_active", "gauge", "Open connections.", double(g.connections_active));
    head(out, "gkq_http_parse_errors_total", "counter",
         "Requests rejected while parsing, by status (400 malformed, 413/414/431 too large, 505 version).");
    for (const auto& [status, n] : m_parse_errors)
        sample(out, "gkq_http_parse_errors_total", "code=\"" + std::to_string(status) + "\"", double(n));
    head(out, "gkq_http_timeouts_total", "counter", "Requests answered 408 because headers or body came too slowly.");
    sample(out, "gkq_http_timeouts_total", "phase=\"headers\"", double(m_timeouts_headers));
    sample(out, "gkq_http_timeouts_total", "phase=\"body\"", double(m_timeouts_body));

    head(out, "gkq_inference_requests_total", "counter", "Generations run, by result.");
    sample(out, "gkq_inference_requests_total", "result=\"ok\"", double(m_inference[0]));
    sample(out, "gkq_inference_requests_total", "result=\"error\"", double(m_inference[1]));
    sample(out, "gkq_inference_requests_total", "result=\"cancelled\"", double(m_inference[2]));
    scalar(out, "gkq_inference_rejected_total", "counter", "Generations refused with 429 because the queue was full.",
           double(m_inference_rejected));
    head(out, "gkq_inference_tokens_total", "counter", "Tokens processed: prompt (BOS included) and completion.");
    sample(out, "gkq_inference_tokens_total", "kind=\"prompt\"", double(m_prompt_tokens));
    sample(out, "gkq_inference_tokens_total", "kind=\"completion\"", double(m_completion_tokens));
    head(out, "gkq_inference_queue_seconds", "histogram", "Time a generation waited for a worker.");
    histogram_samples(out, "gkq_inference_queue_seconds", "", m_queue_seconds);
    head(out, "gkq_inference_duration_seconds", "histogram",
         "Worker time of a generation: weights from the cache, prompt and sampled tokens.");
    histogram_samples(out, "gkq_inference_duration_seconds", "", m_run_seconds);
    scalar(out, "gkq_inference_queue_depth", "gauge", "Generations waiting for a worker.", double(g.queue_depth));
    scalar(out, "gkq_inference_in_flight", "gauge", "Generations running.", double(g.in_flight));

    scalar(out, "gkq_weights_loaded", "gauge", "Weights (tensors) the store holds.", double(g.weights_loaded));
    scalar(out, "gkq_weights_resident_bytes", "gauge", "Quantized weight bytes held in memory.",
           double(g.resident_bytes));
    if (g.has_cache) {
        const WeightCacheStats& c = g.cache;
        scalar(out, "gkq_cache_lookups_total", "counter", "Weight cache lookups (hits + misses).", double(c.lookups));
        scalar(out, "gkq_cache_hits_total", "counter", "Lookups answered from the cache.", double(c.hits));
        scalar(out, "gkq_cache_misses_total", "counter", "Lookups that needed a reconstruction.", double(c.misses));
        scalar(out, "gkq_cache_reconstructions_total", "counter", "Weights reconstructed to float32.",
               double(c.reconstructions));
        scalar(out, "gkq_cache_reconstruction_failures_total", "counter", "Reconstructions that failed.",
               double(c.reconstruction_failures));
        head(out, "gkq_cache_evictions_total", "counter", "Entries removed from the cache, by reason.");
        sample(out, "gkq_cache_evictions_total", "reason=\"budget\"", double(c.evictions_budget));
        sample(out, "gkq_cache_evictions_total", "reason=\"age\"", double(c.evictions_age));
        sample(out, "gkq_cache_evictions_total", "reason=\"cleared\"", double(c.evictions_cleared));
        scalar(out, "gkq_cache_not_kept_total", "counter",
               "Reconstructions not cached (larger than the budget, or caching off in CDN mode).", double(c.not_kept));
        scalar(out, "gkq_cache_bytes", "gauge", "Float32 bytes of the cached reconstructions.", double(c.bytes_used));
        scalar(out, "gkq_cache_budget_bytes", "gauge", "The cache's byte budget (GPU_CACHE_SIZE_MB).",
               double(c.budget_bytes));
        scalar(out, "gkq_cache_entries", "gauge", "Cached reconstructions.", double(c.n_entries));
    }
    head(out, "gkq_cache_reconstruction_seconds", "histogram", "Wall time of one weight's reconstruction.");
    histogram_samples(out, "gkq_cache_reconstruction_seconds", "", m_reconstruct_seconds);
    return out;
}

}  // namespace gkq::server
