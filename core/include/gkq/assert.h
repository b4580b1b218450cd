// GKQ_ASSERT: an invariant check that stays on in release builds. For bugs in gkq, never for bad input
// (bad input gets a Status).
#pragma once

namespace gkq::detail {
[[noreturn]] void assert_fail(const char* expr, const char* file, int line);
}

#define GKQ_ASSERT(expr) ((expr) ? (void)0 : ::gkq::detail::assert_fail(#expr, __FILE__, __LINE__))
