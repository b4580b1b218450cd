// safetensors writer (layout: see safetensors_reader.cpp) and the config.json beside it, in HF's conventions as
// the architecture's row gives them (arch_for_writing: names, keys, the half-split rotary layout of q/k rows).
// The header is compact JSON with "__metadata__" first and the tensors in the caller's order, each as
// {"dtype", "shape", "data_offsets"}; it is padded with spaces so the data section starts 8-byte aligned,
// as the reference implementation does.
#include "common/byte_reader.h"
#include "formats/fused_tensors.h"
#include "formats/hf_config.h"
#include "formats/norm_layout.h"
#include "formats/rope_layout.h"
#include "gkq/arch.h"
#include "gkq/atomic_file.h"
#include "gkq/convert.h"
#include "gkq/model_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <new>
#include <unordered_set>

namespace gkq {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Planned {
    std::string name;
    uint64_t n_elements = 0;
    uint64_t begin = 0;  // data_offsets, relative to the data section of its file
    uint64_t end = 0;
};

// The tensor's floats: its data, or `fill` run into `buf`.
Result<const float*> tensor_floats(const WriteTensor& t, uint64_t n, std::vector<float>& buf) {
    if (t.data) return t.data;
    try {
        buf.resize(static_cast<size_t>(n));
    } catch (const std::bad_alloc&) {
        return error(StatusCode::InvalidArgument, "out of memory for a tensor of " + std::to_string(n) + " floats");
    }
    if (Status s = t.fill(buf.data()); !s) return s;
    return static_cast<const float*>(buf.data());
}

const char* safetensors_dtype_name(DType t) {
    switch (t) {
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        default: return "F32";
    }
}

// Writes n floats of src as `dtype`, converting a chunk at a time so memory stays bounded.
Status write_data(AtomicFile& f, DType dtype, const float* src, uint64_t n) {
    if (dtype == DType::F32) return f.write(src, n * sizeof(float));  // little-endian host
    constexpr uint64_t kChunk = 1 << 16;
    std::vector<uint16_t> buf(static_cast<size_t>(std::min(n, kChunk)));
    for (uint64_t i = 0; i < n; i += kChunk) {
        const uint64_t k = std::min(kChunk, n - i);
        if (dtype == DType::F16)
            encode_f16(src + i, k, buf.data());
        else
            encode_bf16(src + i, k, buf.data());
        if (Status s = f.write(buf.data(), k * sizeof(uint16_t)); !s) return s;
    }
    return Status::ok();
}

}  // namespace

