// Child processes for the peak-memory tests: run the real gkq binary and read its peak RSS (wait4's ru_maxrss),
// and the inputs those tests need (a llama2.c tokenizer of a real model's vocabulary size). Qt-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gkq::test {

struct ChildRun {
    int code = -1;               // the exit code; -1: not started, or killed by a signal
    uint64_t max_rss_bytes = 0;  // the child's peak resident set
};

// Runs argv (argv[0] a path) with stdout and stderr into `log` and waits for it with wait4.
ChildRun run_child(const std::vector<std::string>& args, const std::string& log);

// The whole file (empty when it cannot be read).
std::string slurp(const std::string& path);

// A llama2.c tokenizer.bin of n tokens: <unk> <s> </s>, the 256 byte tokens, " ", the letters a-z and every
// " x", " xy", " xyz" of them (so a text of three-letter words takes one token a word), then words "▁wN" (as before).
void write_llama2c_tokenizer(const std::string& path, int n);

inline double mib(uint64_t bytes) {
    return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace gkq::test
