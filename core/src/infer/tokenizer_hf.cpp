// Hugging Face folders with a sentencepiece-style tokenizer (Llama-2, Mistral, Phi-3, Gemma): tokenizer.model or a
// byte-fallback BPE tokenizer.json, made into the SPM family the way llama.cpp's convert_hf_to_gguf.py makes their
// GGUF vocabularies, and the special tokens of tokenizer_config.json / config.json as its gguf.SpecialVocab reads
// them.
//
// tokenizer.model (_create_vocab_sentencepiece): pieces, scores and types as sentencepiece reports them (its
// USER_DEFINED pieces become NORMAL: the converter asks IsUnknown/IsControl/IsUnused/IsByte only), the vocabulary
// sized by config.json's vocab_size (missing ids "[PADi]", score -10000, UNUSED; pieces past it dropped), then
// added_tokens.json's tokens USER_DEFINED and tokenizer_config.json's added_tokens_decoder CONTROL when special
// (or looking special: <|...|>, <unused...>, <pad>, <mask>), else USER_DEFINED with U+2581 as spaces; both score
// -1000. Only BPE models are taken: llama.cpp tokenizes every "llama" vocabulary by merging scored pairs, which is
// sentencepiece's BPE and not its unigram (Viterbi) encoding.
//
// tokenizer.json with a byte-fallback BPE model (LlamaHfVocab): <0xXX> pieces BYTE, special added tokens CONTROL
// (and those that look special, as _create_vocab_sentencepiece has them), other added tokens USER_DEFINED with
// U+2581 as spaces (as _create_vocab_sentencepiece and get_vocab_base write them), the rest NORMAL; model.unk_token
// UNKNOWN (the converter says CONTROL; the tokenizer.model of the same model says UNKNOWN, and the ids come out the
// same). One deliberate difference: LlamaHfVocab gives every token the score -1000, so llama.cpp's SPM session merges
// equal-score pairs left to right, which is not what the file's merges do; here a token's score is minus the rank of
// the first merge that forms it (-1e10 for a token no merge forms: llama.cpp forms it last), so the SPM merge order is
// the BPE merge order and the ids are Hugging Face's (and, for Llama-2, llama.cpp's own vectors from its
// tokenizer.model GGUF). The dummy prefix: a normalizer Prepend "▁" or a Metaspace pre-tokenizer that prepends;
// tokenizer_config.json's add_prefix_space overrides either way (LlamaModel.set_vocab writes it to the GGUF).
#include "infer/tokenizer_hf.h"

#include "infer/sentencepiece_model.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace gkq {

namespace fs = std::filesystem;

namespace {

constexpr int32_t kNormal = 1;
constexpr int32_t kUnknown = 2;
constexpr int32_t kControl = 3;
constexpr int32_t kUserDefined = 4;
constexpr int32_t kUnused = 5;
constexpr int32_t kByte = 6;
constexpr int64_t kMaxTokens = 1 << 24;
const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581

// A JSON file of the folder: null when absent; Corrupt when it is there but is not a JSON object.
Result<nlohmann::json> read_json(const fs::path& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return nlohmann::json();
    std::ifstream in(file, std::ios::binary);
    if (!in) return error(StatusCode::IoError, file.string() + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return error(StatusCode::Corrupt, file.string() + ": not a JSON object");
    return j;
}

// A token as tokenizer_config.json writes it: "text" or {"content": "text", ...}; empty when neither.
std::optional<std::string> token_text(const nlohmann::json& j) {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
    return std::nullopt;
}

bool starts_ends(const std::string& s, const std::string& a, const std::string& b) {
    return s.size() >= a.size() + b.size() && s.compare(0, a.size(), a) == 0 &&
           s.compare(s.size() - b.size(), b.size(), b) == 0;
}

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& t) {
    return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || starts_ends(t, "<|", "|>") ||
           starts_ends(t, "<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || starts_ends(t, "<unused", ">");
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
    return s;
}

bool is_byte_piece(const std::string& p) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
    return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

// config.json's key, or its text_config's (multimodal folders).
const nlohmann::json* config_value(const nlohmann::json& config, const char* key) {
    if (!config.is_object()) return nullptr;
    if (auto it = config.find(key); it != config.end() && !it->is_null()) return &*it;
    if (auto tc = config.find("text_config"); tc != config.end() && tc->is_object())
        if (auto it = tc->find(key); it != tc->end() && !it->is_null()) return &*it;
    return nullptr;
}

}  // namespace

// The folder's files, read once; what the converter's SpecialVocab and the vocabulary builders take from them.
struct HfLoader {
    fs::path dir;
    nlohmann::json tokenizer_config;  // null when absent
    nlohmann::json config;
    nlohmann::json generation_config;

