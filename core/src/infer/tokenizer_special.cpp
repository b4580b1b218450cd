// The special tokens of a vocabulary beside BOS / EOS, as llama.cpp's llama_vocab::impl::load() finds them
// (src/llama-vocab.cpp: the special_token_types keys, "auto-detect special tokens by text" and "maintain a list of
// tokens that cause end-of-generation"): the one place that knows their keys and texts. See SpecialIds,
// Tokenizer::special_ids() and Tokenizer::is_eog() in gkq/tokenizer.h.
#include "gkq/tokenizer.h"

#include <algorithm>
#include <span>
#include <string_view>

namespace gkq {

namespace {

// The texts llama.cpp takes as end of turn when tokenizer.ggml.eot_token_id is absent, in its order.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",  // granite
    "<EOT>",
    "_<EOT>",
    "[EOT]",                  // Kimi-K2
    "<｜end▁of▁sentence｜>",  // DeepSeek
    "<end_of_utterance>",     // smoldocling
};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {
    "<|fim_prefix|>",   // Qwen
    "<fim-prefix>",     //
    "<fim_prefix>",     // Granite
    "<｜fim▁begin｜>",  // DeepSeek
    "<PRE>",            //
    "▁<PRE>",           // CodeLlama
    "<|code_prefix|>",  // GLM-4.5
    "<|prefix|>",       // Falcon-H1-Tiny-Coder
};
constexpr std::string_view kFimSufTexts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",    "<｜fim▁hole｜>",
    "<SUF>",          "▁<SUF>",       "<|code_suffix|>", "<|suffix|>",
};
constexpr std::string_view kFimMidTexts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",    "<｜fim▁end｜>",
    "<MID>",          "▁<MID>",       "<|code_middle|>", "<|middle|>",
};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

// One special token: its field, its key (tokenizer.ggml.<key>), the older key llama.cpp reads after it (so it wins),
// the texts it is found by, and whether it ends generation.
struct SpecialRow {
    int32_t SpecialIds::*field;
    std::string_view key;
    std::string_view older_key;
    std::span<const std::string_view> texts;
    bool ends_generation;
};
constexpr SpecialRow kSpecialRows[] = {
    {&SpecialIds::eot, "eot_token_id", {}, kEotTexts, true},
    {&SpecialIds::eom, "eom_token_id", {}, kEomTexts, true},
    {&SpecialIds::fim_pre, "fim_pre_token_id", "prefix_token_id", kFimPreTexts, false},
    {&SpecialIds::fim_suf, "fim_suf_token_id", "suffix_token_id", kFimSufTexts, false},
    {&SpecialIds::fim_mid, "fim_mid_token_id", "middle_token_id", kFimMidTexts, false},
    {&SpecialIds::fim_pad, "fim_pad_token_id", {}, kFimPadTexts, true},
    {&SpecialIds::fim_rep, "fim_rep_token_id", {}, kFimRepTexts, true},
    {&SpecialIds::fim_sep, "fim_sep_token_id", {}, kFimSepTexts, true},
};

// The texts llama.cpp ends generation at (besides EOS and the ids above that end it).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",  // deepseek-ocr
    "[e~[",                   // minimax-m2/m3
};

int rank_in(std::span<const std::string_view> texts, std::string_view s) {
    for (size_t i = 0; i < texts.size(); ++i)
        if (texts[i] == s) return static_cast<int>(i);
    return -1;
}

// The token whose text comes first in `texts` (the lowest id among equals); -1 when none.
int32_t first_by_text(const std::vector<std::string>& stored, std::span<const std::string_view> texts) {
    // llama.cpp takes the first text its hash map of token texts yields, an order C++ leaves unspecified; the text
    // earliest in its list gives llama.cpp's id for every vocabulary of its tests that holds two (llama-bpe:
    // <|eot_id|> over <|end_of_text|>, qwen2: <|im_end|> over <|endoftext|>, phi-3: <|end|> over <|endoftext|>:
    // tests/core/test_tokenizer_vectors.cpp).
    int32_t found = -1;
    int best = -1;
    for (size_t i = 0; i < stored.size(); ++i) {
        const int r = rank_in(texts, stored[i]);
        if (r >= 0 && (best < 0 || r < best)) {
            best = r;
            found = static_cast<int32_t>(i);
        }
    }
    return found;
}

}  // namespace

Result<SpecialIds> special_ids_from_keys(const Metadata& meta, size_t n_tokens, const std::string& label) {
    SpecialIds ids;
    for (const SpecialRow& row : kSpecialRows) {
        for (const std::string_view name : {row.key, row.older_key}) {
            if (name.empty()) continue;
            const std::string key = "tokenizer.ggml." + std::string(name);
            const MetaValue* v = meta.find(key);
            if (v == nullptr) continue;
            const std::optional<int64_t> id = v->as_int();
            if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n_tokens)
                return error(StatusCode::Corrupt, label + ": metadata '" + key + "' = " + v->to_display() +
                                                      " is not a token id below " + std::to_string(n_tokens));
            ids.*row.field = static_cast<int32_t>(*id);
        }
    }
    return ids;
}

