// generate(): text generation as llama2.c's run.c generate() does it — the prompt encoded with BOS, fed
// through the model (here as one batch), then one sampled token per position until `steps` positions have
// run, BOS is sampled (run.c's end of a story) or, optionally, an end-of-generation token (EOS, EOT). The printed text
// is what run.c prints: the prompt's pieces after BOS, then the sampled ones, each decoded after its predecessor.
#pragma once

#include "gkq/status.h"

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace gkq {

class Transformer;
class Tokenizer;
class Sampler;

struct GenerateOptions {
    int64_t steps = 256;  // positions to run, the prompt's included (run.c's -n); <= 0 or beyond the
                          // context: the whole context
    // Stop at an end-of-generation token as llama.cpp does (Tokenizer::is_eog: EOS, EOT such as <|eot_id|> or
    // <|im_end|>, ...); run.c stops only at BOS.
    bool stop_at_eog = true;
};

struct GenerateStats {
    int64_t n_prompt_tokens = 0;      // tokens run as the prompt batch, BOS included
    double prompt_seconds = 0;        // the prompt batch's forward pass
    int64_t n_sampled = 0;            // tokens sampled (the first comes from the prompt's last logits)
    int64_t n_generate_forwards = 0;  // forward passes after the prompt
    double generate_seconds = 0;      // those passes and their sampling
    bool stopped = false;             // ended by BOS, EOS/EOT or by the callback before `steps`
};

// Receives each piece of text as it is produced; returning false stops generation (not an error).
using PieceFn = std::function<bool(std::string_view piece)>;

// Receives each sampled token id, before its piece.
using TokenFn = std::function<void(int32_t id)>;

Result<GenerateStats> generate(Transformer& model, const Tokenizer& tokenizer, Sampler& sampler,
                               std::string_view prompt, const GenerateOptions& options, const PieceFn& on_piece);
// The same from token ids, run exactly as given (no BOS added): `tokens` is the prompt.
Result<GenerateStats> generate(Transformer& model, const Tokenizer& tokenizer, Sampler& sampler,
                               const std::vector<int32_t>& tokens, const GenerateOptions& options,
                               const PieceFn& on_piece, const TokenFn& on_token = {});

}  // namespace gkq
