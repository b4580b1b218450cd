// generate(): run.c's generate() loop with the prompt run as one batch. See generate.h.
#include "gkq/generate.h"

#include "gkq/sampler.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace gkq {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<GenerateStats> generate(Transformer& model, const Tokenizer& tokenizer, Sampler& sampler,
                               std::string_view prompt, const GenerateOptions& options, const PieceFn& on_piece) {
    GenerateStats stats;
    const std::vector<int32_t> tokens = tokenizer.encode(prompt, true, false);
    if (tokens.empty())
        return error(StatusCode::InvalidArgument,
                     "generate: the prompt encodes to no tokens and the tokenizer "
                     "has no BOS token to start from");
    int64_t steps = options.steps;
    if (steps <= 0 || steps > model.n_context()) steps = model.n_context();
    const auto n_prompt = static_cast<int64_t>(tokens.size());
    const int32_t bos = tokenizer.bos_id();
    const int32_t eos = tokenizer.eos_id();
    auto ends = [&](int32_t t) { return t == bos || (options.stop_at_eos && t == eos && eos >= 0); };

    // the prompt, as one batch (run.c feeds it one position at a time: same logits)
    const int64_t n_feed = std::min(n_prompt, steps);
    auto t0 = std::chrono::steady_clock::now();
    auto logits = model.forward_batch(tokens.data(), n_feed, 0);
    if (!logits) return logits.status();
    stats.n_prompt_tokens = n_feed;
    stats.prompt_seconds = seconds_since(t0);

    // run.c prints prompt token pos+1 after running position pos
    for (int64_t i = 1; i <= std::min(n_prompt - 1, steps); i++) {
        if (tokens[static_cast<size_t>(i)] == bos) {
            stats.stopped = true;
            return stats;
        }
        if (on_piece &&
            !on_piece(tokenizer.decode(tokens[static_cast<size_t>(i - 1)], tokens[static_cast<size_t>(i)]))) {
            stats.stopped = true;
            return stats;
        }
    }
    if (steps < n_prompt) return stats;

    // sampled tokens: the first from the prompt's last logits, then one per position
    t0 = std::chrono::steady_clock::now();
    int32_t token = tokens.back();
    int64_t pos = n_prompt;
    int32_t next = sampler.sample(*logits);
    stats.n_sampled = 1;
    for (;;) {
        if (ends(next)) {
            stats.stopped = true;
            break;
        }
        if (on_piece && !on_piece(tokenizer.decode(token, next))) {
            stats.stopped = true;
            break;
        }
        token = next;
        if (pos >= steps) break;
        auto out = model.forward(token, pos);
        if (!out) return out.status();
        pos++;
        stats.n_generate_forwards++;
        next = sampler.sample(*out);
        stats.n_sampled++;
    }
    stats.generate_seconds = seconds_since(t0);
    return stats;
}

}  // namespace gkq
