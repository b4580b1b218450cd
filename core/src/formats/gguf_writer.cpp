// GGUF v3 writer (layout in gguf_layout.h): the architecture's GGUF name and config keys (arch_for_writing: llama
// for the llama family), general.alignment 32, the vocabulary, the caller's extra keys, then each tensor's data at a
// 32-byte aligned offset, named by the architecture's row. q/k of a half-split (HF) model are reordered to the
// rotary layout the row gives GGUF files (interleaved for llama). Everything is validated before the first byte
// is written, and the file appears only when complete (AtomicFile).
#include "common/byte_reader.h"
#include "formats/fused_tensors.h"
#include "formats/gguf_layout.h"
#include "formats/gguf_vocab.h"
#include "formats/norm_layout.h"
#include "formats/rope_layout.h"
#include "gkq/arch.h"
#include "gkq/atomic_file.h"
#include "gkq/convert.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace gkq {

namespace {

constexpr uint64_t kAlignment = gguf::kDefaultAlignment;
constexpr uint64_t kChunkElements = uint64_t{1} << 16;  // a multiple of every block size written

uint64_t align_up(uint64_t x) {
    return (x + kAlignment - 1) / kAlignment * kAlignment;
}

// ---------------------------------------------------------------------------------------------------------
// header serialization

class Buffer {
public:
    template <class T>
    void put(T v) {
        char b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));  // little-endian host assumed, as in ByteReader
        m_bytes.append(b, sizeof(T));
    }
    void put_raw(std::string_view s) { m_bytes.append(s); }
    void put_string(std::string_view s) {
        put<uint64_t>(s.size());
        m_bytes.append(s);
    }
    void pad_to_alignment() { m_bytes.resize(align_up(m_bytes.size()), '\0'); }
    const std::string& bytes() const { return m_bytes; }

private:
    std::string m_bytes;
};

// The value as a signed/unsigned integer when it holds one that fits [lo, hi].
bool integer_in(const MetaValue& v, int64_t lo, uint64_t hi, uint64_t& bits) {
    if (const auto* u = std::get_if<uint64_t>(&v.scalar)) {
        if (*u > hi) return false;
        bits = *u;
        return true;
    }
    if (const auto* i = std::get_if<int64_t>(&v.scalar)) {
        if (*i < lo || (*i > 0 && static_cast<uint64_t>(*i) > hi)) return false;
        bits = static_cast<uint64_t>(*i);  // two's complement; put<> truncates to the type's width
        return true;
    }
    return false;
}

