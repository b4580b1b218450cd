#include "codec/factor_quant.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gkq::codec {

float round_up_to_float(double x) {
    float f = static_cast<float>(x);
    if (static_cast<double>(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    return f;
}

float code_step(float max_abs, int bits) {
    return max_abs / static_cast<float>(n_levels(bits) - 1);
}

float quantize_vector(const double* x, int64_t n, int64_t stride, int bits, uint8_t* codes) {
    double max_abs = 0.0;
    for (int64_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(x[i * stride]));
    const float m = round_up_to_float(max_abs);
    const double d = code_step(m, bits);  // the decoder's step, exactly
    const int top = n_levels(bits) - 1;
    for (int64_t i = 0; i < n; ++i) {
        long c = 0;
        if (d > 0.0) c = std::lround((x[i * stride] / d + top) * 0.5);
        codes[i] = static_cast<uint8_t>(std::clamp<long>(c, 0, top));
    }
    return m;
}

void delta_encode(uint8_t* codes, int64_t n, int bits) {
    const unsigned mask = static_cast<unsigned>(n_levels(bits) - 1);
    uint8_t prev = 0;
    for (int64_t i = 0; i < n; ++i) {
        const uint8_t c = codes[i];
        codes[i] = static_cast<uint8_t>((c - prev) & mask);
        prev = c;
    }
}

void delta_decode(uint8_t* codes, int64_t n, int bits) {
    const unsigned mask = static_cast<unsigned>(n_levels(bits) - 1);
    uint8_t prev = 0;
    for (int64_t i = 0; i < n; ++i) {
        prev = static_cast<uint8_t>((prev + codes[i]) & mask);
        codes[i] = prev;
    }
}

uint64_t packed_bytes(uint64_t n, int bits) {
    return (n * static_cast<uint64_t>(bits) + 7) / 8;
}

void pack_codes(const uint8_t* codes, uint64_t n, int bits, std::vector<uint8_t>& out) {
    const size_t start = out.size();
    out.resize(start + packed_bytes(n, bits), 0);
    uint8_t* p = out.data() + start;
    const int per_byte = 8 / bits;  // bits divides 8: a code never straddles two bytes
    for (uint64_t i = 0; i < n; ++i) p[i / per_byte] |= static_cast<uint8_t>(codes[i] << ((i % per_byte) * bits));
}

bool unpack_codes(const uint8_t* packed, uint64_t n, int bits, uint8_t* codes) {
    const int per_byte = 8 / bits;
    const unsigned mask = static_cast<unsigned>(n_levels(bits) - 1);
    for (uint64_t i = 0; i < n; ++i)
        codes[i] = static_cast<uint8_t>((packed[i / per_byte] >> ((i % per_byte) * bits)) & mask);
    const uint64_t used = n % per_byte;
    if (used != 0 && (packed[n / per_byte] >> (used * bits)) != 0) return false;
    return true;
}

uint8_t quantize_sigma(double s, float sigma_max) {
    if (!(sigma_max > 0.0f)) return 0;
    const long c = std::lround(s / sigma_max * 255.0);
    return static_cast<uint8_t>(std::clamp<long>(c, 0, 255));
}

}  // namespace gkq::codec
