// Routing and request validation (see api.h). No I/O; nothing here throws.
#include "server/api.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace gkq::server {

using json = nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 32;

struct RouteSpec {
    std::string_view path;
    RouteId id;
    bool post;  // POST only; otherwise GET and HEAD
};

constexpr RouteSpec kRoutes[] = {
    {"/health", RouteId::Health, false},
    {"/ready", RouteId::Ready, false},
    {"/metrics", RouteId::Metrics, false},
    {"/stats", RouteId::Stats, false},
    {"/v1/models", RouteId::Models, false},
    {"/infer", RouteId::Infer, true},
    {"/v1/completions", RouteId::Completions, true},
};

Response json_response(int status, std::string body) {
    Response r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

Response with_retry_after(Response r) {
    r.headers.emplace_back("Retry-After", "1");
    return r;
}

std::string dump(const json& j) {
    try {
        return j.dump(-1, ' ', false, json::error_handler_t::replace);
    } catch (...) {
        return "null";
    }
}

Validated invalid(std::string_view message, std::string_view param, std::string_view code = {}) {
    Validated v;
    v.error = api_error(400, message, "invalid_request_error", param, code);
    return v;
}

// Parses `body` as one JSON object, refusing deep nesting before the parser sees it.
bool parse_object(std::string_view body, json& out, Validated& failure) {
    if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
        failure = invalid("the JSON body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", "");
        return false;
    }
    out = json::parse(body.begin(), body.end(), nullptr, false);
    if (out.is_discarded()) {
        failure = invalid("the request body is not valid JSON", "");
        return false;
    }
    if (!out.is_object()) {
        failure = invalid("the request body must be a JSON object", "");
        return false;
    }
    return true;
}

// Integer field in [lo, hi]; absent or null keeps `out`.
bool get_int(const json& o, const char* key, int64_t lo, int64_t hi, int64_t& out, Validated& failure) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_number_integer()) {
        failure = invalid(std::string("'") + key + "' must be an integer", key);
        return false;
    }
    // nlohmann stores non-negative literals as unsigned: compare those without a signed conversion.
    const bool outside = it->is_number_unsigned() ? (it->get<uint64_t>() > static_cast<uint64_t>(hi) ||
                                                     (lo > 0 && it->get<uint64_t>() < static_cast<uint64_t>(lo)))
                                                  : (it->get<int64_t>() < lo || it->get<int64_t>() > hi);
    if (outside) {
        failure = invalid(
            std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), key);
        return false;
    }
    out = it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>()) : it->get<int64_t>();
    return true;
}

bool get_number(const json& o, const char* key, double lo, double hi, float& out, Validated& failure) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_number()) {
        failure = invalid(std::string("'") + key + "' must be a number", key);
        return false;
    }
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "' must be between %g and %g", lo, hi);
        failure = invalid(std::string("'") + key + buf, key);
        return false;
    }
    out = static_cast<float>(v);
    return true;
}

bool get_seed(const json& o, std::optional<uint64_t>& out, Validated& failure) {
    auto it = o.find("seed");
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0)) {
        failure = invalid("'seed' must be a non-negative integer", "seed");
        return false;
    }
    out = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
    return true;
}

bool get_sampling(const json& o, int64_t max_tokens_limit, CompletionParams& p, Validated& failure) {
    if (o.contains("max_tokens") && !o["max_tokens"].is_null() && !o["max_tokens"].is_number_integer()) {
        failure = invalid("'max_tokens' must be an integer", "max_tokens");
        return false;
    }
    return get_int(o, "max_tokens", 1, max_tokens_limit, p.max_tokens, failure) &&
           get_number(o, "temperature", 0.0, 2.0, p.temperature, failure) &&
           get_number(o, "top_p", 0.0, 1.0, p.top_p, failure) && get_seed(o, p.seed, failure);
}

// An optional field that we only accept at its "off" value.
bool only_default(const json& o, const char* key, const json& allowed, std::string_view why, Validated& failure) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null() || *it == allowed) return true;
    failure = invalid(std::string("'") + key + "' " + std::string(why), key, "unsupported_parameter");
    return false;
}

