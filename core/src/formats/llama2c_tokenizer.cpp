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

    // One token (score, length, bytes) into `out`; false with r's status set when the file does not hold it.
    auto read_token = [&](Vocabulary& out) {
        const std::string what = "tokenizer token " + std::to_string(out.tokens.size());
        const uint64_t start = r.offset();
        float score = 0;
        int32_t len = 0;
        const uint8_t* bytes = nullptr;
        if (!r.read(score, what.c_str()) || !r.read(len, what.c_str())) return false;
        if (len < 0 || len > v.max_token_length) {
            r.fail_at(start + 4, what,
                      "length " + std::to_string(len) + " is outside 0.." + std::to_string(v.max_token_length) +
                          " (max_token_length)");
            return false;
        }
        if (!r.bytes(static_cast<uint64_t>(len), bytes, what.c_str())) return false;
        out.tokens.emplace_back(reinterpret_cast<const char*>(bytes), static_cast<size_t>(len));
        out.scores.push_back(score);
        return true;
    };
    // run.c reads exactly vocab_size tokens: a file that ends after fewer whole tokens, or holds whole tokens beyond
    // them, is another vocabulary's tokenizer, told with both sizes (Corrupt as before, not "truncated?").
    auto other_size = [&](uint64_t n_found) {
        return error(StatusCode::Corrupt, path + ": this llama2.c tokenizer holds " + std::to_string(n_found) +
                                              " tokens, but the model's vocabulary has " +
                                              std::to_string(expected_vocab) +
                                              " (vocab_size): it is another model's tokenizer");
    };
    while (expected_vocab > 0 ? static_cast<int64_t>(v.tokens.size()) < expected_vocab : r.remaining() > 0) {
        if (r.remaining() == 0) return other_size(v.tokens.size());
        if (!read_token(v)) break;
    }
    if (!r.ok()) return r.status();
    if (r.remaining() > 0) {
        const uint64_t after = r.offset();
        const uint64_t extra_bytes = r.remaining();
        Vocabulary extra;
        while (r.remaining() > 0 && read_token(extra)) {
        }
        if (r.ok()) return other_size(v.tokens.size() + extra.tokens.size());
        // Bytes beyond the tokens that are no tokens.
        return error(StatusCode::Corrupt, path + ": " + std::to_string(extra_bytes) + " bytes after token " +
                                              std::to_string(v.tokens.size() - 1) + " at offset " +
                                              std::to_string(after) + ": the file holds more than the " +
                                              std::to_string(expected_vocab) + " tokens expected");
    }
    return v;
}

}  // namespace gkq
