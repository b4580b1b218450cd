// GGUF v2/v3 reader (layout in gguf_layout.h). Every count is bounded by the bytes left in the file before
// anything is reserved, every tensor's data range is checked against the file, and every error names the file
// with the offset, key or tensor involved.
#include "common/byte_reader.h"
#include "formats/gguf_layout.h"
#include "formats/model_file_data.h"
#include "gkq/arch.h"
#include "gkq/naming.h"

#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_set>

namespace gkq {

namespace {

std::string u64s(uint64_t v) {
    return std::to_string(v);
}

std::string type_name_of(uint32_t t) {
    return gguf::is_meta_type(t) ? std::string(meta_type_name(static_cast<MetaType>(t))) : "type " + u64s(t);
}

// ---------------------------------------------------------------------------------------------------------
// metadata values

template <class T>
bool read_scalar(ByteReader& r, const std::string& what, T& out) {
    return r.read(out, what.c_str());
}

// A fixed-width number, kept in the variant alternative of its kind (unsigned, signed, floating).
template <class T>
bool read_number(ByteReader& r, const std::string& what, MetaType type, MetaValue& out) {
    T v{};
    if (!read_scalar(r, what, v)) return false;
    out = MetaValue{};
    out.type = type;
    if constexpr (std::is_floating_point_v<T>)
        out.scalar = static_cast<double>(v);
    else if constexpr (std::is_signed_v<T>)
        out.scalar = static_cast<int64_t>(v);
    else
        out.scalar = static_cast<uint64_t>(v);
    return true;
}

// Reads one value of `type` (already validated) into `out`. `depth` counts enclosing arrays.
bool read_value(ByteReader& r, MetaType type, int depth, const std::string& what, MetaValue& out) {
    switch (type) {
        case MetaType::U8: return read_number<uint8_t>(r, what, type, out);
        case MetaType::I8: return read_number<int8_t>(r, what, type, out);
        case MetaType::U16: return read_number<uint16_t>(r, what, type, out);
        case MetaType::I16: return read_number<int16_t>(r, what, type, out);
        case MetaType::U32: return read_number<uint32_t>(r, what, type, out);
        case MetaType::I32: return read_number<int32_t>(r, what, type, out);
        case MetaType::U64: return read_number<uint64_t>(r, what, type, out);
        case MetaType::I64: return read_number<int64_t>(r, what, type, out);
        case MetaType::F32: return read_number<float>(r, what, type, out);
        case MetaType::F64: return read_number<double>(r, what, type, out);
        case MetaType::Bool: {
            const uint64_t at = r.offset();
            uint8_t v = 0;
            if (!read_scalar(r, what, v)) return false;
            if (v > 1) {
                r.fail_at(at, what, "bool value " + u64s(v) + " is neither 0 nor 1");
                return false;
            }
            out = MetaValue::of_bool(v != 0);
            return true;
        }
        case MetaType::String: {
            // Values are raw bytes: tokenizer tokens need not be valid UTF-8 on their own.
            std::string s;
            if (!r.read_string_u64(s, what.c_str(), gguf::kMaxStringBytes)) return false;
            out = MetaValue::of_string(std::move(s));
            return true;
        }
        case MetaType::Array: {
            const uint64_t at = r.offset();
            uint32_t elem = 0;
            uint64_t n = 0;
            if (!read_scalar(r, what + " array element type", elem) || !read_scalar(r, what + " array length", n))
                return false;
            if (depth >= gguf::kMaxArrayDepth) {
                r.fail_at(at, what, "arrays nested deeper than " + std::to_string(gguf::kMaxArrayDepth) + " levels");
                return false;
            }
            if (!gguf::is_meta_type(elem)) {
                r.fail_at(at, what, "unknown array element type " + u64s(elem));
                return false;
            }
            const auto elem_type = static_cast<MetaType>(elem);
            uint64_t need = 0;
            const bool overflow = !checked_mul(n, gguf::min_value_bytes(elem_type), need);
            if (overflow || need > r.remaining()) {
                r.fail_at(at, what,
                          "array of " + u64s(n) + " " + type_name_of(elem) + " values needs at least " +
                              (overflow ? std::string("2^64") : u64s(need)) + " bytes but only " + u64s(r.remaining()) +
                              " remain");
                return false;
            }
            out = MetaValue{};
            out.type = MetaType::Array;
            out.array_type = elem_type;
            out.array.reserve(static_cast<size_t>(n));
            for (uint64_t i = 0; i < n; ++i) {
                MetaValue e;
                if (!read_value(r, elem_type, depth + 1, what, e)) return false;
                out.array.push_back(std::move(e));
            }
            return true;
        }
    }
    return false;
}

bool read_metadata(ByteReader& r, uint64_t n_kv, Metadata& meta) {
    std::unordered_set<std::string> keys;
    meta.entries.reserve(static_cast<size_t>(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
        const uint64_t at = r.offset();
        const std::string key_what = "metadata entry " + u64s(i) + " key";
        std::string key;
        if (!r.read_string_u64(key, key_what.c_str(), gguf::kMaxKeyBytes)) return false;
        if (key.empty()) {
            r.fail_at(at, key_what, "the key is empty");
            return false;
        }
        if (!is_valid_utf8(key)) {
            r.fail_at(at, key_what, "the key is not valid UTF-8");
            return false;
        }
        const std::string what = "metadata '" + key + "'";
        if (!keys.insert(key).second) {
            r.fail_at(at, what, "the key appears more than once");
            return false;
        }
        const uint64_t type_at = r.offset();
        uint32_t type = 0;
        if (!read_scalar(r, what + " value type", type)) return false;
        if (!gguf::is_meta_type(type)) {
            r.fail_at(type_at, what, "unknown value type " + u64s(type));
            return false;
        }
        MetaValue v;
        if (!read_value(r, static_cast<MetaType>(type), 0, what, v)) return false;
        meta.entries.emplace_back(std::move(key), std::move(v));
    }
    return true;
}

// ---------------------------------------------------------------------------------------------------------
// tensor infos

struct GgufTensor {
    Tensor tensor;
    uint64_t relative_offset = 0;
    uint64_t info_offset = 0;  // where its tensor info starts, for messages
};

Status read_tensor_info(ByteReader& r, uint64_t index, const ArchSpec& arch, std::unordered_set<std::string>& names,
                        GgufTensor& out) {
    const uint64_t at = r.offset();
    out.info_offset = at;
    const std::string name_what = "tensor info " + u64s(index) + " name";
    std::string name;
    if (!r.read_string_u64(name, name_what.c_str(), gguf::kMaxNameBytes)) return r.status();
    if (name.empty()) {
        r.fail_at(at, name_what, "the name is empty");
        return r.status();
    }
    if (!is_valid_utf8(name)) {
        r.fail_at(at, name_what, "the name is not valid UTF-8");
        return r.status();
    }
    const std::string what = "tensor '" + name + "'";
    if (!names.insert(name).second) {
        r.fail_at(at, what, "the name appears more than once");
        return r.status();
    }
    const uint64_t dims_at = r.offset();
    uint32_t n_dims = 0;
    if (!read_scalar(r, what + " n_dims", n_dims)) return r.status();
    if (n_dims == 0 || n_dims > gguf::kMaxDims) {
        r.fail_at(dims_at, what, "n_dims " + u64s(n_dims) + " is outside 1.." + std::to_string(gguf::kMaxDims));
        return r.status();
    }
    uint64_t ne[gguf::kMaxDims] = {};
    uint64_t n_elements = 1;
    for (uint32_t j = 0; j < n_dims; ++j) {
        const uint64_t ne_at = r.offset();
        const std::string ne_what = what + " ne[" + std::to_string(j) + "]";
        if (!read_scalar(r, ne_what, ne[j])) return r.status();
        if (ne[j] == 0) {
            r.fail_at(ne_at, ne_what, "zero dimension");
            return r.status();
        }
        if (ne[j] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
            !checked_mul(n_elements, ne[j], n_elements) ||
            n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            r.fail_at(ne_at, ne_what, "dimension " + u64s(ne[j]) + " makes the element count overflow");
            return r.status();
        }
    }
    const uint64_t type_at = r.offset();
    uint32_t type_id = 0;
    uint64_t rel = 0;
    if (!read_scalar(r, what + " type", type_id) || !read_scalar(r, what + " offset", rel)) return r.status();
    const TypeTraits* type = gguf::find_ggml_type(type_id);
    if (type == nullptr)  // possibly a type newer than this table: unsupported rather than corrupt
        return error(StatusCode::Unsupported, r.label() + ": " + what + " at offset " + u64s(type_at) +
                                                  ": unknown ggml type id " + u64s(type_id));
    // ggml lays blocks out along rows, so each row (ne[0]) must be whole blocks, not just the total.
    if (ne[0] % type->block_elements != 0) {
        r.fail_at(type_at, what,
                  "row length ne[0] = " + u64s(ne[0]) + " (element count " + u64s(n_elements) +
                      ") is not a multiple of the " + std::string(type->ggml_name) + " block size " +
                      std::to_string(type->block_elements));
        return r.status();
    }
    uint64_t n_bytes = 0;
    if (!checked_mul(n_elements / type->block_elements, type->block_bytes, n_bytes)) {
        r.fail_at(type_at, what, "data size overflows");
        return r.status();
    }

    Tensor& t = out.tensor;
    const RoleAndLayer rl = parse_tensor_name(arch, NameFormat::Gguf, name);
    t.name = std::move(name);
    t.role = rl.role;
    t.layer = rl.layer;
    t.shape.assign(n_dims, 0);
    for (uint32_t j = 0; j < n_dims; ++j) t.shape[n_dims - 1 - j] = static_cast<int64_t>(ne[j]);
    t.dtype = type->dtype;
    t.type_name = std::string(type->ggml_name);
    t.n_bytes = n_bytes;
    out.relative_offset = rel;
    return Status::ok();
}

// ---------------------------------------------------------------------------------------------------------
// config and vocabulary from metadata

class MetaLookup {
public:
    MetaLookup(const Metadata& m, const std::string& path) : m_meta(m), m_path(path) {}

    Status type_error(const std::string& key, const MetaValue& v, const char* expected) const {
        std::string found(meta_type_name(v.type));
        if (v.type == MetaType::Array) found += " of " + std::string(meta_type_name(v.array_type));
        return error(StatusCode::Corrupt,
                     m_path + ": metadata '" + key + "' has type " + found + "; expected " + expected);
    }

    // A non-negative integer; per-layer arrays (some architectures vary head counts by layer) give their
    // common value, or leave `out` alone when the layers differ.
    Status count(const std::string& key, int64_t& out) const {
        const MetaValue* v = m_meta.find(key);
        if (v == nullptr) return Status::ok();
        if (v->type == MetaType::Array) {
            if (!is_integer(v->array_type)) return type_error(key, *v, "an integer");
            std::optional<int64_t> common;
            for (const MetaValue& e : v->array) {
                auto x = e.as_int();
                if (!x || *x < 0) return range_error(key, e);
                if (common && *common != *x) return Status::ok();
                common = x;
            }
            if (common) out = *common;
            return Status::ok();
        }
        if (!is_integer(v->type)) return type_error(key, *v, "an integer");
        auto x = v->as_int();
        if (!x || *x < 0) return range_error(key, *v);
        out = *x;
        return Status::ok();
    }

    Status real(const std::string& key, double& out) const {
        const MetaValue* v = m_meta.find(key);
        if (v == nullptr) return Status::ok();
        if (v->type != MetaType::F32 && v->type != MetaType::F64) return type_error(key, *v, "f32 or f64");
        out = *v->as_float();
        return Status::ok();
    }

    Status flag(const std::string& key, bool& out) const {
        const MetaValue* v = m_meta.find(key);
        if (v == nullptr) return Status::ok();
        const auto* b = std::get_if<bool>(&v->scalar);
        if (v->type != MetaType::Bool || b == nullptr) return type_error(key, *v, "bool");
        out = *b;
        return Status::ok();
    }

    Status token_id(const std::string& key, int32_t& out) const {
        const MetaValue* v = m_meta.find(key);
        if (v == nullptr) return Status::ok();
        if (!is_integer(v->type)) return type_error(key, *v, "an integer");
        auto x = v->as_int();
        if (!x || *x < 0 || *x > std::numeric_limits<int32_t>::max()) return range_error(key, *v);
        out = static_cast<int32_t>(*x);
        return Status::ok();
    }

    // An array whose elements have one of `allowed` types (nullptr when absent).
    Result<const MetaValue*> array(const std::string& key, std::initializer_list<MetaType> allowed,
                                   const char* expected) const {
        const MetaValue* v = m_meta.find(key);
        if (v == nullptr) return static_cast<const MetaValue*>(nullptr);
        if (v->type != MetaType::Array) return type_error(key, *v, expected);
        for (MetaType t : allowed)
            if (v->array_type == t) return v;
        return type_error(key, *v, expected);
    }

    Status range_error(const std::string& key, const MetaValue& v) const {
        return error(StatusCode::Corrupt, m_path + ": metadata '" + key + "' = " + v.to_display() + " is out of range");
    }

    static bool is_integer(MetaType t) {
        switch (t) {
            case MetaType::U8:
            case MetaType::I8:
            case MetaType::U16:
            case MetaType::I16:
            case MetaType::U32:
            case MetaType::I32:
            case MetaType::U64:
            case MetaType::I64: return true;
            default: return false;
        }
    }

private:
    const Metadata& m_meta;
    const std::string& m_path;
};

// The row whose tensor names and keys the file uses: by general.architecture, llama's when the table has none
// (a missing or mistyped general.architecture is reported by read_config).
const ArchSpec& arch_of(const Metadata& meta) {
    const MetaValue* v = meta.find(arch_name_keys().gguf_architecture);
    const std::string* name = v != nullptr ? v->as_string() : nullptr;
    const ArchSpec* a = name != nullptr ? find_arch_gguf(*name) : nullptr;
    return a != nullptr ? *a : default_arch();
}

Status read_config(ModelFileData& d) {
    const MetaLookup m(d.metadata, d.path);
    const std::string arch_key(arch_name_keys().gguf_architecture);
    const MetaValue* arch = d.metadata.find(arch_key);
    if (arch == nullptr) return error(StatusCode::Corrupt, d.path + ": metadata '" + arch_key + "' is missing");
    if (arch->as_string() == nullptr) return m.type_error(arch_key, *arch, "string");
    ModelConfig& c = d.config;
    c.architecture = *arch->as_string();
    const ArchSpec& spec = arch_of(d.metadata);
    c.rope_style = spec.gguf_rope;
    c.norm_storage = norm_storage(spec, NameFormat::Gguf);
    apply_defaults(spec.defaults, c);
    // Keys under the file's own prefix, as llama.cpp reads them, for architectures the table lacks too.
    c.n_kv_heads = -1;  // absent, or per-layer values that differ: n_heads
    for (const HParamKey& k : spec.gguf_keys) {
        const std::string key = gguf_key(k.key, c.architecture);
        const HParamField f = hparam_field(k.param, c);
        Status s;
        switch (hparam_kind(k.param)) {
            case HParamKind::Count: s = m.count(key, *f.count); break;
            case HParamKind::Real: s = m.real(key, *f.real); break;
            case HParamKind::Flag: s = m.flag(key, *f.flag); break;
            case HParamKind::RopeType:
                if (const MetaValue* v = d.metadata.find(key)) {
                    if (v->as_string() == nullptr) return m.type_error(key, *v, "string");
                    if (!rope_scaling_from_name(*v->as_string(), NameFormat::Gguf, *f.rope))
                        *f.rope = RopeScaling::Unsupported;
                }
                break;
        }
        if (!s) return s;
    }
    if (c.n_kv_heads < 0) c.n_kv_heads = c.n_heads;
    // llama.cpp divides positions by a scaling factor whatever the scaling type says (linear when it says none)
    if (c.rope_scaling == RopeScaling::None && c.rope_factor != 1.0 && c.rope_factor != 0.0)
        c.rope_scaling = RopeScaling::Linear;
    if (c.rope_factor == 0.0) c.rope_factor = 1.0;  // llama.cpp: 0 means unscaled
    // Gemma's attention scale, which GGUF does not store, as llama.cpp derives it
    if (spec.gguf_scale_by_embd_layers > 0)
        c.query_pre_attn_scalar =
            c.n_layers == spec.gguf_scale_by_embd_layers && c.n_heads > 0 ? c.dim / c.n_heads : c.head_size();
    return Status::ok();
}

Status read_vocabulary(ModelFileData& d) {
    const MetaLookup m(d.metadata, d.path);
    Vocabulary& v = d.vocab;
    if (const MetaValue* model = d.metadata.find("tokenizer.ggml.model")) {
        if (model->as_string() == nullptr) return m.type_error("tokenizer.ggml.model", *model, "string");
        v.model = *model->as_string();
    }
    auto tokens = m.array("tokenizer.ggml.tokens", {MetaType::String}, "array of string");
    if (!tokens) return tokens.status();
    if (*tokens != nullptr) {
        v.tokens.reserve((*tokens)->array.size());
        for (const MetaValue& e : (*tokens)->array) v.tokens.push_back(*e.as_string());
    }
    const size_t n_tokens = v.tokens.size();
    auto length_error = [&](const std::string& key, size_t n) {
        return error(StatusCode::Corrupt, d.path + ": metadata '" + key + "' has " + std::to_string(n) +
                                              " entries but tokenizer.ggml.tokens has " + std::to_string(n_tokens));
    };
    auto scores = m.array("tokenizer.ggml.scores", {MetaType::F32, MetaType::F64}, "array of f32");
    if (!scores) return scores.status();
    if (*scores != nullptr) {
        if ((*scores)->array.size() != n_tokens) return length_error("tokenizer.ggml.scores", (*scores)->array.size());
        v.scores.reserve(n_tokens);
        for (const MetaValue& e : (*scores)->array) v.scores.push_back(static_cast<float>(*e.as_float()));
    }
    auto types = m.array("tokenizer.ggml.token_type",
                         {MetaType::I32, MetaType::U32, MetaType::I8, MetaType::U8, MetaType::I16, MetaType::U16},
                         "array of i32");
    if (!types) return types.status();
    if (*types != nullptr) {
        if ((*types)->array.size() != n_tokens)
            return length_error("tokenizer.ggml.token_type", (*types)->array.size());
        v.token_types.reserve(n_tokens);
        for (const MetaValue& e : (*types)->array) {
            const int64_t x = *e.as_int();
            if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
                return m.range_error("tokenizer.ggml.token_type", e);
            v.token_types.push_back(static_cast<int32_t>(x));
        }
    }
    if (Status s = m.token_id("tokenizer.ggml.bos_token_id", v.bos_id); !s) return s;
    if (Status s = m.token_id("tokenizer.ggml.eos_token_id", v.eos_id); !s) return s;
    if (d.config.vocab_size == 0) d.config.vocab_size = static_cast<int64_t>(n_tokens);
    return Status::ok();
}

std::string printable_magic(const uint8_t* p) {
    std::string s = "\"";
    for (int i = 0; i < 4; ++i) {
        if (p[i] >= 0x20 && p[i] < 0x7f) {
            s += static_cast<char>(p[i]);
        } else {
            static const char* hex = "0123456789abcdef";
            s += "\\x";
            s += hex[p[i] >> 4];
            s += hex[p[i] & 15];
        }
    }
    return s + "\"";
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------

Result<ModelFileDataPtr> read_gguf(const std::string& path) {
    auto mapped = MappedFile::open(path);
    if (!mapped) return mapped.status();
    MappedFile map = std::move(mapped).value();
    const uint8_t* base = map.data();
    const uint64_t file_size = map.size();
    ByteReader r(base, file_size, path);

    // ---- header
    const uint8_t* magic = nullptr;
    if (!r.bytes(4, magic, "magic")) return r.status();
    if (std::memcmp(magic, gguf::kMagic, 4) != 0)
        return error(StatusCode::Corrupt, path + ": not a GGUF file: magic at offset 0 is " + printable_magic(magic) +
                                              ", expected \"GGUF\"");
    uint32_t version = 0;
    if (!r.read(version, "version")) return r.status();
    if (version != 2 && version != 3) {
        const uint32_t swapped = __builtin_bswap32(version);
        if (swapped == 2 || swapped == 3)
            return error(StatusCode::Unsupported,
                         path + ": big-endian GGUF v" + std::to_string(swapped) + " files are not supported");
        return error(StatusCode::Unsupported, path + ": unsupported GGUF version " + std::to_string(version) +
                                                  " (this reader handles versions 2 and 3)");
    }
    uint64_t n_tensors = 0;
    uint64_t n_kv = 0;
    const uint64_t n_tensors_at = r.offset();
    if (!r.read(n_tensors, "tensor_count")) return r.status();
    const uint64_t n_kv_at = r.offset();
    if (!r.read(n_kv, "metadata_kv_count")) return r.status();
    uint64_t need = 0;
    if (!checked_mul(n_tensors, gguf::kMinTensorInfoBytes, need) || need > r.remaining()) {
        r.fail_at(n_tensors_at, "tensor_count",
                  u64s(n_tensors) + " tensor infos cannot fit in the " + u64s(r.remaining()) + " bytes left");
        return r.status();
    }
    if (!checked_mul(n_kv, gguf::kMinKvBytes, need) || need > r.remaining()) {
        r.fail_at(n_kv_at, "metadata_kv_count",
                  u64s(n_kv) + " key/value pairs cannot fit in the " + u64s(r.remaining()) + " bytes left");
        return r.status();
    }

    auto d = std::make_unique<ModelFileData>();
    d->format = ModelFormat::Gguf;
    d->format_detail = "gguf v" + std::to_string(version);
    d->path = path;

    // ---- metadata
    if (!read_metadata(r, n_kv, d->metadata)) return r.status();
    uint64_t alignment = gguf::kDefaultAlignment;
    if (const MetaValue* a = d->metadata.find("general.alignment")) {
        if (a->type != MetaType::U32) return MetaLookup(d->metadata, path).type_error("general.alignment", *a, "u32");
        alignment = static_cast<uint64_t>(*a->as_int());
        if (alignment == 0 || (alignment & (alignment - 1)) != 0)
            return error(StatusCode::Corrupt, path + ": metadata 'general.alignment' = " + u64s(alignment) +
                                                  " is not a non-zero power of two");
    }

    // ---- tensor infos
    if (!checked_mul(n_tensors, gguf::kMinTensorInfoBytes, need) || need > r.remaining()) {
        r.fail_at(n_tensors_at, "tensor_count",
                  u64s(n_tensors) + " tensor infos cannot fit in the " + u64s(r.remaining()) +
                      " bytes left after the metadata");
        return r.status();
    }
    std::vector<GgufTensor> infos(static_cast<size_t>(n_tensors));
    std::unordered_set<std::string> names;
    const ArchSpec& arch = arch_of(d->metadata);
    for (uint64_t i = 0; i < n_tensors; ++i)
        if (Status s = read_tensor_info(r, i, arch, names, infos[i]); !s) return s;

    // ---- data section
    uint64_t data_start = 0;
    if (!checked_add(r.offset(), alignment - 1, data_start))
        return error(StatusCode::Corrupt, path + ": header overflows");
    data_start -= data_start % alignment;
    d->tensors.reserve(infos.size());
    for (GgufTensor& info : infos) {
        Tensor& t = info.tensor;
        const std::string where = path + ": tensor '" + t.name + "' (info at offset " + u64s(info.info_offset) + "): ";
        if (info.relative_offset % alignment != 0)
            return error(StatusCode::Corrupt, where + "data offset " + u64s(info.relative_offset) +
                                                  " is not a multiple of the alignment " + u64s(alignment));
        uint64_t abs = 0;
        if (!checked_add(data_start, info.relative_offset, abs) || abs > file_size)
            return error(StatusCode::Corrupt, where + "data offset " + u64s(info.relative_offset) + " (absolute " +
                                                  u64s(data_start) + " + " + u64s(info.relative_offset) +
                                                  ") is past the end of the file (" + u64s(file_size) + " bytes)");
        if (!range_in_file(abs, t.n_bytes, file_size))
            return error(StatusCode::Corrupt, where + u64s(t.n_bytes) + " bytes of " + t.type_name +
                                                  " data at offset " + u64s(abs) + " run past the end of the file (" +
                                                  u64s(file_size) + " bytes)");
        t.file_offset = abs;
        t.data = base + abs;
        d->tensors.push_back(std::move(t));
    }

    if (Status s = read_config(*d); !s) return s;
    if (Status s = read_vocabulary(*d); !s) return s;
    d->maps.push_back(std::move(map));  // the mapping's address survives the move, so tensor pointers stay valid
    return d;
}

}  // namespace gkq
