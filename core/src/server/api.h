// The HTTP API without any I/O: which route a request is, its method check, the JSON bodies of /infer and
// /v1/completions validated into CompletionParams, the small JSON documents the loop answers itself, and the
// OpenAI error envelope. The server and the fuzz target (tests/server/fuzz_http.cpp) both drive route().
#pragma once

#include "server/http_parser.h"
#include "server/http_response.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gkq::server {

enum class RouteId { Health, Ready, Infer, Metrics, Stats, Models, Completions, Other };
inline constexpr int kRouteCount = 8;
std::string_view route_label(RouteId r);  // "/health", ..., "other"

struct CompletionParams {
    bool openai = false;  // /v1/completions (OpenAI shapes) rather than /infer
    bool stream = false;
    std::string prompt;
    int64_t max_tokens = 16;
    float temperature = 1.0f;
    float top_p = 1.0f;
    std::optional<uint64_t> seed;
    // /infer: the answer carries the token ids too, "tokens" (generated) and "prompt_ids" (the prompt as the server's
    // tokenizer encoded it, BOS included); llama.cpp's server calls the option return_tokens.
    bool return_tokens = false;
};

// What the loop knows when it routes (filled by the server; a fixed stub in the fuzzer).
class ApiContext {
public:
    virtual ~ApiContext() = default;
    virtual std::string_view phase() const = 0;  // "loading", "ready", "failed", "draining"
    virtual bool has_model() const = 0;          // weights configured (loaded or not)
    virtual size_t weights_loaded() const = 0;
    virtual std::string model_id() const = 0;
    virtual int64_t max_tokens_limit() const = 0;
    virtual std::string ready_json() const = 0;  // /ready's document
    virtual std::string stats_json() const = 0;
    virtual std::string metrics_text() const = 0;
    virtual int64_t created_unix() const = 0;  // for /v1/models
};

struct RouteResult {
    RouteId route = RouteId::Other;
    bool infer = false;  // true: run `params` on a worker; false: answer `response`
    Response response;
    CompletionParams params;
};

RouteResult route(const HttpRequest& request, const ApiContext& ctx);

// {"error":{"message":...,"type":...,"param":...,"code":...}} with `status`; empty param/code become null.
Response api_error(int status, std::string_view message, std::string_view type, std::string_view param = {},
                   std::string_view code = {});
// The error type OpenAI uses for a status: invalid_request_error (4xx), server_error (5xx), ...
std::string_view error_type_for(int status);

// Body validation, exposed for tests and the fuzzer. On failure the Response is the 400 to send.
struct Validated {
    bool ok = false;
    CompletionParams params;
    Response error;
};
Validated parse_infer_body(std::string_view body, int64_t max_tokens_limit);
Validated parse_completions_body(std::string_view body, std::string_view model_id, int64_t max_tokens_limit);

// Deepest nesting of arrays/objects in a JSON text (strings skipped), stopping once past `limit`.
int json_depth(std::string_view text, int limit);

// A JSON string literal (quotes included) for `s`, invalid UTF-8 replaced by U+FFFD.
std::string json_quote(std::string_view s);

}  // namespace gkq::server
