// The whole-model layer over the codec and the knot file: quantize a model into a knot (optionally one shard of
// it), merge shard knots, verify a knot, and reconstruct a dense model from one.
// Contract: every function is synchronous, runs its per-tensor work on `n_threads` threads with a bounded number
// of tensors in flight, reports progress on the calling thread (returning false cancels: StatusCode::Cancelled,
// and no output file is left), and writes its output through AtomicFile. Every number in a report is measured
// from what was encoded, written or decoded. Errors name the file and the tensor or record.
#pragma once

#include "gkq/codec.h"
#include "gkq/knot.h"
#include "gkq/progress.h"
#include "gkq/status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gkq {

class Weights;

// ---- sharding -------------------------------------------------------------------------------------------------
// Tensors are grouped: group 0 holds every tensor outside the transformer blocks (layer < 0), group 1 + L the
// tensors of block L. Shard i of N holds the groups g with g mod N == i, in source order.

uint32_t knot_group(int32_t layer);
bool in_shard(int32_t layer, uint32_t shard_index, uint32_t shard_count);

// ---- quantize -------------------------------------------------------------------------------------------------

// The default preset: the lowest mean KLD at or under 5 bits per weight on the demo model, as measured by
// packaging/measure-presets.sh (table and commands: docs/presets-measured.md). "paper" stays available.
inline constexpr const char* kDefaultPreset = "lowrank-q4";

struct QuantizeOptions {
    std::string preset = kDefaultPreset;   // see preset_names()
    ParamOverride global;                  // command-line overrides of every matrix's parameters
    std::vector<LayerOverride> per_layer;  // per-layer overrides (an rknot tuning); precedence: resolve_params()
    uint32_t shard_index = 0;              // encode only shard `shard_index` of `shard_count`
    uint32_t shard_count = 1;
    int n_threads = 0;             // 0: one per hardware thread
    Vocabulary vocab;              // stored when the model carries none (llama2.c checkpoints, Hugging Face folders)
    Metadata vocab_keys;           // with `vocab`, into the knot's metadata: FoundVocabulary::keys
    std::string producer = "gkq";  // the knot header's producer string
    // A tensor already stored block-quantized (q8_0, q4_0, llama2.c q8_g) is refused unless this is set: encoding it
    // again adds a second rounding error to the first (llama-quantize's --allow-requantize rule).
    bool allow_requantize = false;
    // An explicit rank above a matrix's smallest dimension is refused unless this is set (then it is capped there).
    bool force = false;
    // Per-column importance of the source tensors (an importance matrix, gkq/imatrix.h: load_model_importance):
    // empty, or one vector per source tensor, each empty or of the tensor's column count; passed to the codec as
    // TensorInput::importance. `importance_command` is appended to the recorded command line ("--imatrix NAME
    // sha256:HEX") and `importance_metadata` added to the knot's metadata.
    std::vector<std::vector<float>> importance;
    std::string importance_command;
    Metadata importance_metadata;
    // Activation Gram matrices of the source tensors' inputs (gkq/imatrix.h: load_model_gram): empty, or one pointer
    // per source tensor, each null or to (cols, cols) doubles X^T X (tensors sharing an input share one); passed to
    // the codec as TensorInput::gram for the whitened methods. `gram_command` is appended to the command line.
    std::vector<std::shared_ptr<const std::vector<double>>> gram;
    std::string gram_command;
    // Memory, not output: a model file's matrix that the codec encodes row by row (f32, f16, the block methods:
    // encodes_by_rows) is read from the mapping chunk_bytes of float32 at a time, the mapped pages dropped once read;
    // a worker starts the next tensor only while the estimated memory of the tensors in flight (its float32 chunks or
    // whole matrix, payload, record) stays within in_flight_bytes (a tensor alone may exceed it). The knot is the
    // same byte for byte whatever the two (and the thread count).
    uint64_t chunk_bytes = kEncodeChunkBytes;
    uint64_t in_flight_bytes = uint64_t{1} << 30;
};

struct QuantizedTensor {
    TensorReport codec;         // method, rank, bits, errors, energy kept, folding: measured by the codec
    uint64_t source_index = 0;  // position in the source model
    KnotCompression compression = KnotCompression::None;
    uint64_t stored_bytes = 0;       // payload as stored in the knot (after zlib when that was smaller)
    uint64_t record_bytes = 0;       // the whole record: descriptor, stored payload, CRC
    uint64_t index_entry_bytes = 0;  // its entry in the knot's index

