// The built-in presets (what each stores for each tensor role) and the resolution of overrides on top of them.
#include "gkq/codec.h"

#include "codec/llama_mix.h"
#include "gkq/type_traits.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace gkq {

namespace {

constexpr size_t kNumRoles = kTensorRoleCount;

CodecParams plain(Method m) {
    CodecParams p;
    p.method = m;
    return p;
}

// Bits per weight of `t`'s blocks, from the type table's sizes.
double block_bits(const TypeTraits& traits) {
    return 8.0 * static_cast<double>(traits.block_bytes) / static_cast<double>(traits.block_elements);
}

// "Q8_0 blocks (N int8 codes + f16 scale, B bits per weight)", with the sizes of the type table.
std::string blocks_text(DType t, const char* codes) {
    const TypeTraits& traits = type_traits(t);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s blocks (%lld %s codes + f16 scale, %g bits per weight)",
                  std::string(traits.ggml_name).c_str(), static_cast<long long>(traits.block_elements), codes,
                  block_bits(traits));
    return buf;
}

// The sentence on matrices whose rows cannot be cut into blocks of `t`.
std::string f16_fallback_text(DType t) {
    return "A matrix whose row length is not a multiple of " + std::to_string(dtype_block_elements(t)) +
           " is stored f16. ";
}

bool is_projection(TensorRole r) {
    switch (r) {
        case TensorRole::AttnQ:
        case TensorRole::AttnK:
        case TensorRole::AttnV:
        case TensorRole::AttnO:
        case TensorRole::FfnGate:
        case TensorRole::FfnUp:
        case TensorRole::FfnDown: return true;
        default: return false;
    }
}

bool is_attention(TensorRole r) {
    return r == TensorRole::AttnQ || r == TensorRole::AttnK || r == TensorRole::AttnV || r == TensorRole::AttnO;
}

// Fills every role: `projection(role)` for the seven attention/FFN projections, `embedding` for token_embd and
// output, f32 for the rest (norms and unknown tensors are stored exactly).
template <class F>
std::vector<CodecParams> table(F projection, const CodecParams& embedding) {
    std::vector<CodecParams> t(kNumRoles, plain(Method::F32));
    for (size_t i = 0; i < kNumRoles; ++i) {
        const auto role = static_cast<TensorRole>(i);
        if (is_projection(role)) t[i] = projection(role);
    }
    t[static_cast<size_t>(TensorRole::TokenEmbd)] = embedding;
    t[static_cast<size_t>(TensorRole::Output)] = embedding;
    return t;
}

Preset make_paper() {
    Preset p;
    p.name = "paper";
    p.description =
        "The GKQ documents' parameters. Attention and FFN projections: truncated SVD keeping the smallest rank that "
        "reaches 99.9% of the energy, at most 3 components; hierarchical folding (attention: one shared basis with "
        "per-head scales when the measured fit error is within 1%; FFN: run-length-encoded coefficient codes when "
        "that is smaller); factors quantized to 2 bits (attention) or 4 bits (FFN) with per-vector max-abs scales, "
        "delta-encoded; sigma as 8-bit codes. No residual. token_embd and output (which the documents do not "
        "describe): Q8_0. Norms: f32.";
    p.by_role = table(
        [](TensorRole role) {
            CodecParams c;
            c.method = Method::LowRank;
            c.energy = 0.999;
            c.max_components = 3;
            c.factor_bits = is_attention(role) ? 2 : 4;
            c.delta = true;
            c.fold = true;
            c.fold_tolerance = 0.01;
            c.sigma_quantized = true;
            return c;
        },
        plain(Method::Q8_0));
    return p;
}

Preset make_block(Method m) {
    Preset p;
    p.name = m == Method::Q8_0 ? "q8_0" : "q4_0";
    const DType t = m == Method::Q8_0 ? DType::Q8_0 : DType::Q4_0;
    p.description = "Baseline: every matrix, token_embd and output included, as llama.cpp " +
                    blocks_text(t, m == Method::Q8_0 ? "int8" : "4-bit") +
                    ", bit-compatible, no SVD (like llama-quantize --pure). " + f16_fallback_text(t) + "Norms: f32.";
    p.by_role = table([m](TensorRole) { return plain(m); }, plain(m));
    return p;
}