Status put_value(Buffer& b, const MetaValue& v, const std::string& path, const std::string& key, int depth) {
    auto bad = [&](const std::string& why) {
        return error(StatusCode::InvalidArgument, path + ": metadata '" + key + "': " + why);
    };
    uint64_t bits = 0;
    auto need_int = [&](int64_t lo, uint64_t hi) {
        return integer_in(v, lo, hi, bits) ? Status::ok()
                                           : bad("value does not fit " + std::string(meta_type_name(v.type)));
    };
    switch (v.type) {
        case MetaType::U8:
            if (Status s = need_int(0, UINT8_MAX); !s) return s;
            b.put(static_cast<uint8_t>(bits));
            return Status::ok();
        case MetaType::I8:
            if (Status s = need_int(INT8_MIN, INT8_MAX); !s) return s;
            b.put(static_cast<uint8_t>(bits));
            return Status::ok();
        case MetaType::U16:
            if (Status s = need_int(0, UINT16_MAX); !s) return s;
            b.put(static_cast<uint16_t>(bits));
            return Status::ok();
        case MetaType::I16:
            if (Status s = need_int(INT16_MIN, INT16_MAX); !s) return s;
            b.put(static_cast<uint16_t>(bits));
            return Status::ok();
        case MetaType::U32:
            if (Status s = need_int(0, UINT32_MAX); !s) return s;
            b.put(static_cast<uint32_t>(bits));
            return Status::ok();
        case MetaType::I32:
            if (Status s = need_int(INT32_MIN, INT32_MAX); !s) return s;
            b.put(static_cast<uint32_t>(bits));
            return Status::ok();
        case MetaType::U64:
            if (Status s = need_int(0, UINT64_MAX); !s) return s;
            b.put(bits);
            return Status::ok();
        case MetaType::I64:
            if (Status s = need_int(INT64_MIN, INT64_MAX); !s) return s;
            b.put(bits);
            return Status::ok();
        case MetaType::F32:
        case MetaType::F64: {
            auto x = v.as_float();
            if (!x) return bad("value is not a number");
            if (v.type == MetaType::F32)
                b.put(static_cast<float>(*x));
            else
                b.put(*x);
            return Status::ok();
        }
        case MetaType::Bool: {
            const auto* x = std::get_if<bool>(&v.scalar);
            if (x == nullptr) return bad("bool value holds no bool");
            b.put(static_cast<uint8_t>(*x ? 1 : 0));
            return Status::ok();
        }
        case MetaType::String: {
            const auto* s = std::get_if<std::string>(&v.scalar);
            if (s == nullptr) return bad("string value holds no string");
            b.put_string(*s);
            return Status::ok();
        }
        case MetaType::Array:
            if (depth >= gguf::kMaxArrayDepth)
                return bad("arrays nested deeper than " + std::to_string(gguf::kMaxArrayDepth) + " levels");
            b.put(static_cast<uint32_t>(v.array_type));
            b.put<uint64_t>(v.array.size());
            for (size_t i = 0; i < v.array.size(); ++i) {
                if (v.array[i].type != v.array_type)
                    return bad("element " + std::to_string(i) + " is " + std::string(meta_type_name(v.array[i].type)) +
                               " in an array of " + std::string(meta_type_name(v.array_type)));
                if (Status s = put_value(b, v.array[i], path, key, depth + 1); !s) return s;
            }
            return Status::ok();
    }
    return bad("unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
}

// ---------------------------------------------------------------------------------------------------------
// metadata from config and vocabulary

// llama.cpp's token types (llama.h enum llama_token_type), as tokenizer.ggml.token_type stores them.
constexpr int32_t kTokenNormal = 1;
constexpr int32_t kTokenUnknown = 2;
constexpr int32_t kTokenControl = 3;
constexpr int32_t kTokenByte = 6;

// A byte token as llama.cpp's SPM byte_to_token looks it up: "<0x%02X>" (upper-case hex).
bool is_spm_byte_piece(std::string_view t) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
    return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

std::string trim_ascii_space(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return std::string(s);
}

// The vocabulary in the form llama.cpp loads. A llama2.c tokenizer.bin becomes the llama (SPM) vocabulary
// llama.cpp's converter writes from the sentencepiece model it came from (tokenizer.py reversed): spaces back to
// U+2581, BOS "\n<s>\n" / EOS "\n</s>\n" trimmed to "<s>" / "</s>" and typed CONTROL, id 0 (<unk>) UNKNOWN, the
// <0xXX> pieces BYTE, every other piece NORMAL. A llama vocabulary without token types gets the same types. Every
// token text must be distinct (llama.cpp aborts on a repeated one).
Result<Vocabulary> spm_vocabulary(const std::string& path, const Vocabulary& vocab) {
    Vocabulary v = vocab;
    const bool from_llama2c = vocab.model == "llama2.c";
    if (from_llama2c || v.model.empty()) v.model = "llama";
    const size_t n = v.tokens.size();
    auto is_id = [&](int32_t id, size_t i) { return id >= 0 && static_cast<size_t>(id) == i; };
    if (from_llama2c) {
        static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, sentencepiece's space
        for (size_t i = 0; i < n; ++i) {
            std::string& t = v.tokens[i];
            if (is_id(v.bos_id, i) || is_id(v.eos_id, i)) {
                t = trim_ascii_space(t);
                if (t.empty()) t = is_id(v.bos_id, i) ? "<s>" : "</s>";
                continue;
            }
            std::string out;
            out.reserve(t.size());
            for (char c : t)
                if (c == ' ')
                    out += kSpace;
                else
                    out += c;
            t = std::move(out);
        }
    }
    if (v.model == "llama" && v.token_types.empty()) {
        v.token_types.assign(n, kTokenNormal);
        for (size_t i = 0; i < n; ++i) {
            if (i == 0 && from_llama2c)
                v.token_types[i] = kTokenUnknown;  // llama2.c (sentencepiece) ids: <unk> 0
            else if (is_id(v.bos_id, i) || is_id(v.eos_id, i))
                v.token_types[i] = kTokenControl;
            else if (is_spm_byte_piece(v.tokens[i]))
                v.token_types[i] = kTokenByte;
        }
    }
    std::unordered_map<std::string_view, size_t> seen;
    seen.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        auto [it, fresh] = seen.emplace(v.tokens[i], i);
        if (!fresh)
            return error(StatusCode::InvalidArgument, path + ": vocabulary tokens " + std::to_string(it->second) +
                                                          " and " + std::to_string(i) + " are both '" + v.tokens[i] +
                                                          "'" +
                                                          (from_llama2c ? " once spaces are written as U+2581" : "") +
                                                          "; llama.cpp needs every token text distinct");
    }
    return v;
}

