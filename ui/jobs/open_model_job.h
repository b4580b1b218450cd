// openModelOrKnot: File > Open's work, on a worker thread. A model file or folder, or a knot (is_knot_path: .knot
// or .knot.gz, judged by its bytes), opens as Weights (open_weights): every view reads the knot's records directly
// (read_f32 decodes one when a view asks for it), and nothing is written anywhere. KnotSummary carries what the
// knot records about itself (producer, command, sizes, methods), read from the knot, never estimated;
// TokenizerSummary what the model's tokenizer is, as generate and serve build it (tokenizer_for_model).
#pragma once

#include "gkq/metadata.h"
#include "gkq/status.h"
#include "gkq/tokenizer.h"
#include "gkq/weights.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gkq::ui {

struct KnotSummary {
    std::string path;
    std::string producer;     // as recorded in the header
    std::string command;      // as recorded ("quantize --preset lowrank-q4 ...")
    std::string preset;       // the --preset word of `command`; empty when it names none
    uint64_t file_bytes = 0;  // of the knot file (inflated size for .knot.gz)
    bool gzipped = false;
    size_t n_records = 0;
    int64_t n_params = 0;                                 // elements of all records
    std::vector<std::pair<std::string, size_t>> methods;  // records per method name, in Method order
    Vocabulary vocab;                                     // the knot's own (empty when the source model had none)

    double bitsPerWeight() const;  // 8 * file_bytes / n_params (QuantizeReport::bits_per_weight's definition)
};

// The tokenizer the commands run the model with: its family and size and its special ids, or why there is none.
struct TokenizerSummary {
    std::string family;  // "spm", "bpe"; empty when there is none (then `error` says why)
    std::string pre;     // the pre-tokenizer's name (bpe)
    int32_t size = 0;
    int32_t bos = -1;
    int32_t eos = -1;
    SpecialIds special;        // EOT, EOM, fill in the middle
    std::vector<int32_t> eog;  // the ids generation ends at
    std::string error;
};

struct OpenedModel {
    std::shared_ptr<const Weights> model;  // a ModelFile, or the KnotFile itself
    std::optional<KnotSummary> knot;       // set when `path` was a knot
    TokenizerSummary tokenizer;
};

Result<OpenedModel> openModelOrKnot(const std::string& path);

}  // namespace gkq::ui
