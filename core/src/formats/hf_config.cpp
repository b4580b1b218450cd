#include "formats/hf_config.h"

#include "common/mapped_file.h"
#include "gkq/arch.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <unordered_set>
#include <vector>

namespace gkq {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 64;
constexpr uint64_t kMaxConfigBytes = 16ull << 20;  // real config.json files are a few kB

// Offset of the first byte that breaks UTF-8 (overlongs, surrogates and > U+10FFFF included), or npos.
size_t first_invalid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len = 0;
        uint32_t cp = 0;
        if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else
            return i;
        if (len > n - i) return i;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return i;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += len;
    }
    return std::string_view::npos;
}

// The text from the opening quote of the string holding byte `bad` up to and including that byte, with
// non-ASCII and control bytes escaped as \xNN so the message itself stays valid UTF-8.
std::string escaped_context(std::string_view text, size_t bad) {
    size_t begin = bad;
    while (begin > 0 && bad - begin < 64 && text[begin - 1] != '"') --begin;
    std::string out = "\"";
    for (size_t i = begin; i <= bad && i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c >= 0x80) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "...";
}

// Thrown by the parser callback to stop parsing at the first duplicate key or too-deep nesting; caught in
// parse_json_strict, never leaves this file.
struct StrictJsonStop {
    std::string why;
};

// "[json.exception.parse_error.101] parse error at ..." -> "parse error at ...".
std::string strip_exception_id(const char* what) {
    std::string s = what;
    if (!s.empty() && s[0] == '[') {
        size_t close = s.find("] ");
        if (close != std::string::npos) s.erase(0, close + 2);
    }
    return s;
}

}  // namespace

std::string json_excerpt(const json& v) {
    std::string s;
    try {
        s = v.dump();
    } catch (const json::exception&) {
        return "?";
    }
    if (s.size() > 40) s = s.substr(0, 40) + "...";
    return s;
}

namespace {

Status field_error(const std::string& file, const char* key, const char* want, const json& v) {
    return error(StatusCode::Corrupt,
                 file + ": field '" + key + "' must be " + want + ", not " + v.type_name() + " " + json_excerpt(v));
}

// Optional non-negative integer field; null counts as absent.
Status read_count(const json& cfg, const char* key, const std::string& file, int64_t& out) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return Status::ok();
    if (!it->is_number_unsigned()) return field_error(file, key, "a non-negative integer", *it);
    const auto v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return field_error(file, key, "a non-negative integer below 2^63", *it);
    out = static_cast<int64_t>(v);
    return Status::ok();
}

Status read_number(const json& cfg, const char* key, const std::string& file, double& out) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return Status::ok();
    if (!it->is_number()) return field_error(file, key, "a number", *it);
    out = it->get<double>();
    return Status::ok();
}

Status read_bool(const json& cfg, const char* key, const std::string& file, bool& out) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return Status::ok();
    if (!it->is_boolean()) return field_error(file, key, "true or false", *it);
    out = it->get<bool>();
    return Status::ok();
}

const char* torch_dtype_name(DType t) {
    switch (t) {
        case DType::F16: return "float16";
        case DType::BF16: return "bfloat16";
        default: return "float32";
    }
}

}  // namespace