Status put_vocabulary(const std::string& path, const Vocabulary& v, Metadata& m) {
    const size_t n = v.tokens.size();
    m.set("tokenizer.ggml.model", MetaValue::of_string(v.model));
    MetaValue tokens;
    tokens.type = MetaType::Array;
    tokens.array_type = MetaType::String;
    tokens.array.reserve(n);
    for (const std::string& t : v.tokens) tokens.array.push_back(MetaValue::of_string(t));
    m.set("tokenizer.ggml.tokens", std::move(tokens));
    if (!v.scores.empty()) {
        MetaValue scores;
        scores.type = MetaType::Array;
        scores.array_type = MetaType::F32;
        scores.array.reserve(n);
        for (float s : v.scores) scores.array.push_back(MetaValue::of_float(s, MetaType::F32));
        m.set("tokenizer.ggml.scores", std::move(scores));
    }
    if (!v.token_types.empty()) {
        MetaValue types;
        types.type = MetaType::Array;
        types.array_type = MetaType::I32;
        types.array.reserve(n);
        for (int32_t t : v.token_types) {
            MetaValue e = MetaValue::of_int(t);
            e.type = MetaType::I32;
            types.array.push_back(std::move(e));
        }
        m.set("tokenizer.ggml.token_type", std::move(types));
    }
    auto token_id = [&](const char* key, int32_t id) -> Status {
        if (id < 0) return Status::ok();
        if (static_cast<size_t>(id) >= n)
            return error(StatusCode::InvalidArgument, path + ": " + key + " " + std::to_string(id) +
                                                          " is outside the vocabulary of " + std::to_string(n));
        m.set(key, MetaValue::of_uint(static_cast<uint64_t>(id), MetaType::U32));
        return Status::ok();
    };
    if (Status s = token_id("tokenizer.ggml.bos_token_id", v.bos_id); !s) return s;
    if (Status s = token_id("tokenizer.ggml.eos_token_id", v.eos_id); !s) return s;
    if (v.model == "llama") {
        int32_t unk = -1;
        for (size_t i = 0; i < v.token_types.size() && unk < 0; ++i)
            if (v.token_types[i] == kTokenUnknown) unk = static_cast<int32_t>(i);
        if (Status s = token_id("tokenizer.ggml.unknown_token_id", unk); !s) return s;
        // sentencepiece llama models start every prompt with BOS and never end one with EOS
        m.set("tokenizer.ggml.add_bos_token", MetaValue::of_bool(v.bos_id >= 0));
        m.set("tokenizer.ggml.add_eos_token", MetaValue::of_bool(false));
    }
    return Status::ok();
}

// llama.cpp's general.file_type (llama.h enum llama_ftype) of a file whose matrices are all `t`.
std::optional<uint32_t> llama_file_type(DType t) {
    switch (t) {
        case DType::F32: return 0;
        case DType::F16: return 1;
        case DType::Q4_0: return 2;
        case DType::Q8_0: return 7;
        case DType::BF16: return 32;
        default: return std::nullopt;
    }
}

