#include "formats/model_file_data.h"

namespace gkq {

Result<ModelFileDataPtr> read_safetensors(const std::string& path) {
    return error(StatusCode::Unsupported, path + ": the safetensors reader is not written yet");
}

}  // namespace gkq
