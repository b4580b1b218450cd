// Codec: one tensor to an EncodedTensor (method + payload) and back to float32, with exact accounting.
// Methods: f32 / f16, llama.cpp's block types (bit-compatible), and the GKQ pipeline of the source
// documents — truncated SVD (float64) -> hierarchical folding -> 2/4/8-bit factor quantization with per-vector
// max-abs scales and optional delta encoding -> optional residual in the blocks of any block method's type (Q4_0,
// Q8_0, Q4_K ...). Payload layouts: docs/codec.md.
// Presets map each tensor role to CodecParams; command-line and per-layer (rknot) overrides resolve on top.
// Contract: nothing throws; decode checks every payload size against the header fields and fails with Corrupt
// naming the tensor; every error and size in a TensorReport is measured by decoding what was encoded.
// encode_tensor / decode_tensor keep no state: callers may run them on many tensors at once (the SVD uses
// OpenBLAS, which is then best limited to one thread per caller thread).
#pragma once

#include "gkq/encoded_tensor.h"
#include "gkq/model_config.h"
#include "gkq/spectrum.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

// ---- parameters -------------------------------------------------------------------------------------------------

// The residual of the low-rank methods: none, or the blocks of one block method's type (residual_dtype).
enum class ResidualKind : uint8_t { None, Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K };

// What the truncated SVD decomposes (low-rank methods).
enum class LowRankTarget : uint8_t {
    Weights,     // W itself; a residual, if any, is W - (decoded low-rank part)
    QuantError,  // the residual's quantization error W - deq(Q(W)) (LQER-style correction); needs a residual
};

struct CodecParams {
    // F32, F16, Q8_0, Q4_0, LowRank or LowRankResidual. LowRank with a residual encodes as LowRankResidual, and
    // LowRankResidual needs one (validate_params).
    Method method = Method::F32;

    // Rank selection, first rule that applies: rank > 0 fixes k; else max_rel_error > 0 picks the smallest k
    // whose truncation error sqrt(sum_{i>k} s_i^2 / sum s_i^2) <= max_rel_error; else the smallest k whose
    // kept energy sum_{i<=k} s_i^2 / sum s_i^2 reaches `energy`. The last two are capped by max_components.
    // Every rule is capped by min(rows, cols) and, when max_rank_fraction > 0, by
    // max(1, floor(max_rank_fraction * min(rows, cols))).
    int32_t rank = 0;
    double energy = 0.999;
    double max_rel_error = 0.0;
    int32_t max_components = 0;  // 0 = no cap
    double max_rank_fraction = 0.0;
    // When > 0 (and rank is 0), k = max(1, floor(param_fraction * rows * cols / (rows + cols))): the factors hold
    // that fraction of the matrix's parameters (0.8 = a 20 % parameter reduction). Capped as the other rules.
    double param_fraction = 0.0;

    int factor_bits = 8;           // 2, 4 or 8: codes of the U and V factors
    bool delta = false;            // delta-encode codes along each vector (mod 2^bits)
    bool fold = false;             // hierarchical folding: attention head folding / FFN run-length encoding
    double fold_tolerance = 0.01;  // max relative fit error of head folding, measured on U_k S_k (or V_k S_k)
    bool sigma_quantized = false;  // sigma as 8-bit codes over [0, sigma_1] instead of f32
    ResidualKind residual = ResidualKind::None;
    LowRankTarget target = LowRankTarget::Weights;
    // Activation-aware SVD (SVD-LLM): decompose the target times S, S the lower Cholesky factor of the input's Gram
    // matrix X^T X (TensorInput::gram, required), and store U_k, sigma_k and S^-T V_k, so the decoded matrix is
    // U_k diag(sigma_k) V_k^T S^-1 and each dropped sigma_i costs exactly sigma_i^2 in ||(W - W') X^T||_F^2.
    bool whiten = false;
};

// InvalidArgument naming the field when params cannot be encoded (bits not 2/4/8, energy outside (0, 1], ...).
Status validate_params(const CodecParams& p);

