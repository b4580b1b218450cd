#include "gkq/convert.h"

#include "convert_rows.h"
#include "gkq/block_layout.h"
#include "gkq/tensor.h"
#include "gkq/type_traits.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

namespace gkq {

// ---------------------------------------------------------------------------------------------------------
// half / bfloat16

float f16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalize
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            mant &= 0x3FFu;
            bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
        }
    } else if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13);  // inf / nan (payload kept)
    } else {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));  // nan
    if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {
        // result is subnormal (or zero): value = abs_float * 2^24 rounded to nearest even integer
        if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25: rounds to zero
        uint32_t e = abs >> 23;
        uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126 - e;  // 14 + (113 - e): bits to drop so the unit is 2^-24
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) ++r;
        return static_cast<uint16_t>(sign | r);
    }
    // normal: rebias exponent, round mantissa to 10 bits, nearest even (carry into the exponent is right)
    uint32_t v = abs - ((127u - 15u) << 23);
    uint32_t r = v >> 13;
    uint32_t rem = v & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
}

float bf16_to_f32(uint16_t b) {
    return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

uint16_t f32_to_bf16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7FFFu + lsb;
    return static_cast<uint16_t>(x >> 16);
}

void encode_f16(const float* src, uint64_t n, uint16_t* dst) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void encode_bf16(const float* src, uint64_t n, uint16_t* dst) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

// ---------------------------------------------------------------------------------------------------------
// llama.cpp block formats (layouts: gkq/block_layout.h)

namespace {
constexpr BlockLayout Q8 = kQ8_0Block;
constexpr BlockLayout Q4 = kQ4_0Block;

uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

void dequantize_q8_0(const uint8_t* src, uint64_t n, float* dst) {
    for (uint64_t b = 0; b < n / Q8.elements; ++b) {
        const uint8_t* blk = src + b * Q8.bytes;
        float d = f16_to_f32(load_u16(blk));
        const auto* qs = reinterpret_cast<const int8_t*>(blk + Q8.codes_offset);
        for (int j = 0; j < Q8.elements; ++j) dst[b * Q8.elements + j] = static_cast<float>(qs[j]) * d;
    }
}

void dequantize_q4_0(const uint8_t* src, uint64_t n, float* dst) {
    for (uint64_t b = 0; b < n / Q4.elements; ++b) {
        const uint8_t* blk = src + b * Q4.bytes;
        float d = f16_to_f32(load_u16(blk));
        const uint8_t* qs = blk + Q4.codes_offset;
        for (int j = 0; j < Q4.elements / 2; ++j) {
            int x0 = (qs[j] & 0x0F) - 8;
            int x1 = (qs[j] >> 4) - 8;
            dst[b * Q4.elements + j] = static_cast<float>(x0) * d;
            dst[b * Q4.elements + j + Q4.elements / 2] = static_cast<float>(x1) * d;
        }
    }
}
}  // namespace

