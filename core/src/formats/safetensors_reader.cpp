// safetensors reader: one file, or the shards listed by model.safetensors.index.json, plus config.json.
//
// Byte layout of one file (all little-endian):
//   [0, 8)        u64 N: length of the header
//   [8, 8 + N)    UTF-8 JSON object: name -> {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [b, e]},
//                 and optionally "__metadata__": {string: string}; may be padded with spaces
//   [8 + N, end)  data section; a tensor's bytes are [b, e) relative to its start, row-major, outermost first
// Index: {"metadata": {...}, "weight_map": {tensor name: shard file name relative to the index's folder}}.
#include "common/byte_reader.h"
#include "formats/hf_config.h"
#include "formats/model_file_data.h"
#include "gkq/naming.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <unordered_set>

namespace gkq {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The reference implementation's limit; real headers are well under 1 MB even for 70B models.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr uint64_t kMaxIndexBytes = 100'000'000;

struct DtypeInfo {
    std::string_view name;  // as safetensors writes it
    DType dtype;
    uint32_t bits;  // per element
};

// Every dtype of the safetensors specification. The ones gkq cannot convert are listed as Other with their
// exact size, so such files open and show their tensors, and only compute on those tensors is refused.
constexpr DtypeInfo kDtypes[] = {
    {"F32", DType::F32, 32},      {"F16", DType::F16, 16},   {"BF16", DType::BF16, 16},    {"F64", DType::F64, 64},
    {"I8", DType::I8, 8},         {"U8", DType::U8, 8},      {"I16", DType::I16, 16},      {"I32", DType::I32, 32},
    {"I64", DType::I64, 64},      {"BOOL", DType::Other, 8}, {"F8_E4M3", DType::Other, 8}, {"F8_E5M2", DType::Other, 8},
    {"F8_E8M0", DType::Other, 8}, {"U16", DType::Other, 16}, {"U32", DType::Other, 32},    {"U64", DType::Other, 64},
    {"C64", DType::Other, 64},    {"F4", DType::Other, 4},   {"F6_E2M3", DType::Other, 6}, {"F6_E3M2", DType::Other, 6},
};

const DtypeInfo* find_dtype(std::string_view name) {
    for (const auto& d : kDtypes)
        if (d.name == name) return &d;
    return nullptr;
}

Status corrupt(const std::string& file, const std::string& why) {
    return error(StatusCode::Corrupt, file + ": " + why);
}

Status tensor_error(const std::string& file, const std::string& name, const std::string& why,
                    StatusCode code = StatusCode::Corrupt) {
    return error(code, file + ": tensor '" + name + "': " + why);
}

// A field that must be an integer in [0, 2^63).
bool read_index_value(const json& v, uint64_t& out) {
    if (!v.is_number_unsigned()) return false;
    out = v.get<uint64_t>();
    return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

// One header entry -> Tensor, checked against the data section [data, data + data_size).
Status parse_tensor(const std::string& file, const std::string& name, const json& entry, const uint8_t* data,
                    uint64_t data_start, uint64_t data_size, Tensor& t) {
    if (name.empty()) return corrupt(file, "a tensor has an empty name");
    if (!entry.is_object())
        return tensor_error(file, name, std::string("entry must be an object, not ") + entry.type_name());

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end()) return tensor_error(file, name, "field 'dtype' is missing");
    if (!dtype_it->is_string())
        return tensor_error(file, name, std::string("field 'dtype' must be a string, not ") + dtype_it->type_name());
    const auto& dtype_str = dtype_it->get_ref<const std::string&>();
    const DtypeInfo* dt = find_dtype(dtype_str);
    if (!dt) return tensor_error(file, name, "unknown dtype '" + dtype_str + "'", StatusCode::Unsupported);

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end()) return tensor_error(file, name, "field 'shape' is missing");
    if (!shape_it->is_array())
        return tensor_error(file, name,
                            std::string("field 'shape' must be an array, not ") + shape_it->type_name() + " " +
                                json_excerpt(*shape_it));
    std::vector<int64_t> shape;
    uint64_t n_elements = 1;
    bool overflow = false;
    for (size_t i = 0; i < shape_it->size(); ++i) {
        const json& d = (*shape_it)[i];
        uint64_t dim = 0;
        if (!read_index_value(d, dim)) {
            const std::string why =
                d.is_number_integer() && !d.is_number_unsigned()
                    ? "is negative (" + json_excerpt(d) + ")"
                    : std::string("must be an integer in [0, 2^63), not ") + d.type_name() + " " + json_excerpt(d);
            return tensor_error(file, name, "field 'shape' entry " + std::to_string(i) + " " + why);
        }
        shape.push_back(static_cast<int64_t>(dim));
        overflow = overflow || !checked_mul(n_elements, dim, n_elements);
    }