Status parse_json_strict(std::string_view text, const std::string& file, const char* what, uint64_t file_offset,
                         json& out) {
    // nlohmann rejects invalid UTF-8 too, but its message quotes the raw bytes and gives no offset.
    if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
        return error(StatusCode::Corrupt, file + ": " + what + ": invalid UTF-8 at file offset " +
                                              std::to_string(file_offset + bad) + ", in " + escaped_context(text, bad));

    // One set of keys per open object (arrays get an unused set), and the last key of each level, so a
    // duplicate can be reported with the object it is in.
    std::vector<std::unordered_set<std::string>> keys;
    std::vector<std::string> last_key;
    auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (depth >= kMaxJsonDepth)
                    throw StrictJsonStop{"nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels"};
                keys.emplace_back();
                last_key.emplace_back();
                break;
            case json::parse_event_t::object_end:
            case json::parse_event_t::array_end:
                if (!keys.empty()) {
                    keys.pop_back();
                    last_key.pop_back();
                }
                break;
            case json::parse_event_t::key: {
                if (keys.empty()) break;
                const auto& k = parsed.get_ref<const std::string&>();
                if (!keys.back().insert(k).second) {
                    const std::string& parent = keys.size() >= 2 ? last_key[last_key.size() - 2] : std::string();
                    std::string where = keys.size() < 2  ? "in the top-level object"
                                        : parent.empty() ? "in an object inside an array"
                                                         : "inside '" + parent + "'";
                    throw StrictJsonStop{"key '" + k + "' appears more than once " + where};
                }
                last_key.back() = k;
                break;
            }
            case json::parse_event_t::value: break;
        }
        return true;
    };
    try {
        out = json::parse(text.begin(), text.end(), callback);
    } catch (const StrictJsonStop& stop) {
        return error(StatusCode::Corrupt, file + ": " + what + ": " + stop.why);
    } catch (const json::parse_error& e) {
        // e.byte counts characters read, end of input included: the offending byte is e.byte - 1 from 0.
        const uint64_t at = file_offset + (e.byte > 0 ? e.byte - 1 : 0);
        return error(StatusCode::Corrupt, file + ": " + what + " does not parse (parser byte position " +
                                              std::to_string(e.byte) + ", file offset " + std::to_string(at) +
                                              "): " + strip_exception_id(e.what()));
    } catch (const json::exception& e) {
        return error(StatusCode::Corrupt, file + ": " + what + " does not parse: " + strip_exception_id(e.what()));
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Corrupt, file + ": " + what + ": out of memory while parsing");
    }
    return Status::ok();
}

