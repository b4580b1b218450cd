// Prometheus text exposition format 0.0.4 (what the server's /metrics answers), parsed into samples, and the few
// quantities the Serve panel charts, computed exactly from two scrapes: requests per second, mean request latency
// (sum / count of the duration histogram) with the bucket bound that holds its 99th percentile, and the weight
// cache's hit rate. Qt-free; nothing throws. A malformed line is an error naming its line number and the reason.
#pragma once

#include "gkq/status.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gkq::ui {

struct PromSample {
    std::string name;
    std::vector<std::pair<std::string, std::string>> labels;  // in the order written, values unescaped
    double value = 0.0;

    // The value of label `key`, or nullopt when the sample has none.
    std::optional<std::string> label(std::string_view key) const;
};

using PromLabels = std::vector<std::pair<std::string, std::string>>;

struct PromText {
    std::vector<PromSample> samples;
    std::vector<std::pair<std::string, std::string>> types;  // "# TYPE name type" lines

    // Sum of the samples named `name` whose labels include every pair of `match`; nullopt when none matches.
    std::optional<double> sum(std::string_view name, const PromLabels& match = {}) const;
    // The samples named `name` (any labels).
    std::vector<const PromSample*> find(std::string_view name) const;
};

// Parses the text; InvalidArgument "metrics line N: ..." on a line that is not a comment, blank, or
// `name{label="value",...} number [timestamp]`.
Result<PromText> parse_prometheus_text(std::string_view text);

// What one scrape of gkq's /metrics says, summed over the routes that are not /metrics itself (the panel's own
// scraping would otherwise be all it shows).
struct ServerScrape {
    double requests = 0.0;       // gkq_http_requests_total, route != "/metrics"
    double latency_sum = 0.0;    // gkq_http_request_duration_seconds_sum, route != "/metrics"
    double latency_count = 0.0;  // ..._count, route != "/metrics"
    std::vector<std::pair<double, double>> latency_buckets;  // (le, cumulative count), le ascending, +Inf last
    double cache_hits = 0.0;                                 // gkq_cache_hits_total (0 without a cache)
    double cache_lookups = 0.0;                              // gkq_cache_lookups_total
    double tokens_completion = 0.0;                          // gkq_inference_tokens_total{kind="completion"}
    std::string backend;                                     // gkq_server_info{backend}
    std::string backend_detail;                              // gkq_server_info{detail}
};
ServerScrape summarize_scrape(const PromText& text);

// Between two scrapes `seconds` apart. A field is nullopt when its quantity had no events in the interval
// (no requests: no latency; no lookups: no hit rate).
struct ServerRates {
    double requests_per_second = 0.0;
    std::optional<double> mean_latency_seconds;
    std::optional<double> p99_latency_bound_seconds;  // upper bound of the bucket holding the 99th percentile
    std::optional<double> cache_hit_rate;             // hits / lookups in the interval, 0..1
};
ServerRates rates_between(const ServerScrape& before, const ServerScrape& after, double seconds);

}  // namespace gkq::ui
