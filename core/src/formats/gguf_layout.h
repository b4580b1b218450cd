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
//     u32      ggml_type        a ggml type id (the type table, gkq/type_traits.h)
//     u64      offset           of the tensor's data, relative to the data section; a multiple of the alignment
//   padding to `alignment` (metadata general.alignment, u32, a power of two; 32 when absent)
//   data section                tensors' bytes, each at data_start + offset; ne[0] is a whole number of blocks
#pragma once

#include "gkq/dtype.h"
#include "gkq/metadata.h"
#include "gkq/type_traits.h"

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

// The ggml types are the rows of the type table (gkq/type_traits.h) that have a ggml id.
inline const TypeTraits* find_ggml_type(uint32_t id) {
    return type_traits_for_ggml_id(id);
}

// The ggml type a gkq DType is stored as; nullptr for the types ggml does not have (U8, Q8_G, Other).
inline const TypeTraits* find_ggml_type(DType dtype) {
    const TypeTraits& t = type_traits(dtype);
    return t.ggml_id >= 0 ? &t : nullptr;
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
