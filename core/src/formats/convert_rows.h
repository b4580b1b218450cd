// The row functions of the type table (gkq/type_traits.h), implemented in convert.cpp beside the conversions they
// wrap; core/src/formats/dtype.cpp puts them into the table's rows. n is a whole number of the type's blocks.
#pragma once

#include <cstdint>

namespace gkq::rows {

void f32_to_f32(const void* src, float* dst, int64_t n);
void f16_to_f32(const void* src, float* dst, int64_t n);
void bf16_to_f32(const void* src, float* dst, int64_t n);
void f64_to_f32(const void* src, float* dst, int64_t n);
void q8_0_to_f32(const void* src, float* dst, int64_t n);
void q4_0_to_f32(const void* src, float* dst, int64_t n);

void f32_from_f32(const float* src, void* dst, int64_t n);
void f16_from_f32(const float* src, void* dst, int64_t n);
void bf16_from_f32(const float* src, void* dst, int64_t n);
void q8_0_from_f32(const float* src, void* dst, int64_t n);
void q4_0_from_f32(const float* src, void* dst, int64_t n);

float f32_dot_f32(const void* row, const float* x, int64_t n);
float f16_dot_f32(const void* row, const float* x, int64_t n);
float bf16_dot_f32(const void* row, const float* x, int64_t n);
float q8_0_dot_f32(const void* row, const float* x, int64_t n);
float q4_0_dot_f32(const void* row, const float* x, int64_t n);

// llama.cpp's other legacy blocks (quants_legacy.cpp) and the k-quants (kquants.cpp): exact dequantization and
// ggml's reference quantizers, byte for byte.
void q4_1_to_f32(const void* src, float* dst, int64_t n);
void q4_1_from_f32(const float* src, void* dst, int64_t n);
void q5_0_to_f32(const void* src, float* dst, int64_t n);
void q5_0_from_f32(const float* src, void* dst, int64_t n);
void q5_1_to_f32(const void* src, float* dst, int64_t n);
void q5_1_from_f32(const float* src, void* dst, int64_t n);
void q2_k_to_f32(const void* src, float* dst, int64_t n);
void q2_k_from_f32(const float* src, void* dst, int64_t n);
void q3_k_to_f32(const void* src, float* dst, int64_t n);
void q3_k_from_f32(const float* src, void* dst, int64_t n);
void q4_k_to_f32(const void* src, float* dst, int64_t n);
void q4_k_from_f32(const float* src, void* dst, int64_t n);
void q5_k_to_f32(const void* src, float* dst, int64_t n);
void q5_k_from_f32(const float* src, void* dst, int64_t n);
void q6_k_to_f32(const void* src, float* dst, int64_t n);
void q6_k_from_f32(const float* src, void* dst, int64_t n);
void q8_k_to_f32(const void* src, float* dst, int64_t n);
void q8_k_from_f32(const float* src, void* dst, int64_t n);
void iq4_nl_to_f32(const void* src, float* dst, int64_t n);
void iq4_nl_from_f32(const float* src, void* dst, int64_t n);

// Their scalar reference dot products (quants_dot.cpp; the five above are there too).
float q4_1_dot_f32(const void* row, const float* x, int64_t n);
float q5_0_dot_f32(const void* row, const float* x, int64_t n);
float q5_1_dot_f32(const void* row, const float* x, int64_t n);
float q2_k_dot_f32(const void* row, const float* x, int64_t n);
float q3_k_dot_f32(const void* row, const float* x, int64_t n);
float q4_k_dot_f32(const void* row, const float* x, int64_t n);
float q5_k_dot_f32(const void* row, const float* x, int64_t n);
float q6_k_dot_f32(const void* row, const float* x, int64_t n);
float q8_k_dot_f32(const void* row, const float* x, int64_t n);
float iq4_nl_dot_f32(const void* row, const float* x, int64_t n);

// ggml's importance-weighted quantize_<type> (quants_weighted.cpp): n_rows rows of n_per_row floats, importance
// n_per_row per-column weights or null (then what llama-quantize writes without an imatrix).
void q4_0_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q4_1_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q5_0_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q5_1_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q2_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q3_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q4_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q5_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void q6_k_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);
void iq4_nl_quantize_weighted(const float* src, void* dst, int64_t n_rows, int64_t n_per_row, const float* importance);

}  // namespace gkq::rows
