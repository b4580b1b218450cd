// Shared by the kernel suites (test_kernels_cpu, test_kernels_cuda): the named tolerances, the encoded tensors every
// backend must decode (each preset, and the folded / run-length / quantized-sigma / residual layouts), and checks that
// return "" or a message naming the first element that is off. Qt-free so that messages compose into QVERIFY2.
#pragma once

#include "gkq/codec.h"
#include "gkq/kernels.h"
#include "gkq/lowrank_payload.h"
#include "test_support.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gkq::test {

// ---- named tolerances ----
inline constexpr float kDequantizeTolerance = 0.0f;                        // every backend: bit for bit
inline constexpr double kPerTerm = kernels::kReconstructTolerancePerTerm;  // FMA vs mul + add, per term and rank
inline constexpr double kResidualAddTolerance = FLT_EPSILON;               // relative: one rounding of lr + res

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
    std::vector<uint8_t> b(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& v : b) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v = static_cast<uint8_t>(x >> 24);
    }
    return b;
}

// The first index where a and b differ in bits, or -1.
inline int64_t first_bit_difference(const float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(a + i, b + i, 4) != 0) return i;
    return -1;
}

inline std::string describe(const std::string& what, int64_t i, float got, float want) {
    char buf[256];
    std::snprintf(buf, sizeof buf, ": element %lld is %.9g, expected %.9g", static_cast<long long>(i), got, want);
    return what + buf;
}

inline TensorInput input(const std::string& name, TensorRole role, std::vector<int64_t> shape,
                         const std::vector<float>& w, int32_t n_heads = 0) {
    TensorInput in;
    in.name = name;
    in.role = role;
    in.layer = 0;
    in.shape = std::move(shape);
    in.data = w.data();
    in.n_heads = n_heads;
    return in;
}

// Heads g = 0..7 of a (64, 64) attention projection are c_g times one (8, 64) block (rows), or its transpose.
inline std::vector<float> scaled_heads(bool along_columns) {
    const double c[8] = {1.0, -0.5, 0.25, 2.0, -1.5, 0.75, 1.25, -0.125};
    const std::vector<float> base = random_floats(8 * 64, 77);
    std::vector<float> w(64 * 64);
    for (int g = 0; g < 8; ++g)
        for (int r = 0; r < 8; ++r)
            for (int j = 0; j < 64; ++j) {
                const float x = static_cast<float>(c[g]) * base[r * 64 + j];
                if (along_columns)
                    w[j * 64 + g * 8 + r] = x;
                else
                    w[(g * 8 + r) * 64 + j] = x;
            }
    return w;
}

// Rank 1 with piecewise constant u and v: after delta coding the codes are long runs of zeros (run-length encoded).
inline std::vector<float> piecewise_ffn() {
    std::vector<float> w(192 * 64);
    for (int i = 0; i < 192; ++i)
        for (int j = 0; j < 64; ++j) w[i * 64 + j] = float((i < 96 ? 0.75 : -0.25) * (j < 32 ? 0.25 : 0.75));
    return w;
}

struct Case {
    std::string label;
    EncodedTensor tensor;
    uint32_t required_flags = 0;  // the layout this case exists for
};

// Whether every backend decodes what `p` stores on random matrices: no Gram matrix needed (the whitened presets need
// activations; their factors decode as svd-energy's do), and only methods 0-5 with Q4_0 / Q8_0 residuals: llama.cpp's
// other block types (methods 6-14, and residuals in those types) decode through the type table on the CPU backends
// only, and the CUDA and WASM decoders refuse them by name (the CPU tests check those in cases of their own).
inline bool preset_on_every_backend(const Preset& p) {
    if (preset_needs_gram(p) || !p.llama_mixture.empty()) return false;
    return std::none_of(p.by_role.begin(), p.by_role.end(), [](const CodecParams& c) {
        return c.residual != ResidualKind::None && c.residual != ResidualKind::Q4_0 && c.residual != ResidualKind::Q8_0;
    });
}

// Random matrices through every preset that preset_on_every_backend accepts, three shapes, three roles.
inline std::vector<Case> preset_cases(std::string& error) {
    std::vector<Case> cases;
    for (const std::string& name : preset_names()) {
        const Preset p = *find_preset(name);
        if (!preset_on_every_backend(p)) continue;
        for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{64, 96}, {96, 64}, {70, 160}})
            for (TensorRole role : {TensorRole::AttnQ, TensorRole::FfnUp, TensorRole::TokenEmbd}) {
                const std::vector<float> w =
                    random_floats(static_cast<size_t>(rows * cols), static_cast<uint64_t>(rows * cols) + int(role));
                Result<EncodedTensor> e =
                    encode_tensor(input("blk.0.t.weight", role, {rows, cols}, w), p.params_for(role, 2));
                const std::string label =
                    name + " " + std::to_string(rows) + "x" + std::to_string(cols) + " " + std::string(role_name(role));
                if (!e) {
                    error = label + ": " + e.message();
                    return {};
                }
                cases.push_back({label, std::move(*e), 0});
            }
    }
    return cases;
}