Status build_metadata(const std::string& path, const ModelConfig& c, const Vocabulary& vocab,
                      const WriteOptions& options, bool uniform, Metadata& m) {
    const ArchSpec& arch = arch_for_writing(c.architecture);
    const std::string arch_name(arch.gguf_name);
    m.set(std::string(arch_name_keys().gguf_architecture), MetaValue::of_string(arch_name));
    m.set("general.alignment", MetaValue::of_uint(kAlignment, MetaType::U32));
    ModelConfig values = c;
    for (const HParamKey& k : arch.gguf_keys) {
        if (!hparam_written(k.param, c)) continue;
        // llama.cpp scales positions by any factor it finds: none for a scaling GGUF has no name for (llama3's
        // factors are the rope_freqs tensor)
        if (k.param == HParam::RopeFactor && rope_scaling_name(c.rope_scaling, NameFormat::Gguf).empty()) continue;
        const std::string key = gguf_key(k.key, arch_name);
        const HParamField f = hparam_field(k.param, values);
        switch (hparam_kind(k.param)) {
            case HParamKind::Count: {
                const int64_t value = *f.count;
                if (value < 0 || value > static_cast<int64_t>(UINT32_MAX))
                    return error(StatusCode::InvalidArgument, path + ": config value " + std::to_string(value) +
                                                                  " for '" + key + "' does not fit u32");
                if (value > 0)
                    m.set(key, MetaValue::of_uint(static_cast<uint64_t>(value), MetaType::U32));  // 0: unknown
                break;
            }
            case HParamKind::Real: m.set(key, MetaValue::of_float(static_cast<float>(*f.real), MetaType::F32)); break;
            case HParamKind::Flag: m.set(key, MetaValue::of_bool(*f.flag)); break;
            case HParamKind::RopeType: {
                const std::string_view name = rope_scaling_name(*f.rope, NameFormat::Gguf);
                if (!name.empty()) m.set(key, MetaValue::of_string(std::string(name)));
                break;
            }
        }
    }
    // llama.cpp's label of the file's quantization (callers with a mixture of types give theirs in extra_metadata)
    if (const auto ft = llama_file_type(options.dtype); ft && uniform)
        m.set("general.file_type", MetaValue::of_uint(*ft, MetaType::U32));

    if (!vocab.empty()) {
        const size_t n = vocab.tokens.size();
        auto mismatch = [&](const char* what, size_t k) {
            return error(StatusCode::InvalidArgument, path + ": vocabulary has " + std::to_string(n) + " tokens but " +
                                                          std::to_string(k) + " " + what);
        };
        if (!vocab.scores.empty() && vocab.scores.size() != n) return mismatch("scores", vocab.scores.size());
        if (!vocab.token_types.empty() && vocab.token_types.size() != n)
            return mismatch("token types", vocab.token_types.size());
        auto spm = spm_vocabulary(path, vocab);
        if (!spm) return spm.status();
        if (Status s = put_vocabulary(path, *spm, m); !s) return s;
    }
    for (const auto& [key, value] : options.extra_metadata.entries) {
        if (key.empty() || key.size() > gguf::kMaxKeyBytes || !is_valid_utf8(key))
            return error(StatusCode::InvalidArgument,
                         path + ": extra metadata key '" + key + "' is empty, too long or not valid UTF-8");
        // The data layout below depends on the alignment, so callers cannot redefine it.
        if (key == "general.alignment")
            return error(StatusCode::InvalidArgument, path + ": extra metadata may not set 'general.alignment'");
        m.set(key, value);  // replaces a derived key of the same name in place
    }
    return Status::ok();
}

// ---------------------------------------------------------------------------------------------------------
// tensors

struct PlannedTensor {
    const WriteTensor* src = nullptr;
    std::string name;
    const TypeTraits* type = nullptr;
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
    uint64_t offset = 0;      // relative to the data section
    bool reorder = false;     // q/k rows reordered to the target's rotary layout
    bool norm_shift = false;  // a norm turned to GGUF's meaning (Gemma's HF w becomes 1 + w)
};