    auto off_it = entry.find("data_offsets");
    if (off_it == entry.end()) return tensor_error(file, name, "field 'data_offsets' is missing");
    uint64_t begin = 0, end = 0;
    if (!off_it->is_array() || off_it->size() != 2 || !read_index_value((*off_it)[0], begin) ||
        !read_index_value((*off_it)[1], end))
        return tensor_error(
            file, name,
            "field 'data_offsets' must be an array of two non-negative integers, not " + json_excerpt(*off_it));
    if (begin > end)
        return tensor_error(
            file, name,
            "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] are reversed (begin > end)");
    if (end > data_size)
        return tensor_error(file, name,
                            "data_offsets end " + std::to_string(end) + " is past the end of the data section (" +
                                std::to_string(data_size) + " bytes, from file offset " + std::to_string(data_start) +
                                ")");

    uint64_t n_bits = 0;
    if (overflow || !checked_mul(n_elements, dt->bits, n_bits) ||
        n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return tensor_error(file, name, "shape " + shape_to_string(shape) + " has too many elements");
    if (n_bits % 8 != 0)
        return tensor_error(file, name,
                            "shape " + shape_to_string(shape) + " as " + dtype_str + " is not a whole number of bytes");
    if (n_bits / 8 != end - begin)
        return tensor_error(file, name,
                            "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] hold " +
                                std::to_string(end - begin) + " bytes, but shape " + shape_to_string(shape) + " as " +
                                dtype_str + " needs " + std::to_string(n_bits / 8));

    t.name = name;  // role and layer: from the architecture's names once config.json is read
    t.shape = std::move(shape);
    t.dtype = dt->dtype;
    t.type_name = dtype_str;
    t.file_offset = data_start + begin;
    t.n_bytes = end - begin;
    t.data = data + begin;
    return Status::ok();
}

// Parses one safetensors file; appends its tensors in data order and its "__metadata__" strings.
Status parse_file(const MappedFile& map, std::vector<Tensor>& tensors, Metadata& metadata) {
    const std::string& file = map.path();
    const uint64_t size = map.size();
    if (size < 8)
        return corrupt(file, "the file is " + std::to_string(size) +
                                 " bytes, shorter than the 8-byte header length a safetensors file starts with");
    uint64_t n_header = 0;
    std::memcpy(&n_header, map.data(), 8);
    if (n_header < 2) return corrupt(file, "header length " + std::to_string(n_header) + " at offset 0 is too small");
    if (n_header > kMaxHeaderBytes)
        return corrupt(file, "header length " + std::to_string(n_header) + " at offset 0 exceeds the limit of " +
                                 std::to_string(kMaxHeaderBytes) + " bytes");
    if (n_header > size - 8)
        return corrupt(file, "header length " + std::to_string(n_header) +
                                 " at offset 0 runs past the end of the file (" + std::to_string(size) +
                                 " bytes; truncated?)");

    std::string_view text(reinterpret_cast<const char*>(map.data() + 8), n_header);
    json header;
    if (Status s = parse_json_strict(text, file, "header JSON", 8, header); !s) return s;
    if (!header.is_object())
        return corrupt(file, std::string("the header JSON is ") + (header.is_array() ? "an " : "a ") +
                                 header.type_name() + ", not an object");

    const uint64_t data_start = 8 + n_header;
    const uint64_t data_size = size - data_start;
    const uint8_t* data = map.data() + data_start;
    const size_t first = tensors.size();
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it->is_object())
                return corrupt(file, std::string("'__metadata__' must be an object, not ") + it->type_name());
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string())
                    return corrupt(file,
                                   "'__metadata__' entry '" + m.key() + "' must be a string, not " + m->type_name());
                metadata.set(m.key(), MetaValue::of_string(m->get<std::string>()));
            }
            continue;
        }
        Tensor t;
        if (Status s = parse_tensor(file, it.key(), it.value(), data, data_start, data_size, t); !s) return s;
        tensors.push_back(std::move(t));
    }

    // File order; an empty tensor sorts before one starting at the same offset, so it never "overlaps" it.
    std::sort(tensors.begin() + static_cast<std::ptrdiff_t>(first), tensors.end(),
              [](const Tensor& a, const Tensor& b) {
                  if (a.file_offset != b.file_offset) return a.file_offset < b.file_offset;
                  if (a.n_bytes != b.n_bytes) return a.n_bytes < b.n_bytes;
                  return a.name < b.name;
              });
    const Tensor* furthest = nullptr;  // the tensor whose data ends last so far
    for (size_t i = first; i < tensors.size(); ++i) {
        const Tensor& t = tensors[i];
        if (t.n_bytes == 0) continue;
        if (furthest && t.file_offset < furthest->file_offset + furthest->n_bytes)
            return corrupt(file, "the data of tensors '" + furthest->name + "' and '" + t.name +
                                     "' overlap (at file offset " + std::to_string(t.file_offset) + ")");
        furthest = &t;
    }
    return Status::ok();
}

