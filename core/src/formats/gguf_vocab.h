// The tokenizer keys a GGUF writer copies from the model a knot was made from (the knot header's metadata): what the
// Vocabulary does not carry (byte-level BPE merges, the pre-tokenizer, special ids beyond BOS / EOS, add_* flags, the
// chat template), so that a gpt2-family GGUF written from a knot loads in llama.cpp as its source did.
#pragma once

#include "gkq/metadata.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq {

// Sets in `out` the source's tokenizer.* keys other than those write_gguf derives from `vocab` (model, tokens,
// scores, token_type, bos / eos ids) when the source's tokenizer.ggml.model is `vocab`'s and it has as many tokens (or
// none: the keys of a Hugging Face tokenizer read at quantize time); nothing otherwise (a llama2.c tokenizer, a
// vocabulary given at quantize time).
void copy_source_tokenizer_keys(const Metadata& source, const Vocabulary& vocab, Metadata& out);

// What fit_vocabulary() changed.
struct VocabularyFit {
    size_t n_tokens = 0;               // before
    size_t n_rows = 0;                 // the embedding's
    std::vector<std::string> dropped;  // the texts of the ids from n_rows on, in id order
    size_t n_padded = 0;               // "[PADi]" tokens added
};

// The vocabulary as convert_hf_to_gguf.py writes it for an embedding of `rows` rows (the config's vocab_size), so
// that llama.cpp, which wants one token per row, loads the file: ids from `rows` on dropped (its
// _create_vocab_sentencepiece ignores added tokens past vocab_size with a warning: Gemma 3's <image_soft_token> after
// 262144 rows) and missing ids filled with "[PADi]" (UNUSED, score -10000, as it fills them). BOS / EOS and the
// tokenizer.ggml.*_token_id keys of `keys` that name a dropped id are removed. Nothing changes when `rows` is not
// positive or the vocabulary is empty.
VocabularyFit fit_vocabulary(Vocabulary& vocab, Metadata& keys, int64_t rows);

// What a fit did, as a sentence for the user ("262145 tokens for 262144 embedding rows: id 262144 dropped
// ('<image_soft_token>'), as convert_hf_to_gguf.py drops them"); empty when it changed nothing.
std::string describe(const VocabularyFit& fit);

}  // namespace gkq