std::string models_list(const ApiContext& ctx) {
    json data = json::array();
    if (ctx.has_model())
        data.push_back(
            {{"id", ctx.model_id()}, {"object", "model"}, {"created", ctx.created_unix()}, {"owned_by", "gkq"}});
    return dump({{"object", "list"}, {"data", data}});
}

}  // namespace

std::string_view route_label(RouteId r) {
    switch (r) {
        case RouteId::Health: return "/health";
        case RouteId::Ready: return "/ready";
        case RouteId::Infer: return "/infer";
        case RouteId::Metrics: return "/metrics";
        case RouteId::Stats: return "/stats";
        case RouteId::Models: return "/v1/models";
        case RouteId::Completions: return "/v1/completions";
        case RouteId::Other: return "other";
    }
    return "other";
}

std::string_view error_type_for(int status) {
    if (status == 429) return "rate_limit_error";
    if (status == 404) return "invalid_request_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

Response api_error(int status, std::string_view message, std::string_view type, std::string_view param,
                   std::string_view code) {
    json e = {{"message", std::string(message)},
              {"type", std::string(type)},
              {"param", param.empty() ? json(nullptr) : json(std::string(param))},
              {"code", code.empty() ? json(nullptr) : json(std::string(code))}};
    return json_response(status, dump({{"error", e}}));
}

int json_depth(std::string_view text, int limit) {
    int depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"')
            in_string = true;
        else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
            if (deepest > limit) return deepest;
        } else if (c == ']' || c == '}')
            depth = std::max(0, depth - 1);
    }
    return deepest;
}

std::string json_quote(std::string_view s) {
    return dump(json(std::string(s)));
}

Validated parse_infer_body(std::string_view body, int64_t max_tokens_limit) {
    Validated v;
    json o;
    if (!parse_object(body, o, v)) return v;
    auto prompt = o.find("prompt");
    if (prompt == o.end()) return invalid("'prompt' is required", "prompt");
    if (!prompt->is_string()) return invalid("'prompt' must be a string", "prompt");
    v.params.prompt = prompt->get<std::string>();
    if (!get_sampling(o, max_tokens_limit, v.params, v)) return v;
    if (!only_default(o, "stream", false, "is not supported on /infer; use /v1/completions", v)) return v;
    if (auto it = o.find("return_tokens"); it != o.end() && !it->is_null()) {
        if (!it->is_boolean()) return invalid("'return_tokens' must be true or false", "return_tokens");
        v.params.return_tokens = it->get<bool>();
    }
    v.ok = true;
    return v;
}

Validated parse_completions_body(std::string_view body, std::string_view model_id, int64_t max_tokens_limit) {
    Validated v;
    json o;
    if (!parse_object(body, o, v)) return v;
    v.params.openai = true;
    auto model = o.find("model");
    if (model == o.end() || !model->is_string()) return invalid("'model' is required and must be a string", "model");
    if (model->get<std::string>() != model_id) {
        v.error = api_error(404,
                            "The model '" + model->get<std::string>() + "' does not exist; this server serves '" +
                                std::string(model_id) + "'",
                            "invalid_request_error", "model", "model_not_found");
        return v;
    }
    auto prompt = o.find("prompt");
    if (prompt == o.end() || prompt->is_null()) return invalid("'prompt' is required", "prompt");
    if (prompt->is_array()) {
        if (prompt->size() != 1 || !(*prompt)[0].is_string())
            return invalid("'prompt' must be a string or an array of one string (one completion per request)",
                           "prompt");
        v.params.prompt = (*prompt)[0].get<std::string>();
    } else if (prompt->is_string()) {
        v.params.prompt = prompt->get<std::string>();
    } else {
        return invalid("'prompt' must be a string", "prompt");
    }
    if (!get_sampling(o, max_tokens_limit, v.params, v)) return v;
    if (auto s = o.find("stream"); s != o.end() && !s->is_null()) {
        if (!s->is_boolean()) return invalid("'stream' must be a boolean", "stream");
        v.params.stream = s->get<bool>();
    }
    if (!only_default(o, "n", 1, "must be 1: one completion per request", v) ||
        !only_default(o, "best_of", 1, "must be 1", v) || !only_default(o, "echo", false, "is not supported", v) ||
        !only_default(o, "logprobs", 0, "is not supported", v) ||
        !only_default(o, "suffix", "", "is not supported", v) ||
        !only_default(o, "stop", json::array(), "(stop sequences) is not supported", v) ||
        !only_default(o, "presence_penalty", 0, "must be 0: penalties are not supported", v) ||
        !only_default(o, "frequency_penalty", 0, "must be 0: penalties are not supported", v))
        return v;
    v.ok = true;
    return v;
}

