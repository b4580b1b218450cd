// Byte-level BPE (GPT-2 family), as llama.cpp's llm_tokenizer_bpe / llm_tokenizer_bpe_session do it. See tokenizer.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "infer/tokenizer_bpe.h"

#include <pcre2.h>

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
constexpr int32_t kTypeUnused = 5;
constexpr int32_t kTypeByte = 6;

// The gpt-2 word pattern (tiktoken's r50k), shared by several pre-tokenizers.
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// llama.cpp's adaptations of the tokenizer.json regexes ("(?i:'s|...)" spelled out case by case).
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The pre-tokenizer names llama.cpp's llama-vocab.cpp knows and this file does not implement.
const char* const kUnsupportedPre[] = {
    "kimi-k2",
    "minicpm5",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
    "deepseek-coder",
    "deepseek-v3",
    "spark2_5",
    "youtu",
    "falcon",
    "mpt",
    "starcoder",
    "phi-2",
    "jina-es",
    "jina-de",
    "gigachat",
    "jina-v2-es",
    "jina-v2-de",
    "a.x-4.0",
    "mellum",
    "modern-bert",
    "jais-2",
    "gemma4",
    "granite-embed-multi-311m",
    "sarvam-moe",
    "jina-v1-en",
    "jina-v2-code",
    "roberta-bpe",
    "whitespace",
    "refact",
    "command-r",
    "deepseek-r1-qwen",
    "kormo",
    "f2llmv2",
    "qwen35",
    "stablelm2",
    "olmo",
    "dbrx",
    "smaug-bpe",
    "poro-chat",
    "glm4",
    "chatglm-bpe",
    "viking",
    "jais",
    "tekken",
    "smollm",
    "codeshell",
    "bloom",
    "gpt3-finnish",
    "exaone",
    "exaone4",
    "exaone-moe",
    "chameleon",
    "minerva-7b",
    "megrez",
    "gpt-4o",
    "llama4",
    "kanana2",
    "talkie",
    "granite-embed-multi-97m",
    "tiny_aya",
    "cohere2moe",
    "superbpe",
    "trillion",
    "granite-docling",
    "bailingmoe",
    "bailingmoe2",
    "llada-moe",
    "seed-coder",
    "hunyuan",
    "hunyuan-dense",
    "hy_v4",
    "joyai-llm",
    "ufakzeka",
    "grok-2",
    "afmoe",
    "laguna",
    "minimax-m2",
    "solar-open",
    "mellum2",
};

const char* const kSupportedList = "gpt-2, llama-bpe (llama3, llama-v3), qwen2, deepseek-llm, default";

std::string utf8_of(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    return s;
}

// Length of the UTF-8 sequence a lead byte starts (1 for a stray continuation byte), as llama.cpp's
// unicode_len_utf8.
size_t utf8_len(uint8_t c) {
    static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

struct ByteMap {
    std::array<std::string, 256> to_chars;
    std::unordered_map<uint32_t, uint8_t> to_byte;
};

const ByteMap& byte_map() {
    static const ByteMap map = [] {
        ByteMap m;
        uint32_t extra = 0;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const uint32_t cp = printable ? b : 256 + extra++;
            m.to_chars[b] = utf8_of(cp);
            m.to_byte[cp] = static_cast<uint8_t>(b);
        }
        return m;
    }();
    return map;
}

}  // namespace

const std::string& byte_to_chars(uint8_t b) {
    return byte_map().to_chars[b];
}

std::string chars_to_bytes(std::string_view text) {
    const ByteMap& m = byte_map();
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<uint8_t>(text[i]);
        const size_t n = std::min(text.size() - i, utf8_len(c));
        uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
        for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
        auto it = m.to_byte.find(cp);
        if (it != m.to_byte.end()) {
            out.push_back(static_cast<char>(it->second));
        } else {
            out.append(text.substr(i, n));
        }
        i += n;
    }
    return out;
}

// ----------------------------------------------------------------------------
// pre-tokenizers

Result<PreTokenizer> pre_tokenizer_named(const std::string& name, const std::string& label) {
    PreTokenizer p;
    p.name = name;
    if (name == "gpt-2" || name == "gpt2") {
        p.regexes = {kGpt2};
    } else if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
        p.regexes = {kLlama3};
        p.ignore_merges = true;
        p.add_bos = true;
    } else if (name == "qwen2") {
        p.regexes = {kQwen2};
    } else if (name == "deepseek-llm") {
        p.regexes = {
            "[\r\n]",
            // clang-format off
            "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
            // clang-format on
            "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
            "\\s+$",
            "[一-龥ࠀ-一가-퟿]+",
            "\\p{N}+",
        };
    } else if (name == "default" || name.empty()) {
        p.name = "default";
        p.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
    } else {
        const bool known =
            std::find(std::begin(kUnsupportedPre), std::end(kUnsupportedPre), name) != std::end(kUnsupportedPre);
        return error(StatusCode::Unsupported, label + ": tokenizer.ggml.pre '" + name + "' " +
                                                  (known ? "is a llama.cpp pre-tokenizer this build does not implement"
                                                         : "is not a pre-tokenizer llama.cpp knows") +
                                                  " (supported: " + kSupportedList + ")");
    }
    return p;
}

