// CodecParams validation, the names of methods and residual kinds, and ParamOverride.
#include "gkq/codec.h"

#include "gkq/type_traits.h"

#include <array>
#include <cmath>

namespace gkq {

namespace {

struct ResidualRow {
    ResidualKind kind;
    DType dtype;  // Other for None
};

// One row per kind, in the order lists show them. The block types are the block methods' (a test checks that every
// block method's type is here); their names are the type table's.
constexpr std::array<ResidualRow, 12> kResiduals{{
    {ResidualKind::None, DType::Other},
    {ResidualKind::Q4_0, DType::Q4_0},
    {ResidualKind::Q8_0, DType::Q8_0},
    {ResidualKind::Q4_1, DType::Q4_1},
    {ResidualKind::Q5_0, DType::Q5_0},
    {ResidualKind::Q5_1, DType::Q5_1},
    {ResidualKind::IQ4_NL, DType::IQ4_NL},
    {ResidualKind::Q2_K, DType::Q2_K},
    {ResidualKind::Q3_K, DType::Q3_K},
    {ResidualKind::Q4_K, DType::Q4_K},
    {ResidualKind::Q5_K, DType::Q5_K},
    {ResidualKind::Q6_K, DType::Q6_K},
}};

constexpr std::array<ResidualKind, kResiduals.size()> kResidualKinds = [] {
    std::array<ResidualKind, kResiduals.size()> a{};
    for (size_t i = 0; i < kResiduals.size(); ++i) a[i] = kResiduals[i].kind;
    return a;
}();

const ResidualRow* residual_row(ResidualKind r) {
    for (const ResidualRow& row : kResiduals)
        if (row.kind == r) return &row;
    return nullptr;
}

}  // namespace

Status validate_params(const CodecParams& p) {
    auto bad = [](const std::string& what) { return error(StatusCode::InvalidArgument, "codec parameter " + what); };
    if (static_cast<unsigned>(p.method) >= kMethodCount)
        return bad("method: unknown code " + std::to_string(static_cast<unsigned>(p.method)));
    if (p.factor_bits != 2 && p.factor_bits != 4 && p.factor_bits != 8)
        return bad("factor_bits: " + std::to_string(p.factor_bits) + " is not 2, 4 or 8");
    if (p.rank < 0) return bad("rank: " + std::to_string(p.rank) + " is negative");
    if (!(p.energy > 0.0 && p.energy <= 1.0)) return bad("energy: " + std::to_string(p.energy) + " is outside (0, 1]");
    if (!(p.max_rel_error >= 0.0 && p.max_rel_error <= 1.0))
        return bad("max_rel_error: " + std::to_string(p.max_rel_error) + " is outside [0, 1]");
    if (p.max_components < 0) return bad("max_components: " + std::to_string(p.max_components) + " is negative");
    if (!(p.max_rank_fraction >= 0.0 && p.max_rank_fraction <= 1.0))
        return bad("max_rank_fraction: " + std::to_string(p.max_rank_fraction) + " is outside [0, 1]");
    if (!(p.param_fraction >= 0.0 && p.param_fraction <= 1.0))
        return bad("param_fraction: " + std::to_string(p.param_fraction) + " is outside [0, 1]");
    if (!(p.fold_tolerance >= 0.0 && std::isfinite(p.fold_tolerance)))
        return bad("fold_tolerance: " + std::to_string(p.fold_tolerance) + " is not a finite non-negative number");
    if (residual_row(p.residual) == nullptr) return bad("residual: unknown kind");
    if (p.target != LowRankTarget::Weights && p.target != LowRankTarget::QuantError) return bad("target: unknown");
    const bool low_rank = p.method == Method::LowRank || p.method == Method::LowRankResidual;
    if (p.method == Method::LowRankResidual && p.residual == ResidualKind::None)
        return bad("residual: method lowrank+residual needs a residual (q4_0, q8_0, q4_k ...)");
    if (low_rank && p.target == LowRankTarget::QuantError && p.residual == ResidualKind::None)
        return bad("target: the quantization-error target needs a residual (q4_0, q8_0, q4_k ...)");
    if (p.whiten && !low_rank) return bad("whiten: the whitened SVD applies to the low-rank methods only");
    return Status::ok();
}

std::span<const ResidualKind> all_residual_kinds() {
    return kResidualKinds;
}

std::string_view residual_name(ResidualKind r) {
    const ResidualRow* row = residual_row(r);
    if (row == nullptr) return "?";
    return row->dtype == DType::Other ? std::string_view("none") : type_traits(row->dtype).name;
}

DType residual_dtype(ResidualKind r) {
    const ResidualRow* row = residual_row(r);
    return row != nullptr ? row->dtype : DType::Other;
}

std::optional<ResidualKind> residual_kind_for(DType t) {
    for (const ResidualRow& row : kResiduals)
        if (row.dtype == t && t != DType::Other) return row.kind;
    return std::nullopt;
}

Result<ResidualKind> parse_residual(std::string_view name) {
    std::string list;
    for (ResidualKind r : kResidualKinds) {
        if (residual_name(r) == name) return r;
        list += (list.empty() ? "" : ", ") + std::string(residual_name(r));
    }
    return error(StatusCode::InvalidArgument, "unknown residual '" + std::string(name) + "' (" + list + ")");
}

Result<Method> parse_method(std::string_view name) {
    std::string list;
    for (Method m : all_methods()) {
        if (method_name(m) == name) return m;
        list += (list.empty() ? "" : ", ") + std::string(method_name(m));
    }
    return error(StatusCode::InvalidArgument, "unknown method '" + std::string(name) + "' (" + list + ")");
}

bool ParamOverride::empty() const {
    return !method && !rank && !energy && !max_rel_error && !max_components && !factor_bits && !delta && !fold &&
           !fold_tolerance && !sigma_quantized && !residual && !target;
}

void ParamOverride::apply_to(CodecParams& p) const {
    if (method) p.method = *method;
    // rank-selection fields in this order, so that when several are set `rank` wins, as in CodecParams
    if (energy) {
        p.energy = *energy;
        p.rank = 0;
        p.max_rel_error = 0.0;
        p.param_fraction = 0.0;
    }
    if (max_rel_error) {
        p.max_rel_error = *max_rel_error;
        p.rank = 0;
        p.param_fraction = 0.0;
    }
    if (rank) {
        p.rank = *rank;
        p.max_rank_fraction = 0.0;
    }
    if (max_components) p.max_components = *max_components;
    if (factor_bits) p.factor_bits = *factor_bits;
    if (delta) p.delta = *delta;
    if (fold) p.fold = *fold;
    if (fold_tolerance) p.fold_tolerance = *fold_tolerance;
    if (sigma_quantized) p.sigma_quantized = *sigma_quantized;
    if (residual) {
        p.residual = *residual;
        if (*residual == ResidualKind::None) p.target = LowRankTarget::Weights;  // nothing else to decompose
    }
    if (target) p.target = *target;
}

}  // namespace gkq
