// generate(): run.c's generate() loop with the prompt run as one batch. See generate.h.
#include "gkq/generate.h"

#include "gkq/naming.h"
#include "gkq/sampler.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "infer/kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

namespace gkq {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "blk.1.ffn_up.weight holds nan at element 17": the first weight, in the forward pass's order, with a value that
// is not finite; empty when every weight is finite.
std::string first_nonfinite_weight(const TransformerWeights& w) {
    std::string found;
    auto scan = [&](const std::vector<float>& v, TensorRole role, int32_t layer, size_t first = 0) {
        if (!found.empty()) return;
        for (size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i])) {
                found = gguf_name(role, layer) + " holds " + (std::isnan(v[i]) ? "nan" : "inf") + " at element " +
                        std::to_string(first + i);
                return;
            }
    };
    // A weight lent per step by a WeightLender (values null between steps) is not scanned; stored rows are
    // converted one at a time.
    auto scan_matrix = [&](const Matrix& m, TensorRole role, int32_t layer) {
        if (!m.values) return;
        if (m.stored()) {
            std::vector<float> row(static_cast<size_t>(m.cols));
            for (int64_t r = 0; r < m.rows && found.empty(); ++r) {
                stored_row_to_f32(stored_rows_of(*m.values), m.rows, m.cols, r, row.data());
                scan(row, role, layer, static_cast<size_t>(r * m.cols));
            }
        }
        scan(m.values->dense, role, layer);
        scan(m.values->u, role, layer);
        scan(m.values->svt, role, layer);
    };
    scan_matrix(w.token_embedding, TensorRole::TokenEmbd, -1);
    for (size_t l = 0; l < w.layers.size(); ++l) {
        const LayerWeights& x = w.layers[l];
        const auto layer = static_cast<int32_t>(l);
        scan_matrix(x.rms_att, TensorRole::AttnNorm, layer);
        scan_matrix(x.wq, TensorRole::AttnQ, layer);
        scan_matrix(x.wk, TensorRole::AttnK, layer);
        scan_matrix(x.wv, TensorRole::AttnV, layer);
        scan_matrix(x.wo, TensorRole::AttnO, layer);
        scan_matrix(x.rms_ffn, TensorRole::FfnNorm, layer);
        scan_matrix(x.w1, TensorRole::FfnGate, layer);
        scan_matrix(x.w2, TensorRole::FfnDown, layer);
        scan_matrix(x.w3, TensorRole::FfnUp, layer);
    }
    scan_matrix(w.rms_final, TensorRole::OutputNorm, -1);
    scan_matrix(w.classifier, TensorRole::Output, -1);
    return found;
}

// Logits that are not all finite cannot be sampled from: stop, naming the weight behind them when one is.
Status check_logits(const Transformer& model, const float* logits, int64_t pos) {
    const int64_t n = model.config().vocab_size;
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(logits[i])) {
            const std::string weight = first_nonfinite_weight(model.weights());
            return error(StatusCode::Corrupt,
                         "generate: the logits at position " + std::to_string(pos) + " are not finite (token " +
                             std::to_string(i) + " is " + (std::isnan(logits[i]) ? "nan" : "inf") + "); " +
                             (weight.empty() ? std::string("every weight is finite, so the activations overflowed")
                                             : "the first weight that is not: " + weight));
        }
    return Status::ok();
}
}  // namespace

Result<GenerateStats> generate(Transformer& model, const Tokenizer& tokenizer, Sampler& sampler,
                               std::string_view prompt, const GenerateOptions& options, const PieceFn& on_piece) {
    const std::vector<int32_t> tokens = tokenizer.encode(prompt, true, false);
    if (tokens.empty())
        return error(StatusCode::InvalidArgument,
                     "generate: the prompt encodes to no tokens and the tokenizer "
                     "has no BOS token to start from");
    return generate(model, tokenizer, sampler, tokens, options, on_piece);
}

Result<GenerateStats> generate(Transformer& model, const Tokenizer& tokenizer, Sampler& sampler,
                               const std::vector<int32_t>& tokens, const GenerateOptions& options,
                               const PieceFn& on_piece, const TokenFn& on_token) {
    GenerateStats stats;
    if (tokens.empty()) return error(StatusCode::InvalidArgument, "generate: no prompt tokens to start from");
    int64_t steps = options.steps;
    if (steps <= 0 || steps > model.n_context()) steps = model.n_context();
    const auto n_prompt = static_cast<int64_t>(tokens.size());
    const int32_t bos = tokenizer.bos_id();
    auto ends = [&](int32_t t) { return t == bos || (options.stop_at_eog && tokenizer.is_eog(t)); };

    // the prompt, as one batch (run.c feeds it one position at a time: same logits)
    const int64_t n_feed = std::min(n_prompt, steps);
    auto t0 = std::chrono::steady_clock::now();
    auto logits = model.forward_batch(tokens.data(), n_feed, 0);
    if (!logits) return logits.status();
    if (Status s = check_logits(model, *logits, n_feed - 1); !s) return s;
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
        if (on_token) on_token(next);
        if (on_piece && !on_piece(tokenizer.decode(token, next))) {
            stats.stopped = true;
            break;
        }
        token = next;
        if (pos >= steps) break;
        auto out = model.forward(token, pos);
        if (!out) return out.status();
        if (Status s = check_logits(model, *out, pos); !s) return s;
        pos++;
        stats.n_generate_forwards++;
        next = sampler.sample(*out);
        stats.n_sampled++;
    }
    stats.generate_seconds = seconds_since(t0);
    return stats;
}

}  // namespace gkq
