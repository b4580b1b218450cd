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

}  // namespace gkq::rows
