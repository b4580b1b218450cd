// Rknot: the per-model, per-layer report and tuning file of the source documents — gzipped JSON with model_name,
// version, compression, folded_waves.layers[], saturation_maps, quality_metrics, resonance_tuning and a
// `measured` block. Every field, its meaning and how its value is obtained: docs/rknot-format.md.
// Contract: every value is measured (from the knot, the source model's spectra, a saturation profile or an
// evaluation report), derived by a documented formula from measured values, user-set, or null. Reading checks
// the gzip stream, the JSON, the schema (required fields, no unknown fields, types, ranges) and the internal
// consistency (masks against their hashes, formulas against their inputs); every error names the file and the
// JSON path ("folded_waves.layers[3].bit_width: 7 is not one of 2, 4, 8"). Files are written atomically.
// Nothing throws.
#pragma once

#include "gkq/codec.h"
#include "gkq/progress.h"
#include "gkq/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

class Weights;

constexpr const char* kRknotVersion = "1.0";

struct RknotCompression {
    std::string method;                        // the knot's command (preset and overrides)
    std::optional<double> spectral_ratio;      // sum rows*cols / sum rank*(rows+cols+1) over low-rank records
    std::optional<double> hierarchical_ratio;  // null: the knot does not record unfolded sizes
    std::optional<double> total_compression;   // 4 * n_params / knot file bytes (fp32 over knot)
};

// One weight matrix of the knot (folded_waves.layers[i]).
struct RknotLayer {
    int32_t layer_id = -1;                       // transformer block, -1 outside the blocks
    std::string tensor;                          // record name in the knot
    std::string role;                            // role_name()
    std::string method;                          // method_name() as encoded
    int32_t rank = 0;                            // low-rank k (0: none; as a tuning, 0 leaves the preset's rank rule)
    std::optional<int> bit_width;                // low-rank factor bits (2, 4, 8); null for other methods
    std::vector<double> base_singular_values;    // the top min(8, n) singular values of the source matrix
    std::optional<double> spectral_decay_ratio;  // exp(b) of the least-squares fit ln s_i = a + b i
    int32_t num_levels = 0;                      // levels of the rank ladder 1, 2, 4, ... <= n
    std::vector<double> level_residuals;         // (num_levels) relative error at rank 2^l (Eckart-Young)
    std::optional<bool> is_self_similar;         // fit R^2 >= kSelfSimilarR2
    std::optional<double> self_similarity_confidence;  // the fit's R^2
    std::optional<double> rel_error;                   // ||W - W'||_F / ||W||_F of the decoded record (with a model)
    std::optional<double> expected_accuracy_loss;      // null unless measured (user-set from a per-layer eval)
};

struct RknotMaskLayer {
    int32_t layer_id = 0;
    std::string bitmask_hash;            // "sha256:" + hex of the packed bitmask
    uint64_t compressed_size_bytes = 0;  // LEB128 bytes of the runs
    int64_t neuron_count = 0;
    double saturation_threshold = 0.0;
    double min_frequency = 0.0;
    double scale = 0.0;
    int64_t hot_count = 0;
    std::vector<uint32_t> runs;  // alternating cold/hot run lengths, cold first
};

struct RknotSaturationMaps {
    std::string version = "1.0";
    std::string compression = "run-length encoded";
    std::string source;    // the masks file
    std::string command;   // the profile command
    int64_t n_tokens = 0;  // calibration tokens
    std::vector<RknotMaskLayer> layers;
};

// Fields the source documents name but never define stay null (the validator insists); overall_quality is
// exp(-measured.eval.kld_mean) when an evaluation is present.
struct RknotQualityMetrics {
    std::optional<double> overall_quality;
};

// User-set training hyperparameters (null until set); ranges in docs/rknot-format.md.
struct RknotResonanceTuning {
    std::optional<double> optimal_learning_rate;            // (0, 1]
    std::optional<double> resonance_frequency;              // (0, 1]
    std::optional<double> spectral_lambda;                  // [0, 100]
    std::optional<double> l2_lambda;                        // [0, 100]
    std::optional<int64_t> expected_cliff_emergence_epoch;  // [0, 1000000]
};

