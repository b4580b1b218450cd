// ProgressBar: the progress callback of the long subcommands (quantize, verify, reconstruct, merge, analyze, eval,
// profile, rknot encode). Draws a bar on stderr when stderr is a terminal (nothing otherwise, so logs and pipes stay
// clean) and turns SIGINT and SIGTERM into a cancellation: the core stops at the next item and leaves no partial
// output file; the command says what was not written, and gkq exits 128 + the signal (130, 143). A second signal
// while the first is being handled ends the process at once (the next run to that output removes the temporary).
#pragma once

#include "gkq/progress.h"

#include <string>

namespace gkq::cli {

class ProgressBar {
public:
    explicit ProgressBar(std::string label);  // installs the SIGINT and SIGTERM handlers
    ~ProgressBar();                           // clears the bar, restores the handlers
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    ProgressFn callback();
    void clear();

private:
    std::string m_label;
    bool m_enabled = false;
    bool m_drawn = false;
    int m_last_percent = -1;
};

// The signal that cancelled the last operation (SIGINT, SIGTERM), or 0.
int interrupt_signal();
// "interrupted by SIGTERM", "interrupted by SIGINT", or "cancelled": the start of a cancelled command's message.
std::string interrupted_text();
// A command's exit code as the process's: a cancellation by a signal becomes 128 + the signal, as a shell reports a
// process that signal ended.
int exit_code_after_signals(int code);

}  // namespace gkq::cli
