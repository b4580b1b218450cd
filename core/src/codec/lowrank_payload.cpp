#include "gkq/lowrank_payload.h"

#include "codec/factor_quant.h"
#include "codec/rle.h"
#include "common/byte_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace gkq::codec {

namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
    const size_t n = out.size();
    out.resize(n + sizeof(T));
    std::memcpy(out.data() + n, &v, sizeof(T));
}

void put_floats(std::vector<uint8_t>& out, const std::vector<float>& v) {
    for (float x : v) put(out, x);
}

constexpr uint32_t kKnownFlags = kFlagDelta | kFlagFoldedHeads | kFlagRleCoefficients | kFlagSigmaQuantized;

// Reads n f32 values that must be finite and, when `non_negative`, >= 0.
bool read_floats(ByteReader& r, uint64_t n, std::vector<float>& out, const char* what, bool non_negative) {
    const uint64_t start = r.offset();
    const uint8_t* p = nullptr;
    if (n > r.remaining() / 4) {
        r.fail(what, "needs " + std::to_string(n) + " f32 values but the payload ends after " +
                         std::to_string(r.remaining()) + " bytes (truncated?)");
        return false;
    }
    if (!r.bytes(n * 4, p, what)) return false;
    out.resize(static_cast<size_t>(n));
    if (n > 0) std::memcpy(out.data(), p, static_cast<size_t>(n) * 4);
    for (uint64_t i = 0; i < n; ++i) {
        const float x = out[static_cast<size_t>(i)];
        if (!std::isfinite(x) || (non_negative && x < 0.0f)) {
            r.fail_at(
                start + 4 * i, what,
                "value " + std::to_string(x) + " is not a finite" + (non_negative ? " non-negative" : "") + " number");
            return false;
        }
    }
    return true;
}

// Undoes delta coding and dequantizes `n` codes of one vector.
void decode_vector(const uint8_t* symbols, int64_t n, int bits, bool delta, float scale, float* out,
                   std::vector<uint8_t>& scratch) {
    scratch.assign(symbols, symbols + n);
    if (delta) delta_decode(scratch.data(), n, bits);
    const float step = code_step(scale, bits);
    for (int64_t i = 0; i < n; ++i) out[i] = dequantize_code(scratch[static_cast<size_t>(i)], bits, step);
}

}  // namespace

uint32_t LowRankSection::flags() const {
    uint32_t f = 0;
    if (delta) f |= kFlagDelta;
    if (folded) f |= kFlagFoldedHeads;
    if (rle) f |= kFlagRleCoefficients;
    if (sigma_quantized) f |= kFlagSigmaQuantized;
    return f;
}

void write_lowrank_section(const LowRankSection& s, std::vector<uint8_t>& out) {
    if (s.sigma_quantized) {
        put(out, s.sigma_max);
        out.insert(out.end(), s.sigma_codes.begin(), s.sigma_codes.end());
    } else {
        put_floats(out, s.sigma);
    }
    if (s.folded) {
        put(out, static_cast<uint8_t>(s.fold_axis));
        put(out, uint8_t{0});
        put(out, uint16_t{0});
        put(out, s.n_heads);
        put_floats(out, s.head_scales);
    }
    put_floats(out, s.u_scales);
    put_floats(out, s.v_scales);
    if (s.rle) {
        const std::vector<uint8_t> stream = rle_encode(s.symbols.data(), s.symbols.size(), s.bits);
        put(out, static_cast<uint32_t>(stream.size()));
        out.insert(out.end(), stream.begin(), stream.end());
    } else {
        pack_codes(s.symbols.data(), s.symbols.size(), s.bits, out);
    }
}

