// Writers for the three input formats, used by export (gkq reconstruct) and by tests that build models.
// Each writer names tensors by its own convention from (role, layer), writes to a temporary file beside the
// target and renames it into place, so a failed write never leaves a partial file.
#pragma once

#include "gkq/dtype.h"
#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gkq {

// TensorInfo: name (read only for role Other; the writers name the other roles by their format's convention),
// role, layer, shape; dtype is that of the data handed over by data / fill, F32 (the writers refuse another): the
// stored type is WriteOptions::dtype, or store_as (GGUF).
struct WriteTensor : TensorInfo {
    const float* data = nullptr;  // (shape) n_elements floats, row-major
    // Used when data is null: writes the n_elements floats into `out` when the tensor's turn comes, so a writer
    // holds one tensor at a time (gkq synth streams a model this way). A failed Status stops the write.
    std::function<Status(float* out)> fill = {};
    // GGUF only: this tensor's storage type when it is not the file's (Other: WriteOptions::dtype, F32 for 1-D), and,
    // when set, a function giving its bytes in that type exactly as they are written (instead of data / fill).
    DType store_as = DType::Other;
    std::function<Status(std::vector<uint8_t>& bytes)> fill_stored = {};
};

struct WriteOptions {
    DType dtype = DType::F32;  // matrices' storage type: safetensors F32/F16/BF16; GGUF F32/F16/BF16/Q8_0/Q4_0
    // 1-D tensors (norms) stay F32 in GGUF and follow `dtype` in safetensors when it is a float type.
    Metadata extra_metadata;  // GGUF: extra keys; safetensors: __metadata__ (string values only)
    // safetensors: data larger than this is split into shards model-0000i-of-0000N.safetensors, as HF's
    // save_pretrained does (a new shard when the next tensor would pass the limit), with model.safetensors.index.json
    // beside them in path's folder (then `path` itself is not written). 0: one file.
    uint64_t max_shard_bytes = 0;
    // safetensors: written as config.json instead of the one made from the config (a model the table has no row for).
    std::string config_json;
};

// safetensors at `path` plus config.json in the same directory (HF LlamaForCausalLM naming).
Status write_safetensors(const std::string& path, const ModelConfig& config, const std::vector<WriteTensor>& tensors,
                         const WriteOptions& options = {});

// GGUF v3, llama architecture, general.alignment 32; includes the vocabulary when it is not empty.
Status write_gguf(const std::string& path, const ModelConfig& config, const std::vector<WriteTensor>& tensors,
                  const Vocabulary& vocab = {}, const WriteOptions& options = {});

// llama2.c legacy (version 0) fp32 checkpoint, including the trailing freq_cis tables run.c skips over.
// Needs every role of every layer; the classifier is written (negative vocab in the header) when the
// config says it is not shared.
Status write_llama2c(const std::string& path, const ModelConfig& config, const std::vector<WriteTensor>& tensors);

}  // namespace gkq