constexpr int kRankDivisor = 32;  // the low-rank presets: the rank is at most min(rows, cols) / this
constexpr int kRankCap = 16;      // and at most this

// The low-rank presets' rank rule in words, from the two constants.
std::string rank_rule_text() {
    return "rank min(" + std::to_string(kRankCap) + ", max(1, floor(min(rows, cols) / " + std::to_string(kRankDivisor) +
           ")))";
}

// Rank min(16, min(rows, cols) / kRankDivisor) with 8-bit factors plus Q4_0 blocks: lowrank-q4 (the SVD of W) and
// q4_0-lqer (the SVD of the quantization error) differ only in `target` (and q4_0-lqer's whitening); lowrank-q4k and
// q4_k-lqer are the same with Q4_K blocks.
CodecParams lowrank_q4_params(LowRankTarget target) {
    CodecParams c;
    c.method = Method::LowRankResidual;
    c.rank = kRankCap;
    c.max_rank_fraction = 1.0 / kRankDivisor;
    c.factor_bits = 8;
    c.residual = ResidualKind::Q4_0;
    c.target = target;
    return c;
}

Preset make_lowrank_q4() {
    Preset p;
    p.name = "lowrank-q4";
    p.description =
        "Low rank plus Q4_0 residual, for every matrix: the truncated SVD of W keeps " + rank_rule_text() +
        " with 8-bit factors and f32 sigma; the residual W - (decoded low-rank part) is "
        "stored as Q4_0 blocks, so the blocks carry what the low-rank part misses including its own quantization "
        "error. Decoded as U S V^T + deq(Q4_0). " +
        f16_fallback_text(DType::Q4_0) + "Norms: f32.";
    const CodecParams c = lowrank_q4_params(LowRankTarget::Weights);
    p.by_role = table([c](TensorRole) { return c; }, c);
    return p;
}

Preset make_svd_energy() {
    Preset p;
    p.name = "svd-energy";
    p.description =
        "Truncated SVD of every attention and FFN projection keeping the smallest rank that reaches 99.9% of the "
        "energy, no component cap, 8-bit factors with per-vector max-abs scales, f32 sigma, no folding, no delta, "
        "no residual. token_embd and output: Q8_0. Norms: f32.";
    CodecParams c;
    c.method = Method::LowRank;
    c.energy = 0.999;
    c.factor_bits = 8;
    p.by_role = table([c](TensorRole) { return c; }, plain(Method::Q8_0));
    return p;
}

// Rank for a 20 % parameter reduction of every projection, plain (svd-plain) or whitened (svd-llm).
Preset make_svd_reduction(bool whiten) {
    Preset p;
    p.name = whiten ? "svd-llm" : "svd-plain";
    p.description =
        std::string(whiten ? "Activation-aware truncated SVD (SVD-LLM) of every attention and FFN projection: the SVD "
                             "of W S, S the lower Cholesky factor of the input's Gram matrix X^T X (needs quantize "
                             "--gram FILE; a diagonal shift is added where X^T X is not positive definite), stores "
                             "U_k, sigma_k and S^-T V_k, so W' = U_k diag(sigma_k) V_k^T S^-1. "
                           : "Plain truncated SVD of W for every attention and FFN projection. ") +
        "Rank k = max(1, floor(0.8 rows cols / (rows + cols))), the factors holding 80 % of the matrix's parameters "
        "(a 20 % parameter reduction); 8-bit factors with per-vector max-abs scales, f32 sigma, no folding, no "
        "delta, no residual. token_embd and output: Q8_0. Norms: f32.";
    CodecParams c;
    c.method = Method::LowRank;
    c.param_fraction = 0.8;
    c.factor_bits = 8;
    c.whiten = whiten;
    p.by_role = table([c](TensorRole) { return c; }, plain(Method::Q8_0));
    return p;
}

