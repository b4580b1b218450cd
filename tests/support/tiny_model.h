// A tiny LLaMA-shaped model with deterministic random weights, for writer/reader round trips and tests
// that need a real file in each format.
#pragma once

#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"
#include "gkq/quantize.h"
#include "gkq/saturation.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gkq::test {

struct TinyModel {
    ModelConfig config;
    std::vector<std::vector<float>> storage;  // one buffer per tensor, same order as `tensors`
    std::vector<WriteTensor> tensors;         // every role of every layer (+ output when not shared)
};

// A model's tensors as Weights held in memory (float32, kind "memory"), so a Transformer loads straight from
// values a test made: tests change `values`, or set `factors[i]` to hand tensor i over as low-rank factors (then
// read_factors returns them, as a knot's low-rank record would).
class MemoryWeights final : public Weights {
public:
    explicit MemoryWeights(const TinyModel& m);

    ModelConfig model_config;
    std::vector<TensorInfo> infos;
    std::vector<std::vector<float>> values;             // (infos[i].shape) row-major
    std::vector<std::optional<StoredFactors>> factors;  // set: tensor i is stored as these factors

    // The index of (role, layer); aborts the test when there is none.
    size_t at(TensorRole role, int32_t layer) const;

    std::string_view kind() const override { return "memory"; }
    const std::string& label() const override { return m_label; }
    const ModelConfig& config() const override { return model_config; }
    const Vocabulary& vocabulary() const override { return m_vocab; }
    size_t n_tensors() const override { return infos.size(); }
    const TensorInfo& tensor_info(size_t i) const override { return infos[i]; }
    uint64_t stored_bytes(size_t i) const override { return values[i].size() * sizeof(float); }
    Result<StoredTensor> read_stored(size_t i) const override;
    Result<std::vector<float>> read_f32(size_t i) const override { return values[i]; }
    Result<std::optional<StoredFactors>> read_factors(size_t i) const override { return factors[i]; }

private:
    std::string m_label = "memory";
    Vocabulary m_vocab;
};

// dim 64, hidden 96, 2 layers, 4 heads, 2 kv heads, vocab 40, context 32 unless changed.
ModelConfig tiny_config(bool shared_classifier = true);
TinyModel make_tiny_model(const ModelConfig& config, uint64_t seed = 1);

// A sentencepiece-style vocabulary of 40 tokens for the tiny model (vocab 40): <unk> <s> </s>, "\u2581", the 26
// lowercase letters and 10 merges (default: "\u2581a", "ab", "ba", "\u2581ab", "cd" .. "hi"), so any lowercase text
// encodes. The merges change which pieces a text splits into; tests that count tokens name theirs.
Vocabulary tiny_vocabulary();
Vocabulary tiny_vocabulary(const std::vector<std::string>& merges);

// llama.cpp's SPM vocabulary of 259 tokens: <unk> <s> </s> and the 256 byte tokens <0x00> .. <0xFF> (BOS 1, EOS 2),
// for models whose GGUF llama.cpp loads (the forward-pass and k-quant fixtures).
Vocabulary byte_vocabulary();

// make_tiny_model(tiny_config(shared_classifier), seed) written as GGUF to `path` (with `vocab` when it has tokens);
// aborts the test program with the writer's message if it refuses. Returns `path`.
std::string write_tiny_gguf(const std::string& path, bool shared_classifier = true, uint64_t seed = 1,
                            const Vocabulary& vocab = {});

// The model file at `model_path` quantized by `preset` on one thread into `knot_path`: the core's report, or the
// failing step's message.
Result<QuantizeReport> quantize_file(const std::string& model_path, const std::string& preset,
                                     const std::string& knot_path);
// make_tiny_model(config) written as safetensors to `path` (config.json beside it), then quantize_file.
Result<QuantizeReport> write_tiny_knot(const std::string& path, const ModelConfig& config, const std::string& preset,
                                       const std::string& knot_path);

// The knot of the model at `model_path` by `preset` (written to `knot_path`) and its rknot, encoded against the model
// under the name `model_name` and written to `rknot_path`: the files a Tuning-view test opens. The first failing
// step's message, or ok.
Status write_knot_and_rknot(const std::string& model_path, const std::string& preset, const std::string& knot_path,
                            const std::string& rknot_path, const std::string& model_name = "tiny");

// A one-layer saturation profile of 3 neurons (counts 0, 2, 4 of 4 tokens; the last two hot), for tests of
// masks files.
SaturationProfile small_saturation_profile();

// Ids 3, 10, 17, ... modulo `vocab`: a fixed token sequence for forward-pass tests.
std::vector<int32_t> cycle_tokens(int64_t vocab, size_t n);
// Every position's logits of `tokens` from position 0, (tokens, vocab) row-major, as one batch or one token at a
// time; aborts with the transformer's message when a step fails.
std::vector<float> all_logits(Transformer& t, const std::vector<int32_t>& tokens, bool batch);

}  // namespace gkq::test
