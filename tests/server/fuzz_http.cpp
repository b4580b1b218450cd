// libFuzzer target over the server's request path without sockets: bytes fed to the llhttp-based RequestParser in
// input-chosen pieces (so pipelining and every split point are exercised), each complete request routed through
// route() against a fixed context (JSON bodies validated there), each response serialized; plus the body
// validators and the JSON depth scan on the raw input. Built by clang with -fsanitize=fuzzer,address
// (tests/server/fuzz_http.cmake); a crash, leak, ASan report or broken invariant aborts.
#include "server/api.h"
#include "server/http_parser.h"
#include "server/http_response.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using namespace gkq::server;

class FuzzContext final : public ApiContext {
public:
    std::string_view phase() const override { return "ready"; }
    bool has_model() const override { return true; }
    size_t weights_loaded() const override { return 3; }
    std::string model_id() const override { return "m"; }
    int64_t max_tokens_limit() const override { return 64; }
    std::string ready_json() const override { return R"({"status":"ready"})"; }
    std::string stats_json() const override { return "{}"; }
    std::string metrics_text() const override { return "# TYPE x counter\nx 1\n"; }
    int64_t created_unix() const override { return 0; }
};

void check(bool ok) {
    if (!ok) std::abort();
}

void check_response(const Response& r) {
    check(r.status >= 200 && r.status <= 599);
    const std::string bytes = serialize_response(r, true);
    check(bytes.compare(0, 9, "HTTP/1.1 ") == 0);
    check(bytes.find("\r\n\r\n") != std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    static const FuzzContext ctx;
    ParserLimits limits;
    limits.max_target_bytes = 256;
    limits.max_header_bytes = 1024;
    limits.max_headers = 16;
    limits.max_body_bytes = 2048;
    RequestParser parser(limits);
    const size_t step_seed = size;
    const char* bytes = reinterpret_cast<const char*>(data);
    const size_t n = size;
    size_t pos = 0;
    int n_requests = 0;
    while (pos < n) {
        // Piece sizes 1..16 chosen by the input's length and the position: feeds split anywhere.
        const size_t piece = 1 + ((step_seed + pos * 7) % 16);
        size_t left = std::min(piece, n - pos);
        while (left > 0) {
            const RequestParser::Outcome o = parser.feed(bytes + pos, left);
            check(o.consumed <= left);
            pos += o.consumed;
            left -= o.consumed;
            if (o.event == ParseEvent::Error) {
                check(parser.error_status() >= 400 && parser.error_status() <= 505);
                check(!parser.error_message().empty());
                check_response(
                    api_error(parser.error_status(), parser.error_message(), error_type_for(parser.error_status())));
                return 0;  // the connection would close here
            }
            if (o.event == ParseEvent::NeedMore) {
                check(left == 0);
                break;
            }
            if (o.event == ParseEvent::Request) {
                const HttpRequest req = parser.take_request();
                check(req.target.size() <= limits.max_target_bytes);
                check(req.body.size() <= limits.max_body_bytes);
                check(req.headers.size() <= limits.max_headers);
                const RouteResult rr = route(req, ctx);
                if (rr.infer) {
                    check(rr.params.max_tokens >= 1 && rr.params.max_tokens <= 64);
                    check(rr.params.temperature >= 0 && rr.params.temperature <= 2);
                } else {
                    check_response(rr.response);
                }
                if (++n_requests > 1000) return 0;
            }
            // ExpectsContinue: the server answers 100 and goes on feeding; so do we.
        }
    }
    // The validators on the raw bytes as a body.
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    const Validated a = parse_infer_body(body, 64);
    const Validated b = parse_completions_body(body, "m", 64);
    check(a.ok || a.error.status == 400);
    check(b.ok || b.error.status == 400 || b.error.status == 404);
    check(json_depth(body, 32) >= 0);
    check(!json_quote(body).empty());
    return 0;
}
