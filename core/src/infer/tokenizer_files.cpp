// Finding a model's tokenizer: its own vocabulary (with its GGUF or knot tokenizer keys), the llama2.c tokenizer file
// that sits beside it, or the Hugging Face tokenizer of its folder (as a GGUF vocabulary for callers that store it);
// and the GGUF and byte-level tokenizer.json loaders.
#include "gkq/tokenizer.h"

#include "gkq/knot.h"
#include "gkq/model_file.h"

#include "infer/tokenizer_bpe.h"
#include "infer/tokenizer_hf.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gkq {

namespace fs = std::filesystem;

std::vector<std::string> tokenizers_beside(const std::string& model_path) {
    std::error_code ec;
    const fs::path model(model_path);
    const fs::path dir = fs::is_directory(model, ec) ? model : model.parent_path();
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
        const std::string name = entry.path().filename().string();
        const bool named = name == "tokenizer.bin" || (name.rfind("tok", 0) == 0 && entry.path().extension() == ".bin");
        if (!named || !entry.is_regular_file(ec) || fs::equivalent(entry.path(), model, ec)) continue;
        found.push_back(entry.path().string());
    }
    std::sort(found.begin(), found.end());
    return found;
}

namespace {

// The folder a model is in (the model itself when it is a folder).
std::string model_folder(const std::string& model_path) {
    std::error_code ec;
    const fs::path dir = fs::is_directory(model_path, ec) ? fs::path(model_path) : fs::path(model_path).parent_path();
    return dir.empty() ? std::string(".") : dir.string();
}

// Whether a --tokenizer file names a Hugging Face tokenizer: a tokenizer.json, a tokenizer.model or a folder.
bool is_hf_tokenizer_path(const std::string& path) {
    std::error_code ec;
    const fs::path p(path);
    return !path.empty() && (fs::is_directory(p, ec) || p.extension() == ".json" || p.extension() == ".model");
}

// A Hugging Face tokenizer as a FoundVocabulary, checked to make the tokenizer the folder gives.
Result<FoundVocabulary> hf_found(const std::string& path) {
    auto v = hf_vocabulary(path);
    if (!v) return v.status();
    auto t = hf_tokenizer(*v, path);
    if (!t) return t.status();
    return FoundVocabulary{std::move(v->vocab), path, std::move(v->keys)};
}

// The tokenizer.ggml.* keys that go with a model's own vocabulary: a GGUF's metadata, or a knot header's (the source
// model's, with the keys quantize read from a Hugging Face folder). Empty when they name another tokenizer model
// than `vocab`'s, or when the model cannot be opened as a file (a knot by URL): an SPM vocabulary then gets
// llama.cpp's defaults, a gpt2 one fails for want of its merges.
Result<Metadata> own_tokenizer_keys(const std::string& model_path, const Vocabulary& vocab) {
    Metadata meta;
    Status opened = Status::ok();
    if (is_knot_path(model_path)) {
        auto knot = KnotFile::open(model_path);
        if (knot)
            meta = knot->header().metadata;
        else
            opened = knot.status();
    } else {
        auto model = ModelFile::open(model_path);
        if (model)
            meta = model->metadata();
        else
            opened = model.status();
    }
    if (!opened && vocab.model == "gpt2") return opened;
    const MetaValue* model = meta.find("tokenizer.ggml.model");
    if (model == nullptr || model->as_string() == nullptr || *model->as_string() != vocab.model) return Metadata{};
    return meta;
}

}  // namespace

Result<FoundVocabulary> vocabulary_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                             const std::string& given) {
    if (is_hf_tokenizer_path(given)) return hf_found(given);
    std::string file = given;
    if (file.empty()) {
        if (!vocab.empty()) return FoundVocabulary{vocab, {}, {}};
        const std::vector<std::string> found = tokenizers_beside(model_path);
        if (found.empty()) {
            // No vocabulary and no llama2.c file: a Hugging Face folder's tokenizer.model or tokenizer.json.
            const std::string dir = model_folder(model_path);
            if (Tokenizer::hf_folder_has_tokenizer(dir)) return hf_found(dir);
            return error(StatusCode::NotFound,
                         model_path + " has no vocabulary and no tokenizer.bin or tok*.bin is next to it");
        }
        if (found.size() > 1) {
            std::string list;
            for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
            return error(StatusCode::InvalidArgument, model_path + ": several tokenizers next to it (" + list + ")");
        }
        file = found.front();
    }
    auto read = read_llama2c_tokenizer(file, vocab_size);
    if (!read) return read.status();
    return FoundVocabulary{std::move(*read), file, {}};
}

