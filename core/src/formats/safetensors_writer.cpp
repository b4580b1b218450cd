#include "gkq/model_writer.h"

namespace gkq {

Status write_safetensors(const std::string& path, const ModelConfig&, const std::vector<WriteTensor>&, const WriteOptions&) {
    return error(StatusCode::Unsupported, path + ": safetensors writer pending");
}

}  // namespace gkq
