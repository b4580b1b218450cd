// The process exit codes of every gkq subcommand, and the one mapping from a Status to them. `gkq --help` and the
// README promise: 0 success, 1 failure, 2 bad options or bad input file, 130 cancelled.
#pragma once

#include "gkq/status.h"

namespace gkq::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // the operation failed for a reason other than its input
constexpr int kExitBadInput = 2;  // bad options, or an input file that is corrupt, missing or unsupported
constexpr int kExitCancelled = 130;

// Ok 0; InvalidArgument, NotFound, Corrupt, Unsupported: the input's fault, 2; IoError (the operating system
// refused a read, write or rename) and Internal: 1; Cancelled: 130, as a shell reports an interrupted command.
constexpr int exit_code(StatusCode code) {
    switch (code) {
        case StatusCode::Ok: return kExitOk;
        case StatusCode::InvalidArgument:
        case StatusCode::NotFound:
        case StatusCode::Corrupt:
        case StatusCode::Unsupported: return kExitBadInput;
        case StatusCode::IoError:
        case StatusCode::Internal: return kExitFailure;
        case StatusCode::Cancelled: return kExitCancelled;
    }
    return kExitFailure;
}

inline int exit_code(const Status& s) {
    return exit_code(s.code());
}

}  // namespace gkq::cli
