#include "gkq/status.h"
#include "gkq/assert.h"

#include <cstdio>
#include <cstdlib>

namespace gkq {

const char* status_code_name(StatusCode code) {
    switch (code) {
        case StatusCode::Ok: return "ok";
        case StatusCode::InvalidArgument: return "invalid argument";
        case StatusCode::NotFound: return "not found";
        case StatusCode::IoError: return "i/o error";
        case StatusCode::Corrupt: return "corrupt";
        case StatusCode::Unsupported: return "unsupported";
        case StatusCode::Cancelled: return "cancelled";
        case StatusCode::Internal: return "internal error";
    }
    return "?";
}

Status Status::with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(m_code, context + ": " + m_message);
}

namespace detail {
void assert_fail(const char* expr, const char* file, int line) {
    std::fprintf(stderr, "gkq: internal assertion failed: %s (%s:%d)\n", expr, file, line);
    std::abort();
}
}  // namespace detail

}  // namespace gkq