// Q4_0 blocks of W plus a rank-r correction of their error in the whitened metric (LQER / QERA style).
Preset make_q4_0_lqer() {
    // The rank cap of the lowrank preset above, so that both store factors of the same size.
    Preset p;
    p.name = "q4_0-lqer";
    p.description =
        "Q4_0 blocks of W plus a low-rank correction of their quantization error E = W - deq(Q4_0(W)), for every "
        "matrix: " +
        rank_rule_text() +
        " with 8-bit factors and f32 sigma. Attention and FFN projections take the SVD of E S, S the lower "
        "Cholesky factor of the input's Gram matrix X^T X (needs quantize --gram FILE), and store U_k, sigma_k "
        "and S^-T V_k; token_embd and output (no Gram matrix) take the plain SVD of E. Decoded as deq(Q4_0) + "
        "U S V^T. " +
        f16_fallback_text(DType::Q4_0) + "Norms: f32.";
    const CodecParams c = lowrank_q4_params(LowRankTarget::QuantError);
    CodecParams w = c;
    w.whiten = true;
    p.by_role = table([w](TensorRole) { return w; }, c);
    return p;
}

// "Q4_K blocks (256 values, 4.5 bits per weight)", with the sizes of the type table.
std::string kblocks_text(DType t) {
    const TypeTraits& traits = type_traits(t);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s (%lld-value blocks, %g bits per weight)", std::string(traits.ggml_name).c_str(),
                  static_cast<long long>(traits.block_elements), block_bits(traits));
    return buf;
}

// The factors' share of the bits, in words and for a 4096 x 4096 matrix (rank kRankCap): each of the k U and V vectors
// as 8-bit codes with an f32 max-abs scale, and k f32 sigma.
std::string factor_bits_text() {
    const int64_t side = 4096, k = kRankCap;
    const double bits = (8.0 * k * (side + side) + 96.0 * k) / static_cast<double>(side * side);
    char buf[192];
    std::snprintf(buf, sizeof buf,
                  "the factors add (8 k (rows + cols) + 96 k) / (rows cols) bits per weight (%.4f on a %lld x %lld "
                  "matrix)",
                  bits, static_cast<long long>(side), static_cast<long long>(side));
    return buf;
}

// What a residual of type `t` becomes on rows its blocks do not divide (llama-quantize's fallback, then f16).
std::string residual_fallback_text(DType t) {
    const DType smaller = llama_fallback_type(t, dtype_block_elements(t) / 2);
    return "A matrix whose row length is not a multiple of " + std::to_string(dtype_block_elements(t)) +
           " stores its residual as " + kblocks_text(smaller) + " instead (llama-quantize's fallback for " +
           std::string(type_traits(t).ggml_name) + "), and one whose row length is not a multiple of " +
           std::to_string(dtype_block_elements(smaller)) + " either is stored f16; the report names each. ";
}

// lowrank-q4k: lowrank-q4 with the residual in Q4_K blocks.
Preset make_lowrank_q4k() {
    Preset p;
    p.name = "lowrank-q4k";
    p.description =
        "Low rank plus Q4_K residual, for every matrix: the truncated SVD of W keeps " + rank_rule_text() +
        " with 8-bit factors and f32 sigma; the residual W - (decoded low-rank part) is stored as " +
        kblocks_text(DType::Q4_K) +
        ", importance-weighted with quantize --imatrix, so the blocks carry what the low-rank part misses including "
        "its own quantization error; " +
        factor_bits_text() + ". Decoded as U S V^T + deq(Q4_K). " + residual_fallback_text(DType::Q4_K) + "Norms: f32.";
    CodecParams c = lowrank_q4_params(LowRankTarget::Weights);
    c.residual = ResidualKind::Q4_K;
    p.by_role = table([c](TensorRole) { return c; }, c);
    return p;
}

