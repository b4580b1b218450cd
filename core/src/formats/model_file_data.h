// The state behind a ModelFile, filled by one reader per format, and the readers' entry points.
#pragma once

#include "common/mapped_file.h"
#include "gkq/model_file.h"

#include <memory>
#include <string>
#include <vector>

namespace gkq {

struct ModelFileData {
    ModelFormat format = ModelFormat::Safetensors;
    std::string format_detail;
    std::string path;
    ModelConfig config;
    std::vector<Tensor> tensors;  // views into `maps`
    Metadata metadata;
    Vocabulary vocab;
    std::vector<MappedFile> maps;  // one per file read (shards)
};

using ModelFileDataPtr = std::unique_ptr<ModelFileData>;

// Each reader fully validates its format and fills every field above (tensors with role and layer).
Result<ModelFileDataPtr> read_gguf(const std::string& path);
Result<ModelFileDataPtr> read_safetensors(const std::string& path);  // a .safetensors or an index .json
Result<ModelFileDataPtr> read_llama2c(const std::string& path);

// Checks shared by every reader, run by ModelFile::open after the format reader: unique tensor names,
// no two tensors' data overlapping, shapes with positive dimensions, n_bytes matching shape and dtype
// where the dtype has a fixed size. Errors name the file and the tensor.
Status validate_tensors(const ModelFileData& d);

// Fills config fields the format did not carry from the tensors (vocab_size from token_embd,
// shared_classifier from the absence of an output tensor, n_layers from the highest block index).
void complete_config_from_tensors(ModelFileData& d);

}  // namespace gkq