// The layouts the presets do not reach on random matrices.
inline std::vector<Case> layout_cases(std::string& error) {
    std::vector<Case> cases;
    auto add = [&](const std::string& label, const TensorInput& in, const CodecParams& p, uint32_t flags) {
        Result<EncodedTensor> e = encode_tensor(in, p);
        if (!e)
            error = label + ": " + e.message();
        else
            cases.push_back({label, std::move(*e), flags});
    };
    for (bool columns : {false, true}) {
        CodecParams p;
        p.method = Method::LowRank;
        p.rank = 8;
        p.factor_bits = 4;
        p.fold = true;
        p.fold_tolerance = 1e-6;
        p.delta = true;
        const std::vector<float> w = scaled_heads(columns);
        add(columns ? "folded on V" : "folded on U",
            input("heads", columns ? TensorRole::AttnO : TensorRole::AttnQ, {64, 64}, w, 8), p, kFlagFoldedHeads);
    }
    {
        CodecParams p;
        p.method = Method::LowRank;
        p.rank = 1;
        p.factor_bits = 4;
        p.fold = true;
        p.delta = true;
        const std::vector<float> w = piecewise_ffn();
        add("run-length codes", input("ffn", TensorRole::FfnUp, {192, 64}, w), p, kFlagDelta | kFlagRleCoefficients);
    }
    for (int bits : {2, 4, 8})
        for (ResidualKind res : {ResidualKind::None, ResidualKind::Q4_0, ResidualKind::Q8_0}) {
            CodecParams p;
            p.method = res == ResidualKind::None ? Method::LowRank : Method::LowRankResidual;
            p.rank = 5;
            p.factor_bits = bits;
            p.sigma_quantized = true;
            p.delta = bits != 8;
            p.residual = res;
            const std::vector<float> w = random_floats(33 * 96, uint64_t(bits) * 3 + int(res));
            add(std::to_string(bits) + "-bit, 8-bit sigma, residual " + std::string(residual_name(res)),
                input("m", TensorRole::FfnDown, {33, 96}, w), p, kFlagSigmaQuantized);
        }
    {
        CodecParams p;
        p.method = Method::LowRank;
        p.rank = 4;
        const std::vector<float> w = random_floats(4 * 6 * 64, 8);
        add("3-D tensor as its (24, 64) matrix view", input("t3", TensorRole::FfnUp, {4, 6, 64}, w), p, 0);
    }
    return cases;
}

// Per element |got - want| <= kPerTerm * k * sum_r |sigma_r u_ir v_jr| (+ kResidualAddTolerance * |want| with a
// residual), u as ut (k, rows) and v as vt (k, cols).
inline std::string check_reconstruction(const float* ut, const float* sigma, const float* vt, int64_t rows,
                                        int64_t cols, int64_t k, bool with_residual, const float* got,
                                        const float* want) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            double absum = 0.0;
            for (int64_t r = 0; r < k; ++r) absum += std::fabs(double(sigma[r]) * ut[r * rows + i] * vt[r * cols + j]);
            const double w = want[i * cols + j], g = got[i * cols + j];
            const double bound =
                kPerTerm * double(k) * absum + (with_residual ? kResidualAddTolerance * std::fabs(w) : 0.0);
            if (!(std::fabs(g - w) <= bound))
                return describe("reconstruct (" + std::to_string(rows) + " x " + std::to_string(cols) + ", k " +
                                    std::to_string(k) + ", bound " + std::to_string(bound) + ")",
                                i * cols + j, float(g), float(w));
        }
    return "";
}

// Backend b's decode of e against CpuRef's: bit for bit for the block methods, within the reconstruction bound (over
// the codec's own decoded factors) for the low-rank ones.
inline std::string check_decode(kernels::Backend b, const EncodedTensor& e, int n_threads = 2) {
    const int64_t n = e.n_elements();
    std::vector<float> ref(static_cast<size_t>(n), -7.0f), got(static_cast<size_t>(n), -7.0f);
    if (Status s = kernels::decode(kernels::Backend::CpuRef, e, ref.data(), ref.size()); !s)
        return "cpu-ref: " + s.message();
    if (Status s = kernels::decode(b, e, got.data(), got.size(), {n_threads}); !s)
        return std::string(kernels::backend_name(b)) + ": " + s.message();
    const std::string what = std::string(kernels::backend_name(b)) + " vs cpu-ref";
    if (e.method != Method::LowRank && e.method != Method::LowRankResidual) {
        const int64_t bad = first_bit_difference(got.data(), ref.data(), n);
        return bad < 0 ? "" : describe(what, bad, got[bad], ref[bad]);
    }
    const int64_t cols = e.shape.back(), rows = n / cols, k = e.rank;
    codec::LowRankSection section;
    uint64_t consumed = 0;
    if (Status s = codec::read_lowrank_section(e, rows, cols, section, consumed); !s) return s.message();
    std::vector<float> u, sigma, v;  // u (rows, k), v (cols, k)
    codec::decoded_factors(section, u, sigma, v);
    std::vector<float> ut(u.size()), vt(v.size());
    for (int64_t r = 0; r < k; ++r) {
        for (int64_t i = 0; i < rows; ++i) ut[r * rows + i] = u[i * k + r];
        for (int64_t j = 0; j < cols; ++j) vt[r * cols + j] = v[j * k + r];
    }
    const std::string bad = check_reconstruction(ut.data(), sigma.data(), vt.data(), rows, cols, k,
                                                 e.method == Method::LowRankResidual, got.data(), ref.data());
    return bad.empty() ? "" : what + " " + bad;
}

}  // namespace gkq::test