    static Result<HfLoader> open(const fs::path& dir) {
        HfLoader h;
        h.dir = dir;
        auto tc = read_json(dir / "tokenizer_config.json");
        if (!tc) return tc.status();
        auto c = read_json(dir / "config.json");
        if (!c) return c.status();
        h.tokenizer_config = std::move(*tc);
        h.config = std::move(*c);
        // Not every folder's generation_config.json is valid; the converter skips a bad one too.
        auto g = read_json(dir / "generation_config.json");
        if (g) h.generation_config = std::move(*g);
        return h;
    }

    // SpecialVocab._try_load_from_tokenizer_json + _try_load_from_config_json (+ generation_config.json), then
    // llama.cpp's defaults for an SPM vocabulary (BOS 1, EOS 2, add BOS, no EOS), onto `v` and the tokenizer flags.
    struct Specials {
        int32_t bos = -1, eos = -1, unk = -1, pad = -1;
        std::optional<bool> add_bos, add_eos, add_space_prefix;
    };
    Specials specials(const nlohmann::json& tokenizer_json, size_t n_vocab) const {
        Specials s;
        auto set = [&](int32_t& slot, const nlohmann::json* id) {
            if (slot >= 0 || id == nullptr || !id->is_number_integer()) return;
            const int64_t v = id->get<int64_t>();
            if (v >= 0 && static_cast<uint64_t>(v) < n_vocab) slot = static_cast<int32_t>(v);
        };
        const nlohmann::json& tc = tokenizer_config;
        auto tc_text = [&](const char* key) -> std::optional<std::string> {
            if (!tc.is_object() || !tc.contains(key)) return std::nullopt;
            return token_text(tc[key]);
        };
        if (tokenizer_json.is_object()) {
            std::optional<std::string> bos_text = tc_text("bos_token");
            std::optional<std::string> eos_text = tc_text("eos_token");
            if (!bos_text) bos_text = tc_text("cls_token");
            if (!eos_text) eos_text = tc_text("sep_token");
            // TemplateProcessing: a leading special token that is BOS means add_bos, a trailing EOS add_eos.
            const nlohmann::json& post =
                tokenizer_json.contains("post_processor") ? tokenizer_json["post_processor"] : nlohmann::json();
            std::vector<nlohmann::json> procs;
            if (post.is_object() && post.contains("processors") && post["processors"].is_array())
                for (const auto& p : post["processors"]) procs.push_back(p);
            else if (post.is_object())
                procs.push_back(post);
            for (const auto& p : procs) {
                if (!p.is_object() || p.value("type", "") != "TemplateProcessing" || !p.contains("single") ||
                    !p["single"].is_array() || p["single"].size() < 2)
                    continue;
                auto special_id = [](const nlohmann::json& e) -> std::optional<std::string> {
                    if (!e.is_object() || !e.contains("SpecialToken") || !e["SpecialToken"].is_object()) return {};
                    return token_text(e["SpecialToken"].value("id", nlohmann::json()));
                };
                // Without a bos_token (or without the config) the converter takes the template's first token.
                if (auto first = special_id(p["single"].front())) {
                    if (!tc.is_object() || !bos_text) bos_text = first;
                    s.add_bos = first == bos_text;
                }
                if (auto last = special_id(p["single"].back())) {
                    if (!tc.is_object() || !eos_text) eos_text = last;
                    s.add_eos = last == eos_text;
                }
            }
            if (tc.is_object()) {
                auto added_id = [&](const std::optional<std::string>& text) -> const nlohmann::json* {
                    if (!text || !tokenizer_json.contains("added_tokens") || !tokenizer_json["added_tokens"].is_array())
                        return nullptr;
                    for (const auto& a : tokenizer_json["added_tokens"])
                        if (a.is_object() && a.value("content", nlohmann::json()) == *text && a.contains("id"))
                            return &a["id"];
                    return nullptr;
                };
                set(s.bos, added_id(bos_text));
                set(s.eos, added_id(eos_text));
                set(s.unk, added_id(tc_text("unk_token")));
                set(s.pad, added_id(tc_text("pad_token")));
            }
        }
        if (tc.is_object()) {
            if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean())
                s.add_bos = tc["add_bos_token"].get<bool>();
            if (tc.contains("add_eos_token") && tc["add_eos_token"].is_boolean())
                s.add_eos = tc["add_eos_token"].get<bool>();
            if (tc.contains("add_prefix_space") && tc["add_prefix_space"].is_boolean())
                s.add_space_prefix = tc["add_prefix_space"].get<bool>();
        }
        set(s.bos, config_value(config, "bos_token_id"));
        set(s.eos, config_value(config, "eos_token_id"));
        set(s.unk, config_value(config, "unk_token_id"));
        set(s.pad, config_value(config, "pad_token_id"));
        if (const nlohmann::json* g = config_value(generation_config, "eos_token_id"))
            set(s.eos, g->is_array() && !g->empty() ? &(*g)[0] : g);
        set(s.bos, config_value(generation_config, "bos_token_id"));
        return s;
    }

