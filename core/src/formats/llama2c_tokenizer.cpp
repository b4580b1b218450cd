#include "gkq/model_file.h"

namespace gkq {

Result<Vocabulary> read_llama2c_tokenizer(const std::string& path, int64_t) {
    return error(StatusCode::Unsupported, path + ": tokenizer reader pending");
}

}  // namespace gkq
