// Progress reporting for long operations: the callback gets the fraction done (0..1) and a short label of
// the current item; returning false asks the operation to stop, which then returns StatusCode::Cancelled.
#pragma once

#include <functional>
#include <string_view>

namespace gkq {

using ProgressFn = std::function<bool(double fraction, std::string_view what)>;

// Calls `fn` when set; true (keep going) when it is empty.
inline bool report_progress(const ProgressFn& fn, double fraction, std::string_view what) {
    return !fn || fn(fraction, what);
}

}  // namespace gkq