Status plan_tensors(const std::string& path, const ModelConfig& config, const std::vector<WriteTensor>& tensors,
                    DType matrix_dtype, std::vector<PlannedTensor>& out) {
    const ArchSpec& arch = arch_for_writing(config.architecture);
    // The options' matrix type is checked only where a matrix takes it: when every matrix has its own store_as
    // (an export whose matrices all came out q5_0 or iq4_nl), it is only the file's label.
    bool matrix_dtype_ok = false;
    switch (matrix_dtype) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0: matrix_dtype_ok = true; break;
        default: break;
    }
    std::unordered_set<std::string> names;
    uint64_t offset = 0;
    out.reserve(tensors.size());
    for (const WriteTensor& w : tensors) {
        PlannedTensor p;
        p.src = &w;
        p.name = w.role == TensorRole::Other ? w.name : tensor_name(arch, NameFormat::Gguf, w.role, w.layer);
        const std::string where = path + ": tensor '" + p.name + "'";
        if (w.role == TensorRole::Other) {
            if (p.name.empty() || p.name.size() > gguf::kMaxNameBytes || !is_valid_utf8(p.name))
                return error(StatusCode::InvalidArgument, where + ": a tensor of role other needs a UTF-8 name");
        } else {
            const RoleAndLayer back = parse_tensor_name(arch, NameFormat::Gguf, p.name);
            if (back.role != w.role || back.layer != w.layer)
                return error(StatusCode::InvalidArgument, path + ": role " + std::string(role_name(w.role)) +
                                                              " with layer " + std::to_string(w.layer) +
                                                              " has no GGUF name");
        }
        if (!names.insert(p.name).second) return error(StatusCode::InvalidArgument, where + " is given more than once");
        if (w.shape.empty() || w.shape.size() > gguf::kMaxDims)
            return error(StatusCode::InvalidArgument,
                         where + ": GGUF tensors have 1 to 4 dimensions, not " + std::to_string(w.shape.size()));
        p.n_elements = 1;
        for (int64_t dim : w.shape)
            if (dim <= 0 || !checked_mul(p.n_elements, static_cast<uint64_t>(dim), p.n_elements))
                return error(StatusCode::InvalidArgument, where + ": invalid shape " + shape_to_string(w.shape));
        if (w.data == nullptr && !w.fill && !w.fill_stored)
            return error(StatusCode::InvalidArgument, where + ": no data");
        if (!w.fill_stored && w.dtype != DType::F32)
            return error(StatusCode::InvalidArgument, where + ": its data is float32, not " +
                                                          std::string(dtype_name(w.dtype)) +
                                                          " (the write options choose the stored type)");
        const DType dtype = w.store_as != DType::Other ? w.store_as : w.shape.size() == 1 ? DType::F32 : matrix_dtype;
        if (w.store_as == DType::Other && w.shape.size() != 1 && !matrix_dtype_ok)
            return error(StatusCode::InvalidArgument, path + ": GGUF export writes f32, f16, bf16, q8_0 or q4_0, not " +
                                                          std::string(dtype_name(matrix_dtype)));
        p.type = gguf::find_ggml_type(dtype);
        if (p.type == nullptr || p.type->block_bytes == 0 ||
            (!w.fill_stored && p.type->quantize_weighted == nullptr && p.type->from_f32 == nullptr))
            return error(StatusCode::InvalidArgument,
                         where + ": GGUF export cannot write " + std::string(dtype_name(dtype)) + " tensors");
        const auto row = static_cast<uint64_t>(w.shape.back());
        if (row % p.type->block_elements != 0)
            return error(StatusCode::InvalidArgument, where + " (" + shape_to_string(w.shape) + "): rows of " +
                                                          std::to_string(row) + " elements; " +
                                                          std::string(dtype_name(dtype)) + " needs a multiple of " +
                                                          std::to_string(p.type->block_elements));
        auto bytes = dtype_storage_bytes(dtype, p.n_elements);
        if (!bytes) return error(StatusCode::InvalidArgument, where + ": data size overflows");
        p.n_bytes = *bytes;
        if (rope_reorder_needed(w.role, config.rope_style, arch.gguf_rope)) {
            if (Status st = check_rope_reorderable(config, w.shape, where); !st) return st;
            p.reorder = true;
        }
        if (norm_shift_needed(w.role, config.norm_storage, norm_storage(arch, NameFormat::Gguf))) {
            if (w.fill_stored && dtype != DType::F32)
                return error(StatusCode::InvalidArgument,
                             where + ": a norm stored as " + std::string(dtype_name(dtype)) +
                                 " cannot be turned into GGUF's (1 + w); give it as float32");
            p.norm_shift = true;
        }
        p.offset = offset;
        if (!checked_add(offset, align_up(p.n_bytes), offset))
            return error(StatusCode::InvalidArgument, where + ": data size overflows");
        out.push_back(std::move(p));
    }
    return Status::ok();
}