    // The SPM vocabulary `v` with the folder's special tokens, as the keys a GGUF holds them in; `space_prefix` is
    // what the tokenizer file says.
    HfVocabulary finish(Vocabulary v, const nlohmann::json& tokenizer_json, bool space_prefix) const {
        const Specials s = specials(tokenizer_json, v.tokens.size());
        const auto n = static_cast<int32_t>(v.tokens.size());
        v.bos_id = s.bos >= 0 ? s.bos : (n > 1 ? 1 : -1);
        v.eos_id = s.eos >= 0 ? s.eos : (n > 2 ? 2 : -1);
        HfVocabulary out;
        out.keys.set("tokenizer.ggml.model", MetaValue::of_string(v.model));
        out.keys.set("tokenizer.ggml.add_bos_token", MetaValue::of_bool(s.add_bos.value_or(true)));
        out.keys.set("tokenizer.ggml.add_eos_token", MetaValue::of_bool(s.add_eos.value_or(false)));
        out.keys.set("tokenizer.ggml.add_space_prefix", MetaValue::of_bool(s.add_space_prefix.value_or(space_prefix)));
        if (s.pad >= 0)
            out.keys.set("tokenizer.ggml.padding_token_id",
                         MetaValue::of_uint(static_cast<uint64_t>(s.pad), MetaType::U32));
        if (s.unk >= 0)
            out.keys.set("tokenizer.ggml.unknown_token_id",
                         MetaValue::of_uint(static_cast<uint64_t>(s.unk), MetaType::U32));
        out.vocab = std::move(v);
        return out;
    }

    static Result<Tokenizer> tokenizer(const HfVocabulary& v, const std::string& label) {
        return Tokenizer::from_metadata(v.keys, v.vocab, label);
    }

    // _create_vocab_sentencepiece.
    Result<HfVocabulary> from_sentencepiece(const fs::path& file) const {
        const std::string label = file.string();
        auto sp = read_sentencepiece_model(label);
        if (!sp) return sp.status();
        if (sp->model_type != SentencePieceModel::Bpe)
            return error(StatusCode::Unsupported,
                         label + ": a sentencepiece " + sentencepiece_model_type_name(sp->model_type) +
                             " model is not supported (bpe is: llama.cpp's SPM tokenizer merges scored pairs)");
        if (sp->treat_whitespace_as_suffix)
            return error(StatusCode::Unsupported, label + ": treat_whitespace_as_suffix is not supported");
        int64_t n = static_cast<int64_t>(sp->pieces.size());
        for (const char* key : {"vocab_size_per_layer_input", "vocab_size"}) {
            const nlohmann::json* vs = config_value(config, key);
            if (vs == nullptr) continue;
            if (!vs->is_number_integer() || vs->get<int64_t>() <= 0 || vs->get<int64_t>() > kMaxTokens)
                return error(StatusCode::Corrupt,
                             (dir / "config.json").string() + ": " + key + " is not a token count");
            n = vs->get<int64_t>();
            break;
        }
        Vocabulary v;
        v.model = "llama";
        const auto size = static_cast<size_t>(n);
        v.tokens.resize(size);
        v.scores.assign(size, -10000.0f);
        v.token_types.assign(size, kUnused);
        for (size_t i = 0; i < size; ++i) v.tokens[i] = "[PAD" + std::to_string(i) + "]";
        for (size_t i = 0; i < sp->pieces.size() && i < size; ++i) {
            const SentencePieceModel::Piece& p = sp->pieces[i];
            v.tokens[i] = p.piece;
            v.scores[i] = p.score;
            switch (p.type) {
                case SentencePieceModel::Unknown: v.token_types[i] = kUnknown; break;
                case SentencePieceModel::Control: v.token_types[i] = kControl; break;
                case SentencePieceModel::Unused: v.token_types[i] = kUnused; break;
                case SentencePieceModel::Byte: v.token_types[i] = kByte; break;
                default: v.token_types[i] = kNormal; break;
            }
        }
        auto put = [&](int64_t id, const std::string& text, int32_t type) {
            if (id < 0 || id >= n) return;  // the converter warns and ignores it
            v.tokens[static_cast<size_t>(id)] = text;
            v.scores[static_cast<size_t>(id)] = -1000.0f;
            v.token_types[static_cast<size_t>(id)] = type;
        };
        auto added = read_json(dir / "added_tokens.json");
        if (!added) return added.status();
        if (added->is_object())
            for (const auto& [text, id] : added->items())
                if (id.is_number_integer()) put(id.get<int64_t>(), text, kUserDefined);
        if (tokenizer_config.is_object() && tokenizer_config.contains("added_tokens_decoder") &&
            tokenizer_config["added_tokens_decoder"].is_object()) {
            for (const auto& [key, data] : tokenizer_config["added_tokens_decoder"].items()) {
                const std::optional<std::string> text = data.is_object() ? token_text(data) : std::nullopt;
                char* end = nullptr;
                const long long id = std::strtoll(key.c_str(), &end, 10);
                if (!text || end == key.c_str() || *end != '\0')
                    return error(StatusCode::Corrupt, (dir / "tokenizer_config.json").string() +
                                                          ": added_tokens_decoder['" + key +
                                                          "'] is not {id: {content}}");
                if (data.value("special", false) || looks_special(*text))
                    put(id, *text, kControl);
                else
                    put(id, replace_all(*text, kSpaceMark, " "), kUserDefined);
            }
        }
        // SpecialVocab reads the folder's tokenizer.json for the added tokens that name BOS/EOS, whichever file
        // the vocabulary came from.
        auto tokenizer_json = read_json(dir / "tokenizer.json");
        if (!tokenizer_json) return tokenizer_json.status();
        return finish(std::move(v), *tokenizer_json, sp->add_dummy_prefix);
    }