Status write_safetensors(const std::string& path, const ModelConfig& config, const std::vector<WriteTensor>& unfused,
                         const WriteOptions& options) {
    // A fused tensor's parts (Phi-3's q/k/v, gate/up) joined into the one tensor HF's modeling file loads.
    auto joined = join_fused_tensors(path, config, NameFormat::Hf, unfused);
    if (!joined) return joined.status();
    const std::vector<WriteTensor>& given = *joined;
    // HF keeps Llama 3 rope scaling as config.json parameters, not as GGUF's rope_freqs tensor.
    std::vector<WriteTensor> kept;
    bool has_freqs = false;
    for (const WriteTensor& t : given) {
        if (t.role != TensorRole::RopeFreqs) continue;
        has_freqs = true;
        if (config.rope_scaling != RopeScaling::Llama3)
            return error(StatusCode::Unsupported,
                         path +
                             ": the model's rope_freqs tensor (Llama 3 rope scaling, as GGUF stores it) has no "
                             "place in HF files, and its config has no rope_scaling parameters to write instead");
    }
    if (has_freqs)
        for (const WriteTensor& t : given)
            if (t.role != TensorRole::RopeFreqs) kept.push_back(t);
    const std::vector<WriteTensor>& tensors = has_freqs ? kept : given;
    const DType dtype = options.dtype;
    if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
        return error(StatusCode::InvalidArgument,
                     path + ": safetensors export supports F32, F16 and BF16, not " + std::string(dtype_name(dtype)));
    const uint64_t elem_bytes = dtype == DType::F32 ? 4 : 2;

    const ArchSpec& arch = arch_for_writing(config.architecture);
    std::vector<Planned> plan;
    std::unordered_set<std::string> names;
    uint64_t offset = 0;
    for (const WriteTensor& t : tensors) {
        Planned p;
        p.name = t.role == TensorRole::Other ? t.name : tensor_name(arch, NameFormat::Hf, t.role, t.layer);
        if (p.name.empty() || p.name == "__metadata__" || !is_valid_utf8(p.name))
            return error(StatusCode::InvalidArgument, path + ": a tensor of role " + std::string(role_name(t.role)) +
                                                          " has no usable name ('" + p.name + "')");
        if (!names.insert(p.name).second)
            return error(StatusCode::InvalidArgument, path + ": tensor '" + p.name + "' is given twice");
        p.n_elements = 1;
        for (int64_t dim : t.shape) {
            if (dim <= 0 || !checked_mul(p.n_elements, static_cast<uint64_t>(dim), p.n_elements))
                return error(StatusCode::InvalidArgument,
                             path + ": tensor '" + p.name + "' has an invalid shape " + shape_to_string(t.shape));
        }
        uint64_t n_bytes = 0;
        if (!checked_mul(p.n_elements, elem_bytes, n_bytes) || !checked_add(offset, n_bytes, p.end))
            return error(StatusCode::InvalidArgument, path + ": tensor '" + p.name + "' is too large");
        if (t.data == nullptr && !t.fill)
            return error(StatusCode::InvalidArgument, path + ": tensor '" + p.name + "' has no data");
        if (t.dtype != DType::F32)
            return error(StatusCode::InvalidArgument, path + ": tensor '" + p.name + "': its data is float32, not " +
                                                          std::string(dtype_name(t.dtype)) +
                                                          " (the write options choose the stored type)");
        p.begin = offset;
        offset = p.end;
        plan.push_back(std::move(p));
    }

    // Shards as HF's save_pretrained makes them: a new one when the next tensor would pass the limit.
    std::vector<std::vector<size_t>> shards(1);
    if (options.max_shard_bytes > 0 && offset > options.max_shard_bytes) {
        uint64_t in_shard = 0;
        for (size_t i = 0; i < plan.size(); ++i) {
            const uint64_t n = plan[i].end - plan[i].begin;
            if (!shards.back().empty() && in_shard + n > options.max_shard_bytes) {
                shards.emplace_back();
                in_shard = 0;
            }
            shards.back().push_back(i);
            in_shard += n;
        }
    } else {
        for (size_t i = 0; i < plan.size(); ++i) shards[0].push_back(i);
    }
    const uint64_t total_bytes = offset;

    // q/k of an interleaved model are reordered into HF's layout, so that the file means what HF readers (and
    // ours, which label safetensors models with the row's hf_rope) take it to mean.
    std::vector<bool> reorder(tensors.size(), false);
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (!rope_reorder_needed(tensors[i].role, config.rope_style, arch.hf_rope)) continue;
        if (Status st = check_rope_reorderable(config, tensors[i].shape, path + ": tensor '" + plan[i].name + "'"); !st)
            return st;
        reorder[i] = true;
    }

    // "__metadata__": "format" first (what torch's loader expects), then the caller's strings.
    std::vector<std::pair<std::string, std::string>> meta = {{"format", "pt"}};
    for (const auto& [key, value] : options.extra_metadata.entries) {
        const std::string* s = value.as_string();
        if (!s)
            return error(
                StatusCode::InvalidArgument,
                path + ": metadata key '" + key + "' is not a string (safetensors metadata holds strings only)");
        if (!is_valid_utf8(key) || !is_valid_utf8(*s))
            return error(StatusCode::InvalidArgument, path + ": metadata key '" + key + "' is not valid UTF-8");
        auto it = std::find_if(meta.begin(), meta.end(), [&](const auto& kv) { return kv.first == key; });
        if (it != meta.end())
            it->second = *s;
        else
            meta.emplace_back(key, *s);
    }

    // Strings are escaped by nlohmann (valid UTF-8 checked above, so dump() does not throw).
    std::string meta_json = "{\"__metadata__\":{";
    for (size_t i = 0; i < meta.size(); ++i) {
        if (i) meta_json += ',';
        meta_json += json(meta[i].first).dump() + ":" + json(meta[i].second).dump();
    }
    meta_json += '}';

    // Every shard is written under its temporary name first and all are renamed into place at the end, the
    // index and config.json after them: a failed write leaves none of the files.
    const fs::path dir = fs::path(path).parent_path();
    const size_t n_shards = shards.size();
    auto shard_name = [&](size_t s) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, n_shards);
        return std::string(buf);
    };
    std::vector<AtomicFile> files;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (size_t s = 0; s < n_shards; ++s) {
        const std::vector<size_t>& members = shards[s];
        const uint64_t base = members.empty() ? 0 : plan[members.front()].begin;
        std::string header = meta_json;
        for (size_t i : members) {
            header +=
                "," + json(plan[i].name).dump() + ":{\"dtype\":\"" + safetensors_dtype_name(dtype) + "\",\"shape\":[";
            const auto& shape = tensors[i].shape;
            for (size_t k = 0; k < shape.size(); ++k) header += (k ? "," : "") + std::to_string(shape[k]);
            header += "],\"data_offsets\":[" + std::to_string(plan[i].begin - base) + "," +
                      std::to_string(plan[i].end - base) + "]}";
            if (n_shards > 1) weight_map[plan[i].name] = shard_name(s);
        }
        header += '}';
        header.append((8 - header.size() % 8) % 8, ' ');

        auto file = AtomicFile::create(n_shards > 1 ? (dir / shard_name(s)).string() : path);
        if (!file) return file.status();
        const uint64_t n_header = header.size();
        if (Status st = file->write(&n_header, sizeof n_header); !st) return st;
        if (Status st = file->write(header); !st) return st;
        for (size_t i : members) {
            const WriteTensor& t = tensors[i];
            std::vector<float> filled;     // a `fill` tensor's floats
            std::vector<float> reordered;  // one tensor at a time, so memory stays at one matrix
            Result<const float*> src = tensor_floats(t, plan[i].n_elements, filled);
            if (!src) return error(src.status().code(), path + ": tensor '" + plan[i].name + "': " + src.message());
            if (reorder[i])
                reordered =
                    rope_reorder(*src, t.shape[0], t.shape[1], config.head_size(), config.rope_style, arch.hf_rope);
            const float* data = reorder[i] ? reordered.data() : *src;
            std::vector<float> shifted;  // a norm in HF's meaning (Gemma: w of 1 + w)
            if (norm_shift_needed(t.role, config.norm_storage, norm_storage(arch, NameFormat::Hf))) {
                shifted.assign(data, data + plan[i].n_elements);
                shift_norm(shifted.data(), shifted.size(), config.norm_storage, norm_storage(arch, NameFormat::Hf));
                data = shifted.data();
            }
            if (Status st = write_data(*file, dtype, data, plan[i].n_elements); !st) return st;
        }
        files.push_back(std::move(file.value()));
    }
    for (AtomicFile& f : files)
        if (Status st = f.commit(); !st) return st;
    if (n_shards > 1) {
        nlohmann::ordered_json index;
        index["metadata"] = {{"total_size", total_bytes}};
        index["weight_map"] = std::move(weight_map);
        if (Status st = write_file_atomic((dir / "model.safetensors.index.json").string(), index.dump(2) + "\n"); !st)
            return st;
    }

    const std::string config_path = (fs::path(path).parent_path() / "config.json").string();
    return write_file_atomic(config_path,
                             options.config_json.empty() ? hf_config_json(config, dtype) : options.config_json);
}

}  // namespace gkq
