// openModelOrKnot: File > Open's work, on a worker thread. A model file or folder, or a knot (is_knot_path: .knot
// or .knot.gz, judged by its bytes), opens as Weights (open_weights): every view reads the knot's records directly
// (read_f32 decodes one when a view asks for it), and nothing is written anywhere. KnotSummary carries what the
// knot records about itself (producer, command, sizes, methods), read from the knot, never estimated.
#pragma once

#include "gkq/metadata.h"
#include "gkq/status.h"
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

struct OpenedModel {
    std::shared_ptr<const Weights> model;  // a ModelFile, or the KnotFile itself
    std::optional<KnotSummary> knot;       // set when `path` was a knot
};

Result<OpenedModel> openModelOrKnot(const std::string& path);

}  // namespace gkq::ui