    // LlamaHfVocab over a byte-fallback BPE tokenizer.json (scores from merge ranks: see the file comment).
    Result<HfVocabulary> from_byte_fallback_json(const nlohmann::json& j, const std::string& label) const {
        const nlohmann::json& model = j["model"];
        if (!model.contains("vocab") || !model["vocab"].is_object() || !model.contains("merges") ||
            !model["merges"].is_array())
            return error(StatusCode::Corrupt, label + ": model.vocab (object) or model.merges (array) is missing");
        Vocabulary v;
        v.model = "llama";
        auto put = [&](const nlohmann::json& id, const std::string& text, int32_t type) -> Status {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxTokens)
                return error(StatusCode::Corrupt, label + ": token '" + text + "' has no valid id");
            const auto i = static_cast<size_t>(id.get<int64_t>());
            if (i >= v.tokens.size()) {
                v.tokens.resize(i + 1);
                v.token_types.resize(i + 1, 0);
            }
            v.tokens[i] = text;
            v.token_types[i] = type;
            return Status::ok();
        };
        for (const auto& [text, id] : model["vocab"].items())
            if (Status s = put(id, text, is_byte_piece(text) ? kByte : kNormal); !s) return s;
        if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
            for (const auto& a : j["added_tokens"]) {
                if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string())
                    return error(StatusCode::Corrupt, label + ": an added_tokens entry without id and content");
                const std::string text = a["content"].get<std::string>();
                // Looking special (<unusedN>, <mask>, <|...|>) makes a control token, as for added_tokens_decoder; a
                // user-defined one has its U+2581 as spaces (Gemma's runs of spaces), as both converters that
                // type added tokens write it ("pre-normalize user-defined spaces": get_vocab_base for a
                // tokenizer.json, _create_vocab_sentencepiece), and llama.cpp matches it against the text so.
                const bool control = a.value("special", false) || looks_special(text);
                if (Status s = put(a["id"], control ? text : replace_all(text, kSpaceMark, " "),
                                   control ? kControl : kUserDefined);
                    !s)
                    return s;
            }
        }
        std::unordered_map<std::string, int32_t> id_of;
        for (size_t i = 0; i < v.tokens.size(); ++i) {
            if (v.token_types[i] == 0) {  // a hole in the ids, as convert_hf_to_gguf.py fills it
                v.tokens[i] = "[PAD" + std::to_string(i) + "]";
                v.token_types[i] = kUnused;
            }
            id_of.emplace(v.tokens[i], static_cast<int32_t>(i));
        }
        if (model.contains("unk_token") && model["unk_token"].is_string())
            if (auto it = id_of.find(model["unk_token"].get<std::string>()); it != id_of.end())
                v.token_types[static_cast<size_t>(it->second)] = kUnknown;
        // Scores: minus the rank of the first merge forming the token; -1e10 (after every merge) for the others.
        v.scores.assign(v.tokens.size(), -1e10f);
        int64_t rank = 0;
        for (const auto& m : model["merges"]) {
            std::string merged;
            if (m.is_string()) {
                const std::string s = m.get<std::string>();
                const size_t sp = s.find(' ');
                if (sp == std::string::npos)
                    return error(StatusCode::Corrupt,
                                 label + ": merge " + std::to_string(rank) + " '" + s + "' is not \"a b\"");
                merged = s.substr(0, sp) + s.substr(sp + 1);
            } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                merged = m[0].get<std::string>() + m[1].get<std::string>();
            } else {
                return error(StatusCode::Corrupt,
                             label + ": merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
            }
            auto it = id_of.find(merged);
            if (it != id_of.end() && v.scores[static_cast<size_t>(it->second)] == -1e10f &&
                v.token_types[static_cast<size_t>(it->second)] == kNormal)
                v.scores[static_cast<size_t>(it->second)] = -static_cast<float>(rank);
            ++rank;
        }
        // The dummy prefix: normalizer Prepend "▁" (legacy Llama-2/Mistral), or a Metaspace pre-tokenizer that
        // prepends (newer files).
        bool prefix = false;
        auto scan = [&](const nlohmann::json& node, const char* list, auto&& self) -> void {
            if (!node.is_object()) return;
            const std::string type = node.value("type", "");
            if (type == "Sequence" && node.contains(list) && node[list].is_array()) {
                for (const auto& n : node[list]) self(n, list, self);
            } else if (type == "Prepend" && node.value("prepend", "") == kSpaceMark) {
                prefix = true;
            } else if (type == "Metaspace") {
                const std::string scheme =
                    node.value("prepend_scheme", node.value("add_prefix_space", true) ? "always" : "never");
                prefix = prefix || scheme != "never";
            }
        };
        if (j.contains("normalizer")) scan(j["normalizer"], "normalizers", scan);
        if (j.contains("pre_tokenizer")) scan(j["pre_tokenizer"], "pretokenizers", scan);
        // model.fuse_unk is not kept: llama.cpp has no such key, and never fuses (see gkq/tokenizer.h).
        return finish(std::move(v), j, prefix);
    }
};

