// The end tokens of a vocabulary, as llama.cpp's llama_vocab::impl::load() finds them (src/llama-vocab.cpp,
// "auto-detect special tokens by text" and "maintain a list of tokens that cause end-of-generation"): the one place
// that knows their texts. See Tokenizer::eot_id() and Tokenizer::is_eog() in gkq/tokenizer.h.
#include "gkq/tokenizer.h"

#include <algorithm>
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

// The texts llama.cpp ends generation at (besides EOS, EOT and the FIM pad/repo/separator ids).
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

template <size_t N>
int rank_in(const std::string_view (&texts)[N], std::string_view s) {
    for (size_t i = 0; i < N; ++i)
        if (texts[i] == s) return static_cast<int>(i);
    return -1;
}

}  // namespace

int32_t eot_token_by_text(const std::vector<std::string>& stored) {
    // llama.cpp takes the first end-of-turn text its hash map of token texts yields, an order C++ leaves unspecified;
    // here the text earliest in its list (then the lowest id) wins, which gives llama.cpp's id for every vocabulary
    // of its tests that holds two (llama-bpe: <|eot_id|> over <|end_of_text|>, qwen2: <|im_end|> over <|endoftext|>,
    // phi-3: <|end|> over <|endoftext|>: tests/core/test_tokenizer_vectors.cpp).
    int32_t eot = -1;
    int best_rank = -1;
    for (size_t i = 0; i < stored.size(); ++i) {
        const int r = rank_in(kEotTexts, stored[i]);
        if (r >= 0 && (best_rank < 0 || r < best_rank)) {
            best_rank = r;
            eot = static_cast<int32_t>(i);
        }
    }
    return eot;
}

void Tokenizer::find_end_tokens(const std::vector<std::string>& stored, int32_t eot_key) {
    const auto n = static_cast<int32_t>(stored.size());
    auto in_range = [n](int32_t id) { return id >= 0 && id < n; };
    m_eot_id = in_range(eot_key) ? eot_key : eot_token_by_text(stored);
    std::vector<int32_t> eog;
    for (int32_t i = 0; i < n; ++i)
        if (rank_in(kEogTexts, stored[static_cast<size_t>(i)]) >= 0) eog.push_back(i);
    for (const int32_t id : {m_eos_id, m_eot_id})
        if (in_range(id)) eog.push_back(id);
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
    if (!in_range(eot_key)) make_control(m_eot_id);
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
