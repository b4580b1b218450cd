// openModelOrKnot: File > Open's work, on a worker thread. A model file or folder opens as a ModelFile; a knot
// (is_knot_path: .knot or .knot.gz, judged by its bytes) is decoded by the core's reconstruct() into a float32
// model in `scratchDir` (safetensors with the knot's HF tensor names, or GGUF when the knot holds GGUF names), which
// then opens as a ModelFile — so every view shows the weights the knot really reconstructs. KnotSummary carries
// what the knot records about itself (producer, command, sizes), read from the knot, never estimated.
#pragma once

#include "gkq/metadata.h"
#include "gkq/model_file.h"
#include "gkq/progress.h"
#include "gkq/status.h"

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
    std::string decoded_path;                             // the temporary float32 model the views read

    double bitsPerWeight() const;  // 8 * file_bytes / n_params (QuantizeReport::bits_per_weight's definition)
};

struct OpenedModel {
    std::shared_ptr<const ModelFile> model;
    std::optional<KnotSummary> knot;  // set when `path` was a knot
};

Result<OpenedModel> openModelOrKnot(const std::string& path, const std::string& scratchDir, const ProgressFn& progress);

}  // namespace gkq::ui
