// The saved base logits file (layout in gkq/evaluate.h): written through AtomicFile, read with every field and
// size checked against the file and against the run that reuses it.
#include "gkq/atomic_file.h"
#include "gkq/evaluate.h"

#include "common/byte_reader.h"
#include "common/mapped_file.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <new>

namespace gkq {

static_assert(std::endian::native == std::endian::little, "the base logits file is written in host order");

namespace {

constexpr char kMagic[8] = {'G', 'K', 'Q', 'B', 'A', 'S', 'E', '\0'};
constexpr uint32_t kVersion = 3;       // written (compact); 1 and 2 (full float32 logits) are still read
constexpr uint64_t kHeaderBytes = 64;  // then the model path (version 2)
constexpr uint32_t kMaxModelBytes = 4096;

template <class T>
void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}

uint64_t token_hash(const std::vector<int32_t>& tokens) {
    return fnv1a64(tokens.data(), tokens.size() * sizeof(int32_t));
}

}  // namespace

Status save_base_logits(const std::string& path, const BaseLogits& b) {
    const uint64_t n = b.text.tokens.size();
    const auto k = static_cast<uint64_t>(b.top_k);
    if (static_cast<uint64_t>(b.n_rows()) != n || b.rest_logp.size() != n || b.target_logit.size() != n || k < 1 ||
        k > static_cast<uint64_t>(b.n_vocab) || b.ids.size() != n * k || b.logits.size() != n * k)
        return error(StatusCode::Internal, path + ": " + std::to_string(b.n_rows()) + " kept rows for " +
                                               std::to_string(n) + " tokens (top " + std::to_string(k) + " of " +
                                               std::to_string(b.n_vocab) + ")");
    if (b.model.size() > kMaxModelBytes)
        return error(StatusCode::InvalidArgument,
                     path + ": the base model's path is longer than " + std::to_string(kMaxModelBytes) + " bytes");
    std::string head;
    head.append(kMagic, 8);
    put<uint32_t>(head, kVersion);
    put<uint32_t>(head, static_cast<uint32_t>(b.n_vocab));
    put<uint32_t>(head, static_cast<uint32_t>(b.n_ctx));
    put<uint32_t>(head, static_cast<uint32_t>(b.stride));
    put<uint64_t>(head, n);
    put<int32_t>(head, b.text.bos_id);
    put<uint32_t>(head, static_cast<uint32_t>(b.model.size()));
    put<uint64_t>(head, b.text.n_bytes);
    put<uint64_t>(head, token_hash(b.text.tokens));
    put<uint64_t>(head, b.text.text_hash);
    head += b.model;
    put<uint32_t>(head, static_cast<uint32_t>(k));
    put<uint32_t>(head, 0);
    auto f = AtomicFile::create(path);
    if (!f) return f.status();
    if (Status s = f->write(head); !s) return s;
    if (Status s = f->write(b.text.tokens.data(), n * sizeof(int32_t)); !s) return s;
    if (Status s = f->write(b.log_z.data(), n * sizeof(double)); !s) return s;
    if (Status s = f->write(b.rest_logp.data(), n * sizeof(double)); !s) return s;
    if (Status s = f->write(b.target_logit.data(), n * sizeof(float)); !s) return s;
    if (Status s = f->write(b.ids.data(), b.ids.size() * sizeof(int32_t)); !s) return s;
    if (Status s = f->write(b.logits.data(), b.logits.size() * sizeof(float)); !s) return s;
    return f->commit();
}

Result<std::string> base_logits_model(const std::string& path) {
    auto mapped = MappedFile::open(path);
    if (!mapped) return mapped.status();
    const uint64_t size = mapped->size();
    if (size < kHeaderBytes || std::memcmp(mapped->data(), kMagic, 8) != 0)
        return error(StatusCode::Corrupt, path + ": not a usable base logits file: no GKQBASE header");
    ByteReader r(mapped->data(), size, path);
    uint32_t version = 0, model_bytes = 0;
    r.skip(8, "magic");
    r.read(version, "version");
    r.skip(4 * 3 + 8 + 4, "header");
    r.read(model_bytes, "n_model_bytes");
    if (!r.ok()) return r.status();
    if (version == 1) return std::string();
    if ((version != 2 && version != kVersion) || model_bytes > kMaxModelBytes || model_bytes > size - kHeaderBytes)
        return error(StatusCode::Corrupt, path + ": not a usable base logits file: version " + std::to_string(version) +
                                              ", n_model_bytes " + std::to_string(model_bytes));
    return std::string(reinterpret_cast<const char*>(mapped->data() + kHeaderBytes), model_bytes);
}

