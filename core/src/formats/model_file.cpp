#include "formats/model_file_data.h"

#include "common/byte_reader.h"
#include "formats/fused_tensors.h"
#include "gkq/convert.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_set>

namespace gkq {

namespace fs = std::filesystem;

std::string_view model_format_name(ModelFormat f) {
    switch (f) {
        case ModelFormat::Safetensors: return "safetensors";
        case ModelFormat::Gguf: return "gguf";
        case ModelFormat::Llama2c: return "llama2c";
    }
    return "?";
}

namespace {

enum class Detected { Gguf, Safetensors, SafetensorsIndex, Llama2c, Unknown };

Detected detect_file(const std::string& path, std::string& why) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        why = "cannot open";
        return Detected::Unknown;
    }
    uint8_t head[16] = {};
    f.read(reinterpret_cast<char*>(head), sizeof head);
    const auto n = static_cast<size_t>(f.gcount());
    if (n >= 4 && std::memcmp(head, "GGUF", 4) == 0) return Detected::Gguf;
    if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return Detected::SafetensorsIndex;
    if (n >= 9) {
        // safetensors: u64 header length, then a JSON object starting with '{'
        uint64_t len = 0;
        std::memcpy(&len, head, 8);
        if (head[8] == '{' && len >= 2) return Detected::Safetensors;
    }
    if (path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) return Detected::Safetensors;
    if (n >= 4) {
        uint32_t magic = 0;
        std::memcpy(&magic, head, 4);
        if (magic == 0x616b3432u) return Detected::Llama2c;  // "ak42" versioned export
    }
    if (n >= 28 || (path.size() >= 4 && path.compare(path.size() - 4, 4, ".bin") == 0)) return Detected::Llama2c;
    why = "not a GGUF, safetensors or llama2.c file (" + std::to_string(n) + " bytes read)";
    return Detected::Unknown;
}

Result<std::string> resolve_directory(const std::string& dir) {
    for (const char* name : {"model.safetensors.index.json", "model.safetensors"}) {
        fs::path p = fs::path(dir) / name;
        if (fs::exists(p)) return p.string();
    }
    std::vector<std::string> candidates;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        auto ext = e.path().extension().string();
        if (ext == ".gguf" || ext == ".safetensors" || ext == ".bin") candidates.push_back(e.path().string());
    }
    if (candidates.size() == 1) return candidates.front();
    if (candidates.empty())
        return error(StatusCode::NotFound, dir + ": no model.safetensors(.index.json), *.gguf or *.bin in this folder");
    return error(StatusCode::InvalidArgument,
                 dir + ": several model files in this folder (" + std::to_string(candidates.size()) + "); name one");
}

}  // namespace

Status validate_tensors(const ModelFileData& d) {
    std::unordered_set<std::string_view> names;
    struct Range {
        const uint8_t* begin;
        const uint8_t* end;
        const Tensor* t;
    };
    std::vector<Range> ranges;
    for (const Tensor& t : d.tensors) {
        if (!names.insert(t.name).second)
            return error(StatusCode::Corrupt, d.path + ": tensor '" + t.name + "' appears more than once");
        for (int64_t dim : t.shape)
            if (dim <= 0)
                return error(StatusCode::Corrupt, d.path + ": tensor '" + t.name + "' has a non-positive dimension (" +
                                                      shape_to_string(t.shape) + ")");
        const int64_t n = t.n_elements();
        if (n < 0) return error(StatusCode::Corrupt, d.path + ": tensor '" + t.name + "': element count overflows");
        if (auto need = dtype_storage_bytes(t.dtype, static_cast<uint64_t>(n)); need && t.dtype != DType::Other) {
            if (*need != t.n_bytes)
                return error(StatusCode::Corrupt, d.path + ": tensor '" + t.name + "': " + std::to_string(t.n_bytes) +
                                                      " bytes of data, but shape " + shape_to_string(t.shape) + " as " +
                                                      t.type_name + " needs " + std::to_string(*need));
        }
        if (t.n_bytes > 0) ranges.push_back({t.data, t.data + t.n_bytes, &t});
        if (t.n_scale_bytes > 0) ranges.push_back({t.scales, t.scales + t.n_scale_bytes, &t});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < ranges.size(); ++i) {
        if (ranges[i].begin < ranges[i - 1].end)
            return error(StatusCode::Corrupt, d.path + ": the data of tensors '" + ranges[i - 1].t->name + "' and '" +
                                                  ranges[i].t->name + "' overlap");
    }
    return Status::ok();
}

void complete_config_from_tensors(ModelFileData& d) {
    ModelConfig& c = d.config;
    bool has_output = false;
    int32_t max_layer = -1;
    for (const Tensor& t : d.tensors) {
        max_layer = std::max(max_layer, t.layer);
        if (t.role == TensorRole::Output) has_output = true;
        if (t.role == TensorRole::TokenEmbd && t.shape.size() == 2) {
            if (c.vocab_size == 0) c.vocab_size = t.shape[0];
            if (c.dim == 0) c.dim = t.shape[1];
        }
        if (t.role == TensorRole::FfnGate && t.shape.size() == 2 && c.hidden_dim == 0) c.hidden_dim = t.shape[0];
    }
    c.shared_classifier = !has_output;
    if (c.n_layers == 0) c.n_layers = max_layer + 1;
    if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;
}