Status write_tensor_data(AtomicFile& f, const PlannedTensor& p, const float* src) {
    if (p.type->dtype == DType::F32) return f.write(src, p.n_elements * sizeof(float));
    // whole rows at a time (the weighted quantizers take rows); the encoders are row-independent, so the bytes do not
    // depend on the chunk size
    const auto row = static_cast<uint64_t>(p.src->shape.back());
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkElements / row);
    std::vector<uint16_t> halves;
    std::vector<uint8_t> blocks;
    for (uint64_t done = 0; done < p.n_elements; done += rows_per_chunk * row) {
        const uint64_t n = std::min(rows_per_chunk * row, p.n_elements - done);
        if (p.type->dtype == DType::F16 || p.type->dtype == DType::BF16) {
            halves.resize(n);
            if (p.type->dtype == DType::F16)
                encode_f16(src + done, n, halves.data());
            else
                encode_bf16(src + done, n, halves.data());
            if (Status s = f.write(halves.data(), n * sizeof(uint16_t)); !s) return s;
            continue;
        }
        blocks.resize(n / static_cast<uint64_t>(p.type->block_elements) * p.type->block_bytes);
        switch (p.type->dtype) {
            case DType::Q8_0: quantize_q8_0(src + done, n, blocks.data()); break;
            case DType::Q4_0: quantize_q4_0(src + done, n, blocks.data()); break;
            default:
                // llama-quantize's quantize_<type> without an importance matrix
                if (p.type->quantize_weighted != nullptr)
                    p.type->quantize_weighted(src + done, blocks.data(), static_cast<int64_t>(n / row),
                                              static_cast<int64_t>(row), nullptr);
                else
                    p.type->from_f32(src + done, blocks.data(), static_cast<int64_t>(n));
        }
        if (Status s = f.write(blocks.data(), blocks.size()); !s) return s;
    }
    return Status::ok();
}

