// Tokenizer: one interface over the tokenizer families llama.cpp knows, one implementation (session) per family,
// as llama.cpp's llama-vocab.cpp has them:
//
// - Spm: sentencepiece-style BPE over a scored vocabulary, as llama2.c's run.c does it — from a llama2.c
//   tokenizer.bin, from the llama (SPM) vocabulary embedded in a GGUF file (llama-1/2, mistral, phi-3, gemma), or
//   from a Hugging Face folder: its sentencepiece tokenizer.model, or a tokenizer.json whose BPE model has
//   byte_fallback (sentencepiece-style BPE, merge ranks becoming the scores: see tokenizer_hf.cpp).
// - Bpe: byte-level BPE (GPT-2 family) over ranked merges — from a GGUF vocabulary with tokenizer.ggml.model
//   "gpt2" or a Hugging Face tokenizer.json ("BPE" model with a ByteLevel pre-tokenizer). The text is split by
//   the pre-tokenizer regexes chosen by tokenizer.ggml.pre (gpt-2, llama-bpe/llama3, qwen2, deepseek-llm;
//   PCRE2 in UTF mode with Unicode properties), each word's bytes mapped to GPT-2's printable characters, and
//   the lowest-ranked adjacent pair merged until none is a merge (llama.cpp's llm_tokenizer_bpe_session).
//
// SPM encode() follows run.c's encode(): optional BOS, a dummy-prefix " " token when the text is not empty, one
// token per UTF-8 character (up to 4 bytes) found in the vocabulary, byte-fallback tokens <0xXX> for the
// bytes of a character that is not, then repeatedly the highest-scoring adjacent pair is merged (the
// leftmost among equal scores) until no pair forms a vocabulary piece. It produces run.c's tokens exactly;
// merging uses a priority queue instead of run.c's rescans, so long texts encode in O(n log n). A GGUF (and Hugging
// Face) vocabulary is merged as llama.cpp's llm_tokenizer_spm_session merges it: any pair that forms a token, not
// only those scoring above run.c's -1e10.
// One deliberate difference: run.c emits id byte+3 for a byte without a piece even when the vocabulary has
// no byte tokens (a character-level vocabulary), which names an unrelated character or runs past the
// vocabulary; here such a character becomes the unknown token (id 0, sentencepiece's <unk>), one per character.
// A run of them is not fused into one <unk> as sentencepiece and a tokenizer.json with fuse_unk make it: llama.cpp
// has neither the notion nor a GGUF key for it (its SPM session emits each byte of such a character through
// llama_vocab::byte_to_token, which throws when the vocabulary has no token for the byte), so a Hugging Face folder
// tokenizes as the knot and the GGUF made from it do.
//
// Special tokens: with `parse_special` the text of a control token (GGUF token type CONTROL, a tokenizer.json
// added token marked special) becomes that token, as llama.cpp's tokenizer_st_partition does; user-defined
// tokens (BPE and SPM) are always matched first (llama.cpp and Hugging Face do the same).
//
// User-defined and control tokens are matched as their text is stored, as llama.cpp's tokenizer_st_partition does:
// convert_hf_to_gguf.py stores a user-defined token's U+2581 as spaces (Gemma's runs of spaces), so such a token
// matches the spaces of the text; one stored with U+2581 matches only that character. The SPM session matches the
// other tokens against the text with its spaces as U+2581 (llama_escape_whitespace), so a U+2581 in the text is a
// space.
//
// decode() follows run.c's decode(): the piece of a token, with the leading space dropped after BOS and a
// byte token <0xXX> turned into its raw byte. GGUF pieces have their U+2581 '▁' turned into spaces (not those of
// user-defined and control tokens, which are their text as stored, as llama.cpp's token_to_piece has them) and
// control tokens decode to nothing. A BPE token decodes to the bytes its characters stand for, so decoding
// an encoded text gives the text back.
#pragma once

#include "gkq/metadata.h"
#include "gkq/status.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gkq {

enum class TokenizerFamily { Spm, Bpe };

// "spm" (sentencepiece-style BPE over scores), "bpe" (byte-level BPE over merges).
std::string_view tokenizer_family_name(TokenizerFamily f);

struct BpeModel;  // private (core/src/infer/tokenizer_bpe.h)

