// The tokenizer keys a GGUF writer copies from the model a knot was made from (the knot header's metadata): what the
// Vocabulary does not carry (byte-level BPE merges, the pre-tokenizer, special ids beyond BOS / EOS, add_* flags, the
// chat template), so that a gpt2-family GGUF written from a knot loads in llama.cpp as its source did.
#pragma once

#include "gkq/metadata.h"

namespace gkq {

// Sets in `out` the source's tokenizer.* keys other than those write_gguf derives from `vocab` (model, tokens,
// scores, token_type, bos / eos ids) when the source's tokenizer.ggml.model is `vocab`'s and it has as many tokens (or
// none: the keys of a Hugging Face tokenizer read at quantize time); nothing otherwise (a llama2.c tokenizer, a
// vocabulary given at quantize time).
void copy_source_tokenizer_keys(const Metadata& source, const Vocabulary& vocab, Metadata& out);

}  // namespace gkq