Result<Tokenizer> tokenizer_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                      const std::string& given) {
    if (is_hf_tokenizer_path(given)) return Tokenizer::load(given);
    if (given.empty() && vocab.empty() && tokenizers_beside(model_path).empty()) {
        // A Hugging Face folder's tokenizer.model or tokenizer.json, read directly (a tokenizer.json pre-tokenizer
        // regex llama.cpp has no name for included).
        const std::string dir = model_folder(model_path);
        if (Tokenizer::hf_folder_has_tokenizer(dir)) return Tokenizer::load_hf_folder(dir);
    }
    auto found = vocabulary_for_model(model_path, vocab, vocab_size, given);
    if (!found) return found.status();
    if (found->source.empty()) {
        // The model's own vocabulary with the rest of its tokenizer keys (merges, pre-tokenizer, add_bos_token, ...).
        auto keys = own_tokenizer_keys(model_path, found->vocab);
        if (!keys) return keys.status();
        return Tokenizer::from_metadata(*keys, found->vocab, model_path);
    }
    return Tokenizer::from_vocabulary(found->vocab, found->source);
}

// ----------------------------------------------------------------------------
// loaders

namespace {

// A GGUF token id key (u32 or any integer type), -1 when absent; Corrupt when it is no integer or out of range.
Status meta_token_id(const Metadata& meta, const std::string& key, size_t n_tokens, const std::string& label,
                     int32_t& out) {
    const MetaValue* v = meta.find(key);
    if (v == nullptr) return Status::ok();
    const std::optional<int64_t> id = v->as_int();
    if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n_tokens)
        return error(StatusCode::Corrupt, label + ": metadata '" + key + "' = " + v->to_display() +
                                              " is not a token id below " + std::to_string(n_tokens));
    out = static_cast<int32_t>(*id);
    return Status::ok();
}

Status meta_flag(const Metadata& meta, const std::string& key, const std::string& label, bool& out) {
    const MetaValue* v = meta.find(key);
    if (v == nullptr) return Status::ok();
    if (v->type != MetaType::Bool)
        return error(StatusCode::Corrupt,
                     label + ": metadata '" + key + "' is " + std::string(meta_type_name(v->type)) + ", expected bool");
    out = std::get<bool>(v->scalar);
    return Status::ok();
}

std::string read_text(const std::string& path, Status& status) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        status = error(StatusCode::NotFound, path + ": cannot open");
        return {};
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A token written as tokenizer_config.json writes it: "text" or {"content": "text", ...}.
std::string token_text(const nlohmann::json& j) {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
    return {};
}

// The pre-tokenizer a tokenizer.json describes: a ByteLevel one alone (gpt-2's regex), or a Split by a regex
// then ByteLevel without its own regex. Known regexes get llama.cpp's name; others are used as written.
Result<PreTokenizer> hf_pre_tokenizer(const nlohmann::json& pre, const std::string& label) {
    static const char* const kLlama3Hf =
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
        "\\s+(?!\\S)|\\s+";
    static const char* const kQwen2Hf =
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
        "\\s+(?!\\S)|\\s+";
    std::vector<nlohmann::json> steps;
    if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
        for (const auto& s : pre["pretokenizers"]) steps.push_back(s);
    } else if (pre.is_object()) {
        steps.push_back(pre);
    }
    std::vector<std::string> regexes;
    bool byte_level = false;
    for (const auto& s : steps) {
        const std::string type = s.value("type", "");
        if (type == "Split" && s.contains("pattern") && s["pattern"].is_object() && s["pattern"].contains("Regex")) {
            const std::string behavior = s.value("behavior", "Isolated");
            if (behavior != "Isolated" || s.value("invert", false))
                return error(StatusCode::Unsupported, label + ": pre_tokenizer Split with behavior '" + behavior +
                                                          "' is not supported (Isolated is)");
            regexes.push_back(s["pattern"]["Regex"].get<std::string>());
        } else if (type == "ByteLevel") {
            byte_level = true;
            if (s.value("add_prefix_space", false))
                return error(StatusCode::Unsupported, label + ": ByteLevel add_prefix_space is not supported");
            if (s.value("use_regex", true)) {
                auto gpt2 = pre_tokenizer_named("gpt-2", label);
                if (!gpt2) return gpt2.status();
                regexes.push_back(gpt2->regexes.front());
            }
        } else if (type == "Digits" && s.value("individual_digits", false)) {
            regexes.push_back("\\p{N}");
        } else {
            return error(StatusCode::Unsupported,
                         label + ": pre_tokenizer '" + type + "' is not supported (Split by a regex, ByteLevel are)");
        }
    }
    if (!byte_level)
        return error(StatusCode::Unsupported, label +
                                                  ": a BPE tokenizer.json without a ByteLevel pre-tokenizer "
                                                  "(sentencepiece-style BPE) is not supported; use the GGUF");
    if (regexes.size() == 1 && regexes[0] == kLlama3Hf) return pre_tokenizer_named("llama-bpe", label);
    if (regexes.size() == 1 && regexes[0] == kQwen2Hf) return pre_tokenizer_named("qwen2", label);
    PreTokenizer p;
    p.name = regexes.size() == 1 && regexes[0] == pre_tokenizer_named("gpt-2", label)->regexes.front()
                 ? "gpt-2"
                 : "tokenizer.json";
    p.regexes = std::move(regexes);
    return p;
}

}  // namespace

