// ModelFile: an open model in any supported input format, memory-mapped read-only.
// Formats: safetensors (one file, or shards listed by model.safetensors.index.json; config.json beside it),
// GGUF v2/v3 (llama architecture), llama2.c checkpoints (legacy v0 and "ak42" v1/v2).
// Contract: open() checks every magic, count, offset and size against the file before using it and fails
// with a Status naming the file and the offset, tensor or key; tensors stay valid while the ModelFile lives.
// A ModelFile is Weights (weights.h): read_stored hands out the mapped bytes, read_f32 converts.
#pragma once

#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"
#include "gkq/weights.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

enum class ModelFormat { Safetensors, Gguf, Llama2c };

std::string_view model_format_name(ModelFormat f);  // "safetensors", "gguf", "llama2c"

struct ModelFileData;  // private (core/src/formats/model_file_data.h)

class ModelFile final : public Weights {
public:
    // Opens `path`: a file (format detected from its first bytes) or a directory holding
    // model.safetensors.index.json, model.safetensors, or a single *.gguf / *.bin.
    static Result<ModelFile> open(const std::string& path);

    ModelFile(ModelFile&&) noexcept;
    ModelFile& operator=(ModelFile&&) noexcept;
    ~ModelFile() override;

    ModelFormat format() const;
    // Format with its version and detail: "gguf v3", "llama2c v0 (legacy)", "safetensors (2 shards)".
    const std::string& format_detail() const;
    const std::string& path() const;
    const ModelConfig& config() const override;
    const std::vector<Tensor>& tensors() const;
    const Tensor* find(std::string_view name) const;
    const Tensor* find(TensorRole role, int32_t layer) const;
    const Metadata& metadata() const;
    const Vocabulary& vocabulary() const override;
    uint64_t file_bytes() const;  // total bytes of all files read
    uint64_t n_tensor_bytes() const;
    // A hint that bytes [offset, offset + n) of tensor i's data will not be read again soon: the whole pages among
    // them leave the process's resident set (the file's page cache keeps them; a later read maps them again), so a
    // pass over a model larger than memory does not keep what it has read. Nothing happens for bytes that are not
    // mapped from a file.
    void drop_resident(size_t i, uint64_t offset, uint64_t n) const;
    void drop_resident(size_t i) const override;
    // Rows [row0, row0 + n_rows) of tensor i converted to float32 into dst (tensor_rows_to_f32), then their mapped
    // pages dropped from the resident set: a pass over a matrix a chunk of rows at a time holds one chunk of it.
    Status read_rows_f32(size_t i, int64_t row0, int64_t n_rows, float* dst) const;

    // ---- Weights
    std::string_view kind() const override { return "model-file"; }
    const std::string& label() const override { return path(); }
    size_t n_tensors() const override { return tensors().size(); }
    const TensorInfo& tensor_info(size_t i) const override { return tensors()[i]; }
    uint64_t stored_bytes(size_t i) const override;
    Result<StoredTensor> read_stored(size_t i) const override;
    Result<std::vector<float>> read_f32(size_t i) const override;

    explicit ModelFile(std::unique_ptr<ModelFileData> data);

private:
    std::unique_ptr<ModelFileData> m_data;
};

// llama2.c tokenizer.bin: int32 max_token_length, then per token f32 score, int32 length, bytes.
// `expected_vocab` > 0 reads exactly that many tokens (llama2.c's rule); 0 reads to the end of the file.
Result<Vocabulary> read_llama2c_tokenizer(const std::string& path, int64_t expected_vocab);

}  // namespace gkq
