#include "formats/model_file_data.h"

namespace gkq {

Result<ModelFileDataPtr> read_gguf(const std::string& path) {
    return error(StatusCode::Unsupported, path + ": the gguf reader is not written yet");
}

}  // namespace gkq