// Every kind, None first, then in the order lists show them (q4_0, q8_0, then the other block types).
std::span<const ResidualKind> all_residual_kinds();
std::string_view residual_name(ResidualKind r);  // "none", then the type's name: "q4_0", "q8_0", "q4_k"
Result<ResidualKind> parse_residual(std::string_view name);
DType residual_dtype(ResidualKind r);                    // the blocks' type; Other for None
std::optional<ResidualKind> residual_kind_for(DType t);  // nullopt for types no kind stores
Result<Method> parse_method(std::string_view name);      // inverse of method_name()

// ---- presets and overrides -------------------------------------------------------------------------------------

struct Preset {
    std::string name;
    std::string description;           // what the preset does (methods and parameters), not what it achieves
    std::vector<CodecParams> by_role;  // indexed by TensorRole; used for tensors with two or more dimensions
    // A llama.cpp type mixture ("q4_k_m": codec/llama_mix.h) that chooses the block method of each matrix whose
    // by_role method is a block method, by role, layer and row length, as llama-quantize does; empty for the presets
    // that store by role alone.
    std::string llama_mixture;

    // Parameters for a tensor of `role` with `n_dims` dimensions: tensors with fewer than two are stored f32.
    CodecParams params_for(TensorRole role, int n_dims) const;
};

// "paper", "q8_0", "q4_0", "lowrank-q4", "lowrank-q4k", "svd-energy", "svd-plain", "svd-llm", "q4_0-lqer",
// "q4_k-lqer", then llama.cpp's k-quant mixtures "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k" (in that order); svd-llm
// and the -lqer presets whiten by the activations (CodecParams::whiten) and need each projection's Gram matrix.
std::vector<std::string> preset_names();
// NotFound listing the valid names when `name` is not one of them.
Result<Preset> find_preset(std::string_view name);
// True when some role of `p` whitens (CodecParams::whiten): encoding then needs the Gram matrices of the inputs
// (QuantizeOptions::gram), so code that runs every preset on weights alone skips it.
bool preset_needs_gram(const Preset& p);

// Unset fields leave the value below them alone. Setting `rank` also clears max_rank_fraction (an explicit rank
// is taken as given); setting `energy` or `max_rel_error` clears `rank` so that rule is the one used; setting
// `residual` to None also sets `target` back to Weights. `residual` applies to low-rank methods only.
struct ParamOverride {
    std::optional<Method> method;
    std::optional<int32_t> rank;
    std::optional<double> energy;
    std::optional<double> max_rel_error;
    std::optional<int32_t> max_components;
    std::optional<int> factor_bits;
    std::optional<bool> delta;
    std::optional<bool> fold;
    std::optional<double> fold_tolerance;
    std::optional<bool> sigma_quantized;
    std::optional<ResidualKind> residual;
    std::optional<LowRankTarget> target;

    bool empty() const;
    void apply_to(CodecParams& p) const;
};

// A per-layer override (from an rknot tuning file): applies to tensors of `layer` (-1: tensors of every layer,
// including non-block ones) and, when set, only to `role`.
struct LayerOverride {
    int32_t layer = -1;
    std::optional<TensorRole> role;
    ParamOverride params;
};

// Parameters for one tensor. Precedence, lowest to highest (more specific wins):
//   preset role params < `global` (command line) < per-layer overrides matching (layer, any role) in list order
//   < per-layer overrides matching (layer, role) in list order.
// Tensors with fewer than two dimensions are always f32: no override applies to them.
CodecParams resolve_params(const Preset& preset, TensorRole role, int32_t layer, int n_dims,
                           const ParamOverride& global, const std::vector<LayerOverride>& per_layer);

// resolve_params for every tensor of a model, in file order (`tensors`, whose order a type mixture's counters
// follow, as llama-quantize's do): the preset's llama.cpp type mixture, when it has one, first replaces the block
// method of each matrix by the mixture's choice (before any fallback: the codec falls back as llama-quantize does and
// reports it); the overrides then apply as in resolve_params.
std::vector<CodecParams> resolve_model_params(const Preset& preset, const ModelConfig& config,
                                              const std::vector<TensorInfo>& tensors, const ParamOverride& global,
                                              const std::vector<LayerOverride>& per_layer);

