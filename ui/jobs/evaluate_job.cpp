#include "jobs/evaluate_job.h"

#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"

#include <fstream>
#include <sstream>

namespace gkq::ui {

Result<EvalReport> evaluateKnot(const std::string& basePath, const std::string& knotPath, const std::string& textPath,
                                const ProgressFn& progress) {
    std::ifstream in(textPath, std::ios::binary);
    if (!in) return Status(StatusCode::NotFound, textPath + ": cannot open the text file");
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (text.empty()) return Status(StatusCode::InvalidArgument, textPath + ": the text is empty");

    TransformerOptions options;
    options.max_batch = 64;
    auto baseWeights = open_weights(basePath);
    if (!baseWeights) return baseWeights.status();
    auto base = Transformer::load(**baseWeights, options);
    if (!base) return base.status();
    auto knotWeights = open_weights(knotPath);
    if (!knotWeights) return knotWeights.status();
    auto candidate = Transformer::load(**knotWeights, options);
    if (!candidate) return candidate.status();
    auto tokenizer = tokenizer_for_model(basePath, (*baseWeights)->vocabulary(), base->config().vocab_size);
    if (!tokenizer) return tokenizer.status();

    EvalText et;
    et.tokens = tokenizer->encode(text, false, false);
    et.bos_id = tokenizer->bos_id();
    et.n_bytes = text.size();
    et.text_hash = fnv1a64(text.data(), text.size());
    auto report = evaluate_compare(*base, *candidate, et, EvalOptions{}, progress);
    if (report) report->text_label = textPath;
    return report;
}

}  // namespace gkq::ui
