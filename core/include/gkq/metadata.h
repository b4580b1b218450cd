// Metadata: the key/value pairs a model file carries besides tensors (GGUF key/values with their exact
// types, safetensors "__metadata__" strings, config.json entries, llama2.c header facts), in file order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gkq {

// GGUF's value types, in GGUF's numbering.
enum class MetaType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

std::string_view meta_type_name(MetaType t);

struct MetaValue {
    MetaType type = MetaType::String;
    MetaType array_type = MetaType::U8;                                 // element type when type == Array
    std::variant<uint64_t, int64_t, double, bool, std::string> scalar;  // unsigned, signed, float, bool, string
    std::vector<MetaValue> array;                                       // elements when type == Array

    static MetaValue of_string(std::string s);
    static MetaValue of_int(int64_t v);  // I64
    static MetaValue of_uint(uint64_t v, MetaType t = MetaType::U64);
    static MetaValue of_float(double v, MetaType t = MetaType::F64);
    static MetaValue of_bool(bool v);

    std::optional<int64_t> as_int() const;   // any integer type (unsigned values above INT64_MAX: nullopt)
    std::optional<double> as_float() const;  // any numeric type
    const std::string* as_string() const;
    // Short human-readable form; arrays show their first `max_items` elements and their length.
    std::string to_display(size_t max_items = 6) const;
};

struct Metadata {
    std::vector<std::pair<std::string, MetaValue>> entries;

    const MetaValue* find(std::string_view key) const;
    void set(std::string key, MetaValue value);  // replaces an existing key in place
};

// A tokenizer vocabulary as stored with the model (GGUF tokenizer.ggml.*, llama2.c tokenizer.bin).
struct Vocabulary {
    std::string model;                 // "llama" (SPM), "gpt2", "llama2.c", ... ; empty when none
    std::vector<std::string> tokens;   // raw bytes of each token
    std::vector<float> scores;         // empty or one per token
    std::vector<int32_t> token_types;  // empty or one per token (GGUF token_type)
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t max_token_length = 0;  // llama2.c header field; 0 when unknown

    bool empty() const { return tokens.empty(); }
};

}  // namespace gkq