void quantize_q8_0(const float* src, uint64_t n, uint8_t* dst) {
    for (uint64_t b = 0; b < n / Q8.elements; ++b) {
        const float* x = src + b * Q8.elements;
        float amax = 0.0f;
        for (int j = 0; j < Q8.elements; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t* blk = dst + b * Q8.bytes;
        uint16_t dh = f32_to_f16(d);
        std::memcpy(blk, &dh, 2);
        for (int j = 0; j < Q8.elements; ++j) {
            auto q = static_cast<int8_t>(std::roundf(x[j] * id));
            std::memcpy(blk + Q8.codes_offset + j, &q, 1);
        }
    }
}

void quantize_q4_0(const float* src, uint64_t n, uint8_t* dst) {
    constexpr int half = Q4.elements / 2;
    for (uint64_t b = 0; b < n / Q4.elements; ++b) {
        const float* x = src + b * Q4.elements;
        float amax = 0.0f, max = 0.0f;  // max keeps the sign of the largest-magnitude value
        for (int j = 0; j < Q4.elements; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t* blk = dst + b * Q4.bytes;
        uint16_t dh = f32_to_f16(d);
        std::memcpy(blk, &dh, 2);
        for (int j = 0; j < half; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[half + j] * id;
            const uint8_t xi0 = std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x0 + 8.5f)));
            const uint8_t xi1 = std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x1 + 8.5f)));
            blk[Q4.codes_offset + j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// The type table's row functions (convert_rows.h)

namespace rows {

void f32_to_f32(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}
void f16_to_f32(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = gkq::f16_to_f32(load_u16(p + 2 * i));
}
void bf16_to_f32(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = gkq::bf16_to_f32(load_u16(p + 2 * i));
}
void f64_to_f32(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        dst[i] = static_cast<float>(v);
    }
}
void q8_0_to_f32(const void* src, float* dst, int64_t n) {
    dequantize_q8_0(static_cast<const uint8_t*>(src), static_cast<uint64_t>(n), dst);
}
void q4_0_to_f32(const void* src, float* dst, int64_t n) {
    dequantize_q4_0(static_cast<const uint8_t*>(src), static_cast<uint64_t>(n), dst);
}

void f32_from_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}
// Through an aligned buffer: dst may be any byte address (a payload offset), encode_f16 writes uint16_t.
template <uint16_t (*Encode)(float)>
void halves_from_f32(const float* src, void* dst, int64_t n) {
    auto* p = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Encode(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
    }
}
void f16_from_f32(const float* src, void* dst, int64_t n) {
    halves_from_f32<f32_to_f16>(src, dst, n);
}
void bf16_from_f32(const float* src, void* dst, int64_t n) {
    halves_from_f32<f32_to_bf16>(src, dst, n);
}
void q8_0_from_f32(const float* src, void* dst, int64_t n) {
    quantize_q8_0(src, static_cast<uint64_t>(n), static_cast<uint8_t*>(dst));
}
void q4_0_from_f32(const float* src, void* dst, int64_t n) {
    quantize_q4_0(src, static_cast<uint64_t>(n), static_cast<uint8_t*>(dst));
}

}  // namespace rows

// ---------------------------------------------------------------------------------------------------------

Status convert_to_f32(DType t, const void* src, uint64_t n, float* dst) {
    const TypeTraits& traits = type_traits(t);
    if (traits.to_f32 == nullptr)
        return error(StatusCode::Unsupported, "no float32 conversion for type " + std::string(traits.name));
    if (n % static_cast<uint64_t>(traits.block_elements) != 0)
        return error(StatusCode::InvalidArgument, std::string(traits.name) + ": element count " + std::to_string(n) +
                                                      " is not a multiple of " + std::to_string(traits.block_elements));
    traits.to_f32(src, dst, static_cast<int64_t>(n));
    return Status::ok();
}

Result<std::vector<float>> tensor_to_f32(const Tensor& t) {
    const int64_t n = t.n_elements();
    if (n < 0) return error(StatusCode::Corrupt, "tensor '" + t.name + "': invalid shape");
    if (!dtype_is_float_convertible(t.dtype))
        return error(StatusCode::Unsupported,
                     "tensor '" + t.name + "': type " + t.type_name + " cannot be converted to float32");
    auto need = dtype_storage_bytes(t.dtype, static_cast<uint64_t>(n));
    if (!need || *need > t.n_bytes || (n > 0 && t.data == nullptr))
        return error(StatusCode::Corrupt, "tensor '" + t.name + "': data size " + std::to_string(t.n_bytes) +
                                              " does not fit its shape " + shape_to_string(t.shape) + " and type " +
                                              t.type_name);
    std::vector<float> out(static_cast<size_t>(n));
    if (t.dtype == DType::Q8_G) {
        const int64_t g = t.group_size;
        if (g <= 0 || n % g != 0 || t.n_scale_bytes < static_cast<uint64_t>(n / g) * 4 || t.scales == nullptr)
            return error(StatusCode::Corrupt, "tensor '" + t.name + "': group size " + std::to_string(g) +
                                                  " and scales do not fit " + std::to_string(n) + " elements");
        for (int64_t gi = 0; gi < n / g; ++gi) {
            float s;
            std::memcpy(&s, t.scales + 4 * gi, 4);
            for (int64_t j = 0; j < g; ++j)
                out[gi * g + j] = static_cast<float>(static_cast<int8_t>(t.data[gi * g + j])) * s;
        }
        return out;
    }
    if (Status s = convert_to_f32(t.dtype, t.data, static_cast<uint64_t>(n), out.data()); !s)
        return s.with_context("tensor '" + t.name + "'");
    return out;
}

