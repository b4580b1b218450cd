// The type table: one row per stored type, as ggml's type_traits[] — gkq's own types (F32, F16, BF16, F64, the
// integer types, Q8_0, Q4_0, Q8_G, llama.cpp's Q4_1 ... IQ4_NL) and every other ggml type a GGUF file may hold, listed
// by name. A row gives the type's names, its ggml id, its block (elements and bytes) and the row functions gkq
// implements for it; a null function is one gkq does not implement. The rows live in core/src/formats/dtype.cpp;
// nothing else knows a block size (the kernels read gkq/block_layout.h, which the table's Q8_0 / Q4_0 rows read too).
// Row functions take n, a whole number of the type's blocks (callers check; see dtype_storage_bytes):
//   to_f32    n stored values -> n floats, exact (the same values as convert_to_f32)
//   from_f32  n floats -> n stored values, bit for bit llama.cpp's reference quantizers (round to nearest even
//             for f16 / bf16)
//   quantize_weighted  n_rows rows of n_per_row floats (whole blocks) -> blocks, bit for bit ggml's
//             quantize_<type> as llama-quantize calls it: `importance` holds n_per_row per-column weights (an
//             importance matrix's) or is null, which gives what llama-quantize writes without one (from_f32 for all
//             but IQ4_NL, whose scale search runs either way)
//   dot_f32   the dot product of n stored values with n floats: the stored values converted to f32, each
//             multiplied by its activation and summed in f32 in the transformer's order (eight lane sums, lane k
//             taking the terms j = k (mod 8) below n - n % 8 in ascending j, combined as ((l0 + l4) + (l2 + l6)) +
//             ((l1 + l5) + (l3 + l7)), then the remaining terms in order): the scalar reference whose bits the
//             transformer's stored products (core/src/infer/kernels.h, scalar and AVX2) give for every output
// Adding a type (say IQ4_XS, listed today): a DType value (gkq/dtype.h, before Other), its row moved up into DType
// order in dtype.cpp (a static_assert checks the order) with the row functions written in core/src/formats (the
// llama.cpp blocks: quant_blocks.h and the quants*.cpp / kquants.cpp files, checked against ggml's own output in
// tests/data/quants); the GGUF reader, tensor_to_f32 and the size checks then follow from the row (the writers
// list the types they write).
#pragma once

#include "gkq/dtype.h"

#include <cstdint>
#include <span>
#include <string_view>

namespace gkq {

using ToF32Row = void (*)(const void* src, float* dst, int64_t n);
using FromF32Row = void (*)(const float* src, void* dst, int64_t n);
using DotF32Row = float (*)(const void* row, const float* x, int64_t n);
using QuantizeWeighted = void (*)(const float* src, void* dst, int64_t n_rows, int64_t n_per_row,
                                  const float* importance);

struct TypeTraits {
    DType dtype;                         // Other for the ggml types gkq lists but does not convert
    std::string_view name;               // canonical, lower case: "f32", "q8_0", "q8_g", "q4_k"
    std::string_view ggml_name;          // as ggml spells it ("F32", "Q4_K"); empty where ggml has no such type
    int32_t ggml_id;                     // ggml's type id (GGUF tensor info); -1 where ggml has no such type
    int64_t block_elements;              // values per block: 1 for plain types
    uint64_t block_bytes;                // bytes per block; 0 where the size is not fixed (Other). Q8_G: the codes only
    ToF32Row to_f32;                     // null where not implemented (Q8_G needs its group scales: tensor_to_f32)
    FromF32Row from_f32;                 // null where not implemented
    DotF32Row dot_f32;                   // null where not implemented
    QuantizeWeighted quantize_weighted;  // null where not implemented (ggml has none for Q8_0, Q8_K)
};

// Every row: gkq's types in DType order, then the other ggml types by id.
std::span<const TypeTraits> type_table();

// The row of `t` (DType::Other: a row of that name with no sizes and no functions).
const TypeTraits& type_traits(DType t);

// The row of a ggml type id; nullptr for ids that are not valid in files (removed or repacked types).
const TypeTraits* type_traits_for_ggml_id(uint32_t id);

}  // namespace gkq