Result<Tokenizer> Tokenizer::from_metadata(const Metadata& meta, const Vocabulary& vocab, const std::string& label) {
    const size_t n = vocab.tokens.size();
    int32_t pad = -1;
    int32_t unk = -1;
    auto keyed = special_ids_from_keys(meta, n, label);  // EOT, EOM, FIM
    if (!keyed) return keyed.status();
    if (Status s = meta_token_id(meta, "tokenizer.ggml.padding_token_id", n, label, pad); !s) return s;
    if (Status s = meta_token_id(meta, "tokenizer.ggml.unknown_token_id", n, label, unk); !s) return s;
    if (vocab.model != "gpt2") {
        auto t = from_vocabulary(vocab, label, *keyed);
        if (!t) return t.status();
        t->m_pad_id = pad;
        if (unk >= 0) t->m_unk_id = unk;
        if (Status s = meta_flag(meta, "tokenizer.ggml.add_bos_token", label, t->m_add_bos); !s) return s;
        if (Status s = meta_flag(meta, "tokenizer.ggml.add_eos_token", label, t->m_add_eos); !s) return s;
        if (Status s = meta_flag(meta, "tokenizer.ggml.add_space_prefix", label, t->m_add_space_prefix); !s) return s;
        return t;
    }
    BpeSpec spec;
    std::string pre_name;
    if (const MetaValue* p = meta.find("tokenizer.ggml.pre")) {
        if (p->as_string() == nullptr)
            return error(StatusCode::Corrupt, label + ": metadata 'tokenizer.ggml.pre' is not a string");
        pre_name = *p->as_string();
    }
    auto pre = pre_tokenizer_named(pre_name, label);
    if (!pre) return pre.status();
    spec.pre = std::move(*pre);
    const MetaValue* merges = meta.find("tokenizer.ggml.merges");
    if (merges == nullptr || merges->type != MetaType::Array || merges->array_type != MetaType::String)
        return error(StatusCode::Corrupt,
                     label + ": a gpt2 vocabulary without 'tokenizer.ggml.merges' (array of string)");
    spec.merges.reserve(merges->array.size());
    for (const MetaValue& m : merges->array) spec.merges.push_back(*m.as_string());
    spec.tokens = vocab.tokens;
    spec.token_types = vocab.token_types;
    spec.bos_id = vocab.bos_id;
    spec.eos_id = vocab.eos_id;
    spec.special = *keyed;
    spec.pad_id = pad;
    spec.unk_id = unk;
    if (Status s = meta_flag(meta, "tokenizer.ggml.add_bos_token", label, spec.pre.add_bos); !s) return s;
    return BpeBuilder::build(std::move(spec), label);
}

