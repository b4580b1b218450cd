// Reader for llama2.c tokenizer.bin files (tokenizer.py export, run.c build_tokenizer):
//   int32 max_token_length
//   per token: f32 score, int32 length, `length` raw bytes (no terminator)
// tokenizer.py writes max_token_length = the longest token, so 0 <= length <= max_token_length is exact.
// The file carries no special ids; llama2.c's convention (sentencepiece's) is <unk> 0, <s> 1, </s> 2.
#include "gkq/model_file.h"

#include "common/byte_reader.h"
#include "common/mapped_file.h"

#include <algorithm>

namespace gkq {

namespace {
constexpr int32_t kLlama2cBosId = 1;  // run.c encode(): "add optional BOS (=1) token"
constexpr int32_t kLlama2cEosId = 2;  // run.c: "EOS (=2) token"
}  // namespace

Result<Vocabulary> read_llama2c_tokenizer(const std::string& path, int64_t expected_vocab) {
    if (expected_vocab < 0)
        return error(StatusCode::InvalidArgument,
                     path + ": expected vocabulary size " + std::to_string(expected_vocab) + " is negative");
    auto mapped = MappedFile::open(path);
    if (!mapped) return mapped.status();
    const MappedFile& map = *mapped;
    ByteReader r(map.data(), map.size(), path);

    Vocabulary v;
    v.model = "llama2.c";
    v.bos_id = kLlama2cBosId;
    v.eos_id = kLlama2cEosId;
    if (!r.read(v.max_token_length, "tokenizer max_token_length")) return r.status();
    if (v.max_token_length <= 0) {
        r.fail_at(0, "tokenizer max_token_length", std::to_string(v.max_token_length) + " is not positive");
        return r.status();
    }
    // Each token takes at least 8 bytes, which bounds what a caller's count may make us reserve.
    const uint64_t most = r.remaining() / 8;
    const uint64_t reserve =
        expected_vocab > 0 ? std::min<uint64_t>(static_cast<uint64_t>(expected_vocab), most) : most;
    v.tokens.reserve(reserve);
    v.scores.reserve(reserve);

    while (expected_vocab > 0 ? static_cast<int64_t>(v.tokens.size()) < expected_vocab : r.remaining() > 0) {
        const std::string what = "tokenizer token " + std::to_string(v.tokens.size());
        const uint64_t start = r.offset();
        float score = 0;
        int32_t len = 0;
        const uint8_t* bytes = nullptr;
        if (!r.read(score, what.c_str()) || !r.read(len, what.c_str())) break;
        if (len < 0 || len > v.max_token_length) {
            r.fail_at(start + 4, what,
                      "length " + std::to_string(len) + " is outside 0.." + std::to_string(v.max_token_length) +
                          " (max_token_length)");
            break;
        }
        if (!r.bytes(static_cast<uint64_t>(len), bytes, what.c_str())) break;
        v.tokens.emplace_back(reinterpret_cast<const char*>(bytes), static_cast<size_t>(len));
        v.scores.push_back(score);
    }
    if (!r.ok()) return r.status();
    // run.c stops after vocab_size tokens; bytes beyond mean the tokenizer belongs to a larger vocabulary.
    if (r.remaining() > 0)
        return error(StatusCode::Corrupt, path + ": " + std::to_string(r.remaining()) + " bytes after token " +
                                              std::to_string(v.tokens.size() - 1) + " at offset " +
                                              std::to_string(r.offset()) + ": the file holds more than the " +
                                              std::to_string(expected_vocab) + " tokens expected");
    return v;
}

}  // namespace gkq