Result<BaseLogits> load_base_logits(const std::string& path, const EvalText& text, int64_t n_vocab,
                                    const EvalOptions& options, int64_t top_k) {
    auto mapped = MappedFile::open(path);
    if (!mapped) return mapped.status();
    const uint8_t* d = mapped->data();
    const uint64_t size = mapped->size();
    auto corrupt = [&](const std::string& why) {
        return error(StatusCode::Corrupt, path + ": not a usable base logits file: " + why);
    };
    std::string saved_from;  // "; saved with base model M" once the header is read
    auto mismatch = [&](const std::string& why) {
        return error(StatusCode::InvalidArgument, path + ": saved for a different run: " + why + saved_from);
    };
    if (size < kHeaderBytes)
        return corrupt(std::to_string(size) + " bytes, shorter than the " + std::to_string(kHeaderBytes) +
                       "-byte header");
    if (std::memcmp(d, kMagic, 8) != 0) return corrupt("bad magic at offset 0 (expected GKQBASE)");
    ByteReader r(d, size, path);
    uint32_t version = 0, vocab = 0, ctx = 0, stride = 0, model_bytes = 0;
    uint64_t n = 0, n_bytes = 0, tok_hash = 0, txt_hash = 0;
    int32_t bos = 0;
    r.skip(8, "magic");
    r.read(version, "version");
    r.read(vocab, "n_vocab");
    r.read(ctx, "n_ctx");
    r.read(stride, "stride");
    r.read(n, "n_tokens");
    r.read(bos, "bos");
    r.read(model_bytes, "n_model_bytes");
    r.read(n_bytes, "n_bytes");
    r.read(tok_hash, "token hash");
    r.read(txt_hash, "text hash");
    if (!r.ok()) return r.status();
    if (version < 1 || version > kVersion)
        return error(StatusCode::Unsupported, path + ": base logits file version " + std::to_string(version) +
                                                  " (this gkq reads versions 1 to " + std::to_string(kVersion) + ")");
    if (version == 1 && model_bytes != 0) return corrupt("version 1 with a non-zero reserved field at offset 36");
    if (model_bytes > kMaxModelBytes || model_bytes > size - kHeaderBytes)
        return corrupt("n_model_bytes " + std::to_string(model_bytes) + " at offset 36 is beyond " +
                       std::to_string(std::min<uint64_t>(kMaxModelBytes, size - kHeaderBytes)));
    const std::string model(reinterpret_cast<const char*>(d + kHeaderBytes), model_bytes);
    uint64_t data_offset = kHeaderBytes + model_bytes;
    if (!model.empty()) saved_from = " (saved with base model " + model + ": pass --base " + model + ")";
    if (vocab == 0 || n == 0) return corrupt("n_vocab " + std::to_string(vocab) + ", n_tokens " + std::to_string(n));
    uint32_t kept = 0, reserved = 0;
    if (version == kVersion) {
        ByteReader rk(d + data_offset, size - data_offset, path);
        rk.read(kept, "top_k");
        rk.read(reserved, "reserved");
        if (!rk.ok()) return corrupt("no top_k after the model path at offset " + std::to_string(data_offset));
        if (kept == 0 || kept > vocab || reserved != 0)
            return corrupt("top_k " + std::to_string(kept) + " (reserved " + std::to_string(reserved) + ") at offset " +
                           std::to_string(data_offset) + " is outside 1.." + std::to_string(vocab));
        data_offset += 8;
    }
    // Bytes per position after the tokens: version 3 the compact row, versions 1 and 2 the full logits.
    const uint64_t per_row = version == kVersion ? 8 + 8 + 4 + 8 * static_cast<uint64_t>(kept) : 0;
    uint64_t tok_bytes = 0, logit_count = 0, logit_bytes = 0, expected = 0;
    const bool sized = version == kVersion ? checked_mul(n, 4, tok_bytes) && checked_mul(n, per_row, logit_bytes)
                                           : checked_mul(n, 4, tok_bytes) && checked_mul(n, vocab, logit_count) &&
                                                 checked_mul(logit_count, 4, logit_bytes);
    if (!sized || !checked_add(data_offset, tok_bytes, expected) || !checked_add(expected, logit_bytes, expected) ||
        expected != size)
        return corrupt("the header's " + std::to_string(n) + " tokens x " +
                       (version == kVersion ? std::to_string(kept) + " kept" : std::to_string(vocab)) +
                       " logits need a different size than the file's " + std::to_string(size) + " bytes");
    if (vocab != static_cast<uint64_t>(n_vocab))
        return mismatch("logits over " + std::to_string(vocab) + " tokens, the model has " + std::to_string(n_vocab));
    if (static_cast<int64_t>(ctx) != options.n_ctx || static_cast<int64_t>(stride) != options.stride)
        return mismatch("context " + std::to_string(ctx) + " / stride " + std::to_string(stride) + ", this run uses " +
                        std::to_string(options.n_ctx) + " / " + std::to_string(options.stride));
    if (n != text.tokens.size() || bos != text.bos_id)
        return mismatch(std::to_string(n) + " tokens (BOS " + std::to_string(bos) + "), the text has " +
                        std::to_string(text.tokens.size()) + " (BOS " + std::to_string(text.bos_id) + ")");
    if (txt_hash != text.text_hash || n_bytes != text.n_bytes)
        return mismatch("the text differs (hash or size of its " + std::to_string(n_bytes) + " bytes)");
    try {
        BaseLogits b;
        b.path = path;
        b.model = model;
        b.n_vocab = vocab;
        b.n_ctx = ctx;
        b.stride = stride;
        b.text.bos_id = bos;
        b.text.n_bytes = n_bytes;
        b.text.text_hash = txt_hash;
        b.text.tokens.resize(static_cast<size_t>(n));
        std::memcpy(b.text.tokens.data(), d + data_offset, tok_bytes);
        if (token_hash(b.text.tokens) != tok_hash) return corrupt("the tokens do not match their hash in the header");
        if (b.text.tokens != text.tokens) return mismatch("the tokens differ from the text's (another tokenizer?)");
        const uint8_t* rows = d + data_offset + tok_bytes;
        if (version != kVersion) {  // full float32 logits: compacted row by row
            b.top_k = top_k;
            std::vector<float> row(vocab);
            for (uint64_t t = 0; t < n; ++t) {
                std::memcpy(row.data(), rows + t * vocab * 4, vocab * 4);
                b.add_row(row.data(), b.text.tokens[static_cast<size_t>(t)]);
            }
            return b;
        }
        b.top_k = kept;
        b.log_z.resize(n);
        b.rest_logp.resize(n);
        b.target_logit.resize(n);
        b.ids.resize(n * kept);
        b.logits.resize(n * kept);
        std::memcpy(b.log_z.data(), rows, n * 8);
        std::memcpy(b.rest_logp.data(), rows + n * 8, n * 8);
        std::memcpy(b.target_logit.data(), rows + n * 16, n * 4);
        std::memcpy(b.ids.data(), rows + n * 20, n * kept * 4);
        std::memcpy(b.logits.data(), rows + n * 20 + n * kept * 4, n * kept * 4);
        for (uint64_t t = 0; t < n; ++t) {
            const int32_t* ids = b.ids.data() + t * kept;
            for (uint32_t j = 0; j < kept; ++j)
                if (ids[j] < 0 || static_cast<uint64_t>(ids[j]) >= vocab || (j > 0 && ids[j] <= ids[j - 1]))
                    return corrupt("position " + std::to_string(t) + " keeps token id " + std::to_string(ids[j]) +
                                   " (ids must ascend within 0.." + std::to_string(vocab - 1) + ")");
            if (!std::isfinite(b.log_z[t]) || std::isnan(b.rest_logp[t]))
                return corrupt("position " + std::to_string(t) + " has log Z " + std::to_string(b.log_z[t]) +
                               ", log rest " + std::to_string(b.rest_logp[t]));
        }
        return b;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, path + ": does not fit in memory");
    }
}

}  // namespace gkq
