// A tiny LLaMA-shaped model with deterministic random weights, for writer/reader round trips and tests
// that need a real file in each format.
#pragma once

#include "gkq/model_config.h"
#include "gkq/model_writer.h"

#include <cstdint>
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

}  // namespace gkq::test