namespace {

// The byte-level BPE tables of a tokenizer.json `j` (not byte-fallback) read from `path`.
Result<BpeSpec> hf_bpe_spec(const nlohmann::json& j, const std::string& path) {
    const nlohmann::json& model = j["model"];
    if (!model.contains("vocab") || !model["vocab"].is_object() || !model.contains("merges") ||
        !model["merges"].is_array())
        return error(StatusCode::Corrupt, path + ": model.vocab (object) or model.merges (array) is missing");
    auto pre = hf_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : nlohmann::json(), path);
    if (!pre) return pre.status();
    BpeSpec spec;
    spec.pre = std::move(*pre);
    if (model.contains("ignore_merges") && model["ignore_merges"].is_boolean())
        spec.pre.ignore_merges = model["ignore_merges"].get<bool>();
    constexpr int64_t kMaxTokens = 1 << 24;
    auto put = [&](int64_t id, const std::string& tok, int32_t type) -> Status {
        if (id < 0 || id >= kMaxTokens)
            return error(StatusCode::Corrupt, path + ": token '" + tok + "' has id " + std::to_string(id));
        if (static_cast<size_t>(id) >= spec.tokens.size()) {
            spec.tokens.resize(static_cast<size_t>(id) + 1);
            spec.token_types.resize(static_cast<size_t>(id) + 1, 0);
        }
        spec.tokens[static_cast<size_t>(id)] = tok;
        spec.token_types[static_cast<size_t>(id)] = type;
        return Status::ok();
    };
    for (const auto& [tok, id] : model["vocab"].items()) {
        if (!id.is_number_integer()) return error(StatusCode::Corrupt, path + ": model.vocab['" + tok + "'] is no id");
        if (Status s = put(id.get<int64_t>(), tok, 1); !s) return s;
    }
    std::unordered_map<std::string, int32_t> added;
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
        for (const auto& a : j["added_tokens"]) {
            if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
                !a["content"].is_string())
                return error(StatusCode::Corrupt, path + ": an added_tokens entry without id and content");
            const std::string content = a["content"].get<std::string>();
            // Special added tokens are control tokens; the others user-defined text, as convert_hf_to_gguf.py does.
            if (Status s = put(a["id"].get<int64_t>(), content, a.value("special", false) ? 3 : 4); !s) return s;
            added[content] = a["id"].get<int32_t>();
        }
    }
    for (size_t i = 0; i < spec.tokens.size(); ++i)
        if (spec.token_types[i] == 0) {
            spec.tokens[i] = "[PAD" + std::to_string(i) + "]";  // a hole in the ids, as convert_hf_to_gguf.py fills it
            spec.token_types[i] = 5;
        }
    for (const auto& m : model["merges"]) {
        if (m.is_string()) {
            spec.merges.push_back(m.get<std::string>());
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            spec.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
        } else {
            return error(StatusCode::Corrupt, path + ": a merge is neither \"a b\" nor [\"a\", \"b\"]");
        }
    }
    // BOS/EOS and add_bos_token from tokenizer_config.json beside it.
    const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (fs::exists(config, ec)) {
        Status cs;
        const std::string ctext = read_text(config.string(), cs);
        if (!cs) return cs;
        nlohmann::json c = nlohmann::json::parse(ctext, nullptr, false);
        if (c.is_discarded() || !c.is_object())
            return error(StatusCode::Corrupt, config.string() + ": not a JSON object");
        auto id_of = [&](const char* key) {
            auto it = c.find(key);
            if (it == c.end()) return -1;
            auto a = added.find(token_text(*it));
            return a == added.end() ? -1 : a->second;
        };
        spec.bos_id = id_of("bos_token");
        spec.eos_id = id_of("eos_token");
        spec.pad_id = id_of("pad_token");
        if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean())
            spec.pre.add_bos = c["add_bos_token"].get<bool>();
    }
    return spec;
}

// A BPE spec as a GGUF vocabulary; Unsupported when its pre-tokenizer is none llama.cpp names (a regex of its own,
// or ignore_merges other than the named one's), which no tokenizer.ggml.pre can say.
Result<HfVocabulary> bpe_spec_vocabulary(const BpeSpec& spec, const std::string& path) {
    auto named = pre_tokenizer_named(spec.pre.name, path);
    if (!named || named->regexes != spec.pre.regexes || named->ignore_merges != spec.pre.ignore_merges)
        return error(StatusCode::Unsupported,
                     path +
                         ": its pre-tokenizer is none llama.cpp names in tokenizer.ggml.pre, so no GGUF or knot "
                         "vocabulary can hold it");
    HfVocabulary v;
    v.vocab.model = "gpt2";
    v.vocab.tokens = spec.tokens;
    v.vocab.token_types = spec.token_types;
    v.vocab.bos_id = spec.bos_id;
    v.vocab.eos_id = spec.eos_id;
    v.keys.set("tokenizer.ggml.model", MetaValue::of_string("gpt2"));
    v.keys.set("tokenizer.ggml.pre", MetaValue::of_string(spec.pre.name));
    MetaValue merges;
    merges.type = MetaType::Array;
    merges.array_type = MetaType::String;
    merges.array.reserve(spec.merges.size());
    for (const std::string& m : spec.merges) merges.array.push_back(MetaValue::of_string(m));
    v.keys.set("tokenizer.ggml.merges", std::move(merges));
    v.keys.set("tokenizer.ggml.add_bos_token", MetaValue::of_bool(spec.pre.add_bos));
    auto id = [&](const char* key, int32_t value) {
        if (value >= 0) v.keys.set(key, MetaValue::of_uint(static_cast<uint64_t>(value), MetaType::U32));
    };
    for (const auto& [key, value] : special_id_keys(spec.special)) id(key.c_str(), value);
    id("tokenizer.ggml.padding_token_id", spec.pad_id);
    id("tokenizer.ggml.unknown_token_id", spec.unk_id);
    return v;
}

