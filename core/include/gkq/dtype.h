// Element types of stored tensors. Their names, block sizes and conversions are rows of one type table
// (gkq/type_traits.h, core/src/formats/dtype.cpp); the functions here read it. Block-quantized types follow
// llama.cpp's layouts (gkq/block_layout.h). Q8_G is llama2.c's version-2 export: all int8 codes of a tensor,
// then one f32 scale per group.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gkq {

enum class DType : uint8_t {
    F32,
    F16,
    BF16,
    F64,
    I8,
    U8,
    I16,
    I32,
    I64,
    Q8_0,
    Q4_0,
    Q8_G,   // llama2.c v2: int8 codes + separate f32 group scales (see Tensor::scales)
    Other,  // a type we can list but not convert (see Tensor::type_name)
};

// Lower-case canonical name: "f32", "f16", "bf16", "q8_0", "q4_0", "q8_g", ...
std::string_view dtype_name(DType t);

// True for the types that convert to float32 (F32, F16, BF16, F64, Q8_0, Q4_0, Q8_G).
bool dtype_is_float_convertible(DType t);

// Elements per block (1 for plain types).
int64_t dtype_block_elements(DType t);

// Bytes of `n_elements` values stored as `t`, or nullopt when n is not a whole number of blocks, the size
// overflows, or the type has no fixed size (Other, Q8_G whose scales live elsewhere: codes only are counted).
std::optional<uint64_t> dtype_storage_bytes(DType t, uint64_t n_elements);

}  // namespace gkq