struct RknotEval {
    std::string source;   // the eval report file
    std::string command;  // the command that produced it
    std::optional<double> kld_mean, kld_mean_se, kld_p99, kld_p999, top1_agreement, ppl_ratio;
    std::optional<int64_t> n_tokens;
};

struct RknotMeasured {
    std::string knot;            // knot file the rknot was encoded from
    std::string knot_command;    // its header command
    std::string encode_command;  // the `gkq rknot encode` command
    int64_t n_params = 0;
    uint64_t file_bytes = 0;
    double bits_per_weight = 0.0;  // 8 * file_bytes / n_params
    std::string spectrum_source;   // "model" (the source matrices) or "knot" (decoded records)
    std::optional<RknotEval> eval;
};

struct Rknot {
    std::string model_name;
    std::string version = kRknotVersion;
    RknotCompression compression;
    std::vector<RknotLayer> layers;  // folded_waves.layers
    std::optional<RknotSaturationMaps> saturation_maps;
    RknotQualityMetrics quality_metrics;
    RknotResonanceTuning resonance_tuning;
    RknotMeasured measured;
};

constexpr double kSelfSimilarR2 = 0.95;
constexpr int kRknotBaseValues = 8;

// ---- JSON and files --------------------------------------------------------------------------------------------

std::string rknot_to_json(const Rknot& r, int indent = 2);
// Parses and validates JSON text; errors (InvalidArgument) list one "label: path: problem" line per violation.
Result<Rknot> rknot_from_json(std::string_view text, const std::string& label);
// Schema and consistency check of a value (as rknot_from_json(rknot_to_json(r))).
Status validate_rknot(const Rknot& r, const std::string& label);

// gzip (RFC 1952) of the JSON, written atomically.
Status write_rknot(const std::string& path, const Rknot& r);
// Inflates (Corrupt naming the file for bad magic, corrupt or truncated streams), then rknot_from_json.
Result<Rknot> read_rknot(const std::string& path);

// Edits fields: each "PATH=VALUE", PATH like folded_waves.layers[3].bit_width, VALUE a JSON literal (a bare word
// that is not one is taken as a string). Each field must exist; the result of all edits together must validate,
// else `r` is unchanged and the error names the path.
Status rknot_set(Rknot& r, const std::vector<std::string>& assignments, const std::string& label);

// ---- making one, and using it as a tuning ------------------------------------------------------------------------

struct RknotEncodeOptions {
    std::string knot_path;
    std::string model_path;    // optional: the source model (spectra of the original matrices, rel_error)
    std::string profile_path;  // optional: a masks file of `gkq profile`
    std::string eval_path;     // optional: a `gkq eval --json` report
    std::string model_name;    // default: the knot file name without extension
    std::string command;       // the encode command, recorded in measured.encode_command
    int n_threads = 0;
};

// With a model, each matrix's singular values come from the model's spectra cache (spectrum_cache.h) where it holds
// that tensor with that shape, else from an exact SVD here: the same values either way, to rounding (the two SVDs
// may run with different BLAS threading; measured: relative differences below 1e-14).
Result<Rknot> encode_rknot(const RknotEncodeOptions& options, const ProgressFn& progress = {});

// Per matrix entry: its (layer, role) with method, rank (when > 0) and factor bits (when set), for
// QuantizeOptions::per_layer.
Result<std::vector<LayerOverride>> rknot_layer_overrides(const Rknot& r, const std::string& label);

// Whether `r` was made for `model`, before it tunes it: every folded_waves entry names a tensor of the model with
// the same role and layer, and measured.n_params (when set) is the model's parameter count. InvalidArgument naming
// `label`, the rknot's model_name and the first difference.
Status check_rknot_model(const Rknot& r, const Weights& model, const std::string& label);

// The fit behind spectral_decay_ratio and self_similarity_confidence over the positive values of s (descending):
// ln s_i = a + b i, i = 0..m-1; ratio = exp(b), r2 = 1 - SS_res / SS_tot. Null (nullopt) below 3 values or when
// SS_tot is 0.
struct DecayFit {
    double ratio = 0.0;
    double r2 = 0.0;
};
std::optional<DecayFit> fit_spectral_decay(const double* s, int64_t n);

}  // namespace gkq