// Shard names come from the file: they must stay inside the index's folder.
bool is_safe_shard_name(const std::string& name) {
    if (name.empty() || name.find('\0') != std::string::npos || name[0] == '/') return false;
    for (const auto& part : fs::path(name))
        if (part == "..") return false;
    return true;
}

MetaValue scalar_meta(const json& v) {
    if (v.is_string()) return MetaValue::of_string(v.get<std::string>());
    if (v.is_boolean()) return MetaValue::of_bool(v.get<bool>());
    if (v.is_number_unsigned()) return MetaValue::of_uint(v.get<uint64_t>());
    if (v.is_number_integer()) return MetaValue::of_int(v.get<int64_t>());
    if (v.is_number_float()) return MetaValue::of_float(v.get<double>());
    return MetaValue::of_string(json_excerpt(v));
}

Status read_index(const std::string& path, ModelFileData& d) {
    auto index_map = MappedFile::open(path);
    if (!index_map) return index_map.status();
    if (index_map->size() > kMaxIndexBytes)
        return corrupt(path, std::to_string(index_map->size()) + " bytes, more than the limit of " +
                                 std::to_string(kMaxIndexBytes) + " for an index");
    std::string_view text(reinterpret_cast<const char*>(index_map->data()), index_map->size());
    json index;
    if (Status s = parse_json_strict(text, path, "index JSON", 0, index); !s) return s;
    if (!index.is_object())
        return corrupt(path, std::string("the index JSON is a ") + index.type_name() + ", not an object");

    if (auto meta = index.find("metadata"); meta != index.end() && !meta->is_null()) {
        if (!meta->is_object())
            return corrupt(path, std::string("field 'metadata' must be an object, not ") + meta->type_name());
        for (auto m = meta->begin(); m != meta->end(); ++m) d.metadata.set(m.key(), scalar_meta(m.value()));
    }
    auto wm = index.find("weight_map");
    if (wm == index.end()) return corrupt(path, "field 'weight_map' is missing");
    if (!wm->is_object())
        return corrupt(path, std::string("field 'weight_map' must be an object, not ") + wm->type_name());
    if (wm->empty()) return corrupt(path, "field 'weight_map' lists no tensors");

    // shard name -> first tensor listed for it (for messages); std::map keeps shards in name order
    std::map<std::string, std::string> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it->is_string())
            return corrupt(path, "weight_map entry for tensor '" + it.key() + "' must be a shard file name, not " +
                                     it->type_name());
        const auto& shard = it->get_ref<const std::string&>();
        if (!is_safe_shard_name(shard))
            return corrupt(path, "weight_map entry for tensor '" + it.key() + "': shard file name '" + shard +
                                     "' is not a relative path inside the index's folder");
        shards.emplace(shard, it.key());
    }

    const fs::path folder = fs::path(path).parent_path();
    std::unordered_set<std::string> found;
    for (const auto& [shard, first_tensor] : shards) {
        const std::string shard_path = (folder / shard).string();
        auto map = MappedFile::open(shard_path);
        if (!map)
            return error(map.status().code(), path + ": cannot open shard '" + shard + "' (listed for tensor '" +
                                                  first_tensor + "'): " + map.message());
        const size_t first = d.tensors.size();
        if (Status s = parse_file(*map, d.tensors, d.metadata); !s) return s;
        for (size_t i = first; i < d.tensors.size(); ++i) {
            const std::string& name = d.tensors[i].name;
            auto listed = wm->find(name);
            if (listed == wm->end())
                return corrupt(shard_path, "holds tensor '" + name + "', which the index " + path + " does not list");
            if (listed->get_ref<const std::string&>() != shard)
                return corrupt(shard_path, "holds tensor '" + name + "', but the index " + path +
                                               " assigns it to shard '" + listed->get_ref<const std::string&>() + "'");
            found.insert(name);
        }
        d.maps.push_back(std::move(map).value());
    }
    if (found.size() != wm->size()) {
        for (auto it = wm->begin(); it != wm->end(); ++it) {
            if (found.count(it.key())) continue;
            const std::string shard_path = (folder / it->get_ref<const std::string&>()).string();
            return corrupt(path, "tensor '" + it.key() + "' is listed in shard '" + it->get_ref<const std::string&>() +
                                     "', but " + shard_path + " does not hold it");
        }
    }
    d.format_detail = "safetensors (" + std::to_string(shards.size()) + (shards.size() == 1 ? " shard)" : " shards)");
    return Status::ok();
}

