// Temporary: writers land with their readers (each moves into its own *_writer.cpp).
#include "gkq/model_file.h"
#include "gkq/model_writer.h"

namespace gkq {

Status write_safetensors(const std::string& path, const ModelConfig&, const std::vector<WriteTensor>&, const WriteOptions&) {
    return error(StatusCode::Unsupported, path + ": safetensors writer pending");
}
Status write_gguf(const std::string& path, const ModelConfig&, const std::vector<WriteTensor>&, const Vocabulary&,
                  const WriteOptions&) {
    return error(StatusCode::Unsupported, path + ": gguf writer pending");
}
Status write_llama2c(const std::string& path, const ModelConfig&, const std::vector<WriteTensor>&) {
    return error(StatusCode::Unsupported, path + ": llama2c writer pending");
}
Result<Vocabulary> read_llama2c_tokenizer(const std::string& path, int64_t) {
    return error(StatusCode::Unsupported, path + ": tokenizer reader pending");
}

}  // namespace gkq
