// Tokenizer: sentencepiece-style BPE over a scored vocabulary, as llama2.c's run.c does it — from a llama2.c
// tokenizer.bin or from the llama (SPM) vocabulary embedded in a GGUF file.
//
// encode() follows run.c's encode(): optional BOS, a dummy-prefix " " token when the text is not empty, one
// token per UTF-8 character (up to 4 bytes) found in the vocabulary, byte-fallback tokens <0xXX> for the
// bytes of a character that is not, then repeatedly the highest-scoring adjacent pair is merged (the
// leftmost among equal scores) until no pair forms a vocabulary piece. It produces run.c's tokens exactly;
// merging uses a priority queue instead of run.c's rescans, so long texts encode in O(n log n).
// One deliberate difference: run.c emits id byte+3 for a byte without a piece even when the vocabulary has
// no byte tokens (a character-level vocabulary), which names an unrelated character or runs past the
// vocabulary; here such a character becomes the unknown token (id 0, sentencepiece's <unk>).
//
// decode() follows run.c's decode(): the piece of a token, with the leading space dropped after BOS and a
// byte token <0xXX> turned into its raw byte. GGUF pieces have their U+2581 '▁' turned into spaces and
// control tokens decode to nothing.
#pragma once

#include "gkq/metadata.h"
#include "gkq/status.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gkq {

class Tokenizer {
public:
    // A llama2.c tokenizer.bin holding exactly `vocab_size` tokens (ids: <unk> 0, BOS 1, EOS 2).
    static Result<Tokenizer> load_llama2c(const std::string& path, int64_t vocab_size);
    // A vocabulary read with a model: model "llama2.c" (tokenizer.bin pieces) or "llama" (GGUF SPM pieces).
    // `label` names it in errors (the file path).
    static Result<Tokenizer> from_vocabulary(const Vocabulary& vocab, const std::string& label);

    int32_t vocab_size() const { return static_cast<int32_t>(m_pieces.size()); }
    int32_t bos_id() const { return m_bos_id; }
    int32_t eos_id() const { return m_eos_id; }
    int32_t unk_id() const { return m_unk_id; }
    bool has_byte_fallback() const { return m_has_byte_tokens; }
    // The piece of `id` as text (spaces as ' '), before decode's rules; empty for an id out of range.
    const std::string& piece(int32_t id) const;
    float score(int32_t id) const;

    std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const;
    // The bytes `token` adds to the text when it follows `prev_token`.
    std::string_view decode(int32_t prev_token, int32_t token) const;
    // The text of a whole token sequence (pieces decoded in turn; the first one as if after BOS when
    // `after_bos` is set).
    std::string decode_all(const std::vector<int32_t>& tokens, bool after_bos = true) const;

private:
    int32_t lookup(std::string_view s) const;  // -1 when no mergeable piece is `s`
    Status build();

    std::vector<std::string> m_pieces;        // (vocab) text of each token
    std::vector<float> m_scores;              // (vocab) merge priority
    std::vector<uint8_t> m_mergeable;         // (vocab) 1 when encode may produce the piece from text
    std::vector<int16_t> m_byte_value;        // (vocab) the byte a <0xXX> token stands for, or -1
    std::array<int32_t, 256> m_byte_token{};  // token of each byte, -1 when the vocabulary has none
    bool m_has_byte_tokens = false;
    bool m_drop_control = false;                       // GGUF: control tokens decode to ""
    std::vector<uint8_t> m_control;                    // (vocab) GGUF token_type CONTROL
    std::unordered_map<std::string, int32_t> m_index;  // piece -> lowest id, mergeable pieces only
    int32_t m_bos_id = 1;
    int32_t m_eos_id = 2;
    int32_t m_unk_id = 0;
    size_t m_max_piece_bytes = 0;
};

// The llama2.c tokenizer files beside a model: "tokenizer.bin" and "tok*.bin" in its folder (the folder itself when
// `model_path` is one), the model file excluded; sorted.
std::vector<std::string> tokenizers_beside(const std::string& model_path);

// The tokenizer of a model: the llama2.c file `given` when set, else the model's own vocabulary, else the one file
// tokenizers_beside() finds. Errors name the model — NotFound "M has no vocabulary and no tokenizer.bin or tok*.bin is
// next to it", InvalidArgument "M: several tokenizers next to it (A, B)" — and callers add how to choose one.
Result<Tokenizer> tokenizer_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                      const std::string& given = {});

// The vocabulary tokenizer_for_model() builds its tokenizer from (the one lookup, for callers that store it, as
// quantize does in a knot), with the file it came from: `source` is the tokenizer file read, empty when it is the
// model's own `vocab`. Same errors as tokenizer_for_model().
struct FoundVocabulary {
    Vocabulary vocab;
    std::string source;
};
Result<FoundVocabulary> vocabulary_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                             const std::string& given = {});

}  // namespace gkq
