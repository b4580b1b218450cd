// encode_tensor: the per-tensor pipeline. Plain methods (f32, f16, Q8_0, Q4_0) are one call each; the low-rank
// methods run truncated SVD -> hierarchical folding -> factor quantization -> optional residual blocks.
#include "gkq/codec.h"

#include "codec/llama_mix.h"

#include "codec/factor_quant.h"
#include "codec/folding.h"
#include "codec/lowrank.h"
#include "codec/whiten.h"
#include "gkq/convert.h"
#include "gkq/lowrank_payload.h"
#include "gkq/matrix_shape.h"
#include "gkq/type_traits.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>

namespace gkq {

using namespace codec;

namespace {

constexpr double kF16Max = 65504.0;  // the largest finite half-precision value

std::string fmt(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return buf;
}

bool is_attention(TensorRole r) {
    return r == TensorRole::AttnQ || r == TensorRole::AttnK || r == TensorRole::AttnV || r == TensorRole::AttnO;
}

bool is_ffn(TensorRole r) {
    return r == TensorRole::FfnGate || r == TensorRole::FfnUp || r == TensorRole::FfnDown;
}

bool is_low_rank(Method m) {
    return m == Method::LowRank || m == Method::LowRankResidual;
}

DType residual_dtype(ResidualKind r) {
    return r == ResidualKind::Q4_0 ? DType::Q4_0 : DType::Q8_0;
}

// The blocks of `t` for x, a matrix of shape `ms`, as llama-quantize writes them: the type table's importance-weighted
// quantizer with `importance` (ms.cols per-column weights) or without (ggml's quantize_<type> then runs the reference
// quantizer, or for IQ4_NL its scale search); Q8_0, which has no weighted quantizer in ggml either, and Q4_0 without
// importance take the reference quantizer directly.
void quantize_blocks(DType t, const float* x, const MatrixShape& ms, const float* importance, uint8_t* dst) {
    const TypeTraits& tr = type_traits(t);
    if (t == DType::Q8_0 || (t == DType::Q4_0 && importance == nullptr)) {
        tr.from_f32(x, dst, ms.n);
        return;
    }
    tr.quantize_weighted(x, dst, ms.rows, ms.cols, importance);
}

// The largest |x| a block method's f16 scales (or min offsets) can carry for certain: Q8_0 and Q4_0 by their scale
// (amax / 127, amax / 8); the other block types are held to the f16 range itself, a bound below theirs.
double block_value_limit(Method m) {
    switch (m) {
        case Method::F16: return kF16Max;
        case Method::Q8_0: return kF16Max * 127.0;
        case Method::Q4_0: return kF16Max * 8.0;
        default: return kF16Max;
    }
}

// What the low-rank path learned beyond the EncodedTensor itself, for the report.
struct LowRankNotes {
    std::optional<double> energy_kept;
    bool fold_applied = false;
    int64_t fold_bytes_saved = 0;
    std::optional<double> fold_fit_error;
    std::string fold_note;
    std::optional<double> whiten_shift;
};

// Quantizes sigma and the factors u (rows, k), v (cols, k); with `fold`, the factor on `axis` is replaced by the
// fold's base block and head scales.
LowRankSection quantize_section(int64_t rows, int64_t cols, int64_t k, const double* sigma,
                                const std::vector<double>& u, const std::vector<double>& v, const CodecParams& p,
                                const HeadFold* fold, FoldAxis axis) {
    LowRankSection s;
    s.rows = rows;
    s.cols = cols;
    s.k = k;
    s.bits = p.factor_bits;
    s.delta = p.delta;
    s.sigma_quantized = p.sigma_quantized;
    if (p.sigma_quantized) {
        s.sigma_max = k > 0 ? static_cast<float>(sigma[0]) : 0.0f;
        for (int64_t r = 0; r < k; ++r) s.sigma_codes.push_back(quantize_sigma(sigma[r], s.sigma_max));
    } else {
        for (int64_t r = 0; r < k; ++r) s.sigma.push_back(static_cast<float>(sigma[r]));
    }
    if (fold != nullptr) {
        s.folded = true;
        s.fold_axis = axis;
        s.n_heads = static_cast<uint32_t>(fold->head_scales.size());
        s.head_scales = fold->head_scales;
    }
    const std::vector<double>& uq = fold != nullptr && axis == FoldAxis::U ? fold->base : u;
    const std::vector<double>& vq = fold != nullptr && axis == FoldAxis::V ? fold->base : v;
    const int64_t ul = s.u_len(), vl = s.v_len();
    s.symbols.resize(static_cast<size_t>(s.n_symbols()));
    for (int64_t r = 0; r < k; ++r) {
        uint8_t* codes = s.symbols.data() + r * ul;
        s.u_scales.push_back(quantize_vector(uq.data() + r, ul, k, s.bits, codes));
        if (s.delta) delta_encode(codes, ul, s.bits);
    }
    for (int64_t r = 0; r < k; ++r) {
        uint8_t* codes = s.symbols.data() + k * ul + r * vl;
        s.v_scales.push_back(quantize_vector(vq.data() + r, vl, k, s.bits, codes));
        if (s.delta) delta_encode(codes, vl, s.bits);
    }
    return s;
}

std::vector<uint8_t> section_bytes(const LowRankSection& s) {
    std::vector<uint8_t> out;
    write_lowrank_section(s, out);
    return out;
}

Status encode_low_rank(const TensorInput& in, const MatrixShape& ms, const CodecParams& p, EncodedTensor& e,
                       LowRankNotes& notes) {
    const std::string label = "tensor '" + in.name + "'";
    const int64_t rows = ms.rows, cols = ms.cols, n = ms.n;
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(in.data[i]))
            return error(StatusCode::InvalidArgument,
                         label + ": element " + std::to_string(i) + " is not finite; the SVD needs finite values");

