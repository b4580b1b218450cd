// Tokenizer: the shared interface (special tokens, decode) and the SPM session, run.c's encode()/decode() over
// llama2.c and GGUF (SPM) vocabularies. The BPE session is tokenizer_bpe.cpp. See tokenizer.h.
#include "gkq/tokenizer.h"

#include "gkq/model_file.h"
#include "infer/tokenizer_bpe.h"

#include <algorithm>
#include <array>
#include <climits>
#include <queue>

namespace gkq {

namespace {

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeUnknown = 2;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeUserDefined = 4;
constexpr int32_t kTypeByte = 6;

// run.c's best_score starts at -1e10 and only a strictly higher score wins.
constexpr float kNoMergeScore = -1e10f;

const std::string kEmpty;

const std::array<char, 256>& byte_chars() {
    static const std::array<char, 256> table = [] {
        std::array<char, 256> t{};
        for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = static_cast<char>(i);
        return t;
    }();
    return table;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// The byte of a "<0xXX>" piece, or -1.
int byte_piece_value(std::string_view p) {
    if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
    const int hi = hex_value(p[3]);
    const int lo = hex_value(p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, sentencepiece's word-boundary mark

std::string spm_to_text(const std::string& piece) {
    std::string out;
    out.reserve(piece.size());
    for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
            out.push_back(' ');
            i += kSpaceMark.size();
        } else {
            out.push_back(piece[i++]);
        }
    }
    return out;
}

}  // namespace

// ----------------------------------------------------------------------------
// construction

std::string_view tokenizer_family_name(TokenizerFamily f) {
    switch (f) {
        case TokenizerFamily::Spm: return "spm";
        case TokenizerFamily::Bpe: return "bpe";
    }
    return "?";
}

Result<Tokenizer> Tokenizer::load_llama2c(const std::string& path, int64_t vocab_size) {
    auto vocab = read_llama2c_tokenizer(path, vocab_size);
    if (!vocab) return vocab.status();
    return from_vocabulary(*vocab, path);
}

Result<Tokenizer> Tokenizer::from_vocabulary(const Vocabulary& v, const std::string& label) {
    return from_vocabulary(v, label, SpecialIds{});
}

Result<Tokenizer> Tokenizer::from_vocabulary(const Vocabulary& v, const std::string& label, const SpecialIds& keyed) {
    const bool spm = v.model == "llama";
    if (v.model == "gpt2")
        return error(StatusCode::Unsupported, label +
                                                  ": a byte-level BPE (gpt2) vocabulary needs its merges "
                                                  "(tokenizer.ggml.merges), which a bare vocabulary does not carry");
    if (!spm && v.model != "llama2.c")
        return error(StatusCode::Unsupported, label + ": tokenizer model '" + v.model +
                                                  "' is not supported (llama2.c tokenizer.bin and GGUF 'llama' "
                                                  "sentencepiece vocabularies are)");
    const size_t n = v.tokens.size();
    if (n == 0) return error(StatusCode::NotFound, label + ": the vocabulary is empty");
    if (n > static_cast<size_t>(INT32_MAX))
        return error(StatusCode::Unsupported, label + ": " + std::to_string(n) + " tokens are too many");
    if (v.scores.size() != n)
        return error(StatusCode::Corrupt, label + ": " + std::to_string(v.scores.size()) + " scores for " +
                                              std::to_string(n) + " tokens (BPE merges need one score per token)");
    if (!v.token_types.empty() && v.token_types.size() != n)
        return error(StatusCode::Corrupt, label + ": " + std::to_string(v.token_types.size()) + " token types for " +
                                              std::to_string(n) + " tokens");

    Tokenizer t;
    t.m_scores = v.scores;
    t.m_pieces.reserve(n);
    t.m_mergeable.assign(n, 1);
    t.m_control.assign(n, 0);
    t.m_drop_control = spm;
    t.m_escape_spaces = spm;
    t.m_user_defined.reserve(n);
    auto type_of = [&](size_t i) { return v.token_types.empty() ? kTypeNormal : v.token_types[i]; };
    for (size_t i = 0; i < n; ++i) {
        // llama.cpp's token_to_piece: a control or user-defined token is its text as stored, any other one with its
        // U+2581 as spaces.
        const bool as_stored = !spm || type_of(i) == kTypeControl || type_of(i) == kTypeUserDefined;
        t.m_pieces.push_back(as_stored ? v.tokens[i] : spm_to_text(v.tokens[i]));
    }
    auto in_range = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n; };
    if (spm) {
        t.m_bos_id = in_range(v.bos_id) ? v.bos_id : -1;
        t.m_eos_id = in_range(v.eos_id) ? v.eos_id : -1;
        t.m_unk_id = -1;
        for (size_t i = 0; i < n; ++i) {
            const int32_t type = type_of(i);
            // Only text pieces take part in merges; specials and bytes never come out of a merge in SPM.
            t.m_mergeable[i] = type == kTypeNormal || type == kTypeUserDefined;
            t.m_control[i] = type == kTypeControl;
            t.m_user_defined.push_back(type == kTypeUserDefined);
            if ((type == kTypeControl || type == kTypeUserDefined || type == kTypeUnknown) && !t.m_pieces[i].empty())
                t.m_special.push_back(static_cast<int32_t>(i));
            if (type == kTypeUnknown && t.m_unk_id < 0) t.m_unk_id = static_cast<int32_t>(i);
            if (type == kTypeByte || (v.token_types.empty() && byte_piece_value(v.tokens[i]) >= 0))
                t.m_mergeable[i] = 0;
        }
        if (t.m_bos_id >= 0) t.m_mergeable[static_cast<size_t>(t.m_bos_id)] = 0;
        if (t.m_eos_id >= 0) t.m_mergeable[static_cast<size_t>(t.m_eos_id)] = 0;
        if (t.m_unk_id < 0) t.m_unk_id = 0;
        std::stable_sort(t.m_special.begin(), t.m_special.end(), [&](int32_t a, int32_t b) {
            return t.m_pieces[static_cast<size_t>(a)].size() > t.m_pieces[static_cast<size_t>(b)].size();
        });
    } else {
        // llama2.c: sentencepiece's fixed ids, every piece searchable as in run.c's sorted_vocab.
        t.m_bos_id = in_range(1) ? 1 : -1;
        t.m_eos_id = in_range(2) ? 2 : -1;
        t.m_unk_id = 0;
        t.m_user_defined.assign(n, 0);
    }
    // A GGUF vocabulary is matched as llama.cpp's SPM session matches it: the text with its spaces as U+2581 against
    // the tokens as stored.
    if (spm) t.m_stored = v.tokens;
    if (Status s = t.build(); !s) return s.with_context(label);
    t.find_end_tokens(v.tokens, keyed);
    return t;
}

Status Tokenizer::build() {
    m_byte_value.assign(m_pieces.size(), -1);
    m_byte_token.fill(-1);
    m_index.reserve(m_pieces.size());
    for (size_t i = 0; i < m_pieces.size(); ++i) {
        const int b = byte_piece_value(m_pieces[i]);
        if (b >= 0) {
            m_byte_value[i] = static_cast<int16_t>(b);
            if (m_byte_token[static_cast<size_t>(b)] < 0)
                m_byte_token[static_cast<size_t>(b)] = static_cast<int32_t>(i);
            m_has_byte_tokens = true;
        }
        if (m_mergeable[i]) {
            const std::string& key = match_text(static_cast<int32_t>(i));
            m_index.emplace(key, static_cast<int32_t>(i));  // keeps the lowest id of a duplicate
            m_max_piece_bytes = std::max(m_max_piece_bytes, key.size());
        }
    }
    return Status::ok();
}

const std::string& Tokenizer::match_text(int32_t id) const {
    return m_escape_spaces ? m_stored[static_cast<size_t>(id)] : m_pieces[static_cast<size_t>(id)];
}

const std::string& Tokenizer::piece(int32_t id) const {
    return id >= 0 && id < vocab_size() ? m_pieces[static_cast<size_t>(id)] : kEmpty;
}

float Tokenizer::score(int32_t id) const {
    return id >= 0 && id < vocab_size() ? m_scores[static_cast<size_t>(id)] : 0.0f;
}

bool Tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < vocab_size() && m_control[static_cast<size_t>(id)] != 0;
}

