// The type table (gkq/type_traits.h): one row per stored type. gkq's own types come first, in DType order, so
// that a DType indexes its row; then every other ggml type a GGUF file may hold, by id, with the sizes of
// llama.cpp's ggml-common.h block structs (ggml.h's enum ggml_type gives the ids; 4, 5 (removed Q4_2 / Q4_3),
// 31..33 and 36..38 (removed repacked types) are not valid in files). Q8_0 / Q4_0 read gkq/block_layout.h, which
// the kernels include.
#include "gkq/dtype.h"
#include "gkq/block_layout.h"
#include "gkq/type_traits.h"

#include "common/byte_reader.h"
#include "convert_rows.h"

#include <cstddef>

namespace gkq {

namespace {

constexpr TypeTraits plain(DType t, std::string_view name, std::string_view ggml_name, int32_t ggml_id, uint64_t bytes,
                           ToF32Row to = nullptr, FromF32Row from = nullptr, DotF32Row dot = nullptr) {
    return {t, name, ggml_name, ggml_id, 1, bytes, to, from, dot, nullptr};
}

constexpr TypeTraits block(DType t, std::string_view name, std::string_view ggml_name, int32_t ggml_id,
                           int64_t elements, uint64_t bytes, ToF32Row to, FromF32Row from, DotF32Row dot,
                           QuantizeWeighted weighted) {
    return {t, name, ggml_name, ggml_id, elements, bytes, to, from, dot, weighted};
}

constexpr TypeTraits listed(std::string_view name, std::string_view ggml_name, int32_t ggml_id, int64_t elements,
                            uint64_t bytes) {
    return {DType::Other, name, ggml_name, ggml_id, elements, bytes, nullptr, nullptr, nullptr, nullptr};
}

constexpr TypeTraits kTable[] = {
    // gkq's types, in DType order
    plain(DType::F32, "f32", "F32", 0, 4, rows::f32_to_f32, rows::f32_from_f32, rows::f32_dot_f32),
    plain(DType::F16, "f16", "F16", 1, 2, rows::f16_to_f32, rows::f16_from_f32, rows::f16_dot_f32),
    plain(DType::BF16, "bf16", "BF16", 30, 2, rows::bf16_to_f32, rows::bf16_from_f32, rows::bf16_dot_f32),
    plain(DType::F64, "f64", "F64", 28, 8, rows::f64_to_f32),
    plain(DType::I8, "i8", "I8", 24, 1),
    plain(DType::U8, "u8", "", -1, 1),
    plain(DType::I16, "i16", "I16", 25, 2),
    plain(DType::I32, "i32", "I32", 26, 4),
    plain(DType::I64, "i64", "I64", 27, 8),
    {DType::Q8_0, "q8_0", "Q8_0", 8, kQ8_0Block.elements, kQ8_0Block.bytes, rows::q8_0_to_f32, rows::q8_0_from_f32,
     rows::q8_0_dot_f32, nullptr},
    {DType::Q4_0, "q4_0", "Q4_0", 2, kQ4_0Block.elements, kQ4_0Block.bytes, rows::q4_0_to_f32, rows::q4_0_from_f32,
     rows::q4_0_dot_f32, rows::q4_0_quantize_weighted},
    plain(DType::Q8_G, "q8_g", "", -1, 1),  // int8 codes; the f32 group scales are stored apart (Tensor::scales)
    // llama.cpp's other legacy blocks and the k-quants (gkq/block_layout.h; quants_legacy.cpp, kquants.cpp)
    block(DType::Q4_1, "q4_1", "Q4_1", 3, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q4_1_BLOCK_BYTES, rows::q4_1_to_f32,
          rows::q4_1_from_f32, rows::q4_1_dot_f32, rows::q4_1_quantize_weighted),
    block(DType::Q5_0, "q5_0", "Q5_0", 6, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q5_0_BLOCK_BYTES, rows::q5_0_to_f32,
          rows::q5_0_from_f32, rows::q5_0_dot_f32, rows::q5_0_quantize_weighted),
    block(DType::Q5_1, "q5_1", "Q5_1", 7, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_Q5_1_BLOCK_BYTES, rows::q5_1_to_f32,
          rows::q5_1_from_f32, rows::q5_1_dot_f32, rows::q5_1_quantize_weighted),
    block(DType::Q2_K, "q2_k", "Q2_K", 10, GKQ_QK_K, GKQ_Q2_K_BLOCK_BYTES, rows::q2_k_to_f32, rows::q2_k_from_f32,
          rows::q2_k_dot_f32, rows::q2_k_quantize_weighted),
    block(DType::Q3_K, "q3_k", "Q3_K", 11, GKQ_QK_K, GKQ_Q3_K_BLOCK_BYTES, rows::q3_k_to_f32, rows::q3_k_from_f32,
          rows::q3_k_dot_f32, rows::q3_k_quantize_weighted),
    block(DType::Q4_K, "q4_k", "Q4_K", 12, GKQ_QK_K, GKQ_Q4_K_BLOCK_BYTES, rows::q4_k_to_f32, rows::q4_k_from_f32,
          rows::q4_k_dot_f32, rows::q4_k_quantize_weighted),
    block(DType::Q5_K, "q5_k", "Q5_K", 13, GKQ_QK_K, GKQ_Q5_K_BLOCK_BYTES, rows::q5_k_to_f32, rows::q5_k_from_f32,
          rows::q5_k_dot_f32, rows::q5_k_quantize_weighted),
    block(DType::Q6_K, "q6_k", "Q6_K", 14, GKQ_QK_K, GKQ_Q6_K_BLOCK_BYTES, rows::q6_k_to_f32, rows::q6_k_from_f32,
          rows::q6_k_dot_f32, rows::q6_k_quantize_weighted),
    block(DType::Q8_K, "q8_k", "Q8_K", 15, GKQ_QK_K, GKQ_Q8_K_BLOCK_BYTES, rows::q8_k_to_f32, rows::q8_k_from_f32,
          rows::q8_k_dot_f32, nullptr),
    block(DType::IQ4_NL, "iq4_nl", "IQ4_NL", 20, GKQ_LEGACY_BLOCK_ELEMENTS, GKQ_IQ4_NL_BLOCK_BYTES, rows::iq4_nl_to_f32,
          rows::iq4_nl_from_f32, rows::iq4_nl_dot_f32, rows::iq4_nl_quantize_weighted),
    {DType::Other, "other", "", -1, 1, 0, nullptr, nullptr, nullptr, nullptr},
    // the other ggml types, by id (listed: sizes for checking files, no conversions yet)
    listed("q8_1", "Q8_1", 9, 32, 36),  // f16 d, s + 32 x i8
    listed("iq2_xxs", "IQ2_XXS", 16, 256, 66),
    listed("iq2_xs", "IQ2_XS", 17, 256, 74),
    listed("iq3_xxs", "IQ3_XXS", 18, 256, 98),
    listed("iq1_s", "IQ1_S", 19, 256, 50),
    listed("iq3_s", "IQ3_S", 21, 256, 110),
    listed("iq2_s", "IQ2_S", 22, 256, 82),
    listed("iq4_xs", "IQ4_XS", 23, 256, 136),
    listed("iq1_m", "IQ1_M", 29, 256, 56),
    listed("tq1_0", "TQ1_0", 34, 256, 54),
    listed("tq2_0", "TQ2_0", 35, 256, 66),
    listed("mxfp4", "MXFP4", 39, 32, 17),  // u8 E8M0 exponent + 16 B E2M1 nibbles
};

constexpr bool rows_follow_dtype_order() {
    for (size_t i = 0; i <= static_cast<size_t>(DType::Other); ++i)
        if (static_cast<size_t>(kTable[i].dtype) != i) return false;
    return true;
}
static_assert(rows_follow_dtype_order(), "the first rows of the type table must follow the DType enum");

}  // namespace

std::span<const TypeTraits> type_table() {
    return kTable;
}

const TypeTraits& type_traits(DType t) {
    return kTable[static_cast<size_t>(t)];
}

const TypeTraits* type_traits_for_ggml_id(uint32_t id) {
    for (const TypeTraits& t : kTable)
        if (t.ggml_id >= 0 && static_cast<uint32_t>(t.ggml_id) == id) return &t;
    return nullptr;
}

// ---- the DType queries of gkq/dtype.h, read from the table ----

std::string_view dtype_name(DType t) {
    return type_traits(t).name;
}

bool dtype_is_float_convertible(DType t) {
    return type_traits(t).to_f32 != nullptr || t == DType::Q8_G;  // Q8_G: with its scales, by tensor_to_f32
}

int64_t dtype_block_elements(DType t) {
    return type_traits(t).block_elements;
}

std::optional<uint64_t> dtype_storage_bytes(DType t, uint64_t n) {
    const TypeTraits& traits = type_traits(t);
    if (traits.block_bytes == 0) return std::nullopt;
    const auto per_block = static_cast<uint64_t>(traits.block_elements);
    if (n % per_block != 0) return std::nullopt;
    uint64_t out = 0;
    if (!checked_mul(n / per_block, traits.block_bytes, out)) return std::nullopt;
    return out;
}

}  // namespace gkq
