// GGUF byte layout (versions 2 and 3; all integers little-endian), shared by gguf_reader.cpp and gguf_writer.cpp.
//
//   header
//     char[4]  magic            "GGUF"
//     u32      version          2 or 3 (v1 used u32 counts and strings; v3 only added big-endian files)
//     u64      tensor_count
//     u64      metadata_kv_count
//   metadata_kv_count x key/value
//     string   key              u64 length + bytes (UTF-8, no terminator)
//     u32      value_type       MetaType numbering: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
//                               8 string, 9 array, 10 u64, 11 i64, 12 f64
//     value                     scalar: its fixed width (bool: one byte, 0 or 1); string: u64 length + bytes;
//                               array: u32 element type, u64 count, then count values (arrays may nest)
//   tensor_count x tensor info
//     string   name
//     u32      n_dims           1..4
//     u64[n_dims] ne            innermost (fastest-varying) dimension first: a (rows, cols) matrix is ne = {cols, rows}
//     u32      ggml_type        see kGgmlTypes
//     u64      offset           of the tensor's data, relative to the data section; a multiple of the alignment
//   padding to `alignment` (metadata general.alignment, u32, a power of two; 32 when absent)
//   data section                tensors' bytes, each at data_start + offset; ne[0] is a whole number of blocks
//
// The ggml type table below gives each type's block (elements per block, bytes per block), verified against
// llama.cpp's ggml-common.h block structs and ggml.h's enum ggml_type. Ids 4, 5 (removed Q4_2/Q4_3), 31..33 and
// 36..38 (removed repacked types) are not valid in files.
#pragma once

#include "gkq/dtype.h"
#include "gkq/metadata.h"

#include <array>
#include <cstdint>
#include <string_view>

namespace gkq::gguf {

inline constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;
inline constexpr int kMaxArrayDepth = 8;          // nested arrays deeper than this are rejected
inline constexpr uint64_t kMaxKeyBytes = 65535;   // the GGUF spec's limit on key length
inline constexpr uint64_t kMaxNameBytes = 65535;  // tensor names (ggml itself keeps 63)
inline constexpr uint64_t kMaxStringBytes = 1ull << 30;

// Smallest possible encodings, used to bound counts by the bytes left before anything is reserved.
inline constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, one-byte value
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims, one ne, type, offset

struct GgmlType {
    uint32_t id;
    std::string_view name;    // as llama.cpp's GGMLQuantizationType spells it
    uint32_t block_elements;  // elements per block
    uint32_t block_bytes;     // bytes per block
    DType dtype;              // Other where gkq has no conversion
};

inline constexpr std::array<GgmlType, 32> kGgmlTypes = {{
    {0, "F32", 1, 4, DType::F32},
    {1, "F16", 1, 2, DType::F16},
    {2, "Q4_0", 32, 18, DType::Q4_0},      // f16 d + 16 B nibbles
    {3, "Q4_1", 32, 20, DType::Other},     // f16 d, m + 16 B
    {6, "Q5_0", 32, 22, DType::Other},     // f16 d + 4 B high bits + 16 B
    {7, "Q5_1", 32, 24, DType::Other},     // f16 d, m + 4 B + 16 B
    {8, "Q8_0", 32, 34, DType::Q8_0},      // f16 d + 32 x i8
    {9, "Q8_1", 32, 36, DType::Other},     // f16 d, s + 32 x i8
    {10, "Q2_K", 256, 84, DType::Other},   // 16 B scales + 64 B quants + f16 d, dmin
    {11, "Q3_K", 256, 110, DType::Other},  // 32 B hmask + 64 B + 12 B scales + f16 d
    {12, "Q4_K", 256, 144, DType::Other},  // f16 d, dmin + 12 B scales + 128 B
    {13, "Q5_K", 256, 176, DType::Other},  // f16 d, dmin + 12 B + 32 B high bits + 128 B
    {14, "Q6_K", 256, 210, DType::Other},  // 128 B ql + 64 B qh + 16 B scales + f16 d
    {15, "Q8_K", 256, 292, DType::Other},  // f32 d + 256 x i8 + 16 x i16 bsums
    {16, "IQ2_XXS", 256, 66, DType::Other},
    {17, "IQ2_XS", 256, 74, DType::Other},
    {18, "IQ3_XXS", 256, 98, DType::Other},
    {19, "IQ1_S", 256, 50, DType::Other},
    {20, "IQ4_NL", 32, 18, DType::Other},
    {21, "IQ3_S", 256, 110, DType::Other},
    {22, "IQ2_S", 256, 82, DType::Other},
    {23, "IQ4_XS", 256, 136, DType::Other},
    {24, "I8", 1, 1, DType::I8},
    {25, "I16", 1, 2, DType::I16},
    {26, "I32", 1, 4, DType::I32},
    {27, "I64", 1, 8, DType::I64},
    {28, "F64", 1, 8, DType::F64},
    {29, "IQ1_M", 256, 56, DType::Other},
    {30, "BF16", 1, 2, DType::BF16},
    {34, "TQ1_0", 256, 54, DType::Other},
    {35, "TQ2_0", 256, 66, DType::Other},
    {39, "MXFP4", 32, 17, DType::Other},  // u8 E8M0 exponent + 16 B E2M1 nibbles
}};

inline const GgmlType* find_ggml_type(uint32_t id) {
    for (const GgmlType& t : kGgmlTypes)
        if (t.id == id) return &t;
    return nullptr;
}

// The ggml type a gkq DType is stored as (the first match: F32 -> 0, ..., Q4_0 -> 2); nullptr for Other, Q8_G.
inline const GgmlType* find_ggml_type(DType dtype) {
    if (dtype == DType::Other) return nullptr;
    for (const GgmlType& t : kGgmlTypes)
        if (t.dtype == dtype) return &t;
    return nullptr;
}

inline bool is_meta_type(uint32_t t) {
    return t <= static_cast<uint32_t>(MetaType::F64);
}

// Bytes of the smallest value of type t (a string's length field, an array's type and count).
inline uint64_t min_value_bytes(MetaType t) {
    switch (t) {
        case MetaType::U8:
        case MetaType::I8:
        case MetaType::Bool: return 1;
        case MetaType::U16:
        case MetaType::I16: return 2;
        case MetaType::U32:
        case MetaType::I32:
        case MetaType::F32: return 4;
        case MetaType::U64:
        case MetaType::I64:
        case MetaType::F64:
        case MetaType::String: return 8;
        case MetaType::Array: return 4 + 8;
    }
    return 1;
}

}  // namespace gkq::gguf