// ---- encoding and decoding -------------------------------------------------------------------------------------

// TensorInfo's shape: a matrix view is (n / last, last); dtype stays F32 (`data` is float32 whatever the source held).
struct TensorInput : TensorInfo {
    const float* data = nullptr;  // n_elements float32, row-major
    int32_t n_heads = 0;          // attention heads along the folded axis (fold_head_count); 0 = no head folding
    // (cols) per-input-column importance (an importance matrix's sums / count, gkq/imatrix.h) or null. Block types
    // whose type-table row has quantize_weighted (Q4_0, the k-quants, Q4_1, Q5_x, IQ4_NL) quantize with it, as
    // llama-quantize does with an imatrix: those block methods and the residuals of those types of the low-rank
    // methods (their error weighted the same way); Q8_0, f16, f32 and the factors ignore it.
    const float* importance = nullptr;
    // (cols, cols) row-major X^T X of the matrix's input activations over the calibration tokens, or null; the
    // whitened low-rank methods (CodecParams::whiten) need it.
    const double* gram = nullptr;
};

// Heads along the axis head folding splits: q and o -> n_heads (rows of q, columns of o); k and v -> n_kv_heads;
// 0 for other roles.
int32_t fold_head_count(TensorRole role, const ModelConfig& config);

// Per-record header bytes used for the on-disk estimate until a container (the knot) states its real size.
inline constexpr uint64_t kRecordHeaderBytesEstimate = 96;

// TensorInfo: the encoded tensor's (dtype: its payload layout, as EncodedTensor's).
struct TensorReport : TensorInfo {
    Method method = Method::F32;  // as encoded (after any fallback)
    int32_t rank = 0;
    int factor_bits = 0;
    DType residual_type = DType::Other;  // LowRankResidual: its residual's block type; Other otherwise
    uint32_t flags = 0;
    uint64_t payload_bytes = 0;           // everything: sigma, scales, fold scales, codes / RLE, residual blocks
    double bits_per_weight = 0.0;         // 8 * payload_bytes / n_elements() (0 for an empty tensor)
    uint64_t bytes_on_disk_estimate = 0;  // payload_bytes + kRecordHeaderBytesEstimate
    double rel_error = 0.0;               // ||W - W'||_F / ||W||_F against the decoded W' (0 when both are 0)
    double max_abs_error = 0.0;           // max |W - W'|
    std::optional<double> energy_kept;    // low-rank: sum_{i<=k} s_i^2 / sum s_i^2 of the decomposed matrix
                                          // (W, or the quantization error for LowRankTarget::QuantError)
    bool fold_applied = false;
    int64_t fold_bytes_saved = 0;          // payload without folding - payload with (0 when not applied)
    std::optional<double> fold_fit_error;  // head folding: measured relative fit error
    std::string fold_note;                 // why folding was or was not applied; empty when not requested
    std::string fallback;                  // non-empty when the requested method could not be used, and why
    // whitened SVD: the diagonal shift added to X^T X so that its Cholesky factor exists (0 when none was needed)
    std::optional<double> whiten_shift;
};

// Payload plus a record header of `record_header_bytes`, and the bits per weight that makes.
uint64_t bytes_on_disk(const TensorReport& r, uint64_t record_header_bytes);
double bits_per_weight_on_disk(const TensorReport& r, uint64_t record_header_bytes);

// Encodes `in` with `params`; fills `report` (when given) by decoding the result and measuring it against `in`.
// InvalidArgument for bad params, shapes or non-finite inputs to the SVD; never Corrupt.
Result<EncodedTensor> encode_tensor(const TensorInput& in, const CodecParams& params, TensorReport* report = nullptr);

// ---- row by row, for matrices too large to hold in float32 ------------------------------------------------------

// Rows [row0, row0 + n_rows) of a tensor's (rows, cols) matrix view (gkq/matrix_shape.h: rows = n / last dimension)
// as float32, into dst of n_rows * cols floats.
using RowReader = std::function<Status(int64_t row0, int64_t n_rows, float* dst)>;