// The special tokens beside BOS / EOS that llama.cpp reads from tokenizer.ggml.<name>_token_id keys (llama-arch.cpp's
// LLM_KV_TOKENIZER_*_ID) or, without the key, finds by their text (llama_vocab::impl::load); -1 when none.
struct SpecialIds {
    int32_t eot = -1;      // eot_token_id: end of turn ("<|eot_id|>", "<|im_end|>", "<end_of_turn>", ...)
    int32_t eom = -1;      // eom_token_id: end of message ("<|eom_id|>", Llama 3.1's tool calls)
    int32_t fim_pre = -1;  // fim_pre_token_id (or the older prefix_token_id): fill-in-the-middle prefix
    int32_t fim_suf = -1;  // fim_suf_token_id (suffix_token_id): suffix
    int32_t fim_mid = -1;  // fim_mid_token_id (middle_token_id): middle
    int32_t fim_pad = -1;  // fim_pad_token_id: padding
    int32_t fim_rep = -1;  // fim_rep_token_id: repository name
    int32_t fim_sep = -1;  // fim_sep_token_id: file separator
};

// The ids the tokenizer.ggml.*_token_id keys of `meta` give (-1 where there is none), read as llama.cpp reads them: an
// older prefix/suffix/middle_token_id wins over fim_pre/suf/mid. Corrupt naming the key when a value is no token id
// below `n_tokens`.
Result<SpecialIds> special_ids_from_keys(const Metadata& meta, size_t n_tokens, const std::string& label);
// The ids llama.cpp finds by text in a vocabulary without those keys (its token texts as stored): for each, the token
// whose text comes first in llama.cpp's list, the lowest id among equals.
SpecialIds special_ids_by_text(const std::vector<std::string>& stored_tokens);
// The keys (tokenizer.ggml.eot_token_id, ...) and ids of the set fields of `ids`, in SpecialIds' order.
std::vector<std::pair<std::string, int32_t>> special_id_keys(const SpecialIds& ids);
// What special_ids_by_text() finds in `stored_tokens` that no key of `meta` states (what a GGUF writer adds so that
// llama.cpp need not look by text); Corrupt as special_ids_from_keys().
Result<SpecialIds> special_ids_unstated(const Metadata& meta, const std::vector<std::string>& stored_tokens,
                                        const std::string& label);

class Tokenizer {
public:
    // A llama2.c tokenizer.bin holding exactly `vocab_size` tokens (ids: <unk> 0, BOS 1, EOS 2).
    static Result<Tokenizer> load_llama2c(const std::string& path, int64_t vocab_size);
    // A vocabulary read with a model: model "llama2.c" (tokenizer.bin pieces) or "llama" (GGUF SPM pieces).
    // `label` names it in errors (the file path). A "gpt2" vocabulary needs its merges: from_metadata().
    static Result<Tokenizer> from_vocabulary(const Vocabulary& vocab, const std::string& label);
    // A GGUF vocabulary with the rest of its tokenizer.ggml.* keys (merges, pre, eot/padding ids,
    // add_bos_token): every family. Unsupported pre-tokenizers fail with Unsupported naming the key's value.
    static Result<Tokenizer> from_metadata(const Metadata& meta, const Vocabulary& vocab, const std::string& label);
    // A Hugging Face tokenizer.json: model "BPE" with a ByteLevel pre-tokenizer (Bpe), with the BOS/EOS tokens and
    // add_bos_token of the tokenizer_config.json beside it when there is one; or model "BPE" with byte_fallback
    // (Spm, sentencepiece-style: Llama-2, Mistral, Gemma), with the special tokens of its folder as
    // load_hf_folder() takes them.
    static Result<Tokenizer> load_hf_json(const std::string& path);
    // A sentencepiece tokenizer.model (Llama-2, Mistral, Phi-3, Gemma): the SPM tokenizer with the pieces, scores
    // and token types convert_hf_to_gguf.py would put into a GGUF, with the special tokens of the folder it is in.
    static Result<Tokenizer> load_sentencepiece(const std::string& path);
    // A Hugging Face model folder: its tokenizer.model when there is one (convert_hf_to_gguf.py tries
    // sentencepiece first), else its tokenizer.json. Special tokens and add_bos/add_eos as the converter's
    // SpecialVocab takes them: tokenizer.json's added tokens named by tokenizer_config.json's bos_token etc.,
    // then config.json's *_token_id, the first found winning; generation_config.json's eos_token_id (an id or a
    // list: its first) only when neither names one (the converter does not read it). NotFound when the folder
    // has neither file.
    static Result<Tokenizer> load_hf_folder(const std::string& dir);
    // Whether `dir` holds a tokenizer.model or a tokenizer.json.
    static bool hf_folder_has_tokenizer(const std::string& dir);
    // `path` as `gkq tokenize` takes it: a tokenizer.json or tokenizer.model, a Hugging Face folder holding one, a
    // llama2.c tokenizer .bin, or a model file or knot whose vocabulary is used (GGUF: every family); a model without
    // one (safetensors, a llama2.c checkpoint) takes the tokenizer its commands find, as tokenizer_for_model().
    static Result<Tokenizer> load(const std::string& path);

