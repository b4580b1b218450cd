// evaluateKnot: the Evaluate button's work, on a worker thread — load the base model and the knot as transformers
// (core load_model), tokenize the text with the base model's own vocabulary (else the one tokenizer.bin beside it),
// and run the core's KLD comparison (evaluate_compare) with the default windows. Every number comes from the core.
#pragma once

#include "gkq/evaluate.h"
#include "gkq/progress.h"
#include "gkq/status.h"

#include <string>

namespace gkq::ui {

Result<EvalReport> evaluateKnot(const std::string& basePath, const std::string& knotPath, const std::string& textPath,
                                const ProgressFn& progress);

}  // namespace gkq::ui
