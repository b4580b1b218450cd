// ProgressBar: the progress callback of the long subcommands (quantize, verify, reconstruct, merge). Draws a bar on
// stderr when stderr is a terminal (nothing otherwise, so logs and pipes stay clean) and turns Ctrl-C into a
// cancellation: the core stops at the next item and leaves no partial output file.
#pragma once

#include "gkq/progress.h"

#include <string>

namespace gkq::cli {

class ProgressBar {
public:
    explicit ProgressBar(std::string label);  // installs the SIGINT handler
    ~ProgressBar();                           // clears the bar, restores the handler
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

}  // namespace gkq::cli