// Float32 bytes of rows encode_tensor_rows reads at a time (at least one row) when not told otherwise.
inline constexpr uint64_t kEncodeChunkBytes = uint64_t{16} << 20;

// Whether encode_tensor stores `t` under `params` with a method that encodes each row on its own (f32, f16 and the
// block methods, after its shape fallbacks; not the low-rank methods, which need the whole matrix). Then, when given,
// *payload_bytes is that method's payload size (a value too large for f16 can still turn it into f32, or an error).
bool encodes_by_rows(const TensorInfo& t, const CodecParams& params, uint64_t* payload_bytes = nullptr);

// encode_tensor for a tensor encodes_by_rows accepts, reading its rows through `read` about chunk_bytes of float32
// at a time (whole rows, at least one), with `importance` as TensorInput::importance: the same payload and the same
// report field for field (errors accumulated in double in element order, as measure_encoded does) whatever the
// chunk size. InvalidArgument for a tensor encodes_by_rows refuses; read's errors are passed on.
Result<EncodedTensor> encode_tensor_rows(const TensorInfo& t, const float* importance, const RowReader& read,
                                         const CodecParams& params, TensorReport* report = nullptr,
                                         uint64_t chunk_bytes = kEncodeChunkBytes);

// Decodes to float32 in the tensor's shape, row-major. Corrupt naming the tensor when the payload does not match
// its header fields (size, rank, bits, flags, counts inside the payload).
Result<std::vector<float>> decode_tensor(const EncodedTensor& t);
// The same into caller memory of exactly n_dst = t.n_elements() floats.
Status decode_tensor_into(const EncodedTensor& t, float* dst, uint64_t n_dst);

// The factors of a LowRank / LowRankResidual tensor as decoded, without multiplying them out:
// W' = U diag(S) V^T (+ residual). For running a low-rank matrix factored (x -> V^T x -> S -> U).
struct LowRankFactors {
    int64_t rows = 0;  // matrix view of the tensor's shape
    int64_t cols = 0;
    int64_t rank = 0;             // k
    std::vector<float> u;         // (rows, k) row-major, folding and delta undone
    std::vector<float> s;         // (k)
    std::vector<float> v;         // (cols, k)
    std::vector<float> residual;  // (rows, cols) the dequantized residual blocks; empty for LowRank or when not asked
    // LowRankResidual: the residual's block type (Q4_0, Q8_0, Q4_K ...) and where its (rows, cols) blocks start in
    // t.payload, checked to fill the rest of it; Other and 0 for LowRank.
    DType residual_type = DType::Other;
    uint64_t residual_offset = 0;
};

// InvalidArgument for other methods; Corrupt naming the tensor as decode_tensor does. `dequantize_residual` false
// leaves `residual` empty: the blocks are then read where residual_offset says (the transformer runs them as stored).
Result<LowRankFactors> decode_lowrank_factors(const EncodedTensor& t, bool dequantize_residual = true);

// The accounting fields that follow from `encoded` and the original data (decodes `encoded`): method, sizes, bpw
// and errors. encode_tensor adds energy and folding on top.
Result<TensorReport> measure_encoded(const float* original, const EncodedTensor& encoded);

// ---- the spectrum as the data sees it --------------------------------------------------------------------------

// The singular values of W L, L the lower Cholesky factor of the Gram matrix G = X^T X of W's inputs on a
// calibration text (with the diagonal shift the whitener adds where G is not positive definite): the best rank-k
// approximation's squared output error ||(W - W_k) X^T||_F^2 is the sum of the dropped squares of these, so their
// energy ranks say what rank keeps what share of the layer's output energy on that text (SVD-LLM), next to W's
// own spectrum (its weight energy). `w` (rows, cols) row-major, `gram` (cols, cols) row-major.
struct WhitenedSpectrum {
    std::vector<double> singular_values;  // (min(rows, cols)) descending
    SpectrumMetrics metrics;              // of those values
    double shift = 0.0;                   // added to G's diagonal (0 when none was needed)
};
Result<WhitenedSpectrum> whitened_spectrum(const float* w, int64_t rows, int64_t cols, const double* gram,
                                           const std::string& label);

}  // namespace gkq