    // Everything the tensor costs in the file: record + index entry.
    uint64_t bytes_on_disk() const { return record_bytes + index_entry_bytes; }
    double bits_per_weight() const;
};

struct QuantizeReport {
    std::string path;
    std::string preset;
    std::string command;  // as stored in the knot header
    uint32_t shard_index = 0;
    uint32_t shard_count = 1;
    std::vector<QuantizedTensor> tensors;  // the tensors of this shard, in source order
    uint64_t file_bytes = 0;               // size of the written knot
    uint64_t container_bytes = 0;          // file header, header block, index head, trailer: no tensor's
    int64_t n_params = 0;                  // elements of the tensors stored
    double seconds = 0.0;

    double bits_per_weight() const;  // 8 * file_bytes / n_params
    // Entropy coding (zlib per record, where it pays): the payloads as the codec made them and as stored, and the
    // bits per weight the file would have with every payload stored raw (8 * (file_bytes + raw - stored) / n_params).
    uint64_t raw_payload_bytes() const;
    uint64_t stored_payload_bytes() const;
    size_t n_deflated() const;  // records stored zlib-compressed
    double bits_per_weight_uncompressed() const;
    double ratio_vs_bf16() const;  // 2 * n_params / file_bytes
    double ratio_vs_fp32() const;  // 4 * n_params / file_bytes
};

// "quantize --preset P" and the overrides that are set, in a fixed order (no shard, no paths), as stored in the
// knot header; equal options give equal strings.
std::string quantize_command(const QuantizeOptions& options);

// Encodes every tensor of `model` in the options' shard (matrices by the resolved parameters, tensors of fewer
// than two dimensions as f32) and writes the knot `out_path` with the model's config, vocabulary and metadata.
// `model` is a model file, or a whole knot: its records decoded and encoded again (each lossy record counts as
// already quantized: allow_requantize), its header's metadata carried over.
// Records are written in source order whatever the thread count, so the file is deterministic.
Result<QuantizeReport> quantize_model(const Weights& model, const QuantizeOptions& options, const std::string& out_path,
                                      const ProgressFn& progress = {});

// ---- mixed precision by measurement (quantize --target-bpw) ------------------------------------------------------

// One type a matrix may take, measured on it: the type's bits per weight (its blocks, after llama-quantize's
// fallback for rows the blocks do not divide) and the error of the decoded matrix, sum_j w_j sum_i (W - W')_ij^2
// with w_j the column's importance (an importance matrix: the squared inputs the calibration text gave that
// column, so the sum is the squared output error under llama.cpp's diagonal approximation), or 1 without one
// (the squared Frobenius error).
struct BpwCandidate {
    Method method = Method::Q4_K;
    double bits_per_weight = 0.0;
    double error = 0.0;
};

struct BpwPlanTensor {
    size_t source_index = 0;
    std::string name;
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;
    int64_t n_elements = 0;
    std::vector<BpwCandidate> candidates;  // by bits per weight, ascending; one when the type is fixed
    size_t chosen = 0;                     // index into candidates
    // With an output probe: the model's mean KLD on the calibration text with this matrix alone at its cheapest
    // candidate (probe_kld), and sensitivity = probe_kld / that candidate's error, the factor that turns each
    // candidate's error into an estimate of its output KLD for the greedy choice. Without one: 0 and 1.
    double probe_kld = 0.0;
    double sensitivity = 1.0;
};

struct BpwPlan {
    double target_bpw = 0.0;
    double planned_bpw = 0.0;  // payload bits of every tensor (blocks, f32 norms) / parameters: the knot adds headers
    double lowest_bpw = 0.0;   // the same with every searched matrix at its cheapest candidate
    int64_t n_params = 0;
    bool weighted = false;                 // errors weighted by an importance matrix
    bool output_measured = false;          // each matrix's error scaled by its measured output sensitivity
    std::vector<BpwPlanTensor> tensors;    // the matrices, in source order (norms are f32 and not listed)
    std::vector<LayerOverride> overrides;  // the choice as QuantizeOptions::per_layer (method per layer and role)
};

