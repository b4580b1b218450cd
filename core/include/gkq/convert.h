// Exact conversions between storage types and float32, and the reference block quantizers.
// Rounding follows IEEE round-to-nearest-even for f16/bf16; Q8_0/Q4_0 quantization follows llama.cpp's
// quantize_row_q8_0_ref / quantize_row_q4_0_ref bit for bit.
#pragma once

#include "gkq/dtype.h"
#include "gkq/status.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gkq {

struct Tensor;

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);

// Converts n elements of type t at src into dst. n must be a whole number of blocks for block types.
// Returns Unsupported for types without a float32 conversion (Q8_G needs its scales: use tensor_to_f32).
Status convert_to_f32(DType t, const void* src, uint64_t n, float* dst);

// Encodes n floats (a whole number of blocks) into Q8_0 / Q4_0 blocks; dst holds dtype_storage_bytes(t, n) bytes.
void quantize_q8_0(const float* src, uint64_t n, uint8_t* dst);
void quantize_q4_0(const float* src, uint64_t n, uint8_t* dst);

// Encodes n floats as f16 / bf16 (little-endian 16-bit words).
void encode_f16(const float* src, uint64_t n, uint16_t* dst);
void encode_bf16(const float* src, uint64_t n, uint16_t* dst);

// The whole tensor as float32, row-major in the tensor's shape. Names the tensor in errors.
Result<std::vector<float>> tensor_to_f32(const Tensor& t);

// Rows [row0, row0 + n_rows) of the tensor's (rows, cols) view (rows = n / last dimension) as float32 into dst
// (n_rows * cols floats): the same values tensor_to_f32 gives them. Names the tensor in errors.
Status tensor_rows_to_f32(const Tensor& t, int64_t row0, int64_t n_rows, float* dst);

// Where rows [row0, row0 + n_rows) lie in t.data: *offset and *n_bytes (Q8_G: its codes, one byte a value).
// False when the type has no fixed row size.
bool tensor_row_bytes(const Tensor& t, int64_t row0, int64_t n_rows, uint64_t* offset, uint64_t* n_bytes);

}  // namespace gkq