// config.json beside the model is optional: without it the config is completed from the tensors.
Status read_config_beside(const std::string& model_path, ModelFileData& d) {
    const fs::path config = fs::path(model_path).parent_path() / "config.json";
    std::error_code ec;
    if (!fs::exists(config, ec)) return Status::ok();
    return read_hf_config(config.string(), d.config, d.metadata);
}

}  // namespace

Result<ModelFileDataPtr> read_safetensors(const std::string& path) {
    auto d = std::make_unique<ModelFileData>();
    d->format = ModelFormat::Safetensors;
    d->path = path;
    if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
        if (Status s = read_index(path, *d); !s) return s;
    } else {
        auto map = MappedFile::open(path);
        if (!map) return map.status();
        if (Status s = parse_file(*map, d->tensors, d->metadata); !s) return s;
        d->maps.push_back(std::move(map).value());
        d->format_detail = "safetensors";
    }
    if (Status s = read_config_beside(path, *d); !s) return s;
    // The architecture's HF names and rotary layout (HF checkpoints pair rotary dimensions (i, i + head_size/2):
    // their q/k rows are stored half-split); llama's names without config.json or for unknown architectures.
    const ArchSpec& arch = arch_or_default(d->config.architecture);
    for (Tensor& t : d->tensors) {
        const RoleAndLayer rl = parse_tensor_name(arch, NameFormat::Hf, t.name);
        t.role = rl.role;
        t.layer = rl.layer;
    }
    d->config.rope_style = arch.hf_rope;
    d->config.norm_storage = norm_storage(arch, NameFormat::Hf);
    return d;
}

}  // namespace gkq
