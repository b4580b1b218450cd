// Finding a model's tokenizer: its own vocabulary, or the llama2.c tokenizer file that sits beside it.
#include "gkq/tokenizer.h"

#include "gkq/model_file.h"

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

Result<FoundVocabulary> vocabulary_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                             const std::string& given) {
    std::string file = given;
    if (file.empty()) {
        if (!vocab.empty()) return FoundVocabulary{vocab, {}};
        const std::vector<std::string> found = tokenizers_beside(model_path);
        if (found.empty())
            return error(StatusCode::NotFound,
                         model_path + " has no vocabulary and no tokenizer.bin or tok*.bin is next to it");
        if (found.size() > 1) {
            std::string list;
            for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
            return error(StatusCode::InvalidArgument, model_path + ": several tokenizers next to it (" + list + ")");
        }
        file = found.front();
    }
    auto read = read_llama2c_tokenizer(file, vocab_size);
    if (!read) return read.status();
    return FoundVocabulary{std::move(*read), file};
}

Result<Tokenizer> tokenizer_for_model(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                      const std::string& given) {
    auto found = vocabulary_for_model(model_path, vocab, vocab_size, given);
    if (!found) return found.status();
    return Tokenizer::from_vocabulary(found->vocab, found->source.empty() ? model_path : found->source);
}

}  // namespace gkq