Status read_lowrank_section(const EncodedTensor& t, int64_t rows, int64_t cols, LowRankSection& s, uint64_t& consumed) {
    const std::string label = "tensor '" + t.name + "' (" + std::string(method_name(t.method)) + ") payload";
    auto corrupt = [&](const std::string& why) { return error(StatusCode::Corrupt, label + ": " + why); };

    if (t.factor_bits != 2 && t.factor_bits != 4 && t.factor_bits != 8)
        return corrupt("factor_bits is " + std::to_string(t.factor_bits) + ", expected 2, 4 or 8");
    if (t.rank < 0 || t.rank > std::min(rows, cols))
        return corrupt("rank " + std::to_string(t.rank) + " is outside [0, " + std::to_string(std::min(rows, cols)) +
                       "] for a (" + std::to_string(rows) + ", " + std::to_string(cols) + ") matrix");
    if ((t.flags & ~kKnownFlags) != 0)
        return corrupt("unknown flag bits 0x" + [&] {
            char buf[16];
            std::snprintf(buf, sizeof buf, "%x", t.flags & ~kKnownFlags);
            return std::string(buf);
        }());

    s = LowRankSection{};
    s.rows = rows;
    s.cols = cols;
    s.k = t.rank;
    s.bits = t.factor_bits;
    s.delta = (t.flags & kFlagDelta) != 0;
    s.folded = (t.flags & kFlagFoldedHeads) != 0;
    s.rle = (t.flags & kFlagRleCoefficients) != 0;
    s.sigma_quantized = (t.flags & kFlagSigmaQuantized) != 0;
    const auto k = static_cast<uint64_t>(s.k);

    ByteReader r(t.payload.data(), t.payload.size(), label);
    if (s.sigma_quantized) {
        std::vector<float> max;
        if (!read_floats(r, 1, max, "sigma_max", true)) return r.status();
        s.sigma_max = max[0];
        const uint8_t* p = nullptr;
        if (!r.bytes(k, p, "sigma codes")) return r.status();
        s.sigma_codes.assign(p, p + k);
    } else if (!read_floats(r, k, s.sigma, "sigma", true)) {
        return r.status();
    }
    if (s.folded) {
        uint8_t axis = 0, pad0 = 0;
        uint16_t pad1 = 0;
        const uint64_t at = r.offset();
        if (!r.read(axis, "fold axis") || !r.read(pad0, "fold padding") || !r.read(pad1, "fold padding") ||
            !r.read(s.n_heads, "fold head count"))
            return r.status();
        if (axis > 1)
            return corrupt("fold axis " + std::to_string(axis) + " at offset " + std::to_string(at) +
                           " is neither 0 (U) nor 1 (V)");
        if (pad0 != 0 || pad1 != 0) return corrupt("fold padding at offset " + std::to_string(at + 1) + " is not zero");
        s.fold_axis = static_cast<FoldAxis>(axis);
        const int64_t len = s.fold_axis == FoldAxis::U ? rows : cols;
        if (s.n_heads < 2 || len % s.n_heads != 0)
            return corrupt("fold head count " + std::to_string(s.n_heads) + " does not split " + std::to_string(len) +
                           (s.fold_axis == FoldAxis::U ? " rows" : " columns") + " into two or more equal heads");
        if (!read_floats(r, s.n_heads, s.head_scales, "head scales", false)) return r.status();
    }
    if (!read_floats(r, k, s.u_scales, "U scales", true) || !read_floats(r, k, s.v_scales, "V scales", true))
        return r.status();

    const auto n_symbols = static_cast<uint64_t>(s.n_symbols());
    if (s.rle) {
        uint32_t n_rle = 0;
        if (!r.read(n_rle, "run-length stream size")) return r.status();
        const uint64_t at = r.offset();
        const uint8_t* p = nullptr;
        if (!r.bytes(n_rle, p, "run-length coefficient codes")) return r.status();
        s.symbols.resize(static_cast<size_t>(n_symbols));
        std::string why;
        if (!rle_decode(p, n_rle, s.bits, n_symbols, s.symbols.data(), why))
            return corrupt(why + " (stream at offset " + std::to_string(at) + ")");
    } else {
        const uint64_t n_bytes = packed_bytes(n_symbols, s.bits);
        const uint64_t at = r.offset();
        const uint8_t* p = nullptr;
        if (!r.bytes(n_bytes, p, "factor codes")) return r.status();
        s.symbols.resize(static_cast<size_t>(n_symbols));
        if (!unpack_codes(p, n_symbols, s.bits, s.symbols.data()))
            return corrupt("unused bits of the last factor code byte at offset " + std::to_string(at + n_bytes - 1) +
                           " are not zero");
    }
    consumed = r.offset();
    return Status::ok();
}

void decoded_factors(const LowRankSection& s, std::vector<float>& u, std::vector<float>& sigma, std::vector<float>& v) {
    const int64_t k = s.k, ul = s.u_len(), vl = s.v_len();
    sigma.resize(static_cast<size_t>(k));
    for (int64_t r = 0; r < k; ++r)
        sigma[static_cast<size_t>(r)] = s.sigma_quantized
                                            ? dequantize_sigma(s.sigma_codes[static_cast<size_t>(r)], s.sigma_max)
                                            : s.sigma[static_cast<size_t>(r)];

    // Decode each stored vector, then scatter it (expanding a folded factor: head g gets head_scale[g] * base).
    std::vector<float> vec(static_cast<size_t>(std::max(ul, vl)));
    std::vector<uint8_t> scratch;
    auto expand = [&](bool is_u, std::vector<float>& out) {
        const int64_t len = is_u ? s.rows : s.cols;
        const int64_t stored = is_u ? ul : vl;
        const uint8_t* base = s.symbols.data() + (is_u ? 0 : k * ul);
        const std::vector<float>& scales = is_u ? s.u_scales : s.v_scales;
        const bool fold_here = s.folded && (s.fold_axis == FoldAxis::U) == is_u;
        out.assign(static_cast<size_t>(len * k), 0.0f);
        for (int64_t r = 0; r < k; ++r) {
            decode_vector(base + r * stored, stored, s.bits, s.delta, scales[static_cast<size_t>(r)], vec.data(),
                          scratch);
            if (!fold_here) {
                for (int64_t i = 0; i < len; ++i) out[static_cast<size_t>(i * k + r)] = vec[static_cast<size_t>(i)];
                continue;
            }
            for (int64_t g = 0; g < static_cast<int64_t>(s.n_heads); ++g)
                for (int64_t i = 0; i < stored; ++i)
                    out[static_cast<size_t>((g * stored + i) * k + r)] =
                        vec[static_cast<size_t>(i)] * s.head_scales[static_cast<size_t>(g)];
        }
    };
    expand(true, u);
    expand(false, v);
}

void reconstruct_lowrank(const LowRankSection& s, float* out) {
    std::vector<float> u, sigma, v;
    decoded_factors(s, u, sigma, v);
    const int64_t k = s.k;
    std::vector<float> us(static_cast<size_t>(k));
    for (int64_t i = 0; i < s.rows; ++i) {
        for (int64_t r = 0; r < k; ++r)
            us[static_cast<size_t>(r)] = sigma[static_cast<size_t>(r)] * u[static_cast<size_t>(i * k + r)];
        float* row = out + i * s.cols;
        for (int64_t j = 0; j < s.cols; ++j) {
            const float* vj = v.data() + j * k;
            float acc = 0.0f;
            for (int64_t r = 0; r < k; ++r) acc += us[static_cast<size_t>(r)] * vj[r];
            row[j] = acc;
        }
    }
}

}  // namespace gkq::codec
