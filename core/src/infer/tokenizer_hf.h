// The Hugging Face loaders (tokenizer_hf.cpp, tokenizer_files.cpp), private to core/src/infer; see gkq/tokenizer.h.
#pragma once

#include "gkq/tokenizer.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gkq {

// A Hugging Face tokenizer as the GGUF vocabulary convert_hf_to_gguf.py writes from it (FoundVocabulary's `vocab`
// and `keys`), and what no GGUF key holds: whether runs of unknown characters become one <unk> (sentencepiece).
// Tokenizer::from_metadata(keys, vocab) plus `fuse_unk` is the tokenizer of the folder.
struct HfVocabulary {
    Vocabulary vocab;
    Metadata keys;
    bool fuse_unk = false;
};

// The SPM vocabulary of a tokenizer.json `j` (read from `path`) whose BPE model has byte_fallback, with the special
// tokens of the folder it is in.
Result<HfVocabulary> hf_byte_fallback_vocabulary(const nlohmann::json& j, const std::string& path);
// The SPM vocabulary of a sentencepiece tokenizer.model, with the special tokens of the folder it is in.
Result<HfVocabulary> hf_sentencepiece_vocabulary(const std::string& path);
// The vocabulary of a tokenizer.json (either family), of a tokenizer.model, or of a folder holding one
// (tokenizer.model first, as load_hf_folder()).
Result<HfVocabulary> hf_vocabulary(const std::string& path);
// The tokenizer of an HF vocabulary: from_metadata() and fuse_unk.
Result<Tokenizer> hf_tokenizer(const HfVocabulary& v, const std::string& label);

}  // namespace gkq