    // The matrix to decompose: W, or (QuantError) the residual blocks' quantization error W - deq(Q(W)).
    const DType rtype = residual_dtype(p.residual);
    std::vector<uint8_t> blocks;
    std::vector<float> dequantized;
    if (p.residual != ResidualKind::None && p.target == LowRankTarget::QuantError) {
        blocks.resize(static_cast<size_t>(*dtype_storage_bytes(rtype, static_cast<uint64_t>(n))));
        quantize_blocks(rtype, in.data, ms, in.importance, blocks.data());
        dequantized.resize(static_cast<size_t>(n));
        if (Status s = convert_to_f32(rtype, blocks.data(), static_cast<uint64_t>(n), dequantized.data()); !s)
            return s.with_context(label);
    }
    auto fill_target = [&](double* a) {
        for (int64_t i = 0; i < n; ++i)
            a[i] = dequantized.empty() ? static_cast<double>(in.data[i])
                                       : static_cast<double>(in.data[i]) - static_cast<double>(dequantized[i]);
    };
    // Whitened (SVD-LLM): the SVD of (target) L, L the Cholesky factor of the input's Gram matrix, formed once.
    std::optional<Whitener> whitener;
    std::vector<double> whitened;
    if (p.whiten) {
        if (in.gram == nullptr)
            return error(StatusCode::InvalidArgument,
                         label +
                             ": the whitened SVD needs the Gram matrix X^T X of its input activations (gkq "
                             "imatrix --gram FILE, then quantize --gram FILE)");
        Result<Whitener> w = cholesky_whitener(in.gram, cols, label);
        if (!w) return w.status();
        whitener = std::move(w).value();
        notes.whiten_shift = whitener->shift;
        whitened.resize(static_cast<size_t>(n));
        fill_target(whitened.data());
        whiten_rows(*whitener, whitened.data(), rows);
    }
    auto fill = [&](double* a) {
        if (whitener)
            std::copy(whitened.begin(), whitened.end(), a);
        else
            fill_target(a);
    };
    // The randomized SVD (large matrices) works on float32: W itself, or the residual formed once in float.
    std::vector<float> residual32;
    const float* w32 = in.data;
    if (whitener && randomized_svd_applies(rows, cols)) {
        residual32.assign(whitened.begin(), whitened.end());
        w32 = residual32.data();
    } else if (!dequantized.empty() && randomized_svd_applies(rows, cols)) {
        residual32.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) residual32[static_cast<size_t>(i)] = in.data[i] - dequantized[i];
        w32 = residual32.data();
    }
    Result<RankedFactors> ranked = ranked_factors(fill, w32, rows, cols, p, label);
    if (!ranked) return ranked.status();
    dequantized = {};
    residual32 = {};
    const int64_t k = ranked->k;
    notes.energy_kept = ranked->energy_kept;
    std::vector<double> u = std::move(ranked->u), v = std::move(ranked->v);
    const double* sigma = ranked->s.data();
    whitened = {};
    if (whitener) unwhiten_factor(*whitener, v.data(), k);  // V' = L^-T V_k: W' = U_k S_k V'^T