    TokenizerFamily family() const { return m_family; }
    // The pre-tokenizer's name (tokenizer.ggml.pre, or what the tokenizer.json's regex is); empty for Spm.
    const std::string& pre() const { return m_pre; }
    int32_t vocab_size() const { return static_cast<int32_t>(m_pieces.size()); }
    int32_t bos_id() const { return m_bos_id; }
    int32_t eos_id() const { return m_eos_id; }
    // End of turn (llama.cpp's special_eot_id): tokenizer.ggml.eot_token_id, else the token of the first of llama.cpp's
    // end-of-turn texts the vocabulary holds ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", ...); -1 when
    // none. Found by text, such a token (as every one special_ids() finds by text, and the end-of-generation ones) is a
    // control token, as llama.cpp types them.
    int32_t eot_id() const { return m_special_ids.eot; }
    int32_t eom_id() const { return m_special_ids.eom; }  // end of message: tokenizer.ggml.eom_token_id, "<|eom_id|>"
    // EOT, EOM and the fill-in-the-middle tokens: from the keys of a GGUF (knot, tokenizer folder), else by text.
    const SpecialIds& special_ids() const { return m_special_ids; }
    // Whether generation ends at `id`, as llama.cpp's llama_vocab_is_eog: EOS, EOT, EOM, the FIM pad / repository /
    // separator tokens and every token whose text llama.cpp ends generation at ("</s>", "<|endoftext|>", ...).
    bool is_eog(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const { return m_eog_ids; }  // ascending
    int32_t pad_id() const { return m_pad_id; }                        // -1 when none
    int32_t unk_id() const { return m_unk_id; }
    bool add_bos() const { return m_add_bos; }  // whether the model's prompts start with BOS
    bool add_eos() const { return m_add_eos; }  // whether they end with EOS (tokenizer_config add_eos_token)
    // SPM: whether a text (and a text after a special token) gets sentencepiece's dummy-prefix space.
    bool add_space_prefix() const { return m_add_space_prefix; }
    bool has_byte_fallback() const { return m_has_byte_tokens; }
    // The piece of `id` as text (spaces as ' ', BPE: the bytes it stands for), before decode's rules; empty for
    // an id out of range.
    const std::string& piece(int32_t id) const;
    float score(int32_t id) const;
    bool is_control(int32_t id) const;  // a control token (decodes to nothing)

    std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const;
    std::vector<int32_t> encode(std::string_view text, bool bos, bool eos, bool parse_special) const;
    // The bytes `token` adds to the text when it follows `prev_token`.
    std::string_view decode(int32_t prev_token, int32_t token) const;
    // The text of a whole token sequence (pieces decoded in turn; the first one as if after BOS when
    // `after_bos` is set).
    std::string decode_all(const std::vector<int32_t>& tokens, bool after_bos = true) const;

private:
    // from_vocabulary() with the special ids the tokenizer.ggml.*_token_id keys give.
    static Result<Tokenizer> from_vocabulary(const Vocabulary& v, const std::string& label, const SpecialIds& keyed);
    int32_t lookup(std::string_view s) const;  // -1 when no mergeable token's match_text() is `s`
    // What the SPM session matches a token as: its text as stored for a GGUF vocabulary (the session's text has its
    // spaces as U+2581), its piece for a llama2.c one.
    const std::string& match_text(int32_t id) const;
    Status build();
    // The SPM session: run.c's encode of one text fragment.
    std::vector<int32_t> encode_spm(std::string_view text, bool bos, bool eos, bool dummy_prefix) const;
    // Text fragments and special tokens (a fragment is {-1, offset, length}; a token is {id, 0, 0}).
    struct Fragment {
        int32_t token;
        size_t offset;
        size_t length;
    };
    std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
    // The special-token pass over the token texts as stored (tokenizer_special.cpp): EOT, EOM and FIM (`keyed`'s where
    // set, else found by text), the end-of-generation ids, and the control type of the tokens found. Needs EOS set.
    void find_end_tokens(const std::vector<std::string>& stored, const SpecialIds& keyed);
    // Shared by the BPE loaders: fills the BPE tables from encoded tokens and merges.
    friend struct BpeBuilder;
    // The Hugging Face loaders (tokenizer_hf.cpp): set the special tokens and flags of the folder's files.
    friend struct HfLoader;

    TokenizerFamily m_family = TokenizerFamily::Spm;
    std::string m_pre;
    std::vector<std::string> m_pieces;        // (vocab) text of each token
    std::vector<std::string> m_stored;        // (vocab) GGUF SPM: the token texts as stored (U+2581 for spaces)
    bool m_escape_spaces = false;             // GGUF SPM: the session's text has its spaces as U+2581
    std::vector<float> m_scores;              // (vocab) merge priority
    std::vector<uint8_t> m_mergeable;         // (vocab) 1 when encode may produce the piece from text
    std::vector<int16_t> m_byte_value;        // (vocab) the byte a <0xXX> token stands for, or -1
    std::array<int32_t, 256> m_byte_token{};  // token of each byte, -1 when the vocabulary has none
    bool m_has_byte_tokens = false;
    bool m_drop_control = false;                       // GGUF: control tokens decode to ""
    std::vector<uint8_t> m_control;                    // (vocab) GGUF token_type CONTROL
    std::unordered_map<std::string, int32_t> m_index;  // piece -> lowest id, mergeable pieces only
    std::vector<int32_t> m_special;                    // control/unknown/user-defined ids, longest text first
    std::vector<uint8_t> m_user_defined;               // (vocab) GGUF token_type USER_DEFINED
    std::shared_ptr<const BpeModel> m_bpe;             // Bpe: ranks, pre-tokenizer regexes
    int32_t m_bos_id = 1;
    int32_t m_eos_id = 2;
    SpecialIds m_special_ids;
    std::vector<int32_t> m_eog_ids;  // ascending
    int32_t m_pad_id = -1;
    int32_t m_unk_id = 0;
    bool m_add_bos = true;
    bool m_add_eos = false;
    bool m_add_space_prefix = true;
    size_t m_max_piece_bytes = 0;
};

// The llama2.c tokenizer files beside a model: "tokenizer.bin" and "tok*.bin" in its folder (the folder itself when
// `model_path` is one), the model file excluded; sorted.
std::vector<std::string> tokenizers_beside(const std::string& model_path);

// The tokenizer of a model: the file `given` when set (a llama2.c tokenizer .bin, a tokenizer.json or
// tokenizer.model, a Hugging Face folder), else the model's own vocabulary with the tokenizer.ggml.* keys of the
// model's metadata (a GGUF's, or a knot header's: what quantize stored), else the one file tokenizers_beside() finds,
// else the Hugging Face tokenizer in the model's folder. Errors name the model — NotFound "M has no vocabulary and no
// tokenizer.bin or tok*.bin is next to it", InvalidArgument "M: several tokenizers next to it (A, B)" — and callers add
// how to choose one.
Result<Tokenizer> tokenizer_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                      const std::string& given = {});

// The vocabulary tokenizer_for_model() builds its tokenizer from (the one lookup, for callers that store it, as
// quantize does in a knot and export in a GGUF), with the file it came from: `source` is the tokenizer file or
// Hugging Face folder read, empty when it is the model's own `vocab`. A Hugging Face tokenizer (tokenizer.model or
// tokenizer.json, as load_hf_folder() reads it) comes as the GGUF vocabulary convert_hf_to_gguf.py writes from it:
// `vocab` (model "llama" with scores and token types, or "gpt2" with token types) and in `keys` the other
// tokenizer.ggml.* keys (model, merges, pre, padding / unknown ids, add_bos_token, add_eos_token,
// add_space_prefix), from which Tokenizer::from_metadata() builds the tokenizer the folder gives; `keys` is empty
// for the other sources. A tokenizer.json whose pre-tokenizer llama.cpp has no name for fails with Unsupported.
// Same errors as tokenizer_for_model() otherwise.
struct FoundVocabulary {
    Vocabulary vocab;
    std::string source;
    Metadata keys;
};
Result<FoundVocabulary> vocabulary_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                             const std::string& given = {});

}  // namespace gkq
