// The CLI side of gkq::check_output_not_input: every subcommand that writes a file refuses, before any work, an
// output that is one of its inputs (exit 2 with the reason).
#pragma once

#include "cli/args.h"

#include "gkq/atomic_file.h"

#include <cstdio>
#include <string>
#include <vector>

namespace gkq::cli {

// 0 when `output` replaces none of `inputs`; otherwise prints "gkq <command>: <why>" and returns kExitBadInput.
inline int refuse_output_over_input(const char* command, const std::string& output,
                                    const std::vector<std::string>& inputs) {
    const Status s = check_output_not_input(output, inputs);
    if (s) return 0;
    std::fprintf(stderr, "gkq %s: %s\n", command, s.message().c_str());
    return kExitBadInput;
}

// The inputs of a model: its files (gkq::model_input_files), then the extra files given (empty ones skipped).
inline std::vector<std::string> model_inputs(const std::string& model, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> in = model.empty() ? std::vector<std::string>{} : model_input_files(model);
    for (const std::string& e : extra)
        if (!e.empty()) in.push_back(e);
    return in;
}

}  // namespace gkq::cli