int32_t Tokenizer::lookup(std::string_view s) const {
    if (s.size() > m_max_piece_bytes) return -1;
    auto it = m_index.find(std::string(s));
    return it == m_index.end() ? -1 : it->second;
}

// ----------------------------------------------------------------------------
// encode

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool bos, bool eos) const {
    return encode(text, bos, eos, false);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool bos, bool eos, bool parse_special) const {
    // Without special-token parsing an SPM text without user-defined tokens is one fragment: run.c's encode.
    const auto user_defined = [&](int32_t id) {
        return m_user_defined[static_cast<size_t>(id)] != 0 && m_control[static_cast<size_t>(id)] == 0;
    };
    if (m_family == TokenizerFamily::Spm && !parse_special &&
        std::none_of(m_special.begin(), m_special.end(), user_defined))
        return encode_spm(text, bos, eos, m_add_space_prefix);
    std::vector<int32_t> out;
    if (bos && m_bos_id >= 0) out.push_back(m_bos_id);
    bool prev_special = true;  // llama.cpp: an SPM fragment at the start or after a special token gets the " "
    for (const Fragment& f : partition(text, parse_special)) {
        if (f.token >= 0) {
            out.push_back(f.token);
            prev_special = true;
            continue;
        }
        const std::string_view sub = text.substr(f.offset, f.length);
        if (m_family == TokenizerFamily::Spm) {
            const std::vector<int32_t> ids = encode_spm(sub, false, false, prev_special && m_add_space_prefix);
            out.insert(out.end(), ids.begin(), ids.end());
        } else {
            m_bpe->tokenize(sub, out);
        }
        prev_special = false;
    }
    if (eos && m_eos_id >= 0) out.push_back(m_eos_id);
    return out;
}

