// encode_tensor: the per-tensor pipeline. Plain methods (f32, f16, Q8_0, Q4_0) are one call each; the low-rank
// methods run truncated SVD -> hierarchical folding -> factor quantization -> optional residual blocks.
#include "gkq/codec.h"

#include "codec/llama_mix.h"

#include "codec/accounting.h"
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
#include <functional>
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
    e.residual_code = residual_code_of(rtype);
    e.flags = chosen.flags();
    e.payload = std::move(bytes);
    e.payload.insert(e.payload.end(), blocks.begin(), blocks.end());
    return Status::ok();
}

// What encode_tensor decides before it reads a value: the parameters after the shape fallbacks, and why.
struct EncodePlan {
    MatrixShape ms;
    CodecParams p;
    std::string fallback;
    std::string requested;
    std::optional<DType> blocks;  // the block type the payload stores: the method's own, or the residual's
};

Result<EncodePlan> plan_encode(const TensorInfo& t, const CodecParams& params) {
    const std::string label = "tensor '" + t.name + "'";
    if (Status s = validate_params(params); !s) return s.with_context(label);
    const std::optional<MatrixShape> shape = matrix_shape(t.shape);
    if (!shape)
        return error(StatusCode::InvalidArgument,
                     label + ": shape " + shape_to_string(t.shape) + " has a negative dimension or too many elements");
    EncodePlan plan;
    plan.ms = *shape;
    const MatrixShape& ms = plan.ms;
    CodecParams& p = plan.p;
    p = params;
    if (p.method == Method::LowRank && p.residual != ResidualKind::None) p.method = Method::LowRankResidual;
    if (!is_low_rank(p.method)) p.residual = ResidualKind::None;
    plan.requested = std::string(method_name(p.method));
    if (is_low_rank(p.method) && (t.shape.size() < 2 || ms.n == 0)) {
        plan.fallback = std::string(t.shape.size() < 2 ? "fewer than 2 dimensions" : "no elements") +
                        ": stored f32 instead of " + plan.requested;
        p.method = Method::F32;
    }
    if (is_block_method(p.method)) plan.blocks = method_dtype(p.method);
    if (p.method == Method::LowRankResidual) plan.blocks = residual_dtype(p.residual);
    if (plan.blocks && ms.cols % dtype_block_elements(*plan.blocks) != 0) {
        // As llama-quantize: a 256-element k-quant falls back to its 32-element type, then (or a 32-element type at
        // once) to f16. A residual falls back the same way; where no block type is left, the whole tensor is f16.
        const DType smaller = llama_fallback_type(*plan.blocks, ms.cols);
        const std::optional<Method> m = block_method_for(smaller);
        const std::string why = "row length " + std::to_string(ms.cols) + " is not a multiple of " +
                                std::to_string(dtype_block_elements(*plan.blocks)) + ": ";
        if (p.method == Method::LowRankResidual && m) {
            plan.fallback = why + "residual stored " + std::string(method_name(*m)) + " instead of " +
                            std::string(residual_name(p.residual));
            p.residual = *residual_kind_for(smaller);
            plan.blocks = smaller;
        } else {
            plan.fallback =
                why + "stored " + std::string(m ? method_name(*m) : "f16") + " instead of " + plan.requested;
            p.method = m ? *m : Method::F16;
        }
    }
    return plan;
}

// Rows [row0, row0 + n_rows) as float32: a pointer valid until the next call.
using RowFetch = std::function<Result<const float*>(int64_t row0, int64_t n_rows)>;

// The methods that encode row by row (f32, f16, the block methods), `chunk_rows` rows at a time from `fetch`,
// with the errors measured chunk by chunk against the decoded chunk. f16 (and the f16 block scales of q8_0 / q4_0)
// cannot hold magnitudes above 65504: such a value would be stored as infinity. The first one, in element order,
// turns a fallback to f16 into f32 (the encoding starts again); a requested method is refused, naming the value.
Status encode_rows(const std::string& label, EncodePlan& plan, const RowFetch& fetch, const float* importance,
                   int64_t chunk_rows, EncodedTensor& e, ErrorSums* sums) {
    const MatrixShape& ms = plan.ms;
    const int64_t cols = ms.cols;
    chunk_rows = std::max<int64_t>(chunk_rows, 1);
    std::vector<float> decoded;
    std::vector<uint16_t> halves;
    for (;;) {
        const Method m = plan.p.method;
        const DType t = method_dtype(m);
        const bool limited = m == Method::F16 || is_block_method(m);
        const double limit = block_value_limit(m);
        const uint64_t row_bytes = *dtype_storage_bytes(t, static_cast<uint64_t>(cols));
        e.payload.assign(static_cast<size_t>(*dtype_storage_bytes(t, static_cast<uint64_t>(ms.n))), 0);
        if (sums != nullptr) *sums = {};
        bool restart = false;
        for (int64_t row0 = 0; ms.n > 0 && row0 < ms.rows && !restart; row0 += chunk_rows) {
            const int64_t nr = std::min(chunk_rows, ms.rows - row0);
            const auto count = static_cast<uint64_t>(nr * cols);
            Result<const float*> got = fetch(row0, nr);
            if (!got) return got.status().with_context(label);
            const float* x = *got;
            if (limited) {
                uint64_t at = count;
                for (uint64_t i = 0; i < count && at == count; ++i)
                    if (std::isfinite(x[i]) && std::fabs(static_cast<double>(x[i])) > limit) at = i;
                if (at < count) {
                    char v[48];
                    std::snprintf(v, sizeof v, "%g", static_cast<double>(x[at]));
                    const std::string why = "value " + std::string(v) + " at element " +
                                            std::to_string(static_cast<uint64_t>(row0 * cols) + at) +
                                            " is beyond what " + std::string(method_name(m)) + " stores (|x| <= " +
                                            (m == Method::Q8_0   ? "65504 x 127"
                                             : m == Method::Q4_0 ? "65504 x 8"
                                                                 : "65504") +
                                            ")";
                    if (plan.fallback.empty())
                        return error(StatusCode::InvalidArgument, label + ": " + why + "; choose f32 for it");
                    plan.fallback = "row length " + std::to_string(cols) + " is not a multiple of " +
                                    std::to_string(dtype_block_elements(*plan.blocks)) + " and " + why +
                                    ": stored f32 instead of " + plan.requested;
                    plan.p.method = Method::F32;
                    restart = true;
                    break;
                }
            }
            uint8_t* dst = e.payload.data() + static_cast<uint64_t>(row0) * row_bytes;
            switch (m) {
                case Method::F32: std::memcpy(dst, x, count * 4); break;
                case Method::F16:
                    halves.resize(static_cast<size_t>(count));
                    encode_f16(x, count, halves.data());
                    std::memcpy(dst, halves.data(), count * 2);
                    break;
                default: quantize_blocks(t, x, MatrixShape{nr * cols, nr, cols}, importance, dst); break;
            }
            if (sums != nullptr) {
                decoded.resize(static_cast<size_t>(count));
                if (Status s = convert_to_f32(t, dst, count, decoded.data()); !s) return s.with_context(label);
                sums->add(x, decoded.data(), count);
            }
        }
        if (!restart) break;
    }
    e.method = plan.p.method;
    e.dtype = method_dtype(e.method);
    return Status::ok();
}