// Chooses a block type for every attention and FFN projection of `model` so that the whole model's payload fits
// `target_bpw` bits per weight: each projection measured with Q2_K, Q3_K, Q4_K, IQ4_NL, Q5_K, Q6_K and Q8_0
// (fallbacks as llama-quantize's; types that fall back to the same one measured once; of two types with the same bits
// per weight, Q4_K or Q4_0 and IQ4_NL, only the one with the smaller error is a candidate), all starting at the
// cheapest, then greedily the upgrade with the largest error reduction per added bit that still fits, until none does.
// token_embd is Q4_K and output Q6_K (llama-quantize's Q4_K_M choice, with its fallbacks), norms f32, both counted in
// the budget. `importance` as QuantizeOptions::importance (empty: unweighted). InvalidArgument when even the cheapest
// types exceed the target, naming the lowest reachable bits per weight.
//
// `probe` (optional: make_output_probe in gkq/workflows.h) measures what a matrix's error costs at the output: it is
// given a matrix's source index and the values of its cheapest candidate, and returns the model's mean KLD on a
// calibration text with that matrix alone replaced. Each matrix's candidate errors are then scaled by
// probe_kld / (its cheapest candidate's error) before the greedy choice, so that matrices whose errors the later
// layers amplify are upgraded first. One model load and one pass over the text per searched projection.
using BpwOutputProbe = std::function<Result<double>(size_t source_index, std::vector<float> values)>;

Result<BpwPlan> plan_target_bpw(const Weights& model, double target_bpw,
                                const std::vector<std::vector<float>>& importance, int n_threads,
                                const ProgressFn& progress = {}, const BpwOutputProbe& probe = {});

// Whether preset `preset` can be the base of a --target-bpw run: the plan sets a block type per projection, so the
// base stores blocks too (a k-quant mixture, q8_0 or q4_0). InvalidArgument naming the preset when it cannot;
// find_preset's NotFound for an unknown name. `gkq quantize` and the workbench ask the same question.
Status check_target_bpw_preset(const std::string& preset);

// ---- merge ----------------------------------------------------------------------------------------------------

struct MergeReport {
    std::string path;
    size_t n_shards = 0;
    size_t n_records = 0;
    uint64_t file_bytes = 0;
};

// Combines the shard knots 0..N-1 of one run (any order) into one knot, byte for byte the one an unsharded run
// writes. Checks that the headers agree apart from the shard index, that each shard appears once and that every
// source tensor is present exactly once; records are copied CRC-checked, not re-encoded.
Result<MergeReport> merge_knots(const std::vector<std::string>& inputs, const std::string& out_path,
                                const ProgressFn& progress = {});

// ---- verify ---------------------------------------------------------------------------------------------------

struct VerifyReport {
    std::string path;
    uint64_t file_bytes = 0;
    bool gzipped = false;
    uint32_t shard_index = 0;
    uint32_t shard_count = 1;
    size_t n_records = 0;
    size_t n_ok = 0;                      // records whose CRC, descriptor and payload all check out
    std::vector<size_t> count_by_method;  // indexed by Method
    int64_t n_params = 0;                 // elements of all records
    uint64_t stored_bytes = 0;            // payloads as stored
    uint64_t raw_bytes = 0;               // payloads inflated
    std::vector<std::string> failures;    // one line per bad record, naming the file and the record

    bool ok() const { return failures.empty() && n_ok == n_records; }
};

// Opens the knot (failure: the Status), then reads every record (CRC32, descriptor) and decodes it to float32
// (the codec's payload checks) — all of them, collecting one failure line per bad record.
Result<VerifyReport> verify_knot(const std::string& path, int n_threads = 0, const ProgressFn& progress = {});

// ---- reconstruct ----------------------------------------------------------------------------------------------

struct ReconstructReport {
    std::string path;
    std::string format;    // "safetensors", "gguf", "llama2c"
    size_t n_tensors = 0;  // in the file written: a fused tensor's parts (Phi-3's q/k/v) are one
    int64_t n_params = 0;
    uint64_t file_bytes = 0;
    std::string vocabulary_note;  // GGUF: as ExportReport's (gkq/export.h)
};

// Decodes every record of the (whole, unsharded) knot `knot_path` to float32 and writes a model in the format
// its extension names: .safetensors (+ config.json beside it), .gguf (with the vocabulary), .bin (llama2.c v0).
// The model file is written first, then config.json, each atomically. Before any work, a .safetensors output is
// refused (InvalidArgument) when the config.json beside it describes another model (architecture, shapes, vocab)
// or tokenizer files of an unknown model lie there, unless `replace_other_model`.
// Streamed: each record is decoded when the writer reaches its tensor, into the writer's one-tensor buffer, so peak
// memory is about the largest tensor in float32 plus its record, whatever the model's size. `n_threads` is kept
// for the callers; the decode runs one tensor at a time (BLAS threads the low-rank products).
Result<ReconstructReport> reconstruct(const std::string& knot_path, const std::string& out_path, int n_threads = 0,
                                      const ProgressFn& progress = {}, bool replace_other_model = false);

}  // namespace gkq