// q4_k-lqer: q4_0-lqer with Q4_K blocks.
Preset make_q4_k_lqer() {
    Preset p;
    p.name = "q4_k-lqer";
    p.description =
        kblocks_text(DType::Q4_K) +
        " of W (importance-weighted with quantize --imatrix) plus a low-rank correction of their quantization error "
        "E = W - deq(Q4_K(W)), for every matrix: " +
        rank_rule_text() + " with 8-bit factors and f32 sigma; " + factor_bits_text() +
        ". Attention and FFN projections take the SVD of E S, S the lower Cholesky factor of the input's Gram "
        "matrix X^T X (needs quantize --gram FILE), and store U_k, sigma_k and S^-T V_k; token_embd and output (no "
        "Gram matrix) take the plain SVD of E. Decoded as deq(Q4_K) + U S V^T. " +
        residual_fallback_text(DType::Q4_K) + "Norms: f32.";
    CodecParams c = lowrank_q4_params(LowRankTarget::QuantError);
    c.residual = ResidualKind::Q4_K;
    CodecParams w = c;
    w.whiten = true;
    p.by_role = table([w](TensorRole) { return w; }, c);
    return p;
}

// llama-quantize's k-quant mixtures (codec/llama_mix.cpp holds the rules; the descriptions say them in words).
Preset make_llama_mixture(std::string_view name) {
    const LlamaFileType* ft = find_llama_file_type(name);
    Preset p;
    p.name = std::string(name);
    p.llama_mixture = std::string(name);
    const DType base = ft->base;
    const std::string more_bits =
        "the layers llama.cpp's use_more_bits picks (the first and last eighth of the layers and every third one "
        "between)";
    const std::string v(role_name(TensorRole::AttnV)), o(role_name(TensorRole::AttnO)),
        down(role_name(TensorRole::FfnDown));
    std::string rules;
    if (name == "q2_k")
        rules = v + " " + kblocks_text(DType::Q3_K) + ", or " + kblocks_text(DType::Q4_K) +
                " where n_heads / n_kv_heads >= 4; " + o + " and " + down + " " + kblocks_text(DType::Q3_K) + "; ";
    else if (name == "q3_k_m")
        rules = v + " of the first two layers " + kblocks_text(DType::Q5_K) + ", the others " +
                kblocks_text(DType::Q4_K) + "; " + down + " of the first sixteenth of the layers " +
                kblocks_text(DType::Q5_K) + ", the others " + kblocks_text(DType::Q4_K) + "; " + o + " " +
                kblocks_text(DType::Q4_K) + "; ";
    else if (name == "q4_k_m" || name == "q5_k_m")
        rules = v + " and " + down + " in " + more_bits + " " + kblocks_text(DType::Q6_K) + "; ";
    p.description = "llama-quantize's " + std::string(type_traits(base).ggml_name) +
                    (name == "q6_k" || name == "q2_k" ? "" : "_M") +
                    " type mixture, tensor by tensor as llama.cpp's llama_tensor_get_type chooses for a dense model "
                    "(no experts): every matrix " +
                    kblocks_text(base) + ", except " + rules + "output (and token_embd when it is tied to it) " +
                    kblocks_text(DType::Q6_K) +
                    ". The blocks are bit for bit llama-quantize's, importance-weighted with quantize --imatrix. A "
                    "matrix whose row length is not a multiple of 256 falls back as llama-quantize does (Q2_K, Q3_K "
                    "to Q4_0; Q4_K to Q5_0; Q5_K to Q5_1; Q6_K to Q8_0; then f16), and the output to Q8_0. Norms: "
                    "f32.";
    const Method m = *block_method_for(base);
    p.by_role = table([m](TensorRole) { return plain(m); }, plain(*block_method_for(DType::Q6_K)));
    p.by_role[static_cast<size_t>(TensorRole::TokenEmbd)] = plain(m);
    return p;
}

