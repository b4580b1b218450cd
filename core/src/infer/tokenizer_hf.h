// The Hugging Face sentencepiece-style loaders (tokenizer_hf.cpp), private to core/src/infer; see gkq/tokenizer.h.
#pragma once

#include "gkq/tokenizer.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gkq {

// The SPM tokenizer of a tokenizer.json `j` (read from `path`) whose BPE model has byte_fallback, with the special
// tokens of the folder it is in.
Result<Tokenizer> load_hf_byte_fallback_json(const nlohmann::json& j, const std::string& path);

}  // namespace gkq