    LowRankSection chosen = quantize_section(rows, cols, k, sigma, u, v, p, nullptr, FoldAxis::U);
    std::vector<uint8_t> bytes = section_bytes(chosen);

    // Hierarchical folding: attention -> shared basis + per-head scales; FFN -> run-length-encoded codes.
    if (p.fold) {
        if (is_attention(in.role)) {
            const FoldAxis axis = in.role == TensorRole::AttnO ? FoldAxis::V : FoldAxis::U;
            const int64_t len = axis == FoldAxis::U ? rows : cols;
            const int32_t heads = in.n_heads;
            const char* along = axis == FoldAxis::U ? " rows" : " columns";
            if (heads < 2) {
                notes.fold_note =
                    "not applied: head folding needs two or more heads (n_heads " + std::to_string(heads) + ")";
            } else if (len % heads != 0) {
                notes.fold_note = "not applied: " + std::to_string(len) + along + " do not split into " +
                                  std::to_string(heads) + " heads";
            } else if (k == 0) {
                notes.fold_note = "not applied: rank 0";
            } else {
                const HeadFold fold = fit_head_fold(axis == FoldAxis::U ? u.data() : v.data(), len, k, sigma, heads);
                notes.fold_fit_error = fold.fit_error;
                if (!(fold.fit_error <= p.fold_tolerance)) {
                    notes.fold_note = "not applied: head fit error " + fmt(fold.fit_error) + " exceeds tolerance " +
                                      fmt(p.fold_tolerance);
                } else {
                    LowRankSection folded = quantize_section(rows, cols, k, sigma, u, v, p, &fold, axis);
                    std::vector<uint8_t> folded_bytes = section_bytes(folded);
                    if (folded_bytes.size() < bytes.size()) {
                        notes.fold_applied = true;
                        notes.fold_bytes_saved = static_cast<int64_t>(bytes.size() - folded_bytes.size());
                        notes.fold_note = "applied: " + std::to_string(heads) + " heads share one basis, fit error " +
                                          fmt(fold.fit_error);
                        chosen = std::move(folded);
                        bytes = std::move(folded_bytes);
                    } else {
                        notes.fold_note = "not applied: folding takes " + std::to_string(folded_bytes.size()) +
                                          " bytes against " + std::to_string(bytes.size()) + " unfolded";
                    }
                }
            }
        } else if (is_ffn(in.role)) {
            LowRankSection rle = chosen;
            rle.rle = true;
            std::vector<uint8_t> rle_bytes = section_bytes(rle);
            // (the stream's size is a u32: a section over 4 GiB never takes this path)
            if (rle_bytes.size() < bytes.size() && rle_bytes.size() <= UINT32_MAX) {
                notes.fold_applied = true;
                notes.fold_bytes_saved = static_cast<int64_t>(bytes.size() - rle_bytes.size());
                notes.fold_note = "applied: run-length-encoded coefficient codes";
                chosen = std::move(rle);
                bytes = std::move(rle_bytes);
            } else {
                notes.fold_note = "not applied: run-length encoding takes " + std::to_string(rle_bytes.size()) +
                                  " bytes against " + std::to_string(bytes.size()) + " packed";
            }
        } else {
            notes.fold_note = "not applied: no folding rule for role " + std::string(role_name(in.role));
        }
    }