// A tokenizer.json: its JSON object, checked to be a BPE model.
Result<nlohmann::json> read_hf_json(const std::string& path) {
    Status st;
    const std::string text = read_text(path, st);
    if (!st) return st;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return error(StatusCode::Corrupt, path + ": not a JSON object");
    const nlohmann::json& model = j.contains("model") ? j["model"] : nlohmann::json();
    if (!model.is_object() || model.value("type", "") != "BPE")
        return error(StatusCode::Unsupported, path + ": tokenizer model '" +
                                                  (model.is_object() ? model.value("type", "") : std::string()) +
                                                  "' is not supported (BPE is)");
    return j;
}

}  // namespace

Result<HfVocabulary> hf_vocabulary(const std::string& path) {
    std::error_code ec;
    const fs::path p(path);
    if (fs::is_directory(p, ec)) {
        // convert_hf_to_gguf.py's LlamaModel (and Gemma's, Phi-3's) tries tokenizer.model first.
        if (fs::is_regular_file(p / "tokenizer.model", ec))
            return hf_sentencepiece_vocabulary((p / "tokenizer.model").string());
        if (fs::is_regular_file(p / "tokenizer.json", ec)) return hf_vocabulary((p / "tokenizer.json").string());
        return error(StatusCode::NotFound, path + ": no tokenizer.model or tokenizer.json");
    }
    if (p.extension() == ".model") return hf_sentencepiece_vocabulary(path);
    auto j = read_hf_json(path);
    if (!j) return j.status();
    // Sentencepiece-style BPE (Llama-2, Mistral, Gemma): the SPM family, as convert_hf_to_gguf.py's LlamaHfVocab.
    if ((*j)["model"].value("byte_fallback", false)) return hf_byte_fallback_vocabulary(*j, path);
    auto spec = hf_bpe_spec(*j, path);
    if (!spec) return spec.status();
    return bpe_spec_vocabulary(*spec, path);
}

Result<Tokenizer> Tokenizer::load_hf_json(const std::string& path) {
    auto j = read_hf_json(path);
    if (!j) return j.status();
    if ((*j)["model"].value("byte_fallback", false)) {
        auto v = hf_byte_fallback_vocabulary(*j, path);
        if (!v) return v.status();
        return hf_tokenizer(*v, path);
    }
    auto spec = hf_bpe_spec(*j, path);
    if (!spec) return spec.status();
    // Through the GGUF keys, as a knot or GGUF made from it is read, when they can hold it; a pre-tokenizer regex of
    // its own directly.
    auto v = bpe_spec_vocabulary(*spec, path);
    if (v) return hf_tokenizer(*v, path);
    return BpeBuilder::build(std::move(*spec), path);
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
    std::error_code ec;
    fs::path p(path);
    // A Hugging Face folder (with or without its weights, which carry no vocabulary): its tokenizer files.
    if (fs::is_directory(p, ec) && hf_folder_has_tokenizer(p.string())) return load_hf_folder(p.string());
    if (p.extension() == ".json") return load_hf_json(p.string());
    if (p.extension() == ".model" && !fs::is_directory(p, ec)) return load_sentencepiece(p.string());
    if (p.extension() == ".bin" && !fs::is_directory(p, ec)) {
        // A llama2.c tokenizer.bin by itself (a checkpoint .bin has no vocabulary and fails below).
        const std::string name = p.filename().string();
        if (name == "tokenizer.bin" || name.rfind("tok", 0) == 0) {
            auto v = read_llama2c_tokenizer(p.string(), 0);
            if (!v) return v.status();
            return from_vocabulary(*v, p.string());
        }
    }
    if (is_knot_path(p.string())) {
        // A knot: its header's vocabulary and tokenizer keys, as generate reads them.
        auto knot = KnotFile::open(p.string());
        if (!knot) return knot.status();
        return tokenizer_for_model(p.string(), knot->vocabulary(), knot->config().vocab_size);
    }
    auto model = ModelFile::open(p.string());
    if (!model) return model.status();
    // No vocabulary of its own (safetensors, a llama2.c checkpoint): the tokenizer file beside it, as the model's
    // commands find it, or the error naming what is missing.
    if (model->vocabulary().empty()) return tokenizer_for_model(p.string(), {}, model->config().vocab_size);
    return from_metadata(model->metadata(), model->vocabulary(), p.string());
}

}  // namespace gkq
