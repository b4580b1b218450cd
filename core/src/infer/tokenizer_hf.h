// The Hugging Face loaders (tokenizer_hf.cpp, tokenizer_files.cpp), private to core/src/infer; see gkq/tokenizer.h.
#pragma once

#include "gkq/tokenizer.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gkq {

// A Hugging Face tokenizer as the GGUF vocabulary convert_hf_to_gguf.py writes from it (FoundVocabulary's `vocab`
// and `keys`): Tokenizer::from_metadata(keys, vocab) is the tokenizer of the folder. What no GGUF key holds is not
// kept: sentencepiece's and tokenizer.json's fuse_unk (see gkq/tokenizer.h).
struct HfVocabulary {
    Vocabulary vocab;
    Metadata keys;
};

// The SPM vocabulary of a tokenizer.json `j` (read from `path`) whose BPE model has byte_fallback, with the special
// tokens of the folder it is in.
Result<HfVocabulary> hf_byte_fallback_vocabulary(const nlohmann::json& j, const std::string& path);
// The SPM vocabulary of a sentencepiece tokenizer.model, with the special tokens of the folder it is in.
Result<HfVocabulary> hf_sentencepiece_vocabulary(const std::string& path);
// The vocabulary of a tokenizer.json (either family), of a tokenizer.model, or of a folder holding one
// (tokenizer.model first, as load_hf_folder()).
Result<HfVocabulary> hf_vocabulary(const std::string& path);
// The tokenizer of an HF vocabulary: from_metadata().
Result<Tokenizer> hf_tokenizer(const HfVocabulary& v, const std::string& label);

}  // namespace gkq