bool tensor_row_bytes(const Tensor& t, int64_t row0, int64_t n_rows, uint64_t* offset, uint64_t* n_bytes) {
    const int64_t cols = t.cols();
    if (cols < 0 || row0 < 0 || n_rows < 0) return false;
    const std::optional<uint64_t> row = t.dtype == DType::Q8_G
                                            ? std::optional<uint64_t>(static_cast<uint64_t>(cols))
                                            : dtype_storage_bytes(t.dtype, static_cast<uint64_t>(cols));
    if (!row) return false;
    *offset = *row * static_cast<uint64_t>(row0);
    *n_bytes = *row * static_cast<uint64_t>(n_rows);
    return true;
}

Status tensor_rows_to_f32(const Tensor& t, int64_t row0, int64_t n_rows, float* dst) {
    const int64_t n = t.n_elements();
    const std::string label = "tensor '" + t.name + "'";
    if (n < 0) return error(StatusCode::Corrupt, label + ": invalid shape");
    if (!dtype_is_float_convertible(t.dtype))
        return error(StatusCode::Unsupported, label + ": type " + t.type_name + " cannot be converted to float32");
    const int64_t cols = t.cols();
    const int64_t rows = cols > 0 ? n / cols : 0;
    if (row0 < 0 || n_rows < 0 || row0 > rows || n_rows > rows - row0)
        return error(StatusCode::InvalidArgument, label + ": rows " + std::to_string(row0) + " + " +
                                                      std::to_string(n_rows) + " of " + std::to_string(rows));
    auto need = dtype_storage_bytes(t.dtype, static_cast<uint64_t>(n));
    uint64_t offset = 0, bytes = 0;
    if (!need || *need > t.n_bytes || (n > 0 && t.data == nullptr) ||
        !tensor_row_bytes(t, row0, n_rows, &offset, &bytes))
        return error(StatusCode::Corrupt, label + ": data size " + std::to_string(t.n_bytes) +
                                              " does not fit its shape " + shape_to_string(t.shape) + " and type " +
                                              t.type_name);
    const uint64_t count = static_cast<uint64_t>(n_rows) * static_cast<uint64_t>(cols);
    if (count == 0) return Status::ok();
    if (t.dtype == DType::Q8_G) {
        const int64_t g = t.group_size;
        if (g <= 0 || n % g != 0 || t.n_scale_bytes < static_cast<uint64_t>(n / g) * 4 || t.scales == nullptr)
            return error(StatusCode::Corrupt, label + ": group size " + std::to_string(g) + " and scales do not fit " +
                                                  std::to_string(n) + " elements");
        const uint64_t first = static_cast<uint64_t>(row0) * static_cast<uint64_t>(cols);
        for (uint64_t k = 0; k < count; ++k) {
            const uint64_t i = first + k;
            float s;
            std::memcpy(&s, t.scales + 4 * (i / static_cast<uint64_t>(g)), 4);
            dst[k] = static_cast<float>(static_cast<int8_t>(t.data[i])) * s;
        }
        return Status::ok();
    }
    if (Status s = convert_to_f32(t.dtype, t.data + offset, count, dst); !s) return s.with_context(label);
    return Status::ok();
}

}  // namespace gkq
