#include "gkq/model_writer.h"

namespace gkq {

Status write_gguf(const std::string& path, const ModelConfig&, const std::vector<WriteTensor>&, const Vocabulary&,
                  const WriteOptions&) {
    return error(StatusCode::Unsupported, path + ": gguf writer pending");
}

}  // namespace gkq