Result<ModelFile> ModelFile::open(const std::string& path_in) {
    std::string path = path_in;
    std::error_code ec;
    if (!fs::exists(path, ec)) return error(StatusCode::NotFound, path + ": no such file or directory");
    if (fs::is_directory(path, ec)) {
        auto r = resolve_directory(path);
        if (!r) return r.status();
        path = *r;
    }
    std::string why;
    Result<ModelFileDataPtr> data = error(StatusCode::Internal, "unreachable");
    switch (detect_file(path, why)) {
        case Detected::Gguf: data = read_gguf(path); break;
        case Detected::Safetensors:
        case Detected::SafetensorsIndex: data = read_safetensors(path); break;
        case Detected::Llama2c: data = read_llama2c(path); break;
        case Detected::Unknown: return error(StatusCode::Unsupported, path + ": " + why);
    }
    const std::string name = fs::path(path).filename().string();
    if (!data && (name == "tokenizer.bin" || name.starts_with("tok"))) {
        // Not a checkpoint: a llama2.c tokenizer file (tokenizer.bin, tok*.bin, as tokenizers_beside() finds them) is
        // the usual mix-up, both being .bin files, and is said as such.
        if (auto vocab = read_llama2c_tokenizer(path, 0))
            return error(StatusCode::InvalidArgument,
                         path + ": a llama2.c tokenizer (" + std::to_string(vocab->tokens.size()) +
                             " tokens), not a model checkpoint; gkq tokenize reads it, and the model's commands find "
                             "it beside the checkpoint (or take it with --tokenizer)");
    }
    if (!data) return data.status();
    ModelFileDataPtr d = std::move(data).value();
    if (d->path.empty()) d->path = path;
    if (Status s = validate_tensors(*d); !s) return s;
    if (Status s = split_fused_tensors(*d); !s) return s;  // after the checks of the stored tensors
    complete_config_from_tensors(*d);
    return ModelFile(std::move(d));
}

ModelFile::ModelFile(std::unique_ptr<ModelFileData> data) : m_data(std::move(data)) {}
ModelFile::ModelFile(ModelFile&&) noexcept = default;
ModelFile& ModelFile::operator=(ModelFile&&) noexcept = default;
ModelFile::~ModelFile() = default;

ModelFormat ModelFile::format() const {
    return m_data->format;
}
const std::string& ModelFile::format_detail() const {
    return m_data->format_detail;
}
const std::string& ModelFile::path() const {
    return m_data->path;
}
const ModelConfig& ModelFile::config() const {
    return m_data->config;
}
const std::vector<Tensor>& ModelFile::tensors() const {
    return m_data->tensors;
}
const Metadata& ModelFile::metadata() const {
    return m_data->metadata;
}
const Vocabulary& ModelFile::vocabulary() const {
    return m_data->vocab;
}

const Tensor* ModelFile::find(std::string_view name) const {
    for (const Tensor& t : m_data->tensors)
        if (t.name == name) return &t;
    return nullptr;
}

const Tensor* ModelFile::find(TensorRole role, int32_t layer) const {
    for (const Tensor& t : m_data->tensors)
        if (t.role == role && t.layer == layer) return &t;
    return nullptr;
}

uint64_t ModelFile::file_bytes() const {
    uint64_t n = 0;
    for (const auto& m : m_data->maps) n += m.size();
    return n;
}

uint64_t ModelFile::n_tensor_bytes() const {
    uint64_t n = 0;
    for (const Tensor& t : m_data->tensors) n += t.n_bytes + t.n_scale_bytes;
    return n;
}

void ModelFile::drop_resident(size_t i, uint64_t offset, uint64_t n) const {
    if (i >= m_data->tensors.size()) return;
    const Tensor& t = m_data->tensors[i];
    if (t.data == nullptr || offset > t.n_bytes || n > t.n_bytes - offset) return;
    for (const MappedFile& m : m_data->maps)
        if (m.drop_resident(t.data + offset, n)) return;
}

Status ModelFile::read_rows_f32(size_t i, int64_t row0, int64_t n_rows, float* dst) const {
    if (i >= m_data->tensors.size())
        return error(StatusCode::InvalidArgument, path() + ": no tensor " + std::to_string(i));
    const Tensor& t = m_data->tensors[i];
    if (Status s = tensor_rows_to_f32(t, row0, n_rows, dst); !s) return s;
    uint64_t offset = 0, n_bytes = 0;
    if (tensor_row_bytes(t, row0, n_rows, &offset, &n_bytes)) drop_resident(i, offset, n_bytes);
    return Status::ok();
}

// ---- Weights

uint64_t ModelFile::stored_bytes(size_t i) const {
    const Tensor& t = m_data->tensors.at(i);
    return t.n_bytes + t.n_scale_bytes;
}

Result<StoredTensor> ModelFile::read_stored(size_t i) const {
    if (i >= m_data->tensors.size())
        return error(StatusCode::InvalidArgument, path() + ": no tensor " + std::to_string(i));
    const Tensor& t = m_data->tensors[i];
    StoredTensor s;
    s.info = t;
    s.data = {t.data, t.n_bytes};
    if (t.scales != nullptr) s.scales = {t.scales, t.n_scale_bytes};
    s.group_size = t.group_size;
    return s;
}

void ModelFile::drop_resident(size_t i) const {
    if (i < m_data->tensors.size()) drop_resident(i, 0, m_data->tensors[i].n_bytes);
}

Result<std::vector<float>> ModelFile::read_f32(size_t i) const {
    if (i >= m_data->tensors.size())
        return error(StatusCode::InvalidArgument, path() + ": no tensor " + std::to_string(i));
    auto v = tensor_to_f32(m_data->tensors[i]);
    if (!v) return v.status().with_context(path());
    // The caller has its own copy: the mapped bytes leave the resident set, so a pass over every tensor of a model
    // larger than memory keeps only what it holds.
    drop_resident(i, 0, m_data->tensors[i].n_bytes);
    return v;
}

}  // namespace gkq