// ----------------------------------------------------------------------------
// entry points

bool Tokenizer::hf_folder_has_tokenizer(const std::string& dir) {
    std::error_code ec;
    return fs::is_regular_file(fs::path(dir) / "tokenizer.model", ec) ||
           fs::is_regular_file(fs::path(dir) / "tokenizer.json", ec);
}

Result<HfVocabulary> hf_sentencepiece_vocabulary(const std::string& path) {
    auto h = HfLoader::open(fs::path(path).parent_path());
    if (!h) return h.status();
    return h->from_sentencepiece(path);
}

Result<Tokenizer> hf_tokenizer(const HfVocabulary& v, const std::string& label) {
    return HfLoader::tokenizer(v, label);
}

Result<Tokenizer> Tokenizer::load_sentencepiece(const std::string& path) {
    auto v = hf_sentencepiece_vocabulary(path);
    if (!v) return v.status();
    return hf_tokenizer(*v, path);
}

Result<Tokenizer> Tokenizer::load_hf_folder(const std::string& dir) {
    std::error_code ec;
    const fs::path d(dir);
    // convert_hf_to_gguf.py's LlamaModel (and Gemma's, Phi-3's) tries tokenizer.model first.
    if (fs::is_regular_file(d / "tokenizer.model", ec)) return load_sentencepiece((d / "tokenizer.model").string());
    if (fs::is_regular_file(d / "tokenizer.json", ec)) return load_hf_json((d / "tokenizer.json").string());
    return error(StatusCode::NotFound, dir + ": no tokenizer.model or tokenizer.json");
}

// The byte-fallback branch of hf_vocabulary() and load_hf_json() (tokenizer_files.cpp reads the file and hands the
// JSON here).
Result<HfVocabulary> hf_byte_fallback_vocabulary(const nlohmann::json& j, const std::string& path) {
    auto h = HfLoader::open(fs::path(path).parent_path());
    if (!h) return h.status();
    return h->from_byte_fallback_json(j, path);
}

}  // namespace gkq
