#include "formats/model_file_data.h"

namespace gkq {

Result<ModelFileDataPtr> read_llama2c(const std::string& path) {
    return error(StatusCode::Unsupported, path + ": the llama2c reader is not written yet");
}

}  // namespace gkq