Status read_hf_config(const std::string& path, ModelConfig& config, Metadata& metadata) {
    auto map = MappedFile::open(path);
    if (!map) return map.status();
    if (map->size() > kMaxConfigBytes)
        return error(StatusCode::Corrupt, path + ": " + std::to_string(map->size()) + " bytes, more than the " +
                                              std::to_string(kMaxConfigBytes) + " a config.json may have");
    std::string_view text(reinterpret_cast<const char*>(map->data()), map->size());
    json cfg;
    if (Status s = parse_json_strict(text, path, "JSON", 0, cfg); !s) return s;
    if (!cfg.is_object())
        return error(StatusCode::Corrupt, path + ": the top level is a JSON " + cfg.type_name() + ", not an object");

    // The row whose keys to read: by model_type, else by the first "architectures" class (type errors in
    // either are reported below, after the keys, as before the table existed); llama's keys otherwise.
    const ArchNameKeys& names = arch_name_keys();
    const std::string type_key(names.hf_model_type);
    const std::string arch_key(names.hf_architectures);
    auto type = cfg.find(type_key);
    auto arch = cfg.find(arch_key);
    const ArchSpec* spec = nullptr;
    if (type != cfg.end() && type->is_string())
        spec = find_arch_hf_model_type(type->get_ref<const std::string&>());
    else if ((type == cfg.end() || type->is_null()) && arch != cfg.end() && arch->is_array() && !arch->empty() &&
             arch->front().is_string())
        spec = find_arch_hf_class(arch->front().get_ref<const std::string&>());
    const ArchSpec& keys = spec != nullptr ? *spec : default_arch();

    ModelConfig c;
    apply_defaults(keys.defaults, c);
    for (const HParamKey& k : keys.hf_keys) {
        // "a.b": key b of the object under a (absent or null a: nothing to read)
        const json* holder = &cfg;
        std::string key(k.key);
        if (size_t dot = key.find('.'); dot != std::string::npos) {
            auto parent = cfg.find(key.substr(0, dot));
            if (parent == cfg.end() || parent->is_null()) continue;
            if (!parent->is_object()) return field_error(path, key.substr(0, dot).c_str(), "an object", *parent);
            holder = &*parent;
            key = key.substr(dot + 1);
        }
        const HParamField f = hparam_field(k.param, c);
        Status s;
        switch (hparam_kind(k.param)) {
            case HParamKind::Count: s = read_count(*holder, key.c_str(), path, *f.count); break;
            case HParamKind::Real: s = read_number(*holder, key.c_str(), path, *f.real); break;
            case HParamKind::Flag: s = read_bool(*holder, key.c_str(), path, *f.flag); break;
            case HParamKind::RopeType: {
                auto it = holder->find(key);
                if (it == holder->end() || it->is_null()) break;
                if (!it->is_string()) {
                    s = field_error(path, std::string(k.key).c_str(), "a string", *it);
                    break;
                }
                if (!rope_scaling_from_name(it->get_ref<const std::string&>(), NameFormat::Hf, *f.rope))
                    *f.rope = RopeScaling::Unsupported;
                break;
            }
        }
        if (!s) return s;
    }
    if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;

    if (arch != cfg.end() && !arch->is_null()) {
        if (!arch->is_array()) return field_error(path, arch_key.c_str(), "an array of strings", *arch);
        for (const json& a : *arch)
            if (!a.is_string()) return field_error(path, arch_key.c_str(), "an array of strings", *arch);
    }
    if (type != cfg.end() && !type->is_null()) {
        if (!type->is_string()) return field_error(path, type_key.c_str(), "a string", *type);
        // the row's name where the table knows the type ("gemma3_text" is gemma3)
        c.architecture = spec != nullptr ? std::string(spec->name) : type->get<std::string>();
    } else if (spec != nullptr) {
        c.architecture = std::string(spec->name);
    } else if (arch != cfg.end() && arch->is_array() && !arch->empty()) {
        // A class the table does not know: "FooForCausalLM" -> "foo".
        std::string a = arch->front().get<std::string>();
        if (size_t p = a.find("For"); p != std::string::npos && p > 0) {
            c.architecture.clear();
            for (size_t i = 0; i < p; ++i)
                c.architecture += static_cast<char>(std::tolower(static_cast<unsigned char>(a[i])));
        }
    }
    if (c.architecture.empty()) c.architecture = std::string(default_arch().name);

    for (auto it = cfg.begin(); it != cfg.end(); ++it) {
        const json& v = it.value();
        MetaValue m;
        if (v.is_string())
            m = MetaValue::of_string(v.get<std::string>());
        else if (v.is_boolean())
            m = MetaValue::of_bool(v.get<bool>());
        else if (v.is_number_unsigned())
            m = MetaValue::of_uint(v.get<uint64_t>());
        else if (v.is_number_integer())
            m = MetaValue::of_int(v.get<int64_t>());
        else if (v.is_number_float())
            m = MetaValue::of_float(v.get<double>());
        else
            continue;  // objects, arrays and null: not shown
        metadata.set("config." + it.key(), std::move(m));
    }
    config = c;
    return Status::ok();
}

std::string hf_config_json(const ModelConfig& config, DType dtype) {
    const ArchSpec& a = arch_for_writing(config.architecture);
    const ArchNameKeys& names = arch_name_keys();
    ModelConfig c = config;
    if (c.n_kv_heads <= 0) c.n_kv_heads = c.n_heads;
    nlohmann::ordered_json j;
    j[std::string(names.hf_architectures)] = nlohmann::ordered_json::array({std::string(a.hf_classes.front())});
    j[std::string(names.hf_model_type)] = std::string(a.hf_model_type);
    std::vector<HParam> written;
    for (const HParamKey& k : a.hf_keys) {
        if (!hparam_written(k.param, c) || std::find(written.begin(), written.end(), k.param) != written.end())
            continue;
        written.push_back(k.param);
        const HParamField f = hparam_field(k.param, c);
        const std::string key(k.key);
        const size_t dot = key.find('.');
        auto& v = dot == std::string::npos ? j[key] : j[key.substr(0, dot)][key.substr(dot + 1)];
        switch (hparam_kind(k.param)) {
            case HParamKind::Count: v = *f.count; break;
            case HParamKind::Real: v = *f.real; break;
            case HParamKind::Flag: v = *f.flag; break;
            case HParamKind::RopeType: v = std::string(rope_scaling_name(*f.rope, NameFormat::Hf)); break;
        }
    }
    j[std::string(names.hf_activation)] = std::string(a.hf_activation);
    j["torch_dtype"] = torch_dtype_name(dtype);
    return j.dump(2) + "\n";
}

}  // namespace gkq
