// The byte-level BPE session (GPT-2 family): pre-tokenizer regexes (PCRE2), GPT-2's byte-to-character map,
// merges by rank. Private to core/src/infer; see gkq/tokenizer.h.
#pragma once

#include "gkq/status.h"
#include "gkq/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gkq {

// A pre-tokenizer llama.cpp names in tokenizer.ggml.pre: its regexes (applied in turn, each splitting the pieces
// the previous one left) and the defaults llama.cpp sets with it.
struct PreTokenizer {
    std::string name;
    std::vector<std::string> regexes;
    bool ignore_merges = false;  // a word that is a token is taken whole
    bool add_bos = false;
};

// The pre-tokenizer called `name`; Unsupported naming it (and the supported ones) for the others.
Result<PreTokenizer> pre_tokenizer_named(const std::string& name, const std::string& label);

struct BpeModel {
    struct Regex;
    std::vector<std::shared_ptr<const Regex>> regexes;
    bool ignore_merges = false;
    std::unordered_map<std::string, int32_t> text_to_id;  // token text (byte-encoded) -> lowest id
    std::unordered_map<std::string, int32_t> ranks;       // "left right" -> merge rank

    // The words the pre-tokenizer splits `text` into, each byte-encoded.
    std::vector<std::string> split(std::string_view text) const;
    // llama.cpp's llm_tokenizer_bpe_session::tokenize: appends the tokens of `text` to `out`.
    void tokenize(std::string_view text, std::vector<int32_t>& out) const;
};

// What the GGUF and tokenizer.json loaders read: tokens as stored (byte-encoded), their GGUF token types,
// merges "left right" in rank order.
struct BpeSpec {
    PreTokenizer pre;
    std::vector<std::string> tokens;
    std::vector<int32_t> token_types;  // empty or one per token
    std::vector<std::string> merges;
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    SpecialIds special;  // the ids tokenizer.ggml.*_token_id keys give (EOT, EOM, FIM)
    int32_t pad_id = -1;
    int32_t unk_id = -1;
};

struct BpeBuilder {
    static Result<Tokenizer> build(BpeSpec spec, const std::string& label);
};

// GPT-2's bytes_to_unicode(): the UTF-8 text of the character byte `b` is written as, and its inverse applied to a
// whole token (characters outside the map are kept as they are).
const std::string& byte_to_chars(uint8_t b);
std::string chars_to_bytes(std::string_view text);

}  // namespace gkq
