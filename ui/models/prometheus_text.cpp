#include "models/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

namespace gkq::ui {

namespace {

bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}

// The format's float: a decimal or exponent number, or +Inf / -Inf / NaN.
std::optional<double> parse_value(std::string_view s) {
    if (s == "+Inf" || s == "Inf") return std::numeric_limits<double>::infinity();
    if (s == "-Inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    double v = 0.0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
}

Status line_error(size_t line, const std::string& why) {
    return error(StatusCode::InvalidArgument, "metrics line " + std::to_string(line) + ": " + why);
}

bool has_labels(const PromSample& s, const PromLabels& match) {
    for (const auto& [k, v] : match) {
        const auto have = s.label(k);
        if (!have || *have != v) return false;
    }
    return true;
}

}  // namespace

std::optional<std::string> PromSample::label(std::string_view key) const {
    for (const auto& [k, v] : labels)
        if (k == key) return v;
    return std::nullopt;
}

std::optional<double> PromText::sum(std::string_view name, const PromLabels& match) const {
    std::optional<double> total;
    for (const PromSample& s : samples)
        if (s.name == name && has_labels(s, match)) total = total.value_or(0.0) + s.value;
    return total;
}

std::vector<const PromSample*> PromText::find(std::string_view name) const {
    std::vector<const PromSample*> out;
    for (const PromSample& s : samples)
        if (s.name == name) out.push_back(&s);
    return out;
}

Result<PromText> parse_prometheus_text(std::string_view text) {
    PromText out;
    size_t line_no = 0;
    while (!text.empty()) {
        const size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        const size_t first = line.find_first_not_of(" \t");
        if (first == std::string_view::npos) continue;
        line.remove_prefix(first);
        if (line.front() == '#') {
            // "# TYPE name type" is kept; HELP and other comments are skipped.
            if (line.substr(0, 7) == "# TYPE ") {
                std::string_view rest = line.substr(7);
                const size_t sp = rest.find(' ');
                if (sp == std::string_view::npos) return line_error(line_no, "TYPE without a type");
                out.types.emplace_back(std::string(rest.substr(0, sp)), std::string(rest.substr(sp + 1)));
            }
            continue;
        }
        PromSample s;
        size_t i = 0;
        if (!is_name_start(line[0])) return line_error(line_no, "a sample must start with a metric name");
        while (i < line.size() && is_name_char(line[i])) ++i;
        s.name = std::string(line.substr(0, i));
        if (i < line.size() && line[i] == '{') {
            ++i;
            while (true) {
                while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
                if (i < line.size() && line[i] == '}') {
                    ++i;
                    break;
                }
                const size_t k0 = i;
                while (i < line.size() && is_name_char(line[i])) ++i;
                if (i == k0) return line_error(line_no, "expected a label name in '" + s.name + "'");
                std::string key(line.substr(k0, i - k0));
                if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
                    return line_error(line_no, "label '" + key + "' of '" + s.name + "' needs =\"value\"");
                i += 2;
                std::string value;
                bool closed = false;
                while (i < line.size()) {
                    const char c = line[i++];
                    if (c == '"') {
                        closed = true;
                        break;
                    }
                    if (c == '\\') {
                        if (i >= line.size()) break;
                        const char e = line[i++];
                        if (e == 'n')
                            value += '\n';
                        else if (e == '\\' || e == '"')
                            value += e;
                        else
                            return line_error(line_no, "bad escape \\" + std::string(1, e) + " in label '" + key + "'");
                        continue;
                    }
                    value += c;
                }
                if (!closed) return line_error(line_no, "unterminated value of label '" + key + "'");
                s.labels.emplace_back(std::move(key), std::move(value));
            }
        }
        if (i >= line.size() || (line[i] != ' ' && line[i] != '\t'))
            return line_error(line_no, "expected a space and a value after '" + s.name + "'");
        std::string_view rest = line.substr(i);
        const size_t v0 = rest.find_first_not_of(" \t");
        if (v0 == std::string_view::npos) return line_error(line_no, "no value for '" + s.name + "'");
        rest.remove_prefix(v0);
        const size_t v1 = rest.find_first_of(" \t");
        const std::string_view value = rest.substr(0, v1);
        const auto v = parse_value(value);
        if (!v) return line_error(line_no, "value '" + std::string(value) + "' of '" + s.name + "' is not a number");
        if (v1 != std::string_view::npos) {
            // an optional integer timestamp (milliseconds); nothing may follow it
            std::string_view ts = rest.substr(v1);
            ts.remove_prefix(ts.find_first_not_of(" \t") == std::string_view::npos ? ts.size()
                                                                                   : ts.find_first_not_of(" \t"));
            int64_t stamp = 0;
            const auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), stamp);
            if (!ts.empty() && (ec != std::errc() || end != ts.data() + ts.size()))
                return line_error(line_no, "unexpected '" + std::string(ts) + "' after the value of '" + s.name + "'");
        }
        s.value = *v;
        out.samples.push_back(std::move(s));
    }
    return out;
}

ServerScrape summarize_scrape(const PromText& text) {
    ServerScrape s;
    std::map<double, double> buckets;
    for (const PromSample& p : text.samples) {
        const bool own = p.label("route") == std::optional<std::string>("/metrics");
        if (p.name == "gkq_http_requests_total" && !own)
            s.requests += p.value;
        else if (p.name == "gkq_http_request_duration_seconds_sum" && !own)
            s.latency_sum += p.value;
        else if (p.name == "gkq_http_request_duration_seconds_count" && !own)
            s.latency_count += p.value;
        else if (p.name == "gkq_http_request_duration_seconds_bucket" && !own) {
            const auto le = p.label("le");
            if (!le) continue;
            if (const auto bound = parse_value(*le)) buckets[*bound] += p.value;
        } else if (p.name == "gkq_cache_hits_total")
            s.cache_hits = p.value;
        else if (p.name == "gkq_cache_lookups_total")
            s.cache_lookups = p.value;
        else if (p.name == "gkq_inference_tokens_total" && p.label("kind") == std::optional<std::string>("completion"))
            s.tokens_completion = p.value;
        else if (p.name == "gkq_server_info") {
            s.backend = p.label("backend").value_or("");
            s.backend_detail = p.label("detail").value_or("");
        }
    }
    s.latency_buckets.assign(buckets.begin(), buckets.end());
    return s;
}

ServerRates rates_between(const ServerScrape& before, const ServerScrape& after, double seconds) {
    ServerRates r;
    if (seconds > 0.0) r.requests_per_second = std::max(0.0, after.requests - before.requests) / seconds;
    const double n = after.latency_count - before.latency_count;
    if (n > 0.0) {
        r.mean_latency_seconds = (after.latency_sum - before.latency_sum) / n;
        // The interval's histogram is the difference of the cumulative ones (same bounds: one server).
        for (const auto& [le, cumulative] : after.latency_buckets) {
            double earlier = 0.0;
            for (const auto& [le0, c0] : before.latency_buckets)
                if (le0 == le) earlier = c0;
            if (cumulative - earlier >= 0.99 * n) {
                r.p99_latency_bound_seconds = le;
                break;
            }
        }
    }
    const double lookups = after.cache_lookups - before.cache_lookups;
    if (lookups > 0.0) r.cache_hit_rate = (after.cache_hits - before.cache_hits) / lookups;
    return r;
}

}  // namespace gkq::ui
