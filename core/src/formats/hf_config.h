// Hugging Face JSON side files of a safetensors model: strict JSON parsing (shared with the safetensors
// header and index readers) and config.json read/write.
// Contract: nothing here throws; every error is a Status naming the file and the byte, key or field.
#pragma once

#include "gkq/dtype.h"
#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace gkq {

// Parses `text` as JSON into `out`, rejecting what nlohmann would accept silently or handle badly:
// invalid UTF-8 (reported with its byte and the start of the string it is in), an object key that appears
// twice (nlohmann keeps the last one), nesting deeper than 64 levels. `what` names the text in messages
// ("header JSON"); `file_offset` is where the text starts in `file`, so messages can give file offsets.
Status parse_json_strict(std::string_view text, const std::string& file, const char* what, uint64_t file_offset,
                         nlohmann::json& out);

// A value's JSON text, cut to 40 characters, for error messages.
std::string json_excerpt(const nlohmann::json& v);

// Reads the config.json at `path` into `config` with the keys of its architecture's row (llama's when the table
// has none; fields it lacks keep their defaults) and copies its scalar entries into `metadata` as "config.<key>".
// Missing file: NotFound. Malformed JSON or a field of the wrong type: Corrupt, naming the file and the field.
Status read_hf_config(const std::string& path, ModelConfig& config, Metadata& metadata);

// config.json text for `config`, in the names and keys of arch_for_writing(config.architecture), with weights
// stored as `dtype` (torch_dtype).
std::string hf_config_json(const ModelConfig& config, DType dtype);

}  // namespace gkq