int64_t rows_per_chunk(const MatrixShape& ms, uint64_t chunk_bytes) {
    const uint64_t row = static_cast<uint64_t>(std::max<int64_t>(ms.cols, 1)) * 4;
    return static_cast<int64_t>(std::max<uint64_t>(chunk_bytes / row, 1));
}

void fill_report(TensorReport& report, const EncodedTensor& e, const ErrorSums& sums, const std::string& fallback) {
    report = size_fields(e);
    sums.finish(report);
    report.fallback = fallback;
}

Result<EncodedTensor> encode_impl(const TensorInput& in, const CodecParams& params, TensorReport* report) {
    const std::string label = "tensor '" + in.name + "'";
    Result<EncodePlan> planned = plan_encode(in, params);
    if (!planned) return planned.status();
    EncodePlan& plan = *planned;
    const MatrixShape ms = plan.ms;
    if (ms.n > 0 && in.data == nullptr) return error(StatusCode::InvalidArgument, label + ": no data");

    EncodedTensor e;
    e.name = in.name;
    e.role = in.role;
    e.layer = in.layer;
    e.shape = in.shape;

    if (!is_low_rank(plan.p.method)) {
        const RowFetch fetch = [&](int64_t row0, int64_t) -> Result<const float*> { return in.data + row0 * ms.cols; };
        ErrorSums sums;
        if (Status s = encode_rows(label, plan, fetch, in.importance, rows_per_chunk(ms, kEncodeChunkBytes), e,
                                   report != nullptr ? &sums : nullptr);
            !s)
            return s;
        if (report != nullptr) fill_report(*report, e, sums, plan.fallback);
        return e;
    }

    LowRankNotes notes;
    if (Status s = encode_low_rank(in, ms, plan.p, e, notes); !s) return s;
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
        report->fallback = plan.fallback;
    }
    return e;
}

}  // namespace

bool encodes_by_rows(const TensorInfo& t, const CodecParams& params, uint64_t* payload_bytes) {
    Result<EncodePlan> plan = plan_encode(t, params);
    if (!plan || is_low_rank(plan->p.method)) return false;
    if (payload_bytes != nullptr)
        *payload_bytes =
            dtype_storage_bytes(method_dtype(plan->p.method), static_cast<uint64_t>(plan->ms.n)).value_or(0);
    return true;
}

Result<EncodedTensor> encode_tensor_rows(const TensorInfo& t, const float* importance, const RowReader& read,
                                         const CodecParams& params, TensorReport* report, uint64_t chunk_bytes) {
    const std::string label = "tensor '" + t.name + "'";
    try {
        Result<EncodePlan> planned = plan_encode(t, params);
        if (!planned) return planned.status();
        EncodePlan& plan = *planned;
        if (is_low_rank(plan.p.method))
            return error(StatusCode::InvalidArgument,
                         label + ": " + plan.requested + " needs the whole matrix; it does not encode row by row");
        EncodedTensor e;
        e.name = t.name;
        e.role = t.role;
        e.layer = t.layer;
        e.shape = t.shape;
        const int64_t chunk_rows = rows_per_chunk(plan.ms, chunk_bytes);
        std::vector<float> buffer(
            static_cast<size_t>(std::min(chunk_rows, std::max<int64_t>(plan.ms.rows, 1)) * plan.ms.cols));
        const RowFetch fetch = [&](int64_t row0, int64_t n_rows) -> Result<const float*> {
            if (Status s = read(row0, n_rows, buffer.data()); !s) return s;
            return static_cast<const float*>(buffer.data());
        };
        ErrorSums sums;
        if (Status s = encode_rows(label, plan, fetch, importance, chunk_rows, e, report != nullptr ? &sums : nullptr);
            !s)
            return s;
        if (report != nullptr) fill_report(*report, e, sums, plan.fallback);
        return e;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, label + ": does not fit in memory while encoding");
    }
}

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