// A tensor given as stored bytes: checked against its type's size, q/k rows moved to the target's rotary layout.
Status write_stored_data(AtomicFile& f, const PlannedTensor& p, const ModelConfig& config) {
    std::vector<uint8_t> bytes;
    if (Status s = p.src->fill_stored(bytes); !s)
        return error(s.code(), f.path() + ": tensor '" + p.name + "': " + s.message());
    if (bytes.size() != p.n_bytes)
        return error(StatusCode::InvalidArgument,
                     f.path() + ": tensor '" + p.name + "': " + std::to_string(bytes.size()) + " stored bytes; " +
                         std::string(dtype_name(p.type->dtype)) + " of shape " + shape_to_string(p.src->shape) +
                         " takes " + std::to_string(p.n_bytes));
    if (p.norm_shift) {  // float32 (plan_tensors checked)
        std::vector<float> values(bytes.size() / sizeof(float));
        std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
        shift_norm(values.data(), values.size(), config.norm_storage, NormStorage::Multiplier);
        std::memcpy(bytes.data(), values.data(), values.size() * sizeof(float));
    }
    if (!p.reorder) return f.write(bytes.data(), bytes.size());
    // the row permutation: rope_reorder of the row indices (exact in float below 2^24 rows)
    const int64_t rows = p.src->shape[0];
    std::vector<float> index(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) index[static_cast<size_t>(r)] = static_cast<float>(r);
    const std::vector<float> from = rope_reorder(index.data(), rows, 1, config.head_size(), config.rope_style,
                                                 arch_for_writing(config.architecture).gguf_rope);
    const uint64_t row_bytes = p.n_bytes / static_cast<uint64_t>(rows);
    std::vector<uint8_t> out(bytes.size());
    for (int64_t r = 0; r < rows; ++r)
        std::memcpy(out.data() + static_cast<uint64_t>(r) * row_bytes,
                    bytes.data() + static_cast<uint64_t>(from[static_cast<size_t>(r)]) * row_bytes, row_bytes);
    return f.write(out.data(), out.size());
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------

void copy_source_tokenizer_keys(const Metadata& source, const Vocabulary& vocab, Metadata& out) {
    const MetaValue* model = source.find("tokenizer.ggml.model");
    const MetaValue* tokens = source.find("tokenizer.ggml.tokens");
    // (a Hugging Face tokenizer's keys, FoundVocabulary::keys, come without the tokens: they are the vocabulary's)
    if (model == nullptr || model->as_string() == nullptr || *model->as_string() != vocab.model ||
        (tokens != nullptr && tokens->array.size() != vocab.tokens.size()))
        return;
    static constexpr std::string_view kDerived[] = {"tokenizer.ggml.model",        "tokenizer.ggml.tokens",
                                                    "tokenizer.ggml.scores",       "tokenizer.ggml.token_type",
                                                    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
    for (const auto& [key, value] : source.entries) {
        if (key.rfind("tokenizer.", 0) != 0) continue;
        if (std::find(std::begin(kDerived), std::end(kDerived), key) != std::end(kDerived)) continue;
        out.set(key, value);
    }
}

VocabularyFit fit_vocabulary(Vocabulary& vocab, Metadata& keys, int64_t rows) {
    VocabularyFit fit;
    fit.n_tokens = vocab.tokens.size();
    fit.n_rows = rows > 0 ? static_cast<size_t>(rows) : 0;
    if (rows <= 0 || vocab.tokens.empty() || vocab.tokens.size() == fit.n_rows) return fit;
    const size_t n = fit.n_rows;
    if (vocab.tokens.size() > n) {
        fit.dropped.assign(vocab.tokens.begin() + static_cast<std::ptrdiff_t>(n), vocab.tokens.end());
        vocab.tokens.resize(n);
        if (vocab.scores.size() > n) vocab.scores.resize(n);
        if (vocab.token_types.size() > n) vocab.token_types.resize(n);
    } else {
        fit.n_padded = n - vocab.tokens.size();
        constexpr int32_t kUnused = 5;  // GGUF token type UNUSED
        const bool scored = !vocab.scores.empty(), typed = !vocab.token_types.empty();
        for (size_t i = vocab.tokens.size(); i < n; ++i) {
            vocab.tokens.push_back("[PAD" + std::to_string(i) + "]");
            if (scored) vocab.scores.push_back(-10000.0f);
            if (typed) vocab.token_types.push_back(kUnused);
        }
    }
    auto outside = [n](int64_t id) { return id < 0 || static_cast<uint64_t>(id) >= n; };
    if (outside(vocab.bos_id)) vocab.bos_id = -1;
    if (outside(vocab.eos_id)) vocab.eos_id = -1;
    std::erase_if(keys.entries, [&](const std::pair<std::string, MetaValue>& e) {
        const std::string& key = e.first;
        constexpr std::string_view kSuffix = "_token_id";
        const bool id_key = key.rfind("tokenizer.ggml.", 0) == 0 && key.size() > kSuffix.size() &&
                            key.compare(key.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
        const std::optional<int64_t> id = id_key ? e.second.as_int() : std::nullopt;
        return id && outside(*id);
    });
    return fit;
}

std::string describe(const VocabularyFit& fit) {
    if (fit.dropped.empty() && fit.n_padded == 0) return {};
    std::string s = std::to_string(fit.n_tokens) + " tokens for " + std::to_string(fit.n_rows) + " embedding rows: ";
    if (fit.n_padded > 0)
        return s + std::to_string(fit.n_padded) + " \"[PADi]\" tokens added, as convert_hf_to_gguf.py pads them";
    std::string texts;
    for (size_t i = 0; i < fit.dropped.size() && i < 3; ++i) texts += (i ? ", '" : "'") + fit.dropped[i] + "'";
    if (fit.dropped.size() > 3) texts += ", ...";
    const std::string ids = fit.dropped.size() == 1
                                ? "id " + std::to_string(fit.n_rows)
                                : "ids " + std::to_string(fit.n_rows) + ".." + std::to_string(fit.n_tokens - 1);
    return s + ids + " dropped (" + texts + "), as convert_hf_to_gguf.py drops them";
}

Status write_gguf(const std::string& path, const ModelConfig& config, const std::vector<WriteTensor>& unfused,
                  const Vocabulary& vocab, const WriteOptions& options) {
    // A fused tensor's parts (Phi-3's q/k/v, gate/up) joined into the one tensor llama.cpp's converter writes.
    auto joined = join_fused_tensors(path, config, NameFormat::Gguf, unfused);
    if (!joined) return joined.status();
    const std::vector<WriteTensor>& given = *joined;
    // Llama 3 rope scaling from a config (HF) becomes the rope_freqs tensor llama.cpp's converter writes.
    std::vector<float> divisors = llama3_rope_divisors(config);
    std::vector<WriteTensor> with_freqs;
    const bool add_freqs = !divisors.empty() && std::none_of(given.begin(), given.end(), [](const WriteTensor& t) {
        return t.role == TensorRole::RopeFreqs;
    });
    if (add_freqs) {
        with_freqs = given;
        WriteTensor f;
        f.role = TensorRole::RopeFreqs;
        f.shape = {static_cast<int64_t>(divisors.size())};
        f.data = divisors.data();
        with_freqs.push_back(std::move(f));
    }
    const std::vector<WriteTensor>& tensors = add_freqs ? with_freqs : given;
    std::vector<PlannedTensor> planned;
    if (Status s = plan_tensors(path, config, tensors, options.dtype, planned); !s) return s;
    // general.file_type names the matrices' one type; a file whose tensors choose their own types has none unless
    // the caller gives it
    bool uniform = true;
    for (const PlannedTensor& p : planned)
        if (p.src->shape.size() >= 2 && p.type->dtype != options.dtype) uniform = false;
    Metadata meta;
    if (Status s = build_metadata(path, config, vocab, options, uniform, meta); !s) return s;

    Buffer header;
    header.put_raw(std::string_view(gguf::kMagic, sizeof gguf::kMagic));
    header.put<uint32_t>(3);
    header.put<uint64_t>(planned.size());
    header.put<uint64_t>(meta.entries.size());
    for (const auto& [key, value] : meta.entries) {
        header.put_string(key);
        header.put(static_cast<uint32_t>(value.type));
        if (Status s = put_value(header, value, path, key, 0); !s) return s;
    }
    for (const PlannedTensor& p : planned) {
        header.put_string(p.name);
        const auto& shape = p.src->shape;
        header.put(static_cast<uint32_t>(shape.size()));
        for (auto it = shape.rbegin(); it != shape.rend(); ++it)  // ne: innermost first
            header.put(static_cast<uint64_t>(*it));
        header.put(static_cast<uint32_t>(p.type->ggml_id));
        header.put(p.offset);
    }
    header.pad_to_alignment();

    auto file = AtomicFile::create(path);
    if (!file) return file.status();
    AtomicFile& f = file.value();
    if (Status s = f.write(header.bytes()); !s) return s;
    const uint64_t data_start = header.bytes().size();
    for (const PlannedTensor& p : planned) {
        if (f.bytes_written() != data_start + p.offset)
            return error(StatusCode::Internal, path + ": tensor '" + p.name + "' written at the wrong offset");
        if (p.src->fill_stored) {
            if (Status s = write_stored_data(f, p, config); !s) return s;
            if (Status s = f.write_zeros(align_up(p.n_bytes) - p.n_bytes); !s) return s;
            continue;
        }
        std::vector<float> filled;     // a `fill` tensor's floats
        std::vector<float> reordered;  // one tensor at a time, so memory stays at one matrix
        const float* src = p.src->data;
        if (!src) {
            try {
                filled.resize(static_cast<size_t>(p.n_elements));
            } catch (const std::bad_alloc&) {
                return error(StatusCode::InvalidArgument, path + ": tensor '" + p.name + "': out of memory");
            }
            if (Status s = p.src->fill(filled.data()); !s)
                return error(s.code(), path + ": tensor '" + p.name + "': " + s.message());
            src = filled.data();
        }
        if (p.reorder)
            reordered = rope_reorder(src, p.src->shape[0], p.src->shape[1], config.head_size(), config.rope_style,
                                     arch_for_writing(config.architecture).gguf_rope);
        std::vector<float> shifted;  // a norm in GGUF's meaning
        if (p.norm_shift) {
            shifted.assign(src, src + p.n_elements);
            shift_norm(shifted.data(), shifted.size(), config.norm_storage, NormStorage::Multiplier);
            src = shifted.data();
        }
        if (Status s = write_tensor_data(f, p, p.reorder ? reordered.data() : src); !s) return s;
        if (Status s = f.write_zeros(align_up(p.n_bytes) - p.n_bytes); !s) return s;
    }
    return f.commit();
}

}  // namespace gkq
