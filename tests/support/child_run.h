// Child processes for the peak-memory tests: run the real gkq binary and read its peak RSS (wait4's ru_maxrss),
// and the inputs those tests need (a llama2.c tokenizer of a real model's vocabulary size). Qt-free.
#pragma once

#include "gkq/model_config.h"

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

// What the peak-memory bounds are computed from: a model file's tensors as stored (mapped) and in float32, and a knot
// of it: its file (mapped as stored) and its records inflated into their blocks (float32 where a record has no block
// type), with the largest tensor of each.
struct ModelSizes {
    ModelConfig config;           // the model's
    uint64_t stored_bytes = 0;    // every tensor as the model file stores it
    uint64_t largest_stored = 0;  // the largest tensor as stored
    uint64_t f32_bytes = 0;       // every tensor in float32
    uint64_t largest_f32 = 0;     // the largest tensor in float32
    uint64_t knot_file = 0;       // the knot's file size
    uint64_t knot_blocks = 0;     // every record inflated into its blocks
    uint64_t largest_knot_blocks = 0;
};

// The sizes of `model` and of its knot `knot`; false with `error` set when either does not open.
bool model_sizes(const std::string& model, const std::string& knot, ModelSizes& out, std::string& error);

inline double mib(uint64_t bytes) {
    return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace gkq::test