    // Residual: W - (decoded low-rank part), so the blocks also absorb the factors' quantization error.
    if (p.residual != ResidualKind::None && p.target == LowRankTarget::Weights) {
        std::vector<float> r(static_cast<size_t>(n));
        reconstruct_lowrank(chosen, r.data());
        for (int64_t i = 0; i < n; ++i) r[i] = in.data[i] - r[i];
        blocks.resize(static_cast<size_t>(*dtype_storage_bytes(rtype, static_cast<uint64_t>(n))));
        quantize_blocks(rtype, r.data(), ms, in.importance, blocks.data());
    }

    e.method = p.residual != ResidualKind::None ? Method::LowRankResidual : Method::LowRank;
    e.rank = static_cast<int32_t>(k);
    e.factor_bits = static_cast<uint8_t>(p.factor_bits);
    e.residual_bits = p.residual == ResidualKind::None ? 0 : (p.residual == ResidualKind::Q4_0 ? 4 : 8);
    e.flags = chosen.flags();
    e.payload = std::move(bytes);
    e.payload.insert(e.payload.end(), blocks.begin(), blocks.end());
    return Status::ok();
}

Result<EncodedTensor> encode_impl(const TensorInput& in, const CodecParams& params, TensorReport* report) {
    const std::string label = "tensor '" + in.name + "'";
    if (Status s = validate_params(params); !s) return s.with_context(label);
    const std::optional<MatrixShape> shape = matrix_shape(in.shape);
    if (!shape)
        return error(StatusCode::InvalidArgument,
                     label + ": shape " + shape_to_string(in.shape) + " has a negative dimension or too many elements");
    const MatrixShape ms = *shape;
    if (ms.n > 0 && in.data == nullptr) return error(StatusCode::InvalidArgument, label + ": no data");

    EncodedTensor e;
    e.name = in.name;
    e.role = in.role;
    e.layer = in.layer;
    e.shape = in.shape;

    CodecParams p = params;
    if (p.method == Method::LowRank && p.residual != ResidualKind::None) p.method = Method::LowRankResidual;
    if (!is_low_rank(p.method)) p.residual = ResidualKind::None;
    std::string fallback;
    const std::string requested(method_name(p.method));
    if (is_low_rank(p.method) && (in.shape.size() < 2 || ms.n == 0)) {
        fallback = std::string(in.shape.size() < 2 ? "fewer than 2 dimensions" : "no elements") +
                   ": stored f32 instead of " + requested;
        p.method = Method::F32;
    }
    std::optional<DType> blocks;  // the block type the payload stores: the method's own, or the residual's
    if (is_block_method(p.method)) blocks = method_dtype(p.method);
    if (p.method == Method::LowRankResidual) blocks = residual_dtype(p.residual);
    if (blocks && ms.cols % dtype_block_elements(*blocks) != 0) {
        // As llama-quantize: a 256-element k-quant falls back to its 32-element type, then (or a 32-element type at
        // once) to f16.
        const DType smaller = is_block_method(p.method) ? llama_fallback_type(*blocks, ms.cols) : DType::F16;
        const std::optional<Method> m = block_method_for(smaller);
        const bool fits = m.has_value();
        fallback = "row length " + std::to_string(ms.cols) + " is not a multiple of " +
                   std::to_string(dtype_block_elements(*blocks)) + ": stored " +
                   std::string(fits ? method_name(*m) : "f16") + " instead of " + requested;
        p.method = fits ? *m : Method::F16;
    }
    // f16 (and the f16 block scales of q8_0 / q4_0) cannot hold magnitudes above 65504: such a value would be stored
    // as infinity. A fallback to f16 becomes f32; a requested method is refused, naming the value.
    const uint64_t n_values = static_cast<uint64_t>(ms.n);
    if (p.method == Method::F16 || is_block_method(p.method)) {
        const double limit = block_value_limit(p.method);
        uint64_t at = n_values;
        for (uint64_t i = 0; i < n_values && at == n_values; ++i)
            if (std::isfinite(in.data[i]) && std::fabs(static_cast<double>(in.data[i])) > limit) at = i;
        if (at < n_values) {
            char v[48];
            std::snprintf(v, sizeof v, "%g", static_cast<double>(in.data[at]));
            const std::string why = "value " + std::string(v) + " at element " + std::to_string(at) +
                                    " is beyond what " + std::string(method_name(p.method)) + " stores (|x| <= " +
                                    (p.method == Method::Q8_0   ? "65504 x 127"
                                     : p.method == Method::Q4_0 ? "65504 x 8"
                                                                : "65504") +
                                    ")";
            if (fallback.empty()) return error(StatusCode::InvalidArgument, label + ": " + why + "; choose f32 for it");
            fallback = "row length " + std::to_string(ms.cols) + " is not a multiple of " +
                       std::to_string(dtype_block_elements(*blocks)) + " and " + why + ": stored f32 instead of " +
                       requested;
            p.method = Method::F32;
        }
    }

    LowRankNotes notes;
    const auto n = static_cast<uint64_t>(ms.n);
    switch (p.method) {
        case Method::F32:
            e.payload.resize(n * 4);
            if (n > 0) std::memcpy(e.payload.data(), in.data, n * 4);
            break;
        case Method::F16: {
            std::vector<uint16_t> halves(n);
            encode_f16(in.data, n, halves.data());
            e.payload.resize(n * 2);
            if (n > 0) std::memcpy(e.payload.data(), halves.data(), n * 2);
            break;
        }
        case Method::LowRank:
        case Method::LowRankResidual:
            if (Status s = encode_low_rank(in, ms, p, e, notes); !s) return s;
            break;
        default: {  // the block methods
            const DType t = method_dtype(p.method);
            e.payload.resize(*dtype_storage_bytes(t, n));
            quantize_blocks(t, in.data, ms, in.importance, e.payload.data());
            break;
        }
    }
    e.method = is_low_rank(p.method) ? e.method : p.method;
    e.dtype = method_dtype(e.method);

    if (report != nullptr) {
        Result<TensorReport> r = measure_encoded(in.data, e);
        if (!r) return r.status();
        *report = std::move(*r);
        report->energy_kept = notes.energy_kept;
        report->fold_applied = notes.fold_applied;
        report->fold_bytes_saved = notes.fold_bytes_saved;
        report->fold_fit_error = notes.fold_fit_error;
        report->fold_note = notes.fold_note;
        report->whiten_shift = notes.whiten_shift;
        report->fallback = fallback;
    }
    return e;
}

}  // namespace

int32_t fold_head_count(TensorRole role, const ModelConfig& config) {
    switch (role) {
        case TensorRole::AttnQ:
        case TensorRole::AttnO: return static_cast<int32_t>(config.n_heads);
        case TensorRole::AttnK:
        case TensorRole::AttnV: return static_cast<int32_t>(config.n_kv_heads);
        default: return 0;
    }
}

Result<EncodedTensor> encode_tensor(const TensorInput& in, const CodecParams& params, TensorReport* report) {
    try {
        return encode_impl(in, params, report);
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "tensor '" + in.name + "': does not fit in memory while encoding");
    }
}

}  // namespace gkq
