// Factor quantization for the low-rank methods: a uniform mid-rise quantizer with one max-abs scale per vector,
// delta encoding of codes along a vector, LSB-first bit packing, and the 8-bit sigma codes.
// Quantizer: with L = 2^bits levels and m = max |x| of the vector (f32, rounded up so that m >= max |x|),
// code c in [0, L-1] stands for q = 2c - (L-1) (the odd integers in [-(L-1), L-1]) times d = m / (L-1)
// computed in f32; hence |x - x'| <= d, half a step. All L codes are used (2 bits: -m, -m/3, m/3, m).
#pragma once

#include "gkq/lowrank_payload.h"  // packed_bytes, dequantize_sigma: what the kernels need too

#include <cstdint>
#include <vector>

namespace gkq::codec {

inline int n_levels(int bits) {
    return 1 << bits;
}

// d = max_abs / (L - 1) in f32: what one unit of q is worth.
float code_step(float max_abs, int bits);

// The decoded value of code c.
inline float dequantize_code(uint8_t c, int bits, float step) {
    return static_cast<float>(2 * static_cast<int>(c) - (n_levels(bits) - 1)) * step;
}

// Quantizes x[0], x[stride], ... (n values) into codes[0..n); returns the vector's scale m (f32 max |x|).
float quantize_vector(const double* x, int64_t n, int64_t stride, int bits, uint8_t* codes);

// In place: d_0 = c_0, d_i = (c_i - c_{i-1}) mod 2^bits; and back.
void delta_encode(uint8_t* codes, int64_t n, int bits);
void delta_decode(uint8_t* codes, int64_t n, int bits);

// Appends n codes (each < 2^bits) packed LSB-first; unused high bits of the last byte are zero.
void pack_codes(const uint8_t* codes, uint64_t n, int bits, std::vector<uint8_t>& out);
// Unpacks n codes from packed_bytes(n, bits) bytes; false when an unused padding bit is set.
bool unpack_codes(const uint8_t* packed, uint64_t n, int bits, uint8_t* codes);

// Sigma as 8-bit codes over [0, sigma_max]; dequantize_sigma (gkq/lowrank_payload.h) is its inverse.
uint8_t quantize_sigma(double s, float sigma_max);

// f32 value >= x (x >= 0): the scale that never clips.
float round_up_to_float(double x);

}  // namespace gkq::codec
