// Running a knot directly: its records as the WeightSource of Transformer::load (a LowRank record is handed over
// as its factors, so the transformer runs it factored where that costs fewer multiply-adds; every other record,
// LowRankResidual included, is decoded dense), and one loader for "a model file or a knot" used by generate and
// eval.
// Contract: the knot is read record by record (CRC-checked, decoded once); errors name the knot file and the
// record. A knot must be whole (unsharded) to run.
#pragma once

#include "gkq/knot.h"
#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/transformer.h"

#include <memory>
#include <string>

namespace gkq {

// The records of `knot` by role and layer; `knot` must outlive the returned function.
WeightSource knot_weight_source(const KnotFile& knot);

// The knot's config (classifier shared unless it holds an output record) with knot_weight_source().
Result<Transformer> load_transformer(const KnotFile& knot, const TransformerOptions& options = {});

// True when `path` is a knot (.knot, or a gzipped .knot.gz), judged by its first bytes.
bool is_knot_path(const std::string& path);

// A runnable model opened from a model file/folder or from a knot.
struct LoadedModel {
    std::string path;
    bool from_knot = false;
    ModelConfig config;
    Vocabulary vocab;                          // the model's or knot's own vocabulary; empty when it has none
    std::unique_ptr<Transformer> transformer;  // never null on success
};

Result<LoadedModel> load_model(const std::string& path, const TransformerOptions& options = {});

}  // namespace gkq
