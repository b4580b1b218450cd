// Finding a model's tokenizer: its own vocabulary, or the llama2.c tokenizer file that sits beside it.
#include "gkq/tokenizer.h"

#include <algorithm>
#include <filesystem>

namespace gkq {

namespace fs = std::filesystem;

std::vector<std::string> tokenizers_beside(const std::string& model_path) {
    std::error_code ec;
    const fs::path model(model_path);
    const fs::path dir = fs::is_directory(model, ec) ? model : model.parent_path();
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
        const std::string name = entry.path().filename().string();
        const bool named = name == "tokenizer.bin" || (name.rfind("tok", 0) == 0 && entry.path().extension() == ".bin");
        if (!named || !entry.is_regular_file(ec) || fs::equivalent(entry.path(), model, ec)) continue;
        found.push_back(entry.path().string());
    }
    std::sort(found.begin(), found.end());
    return found;
}

Result<Tokenizer> tokenizer_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                      const std::string& given) {
    if (!given.empty()) return Tokenizer::load_llama2c(given, vocab_size);
    if (!vocab.empty()) return Tokenizer::from_vocabulary(vocab, model_path);
    const std::vector<std::string> found = tokenizers_beside(model_path);
    if (found.size() == 1) return Tokenizer::load_llama2c(found.front(), vocab_size);
    if (found.empty())
        return error(StatusCode::NotFound,
                     model_path + " has no vocabulary and no tokenizer.bin or tok*.bin is next to it");
    std::string list;
    for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
    return error(StatusCode::InvalidArgument, model_path + ": several tokenizers next to it (" + list + ")");
}

}  // namespace gkq