struct BpeModel::Regex {
    pcre2_code* code = nullptr;
    ~Regex() { pcre2_code_free(code); }
};

namespace {

Result<std::shared_ptr<const BpeModel::Regex>> compile(const std::string& pattern, const std::string& label) {
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
    if (code == nullptr) {
        std::array<PCRE2_UCHAR, 256> msg{};
        pcre2_get_error_message(err, msg.data(), msg.size());
        return error(StatusCode::Unsupported, label + ": pre-tokenizer regex '" + pattern + "' does not compile at " +
                                                  std::to_string(at) + ": " +
                                                  reinterpret_cast<const char*>(msg.data()));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // the interpreter runs when JIT is unavailable
    auto r = std::make_shared<BpeModel::Regex>();
    r->code = code;
    return std::shared_ptr<const BpeModel::Regex>(std::move(r));
}

}  // namespace

std::vector<std::string> BpeModel::split(std::string_view text) const {
    // Pieces as (offset, length) into `text`; each regex splits every piece into its matches and the gaps
    // between them (llama.cpp's unicode_regex_split).
    std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}};
    if (text.empty()) pieces.clear();
    for (const auto& re : regexes) {
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
        std::vector<std::pair<size_t, size_t>> next;
        for (const auto& [off, len] : pieces) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + off);
            size_t pos = 0;    // end of the last match
            size_t start = 0;  // where the next search starts
            while (start < len) {
                const int rc = pcre2_match(re->code, subject, len, start, 0, md, nullptr);
                if (rc < 0) break;
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
                const size_t s = ov[0];
                const size_t e = ov[1];
                if (e == s) {  // an empty match: search again one character on
                    start = s + utf8_len(static_cast<uint8_t>(text[off + s]));
                    continue;
                }
                if (s > pos) next.emplace_back(off + pos, s - pos);
                next.emplace_back(off + s, e - s);
                pos = start = e;
            }
            if (pos < len) next.emplace_back(off + pos, len - pos);
        }
        pcre2_match_data_free(md);
        pieces = std::move(next);
    }
    std::vector<std::string> words;
    words.reserve(pieces.size());
    for (const auto& [off, len] : pieces) {
        std::string w;
        w.reserve(len * 2);
        for (size_t i = 0; i < len; ++i) w += byte_to_chars(static_cast<uint8_t>(text[off + i]));
        words.push_back(std::move(w));
    }
    return words;
}

