// A tiny LLaMA-shaped model with deterministic random weights, for writer/reader round trips and tests
// that need a real file in each format.
#pragma once

#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/model_writer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq::test {

struct TinyModel {
    ModelConfig config;
    std::vector<std::vector<float>> storage;  // one buffer per tensor, same order as `tensors`
    std::vector<WriteTensor> tensors;         // every role of every layer (+ output when not shared)
};

// dim 64, hidden 96, 2 layers, 4 heads, 2 kv heads, vocab 40, context 32 unless changed.
ModelConfig tiny_config(bool shared_classifier = true);
TinyModel make_tiny_model(const ModelConfig& config, uint64_t seed = 1);

// A sentencepiece-style vocabulary of 40 tokens for the tiny model (vocab 40): <unk> <s> </s>, "\u2581", the 26
// lowercase letters and 10 merges (default: "\u2581a", "ab", "ba", "\u2581ab", "cd" .. "hi"), so any lowercase text
// encodes. The merges change which pieces a text splits into; tests that count tokens name theirs.
Vocabulary tiny_vocabulary();
Vocabulary tiny_vocabulary(const std::vector<std::string>& merges);

// make_tiny_model(tiny_config(shared_classifier), seed) written as GGUF to `path` (with `vocab` when it has tokens);
// aborts the test program with the writer's message if it refuses. Returns `path`.
std::string write_tiny_gguf(const std::string& path, bool shared_classifier = true, uint64_t seed = 1,
                            const Vocabulary& vocab = {});

}  // namespace gkq::test