// One row per preset, in the order lists show them (gkq quantize --help, the workbench): its name and what makes it.
struct PresetRow {
    std::string_view name;
    Preset (*make)(std::string_view name);
};
constexpr std::array<PresetRow, 15> kPresets{{
    {"paper", [](std::string_view) { return make_paper(); }},
    {"q8_0", [](std::string_view) { return make_block(Method::Q8_0); }},
    {"q4_0", [](std::string_view) { return make_block(Method::Q4_0); }},
    {"lowrank-q4", [](std::string_view) { return make_lowrank_q4(); }},
    {"lowrank-q4k", [](std::string_view) { return make_lowrank_q4k(); }},
    {"svd-energy", [](std::string_view) { return make_svd_energy(); }},
    {"svd-plain", [](std::string_view) { return make_svd_reduction(false); }},
    {"svd-llm", [](std::string_view) { return make_svd_reduction(true); }},
    {"q4_0-lqer", [](std::string_view) { return make_q4_0_lqer(); }},
    {"q4_k-lqer", [](std::string_view) { return make_q4_k_lqer(); }},
    {"q2_k", make_llama_mixture},
    {"q3_k_m", make_llama_mixture},
    {"q4_k_m", make_llama_mixture},
    {"q5_k_m", make_llama_mixture},
    {"q6_k", make_llama_mixture},
}};

bool matches(const LayerOverride& o, int32_t layer, TensorRole role, bool with_role) {
    if (o.layer != -1 && o.layer != layer) return false;
    return with_role ? (o.role && *o.role == role) : !o.role;
}

}  // namespace

CodecParams Preset::params_for(TensorRole role, int n_dims) const {
    const auto i = static_cast<size_t>(role);
    if (n_dims < 2 || i >= by_role.size()) return plain(Method::F32);
    return by_role[i];
}

bool preset_needs_gram(const Preset& p) {
    return std::any_of(p.by_role.begin(), p.by_role.end(), [](const CodecParams& c) { return c.whiten; });
}

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const PresetRow& r : kPresets) names.emplace_back(r.name);
    return names;
}

Result<Preset> find_preset(std::string_view name) {
    for (const PresetRow& r : kPresets)
        if (r.name == name) return r.make(name);
    std::string list;
    for (const std::string& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
    return error(StatusCode::NotFound, "unknown preset '" + std::string(name) + "' (presets: " + list + ")");
}

namespace {

void apply_overrides(CodecParams& p, TensorRole role, int32_t layer, const ParamOverride& global,
                     const std::vector<LayerOverride>& per_layer) {
    global.apply_to(p);
    for (const LayerOverride& o : per_layer)
        if (matches(o, layer, role, false)) o.params.apply_to(p);
    for (const LayerOverride& o : per_layer)
        if (matches(o, layer, role, true)) o.params.apply_to(p);
}

}  // namespace

CodecParams resolve_params(const Preset& preset, TensorRole role, int32_t layer, int n_dims,
                           const ParamOverride& global, const std::vector<LayerOverride>& per_layer) {
    CodecParams p = preset.params_for(role, n_dims);
    if (n_dims < 2) return p;
    apply_overrides(p, role, layer, global, per_layer);
    return p;
}

std::vector<CodecParams> resolve_model_params(const Preset& preset, const ModelConfig& config,
                                              const std::vector<TensorInfo>& tensors, const ParamOverride& global,
                                              const std::vector<LayerOverride>& per_layer) {
    std::optional<LlamaTypePlanner> planner;
    if (const LlamaFileType* ft = find_llama_file_type(preset.llama_mixture); ft != nullptr) {
        std::vector<TensorRole> roles;
        roles.reserve(tensors.size());
        for (const TensorInfo& t : tensors) roles.push_back(t.role);
        planner.emplace(*ft, config, roles);
    }
    std::vector<CodecParams> out;
    out.reserve(tensors.size());
    for (const TensorInfo& t : tensors) {
        CodecParams p = preset.params_for(t.role, t.n_dims());
        if (planner) {
            const LlamaTypePlanner::Choice c =
                planner->next(arch_or_default(config.architecture), t.role, t.layer, t.shape);
            if (t.n_dims() >= 2 && is_block_method(p.method))
                if (const std::optional<Method> m = block_method_for(c.wanted)) p.method = *m;
        }
        if (t.n_dims() >= 2) apply_overrides(p, t.role, t.layer, global, per_layer);
        out.push_back(p);
    }
    return out;
}

}  // namespace gkq