void BpeModel::tokenize(std::string_view text, std::vector<int32_t>& out) const {
    struct Symbol {
        int32_t prev;
        int32_t next;
        size_t offset;
        size_t n;
    };
    struct Bigram {
        int32_t rank;
        int32_t left;
        int32_t right;
        std::string text;
    };
    auto worse = [](const Bigram& a, const Bigram& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    };
    auto find = [&](const std::string& s) {
        auto it = text_to_id.find(s);
        return it == text_to_id.end() ? -1 : it->second;
    };
    for (const std::string& word : split(text)) {
        if (ignore_merges) {
            const int32_t id = find(word);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
        }
        std::vector<Symbol> symbols;
        for (size_t off = 0; off < word.size();) {
            const size_t n = std::min(word.size() - off, utf8_len(static_cast<uint8_t>(word[off])));
            const auto index = static_cast<int32_t>(symbols.size());
            symbols.push_back({index - 1, off + n == word.size() ? -1 : index + 1, off, n});
            off += n;
        }
        std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
        std::string key;
        auto add_bigram = [&](int32_t left, int32_t right) {
            if (left < 0 || right < 0) return;
            const Symbol& l = symbols[static_cast<size_t>(left)];
            const Symbol& r = symbols[static_cast<size_t>(right)];
            key.assign(word, l.offset, l.n);
            key += ' ';
            key.append(word, r.offset, r.n);
            auto it = ranks.find(key);
            if (it == ranks.end()) return;
            queue.push({it->second, left, right, word.substr(l.offset, l.n + r.n)});
        };
        for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) add_bigram(i - 1, i);
        while (!queue.empty()) {
            const Bigram b = queue.top();
            queue.pop();
            Symbol& l = symbols[static_cast<size_t>(b.left)];
            Symbol& r = symbols[static_cast<size_t>(b.right)];
            if (l.n == 0 || r.n == 0 || l.offset + l.n != r.offset || l.n + r.n != b.text.size() ||
                word.compare(l.offset, b.text.size(), b.text) != 0)
                continue;  // stale
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = b.left;
            add_bigram(l.prev, b.left);
            add_bigram(b.left, l.next);
        }
        for (const Symbol& s : symbols) {
            if (s.n == 0) continue;
            const std::string piece = word.substr(s.offset, s.n);
            const int32_t id = find(piece);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
            for (char c : piece) {  // llama.cpp: each byte of the piece that is a token by itself
                const int32_t b = find(std::string(1, c));
                if (b >= 0) out.push_back(b);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// construction

Result<Tokenizer> BpeBuilder::build(BpeSpec spec, const std::string& label) {
    const size_t n = spec.tokens.size();
    if (n == 0) return error(StatusCode::NotFound, label + ": the vocabulary is empty");
    if (n > static_cast<size_t>(INT32_MAX))
        return error(StatusCode::Unsupported, label + ": " + std::to_string(n) + " tokens are too many");
    if (!spec.token_types.empty() && spec.token_types.size() != n)
        return error(StatusCode::Corrupt, label + ": " + std::to_string(spec.token_types.size()) + " token types for " +
                                              std::to_string(n) + " tokens");
    if (spec.merges.empty()) return error(StatusCode::Corrupt, label + ": a byte-level BPE vocabulary without merges");
    auto model = std::make_shared<BpeModel>();
    model->ignore_merges = spec.pre.ignore_merges;
    for (const std::string& r : spec.pre.regexes) {
        auto c = compile(r, label);
        if (!c) return c.status();
        model->regexes.push_back(std::move(*c));
    }
    model->text_to_id.reserve(n);
    for (size_t i = 0; i < n; ++i) model->text_to_id.emplace(spec.tokens[i], static_cast<int32_t>(i));
    model->ranks.reserve(spec.merges.size());
    for (size_t i = 0; i < spec.merges.size(); ++i) {
        const std::string& m = spec.merges[i];
        const size_t space = m.find(' ', 1);
        if (space == std::string::npos || space + 1 >= m.size())
            return error(StatusCode::Corrupt, label + ": merge " + std::to_string(i) + " '" + m +
                                                  "' is not two tokens separated by a space");
        model->ranks.emplace(m, static_cast<int32_t>(std::min<size_t>(i, INT32_MAX)));
    }

    Tokenizer t;
    t.m_family = TokenizerFamily::Bpe;
    t.m_pre = spec.pre.name;
    t.m_add_bos = spec.pre.add_bos;
    t.m_drop_control = true;
    t.m_pieces.reserve(n);
    t.m_scores.assign(n, 0.0f);
    t.m_mergeable.assign(n, 0);
    t.m_byte_value.assign(n, -1);
    t.m_byte_token.fill(-1);
    t.m_control.assign(n, 0);
    t.m_user_defined.assign(n, 0);
    auto in_range = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n ? id : -1; };
    t.m_bos_id = in_range(spec.bos_id);
    t.m_eos_id = in_range(spec.eos_id);
    t.m_pad_id = in_range(spec.pad_id);
    t.m_unk_id = in_range(spec.unk_id);
    for (size_t i = 0; i < n; ++i) {
        const int32_t type = spec.token_types.empty() ? kTypeNormal : spec.token_types[i];
        // llama.cpp's token_to_piece: normal (and byte) tokens are byte-level text, the others their raw text.
        const bool text = type == kTypeNormal || type == kTypeByte || type == kTypeUnused;
        t.m_pieces.push_back(text ? chars_to_bytes(spec.tokens[i]) : spec.tokens[i]);
        t.m_control[i] = type == kTypeControl;
        t.m_user_defined[i] = type == kTypeUserDefined;
        if (type == kTypeControl || type == kTypeUserDefined || type == kTypeUnknown) {
            if (!t.m_pieces[i].empty()) t.m_special.push_back(static_cast<int32_t>(i));
        }
        if (type == kTypeUnknown && t.m_unk_id < 0) t.m_unk_id = static_cast<int32_t>(i);
    }
    std::stable_sort(t.m_special.begin(), t.m_special.end(), [&](int32_t a, int32_t b) {
        return t.m_pieces[static_cast<size_t>(a)].size() > t.m_pieces[static_cast<size_t>(b)].size();
    });
    t.m_bpe = std::move(model);
    t.find_end_tokens(spec.tokens, spec.special);
    return t;
}

}  // namespace gkq