RouteResult route(const HttpRequest& request, const ApiContext& ctx) {
    RouteResult rr;
    const RouteSpec* spec = nullptr;
    std::string model_suffix;
    for (const RouteSpec& s : kRoutes)
        if (request.path == s.path) spec = &s;
    if (spec == nullptr && request.path.rfind("/v1/models/", 0) == 0) {
        spec = &kRoutes[4];
        model_suffix = request.path.substr(11);
    }
    if (spec == nullptr) {
        rr.response = api_error(404, "no route for " + request.method + " " + request.path.substr(0, 200),
                                "invalid_request_error", "", "not_found");
        return rr;
    }
    rr.route = spec->id;
    const bool method_ok =
        spec->post ? request.method == "POST" : (request.method == "GET" || request.method == "HEAD");
    if (!method_ok) {
        rr.response = api_error(
            405,
            request.method + " is not allowed on " + std::string(spec->path) + "; use " + (spec->post ? "POST" : "GET"),
            "invalid_request_error", "", "method_not_allowed");
        rr.response.headers.emplace_back("Allow", spec->post ? "POST" : "GET, HEAD");
        return rr;
    }
    const std::string_view phase = ctx.phase();
    switch (spec->id) {
        case RouteId::Health:
            if (phase == "loading")
                rr.response = with_retry_after(json_response(503, R"({"status":"loading"})"));
            else if (phase == "failed")
                rr.response = json_response(503, R"({"status":"failed","weights_loaded":0})");
            else
                rr.response = json_response(
                    200, R"({"status":"healthy","weights_loaded":)" + std::to_string(ctx.weights_loaded()) + "}");
            return rr;
        case RouteId::Ready:
            rr.response = json_response(phase == "ready" ? 200 : 503, ctx.ready_json());
            if (phase != "ready") rr.response = with_retry_after(std::move(rr.response));
            return rr;
        case RouteId::Metrics:
            rr.response = json_response(200, ctx.metrics_text());
            rr.response.content_type = "text/plain; version=0.0.4; charset=utf-8";
            return rr;
        case RouteId::Stats: rr.response = json_response(200, ctx.stats_json()); return rr;
        case RouteId::Models:
            if (model_suffix.empty() && request.path.size() == 10) {
                rr.response = json_response(200, models_list(ctx));
            } else if (ctx.has_model() && model_suffix == ctx.model_id()) {
                rr.response = json_response(200, dump({{"id", ctx.model_id()},
                                                       {"object", "model"},
                                                       {"created", ctx.created_unix()},
                                                       {"owned_by", "gkq"}}));
            } else {
                rr.response = api_error(404, "The model '" + model_suffix.substr(0, 200) + "' does not exist",
                                        "invalid_request_error", "model", "model_not_found");
            }
            return rr;
        case RouteId::Infer:
        case RouteId::Completions: {
            Validated v = spec->id == RouteId::Infer
                              ? parse_infer_body(request.body, ctx.max_tokens_limit())
                              : parse_completions_body(request.body, ctx.model_id(), ctx.max_tokens_limit());
            if (!v.ok) {
                rr.response = std::move(v.error);
                return rr;
            }
            if (!ctx.has_model()) {
                rr.response = api_error(503,
                                        "no model is loaded: start the server with weights (--weights or "
                                        "WEIGHTS_PATH)",
                                        "server_error", "", "model_not_loaded");
                return rr;
            }
            if (phase != "ready") {
                rr.response =
                    with_retry_after(api_error(503,
                                               "the server is " + std::string(phase) +
                                                   (phase == "failed" ? ": weights failed to load" : "; retry shortly"),
                                               "server_error", "", "not_ready"));
                if (phase == "failed") rr.response.headers.clear();
                return rr;
            }
            rr.infer = true;
            rr.params = std::move(v.params);
            return rr;
        }
        case RouteId::Other: break;
    }
    return rr;
}

}  // namespace gkq::server
