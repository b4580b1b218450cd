#include "gkq/model_writer.h"

namespace gkq {

Status write_llama2c(const std::string& path, const ModelConfig&, const std::vector<WriteTensor>&) {
    return error(StatusCode::Unsupported, path + ": llama2c writer pending");
}

}  // namespace gkq