SpecialIds special_ids_by_text(const std::vector<std::string>& stored) {
    SpecialIds ids;
    for (const SpecialRow& row : kSpecialRows) ids.*row.field = first_by_text(stored, row.texts);
    return ids;
}

std::vector<std::pair<std::string, int32_t>> special_id_keys(const SpecialIds& ids) {
    std::vector<std::pair<std::string, int32_t>> out;
    for (const SpecialRow& row : kSpecialRows)
        if (ids.*row.field >= 0) out.emplace_back("tokenizer.ggml." + std::string(row.key), ids.*row.field);
    return out;
}

Result<SpecialIds> special_ids_unstated(const Metadata& meta, const std::vector<std::string>& stored,
                                        const std::string& label) {
    auto keyed = special_ids_from_keys(meta, stored.size(), label);
    if (!keyed) return keyed.status();
    SpecialIds found = special_ids_by_text(stored);
    for (const SpecialRow& row : kSpecialRows)
        if ((*keyed).*row.field >= 0) found.*row.field = -1;
    return found;
}

void Tokenizer::find_end_tokens(const std::vector<std::string>& stored, const SpecialIds& keyed) {
    const auto n = static_cast<int32_t>(stored.size());
    auto in_range = [n](int32_t id) { return id >= 0 && id < n; };
    std::vector<int32_t> by_text;  // found by text: llama.cpp types them control
    std::vector<int32_t> eog;
    for (const SpecialRow& row : kSpecialRows) {
        int32_t& id = m_special_ids.*row.field;
        id = keyed.*row.field;
        if (!in_range(id)) {
            id = first_by_text(stored, row.texts);
            by_text.push_back(id);
        }
        if (row.ends_generation && in_range(id)) eog.push_back(id);
    }
    for (int32_t i = 0; i < n; ++i)
        if (rank_in(kEogTexts, stored[static_cast<size_t>(i)]) >= 0) eog.push_back(i);
    if (in_range(m_eos_id)) eog.push_back(m_eos_id);
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

    // llama.cpp's two work-arounds: o200k_harmony's and solar-open's <|end|> is no end when <|return|> and <|call|>
    // (or <|calls|> and <|flush|>) are; Gemma 4's and paddleocr's </s> none when <|tool_response> is.
    auto find = [&](std::string_view text) {
        for (const int32_t id : eog)
            if (stored[static_cast<size_t>(id)] == text) return id;
        return int32_t{-1};
    };
    const int32_t end = find("<|end|>");
    const bool call = find("<|call|>") >= 0 || find("<|calls|>") >= 0;  // llama.cpp's has_call takes either
    if (end >= 0 && call && (find("<|return|>") >= 0 || find("<|flush|>") >= 0))
        eog.erase(std::find(eog.begin(), eog.end(), end));
    if (const int32_t s = find("</s>"); s >= 0 && find("<|tool_response>") >= 0)
        eog.erase(std::find(eog.begin(), eog.end(), s));
    m_eog_ids = std::move(eog);

    // llama.cpp types every token its texts name as a control token ("control-looking token"): its text is a special
    // token's with --parse-special, and it decodes to nothing. Not in a llama2.c vocabulary, which has no types.
    if (!m_drop_control) return;
    bool added = false;
    auto make_control = [&](int32_t id) {
        if (!in_range(id) || m_control[static_cast<size_t>(id)]) return;
        m_control[static_cast<size_t>(id)] = 1;
        // A control token's piece is its raw text (a normal one's the bytes its characters stand for, or its U+2581
        // as spaces).
        m_pieces[static_cast<size_t>(id)] = stored[static_cast<size_t>(id)];
        if (!m_pieces[static_cast<size_t>(id)].empty() &&
            std::find(m_special.begin(), m_special.end(), id) == m_special.end()) {
            m_special.push_back(id);
            added = true;
        }
    };
    for (const int32_t id : by_text) make_control(id);
    for (const int32_t id : m_eog_ids)
        if (rank_in(kEogTexts, stored[static_cast<size_t>(id)]) >= 0) make_control(id);
    if (added)
        std::stable_sort(m_special.begin(), m_special.end(), [&](int32_t a, int32_t b) {
            return m_pieces[static_cast<size_t>(a)].size() > m_pieces[static_cast<size_t>(b)].size();
        });
}

bool Tokenizer::is_eog(int32_t id) const {
    return std::binary_search(m_eog_ids.begin(), m_eog_ids.end(), id);
}

}  // namespace gkq