std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
    // llama.cpp's tokenizer_st_partition: each special token, longest first, splits the text fragments left.
    std::vector<Fragment> frags;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    for (const int32_t id : m_special) {
        // Without parse_special only user-defined tokens split the text; a user-defined token llama.cpp types as
        // control by its text (Gemma's "</s>", an end-of-generation text) does not.
        const auto i = static_cast<size_t>(id);
        if (!parse_special && (!m_user_defined[i] || m_control[i])) continue;
        const std::string& s = m_pieces[static_cast<size_t>(id)];
        std::vector<Fragment> next;
        next.reserve(frags.size());
        for (const Fragment& f : frags) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            size_t pos = f.offset;
            const size_t end = f.offset + f.length;
            for (;;) {
                const size_t at = text.substr(0, end).find(s, pos);
                if (at == std::string_view::npos) break;
                if (at > pos) next.push_back({-1, pos, at - pos});
                next.push_back({id, 0, 0});
                pos = at + s.size();
            }
            if (pos < end) next.push_back({-1, pos, end - pos});
        }
        frags = std::move(next);
    }
    return frags;
}

std::vector<int32_t> Tokenizer::encode_spm(std::string_view text, bool bos, bool eos, bool dummy_prefix) const {
    std::vector<int32_t> tokens;
    tokens.reserve(text.size() + 3);
    if (bos && m_bos_id >= 0) tokens.push_back(m_bos_id);

    // One character's bytes: its piece, else its byte tokens, else <unk>.
    auto emit = [&](std::string_view ch) {
        const int32_t id = lookup(ch);
        if (id >= 0) {
            tokens.push_back(id);
            return;
        }
        bool all_bytes = true;
        for (char c : ch) all_bytes = all_bytes && m_byte_token[static_cast<uint8_t>(c)] >= 0;
        if (all_bytes) {
            for (char c : ch) tokens.push_back(m_byte_token[static_cast<uint8_t>(c)]);
        } else {
            tokens.push_back(m_unk_id);
        }
    };

    // A GGUF (sentencepiece) vocabulary writes spaces as U+2581: llama.cpp's llama_escape_whitespace turns the text's
    // spaces into U+2581 before its SPM session, so a U+2581 in the text is a space too, a space without a piece falls
    // back to the bytes of U+2581 (as Hugging Face's byte-fallback BPE does after its Replace normalizer), and a
    // user-defined token stored with spaces never comes out of a merge.
    const std::string_view space = m_escape_spaces ? std::string_view(kSpaceMark) : std::string_view(" ");
    std::string escaped;
    if (m_escape_spaces && text.find(' ') != std::string_view::npos) {
        escaped.reserve(text.size() + 16);
        for (char c : text) escaped += c == ' ' ? space : std::string_view(&c, 1);
        text = escaped;
    }

    // run.c: "add_dummy_prefix is true by default ... but only if text != ''"
    if (dummy_prefix && !text.empty()) emit(space);

    // UTF-8 characters exactly as run.c groups them: a lead byte and up to three continuation bytes.
    size_t start = 0;
    size_t len = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<uint8_t>(text[i]);
        if ((c & 0xC0) != 0x80) len = 0;
        if (len == 0) start = i;
        ++len;
        const bool next_continues = i + 1 < text.size() && (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80;
        if (next_continues && len < 4) continue;
        emit(text.substr(start, len));
        len = 0;
    }

    // Merge the best adjacent pair until none forms a piece. Symbols form a linked list over `tokens`;
    // candidate pairs wait in a heap ordered by score, then by position (run.c takes the leftmost of equal
    // scores); a popped pair whose symbols changed since it was pushed is stale and skipped.
    const int32_t n = static_cast<int32_t>(tokens.size());
    std::vector<int32_t> next(static_cast<size_t>(n));
    std::vector<int32_t> prev(static_cast<size_t>(n));
    std::vector<uint8_t> alive(static_cast<size_t>(n), 1);
    for (int32_t i = 0; i < n; ++i) {
        next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
        prev[static_cast<size_t>(i)] = i - 1;
    }
    struct Pair {
        float score;
        int32_t left;
        int32_t right;
        int32_t left_id;
        int32_t right_id;
        int32_t merged;
    };
    auto worse = [](const Pair& a, const Pair& b) {
        if (a.score != b.score) return a.score < b.score;
        return a.left > b.left;
    };
    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> heap(worse);
    std::string buf;
    auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const int32_t a = tokens[static_cast<size_t>(left)];
        const int32_t b = tokens[static_cast<size_t>(right)];
        buf = match_text(a);
        buf += match_text(b);
        const int32_t id = lookup(buf);
        // run.c merges only above its starting best score; llama.cpp's SPM session (try_add_bigram) any pair that
        // forms a token.
        if (id < 0 || (!m_escape_spaces && !(m_scores[static_cast<size_t>(id)] > kNoMergeScore))) return;
        heap.push({m_scores[static_cast<size_t>(id)], left, right, a, b, id});
    };
    for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
    while (!heap.empty()) {
        const Pair p = heap.top();
        heap.pop();
        const auto l = static_cast<size_t>(p.left);
        const auto r = static_cast<size_t>(p.right);
        if (!alive[l] || !alive[r] || next[l] != p.right || tokens[l] != p.left_id || tokens[r] != p.right_id) continue;
        tokens[l] = p.merged;
        alive[r] = 0;
        next[l] = next[r];
        if (next[r] >= 0) prev[static_cast<size_t>(next[r])] = p.left;
        consider(prev[l], p.left);
        consider(p.left, next[l]);
    }
    std::vector<int32_t> out;
    out.reserve(tokens.size() + 1);
    for (int32_t i = 0; i < n; ++i) {
        if (!alive[static_cast<size_t>(i)]) continue;
        // One <unk> per unknown character, never a run fused into one (see gkq/tokenizer.h).
        out.push_back(tokens[static_cast<size_t>(i)]);
    }
    if (eos && m_eos_id >= 0) out.push_back(m_eos_id);
    return out;
}

// ----------------------------------------------------------------------------
// decode

std::string_view Tokenizer::decode(int32_t prev_token, int32_t token) const {
    if (token < 0 || token >= vocab_size()) return {};
    const auto i = static_cast<size_t>(token);
    if (m_family == TokenizerFamily::Bpe) return m_control[i] ? std::string_view{} : std::string_view{m_pieces[i]};
    if (m_byte_value[i] >= 0) return {&byte_chars()[static_cast<size_t>(m_byte_value[i])], 1};
    if (m_drop_control && m_control[i]) return {};
    std::string_view p = m_pieces[i];
    // run.c: "following BOS (1) token, sentencepiece decoder strips any leading whitespace"
    if (prev_token == m_bos_id && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    return p;
}

std::string Tokenizer::decode_all(const std::vector<int32_t>& tokens, bool after_bos) const {
    std::string out;
    int32_t prev = after_bos ? m_bos_id : -1;
    for (int32_t t : tokens) {
        out += decode(prev, t);
        prev = t;
    }
    return out;
}

}  // namespace gkq
