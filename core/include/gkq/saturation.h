// Neuron saturation profiles and masks: how often each FFN hidden neuron of each block fires strongly on a
// calibration text, the per-block hot/cold bitmask that follows, its run-length encoding and sha256, and the
// masks file (JSON) that `gkq profile` writes. Definitions (docs/rknot-format.md, "Saturation maps"):
//   a_tj   = silu(w1 x_t)_j * (w3 x_t)_j, the hidden activation of neuron j at token t of a block
//   scale  = sqrt(mean over all t, j of a_tj^2), the block's activation RMS over the whole text
//   saturated(t, j) <=> |a_tj| > threshold * scale;  frequency_j = #saturated tokens / n_tokens
//   hot_j  <=> frequency_j > min_frequency  (default 0: hot when it saturated at least once)
// Contract: deterministic (the forward pass is); nothing throws; the masks file is written atomically and read
// back with every count, run and hash checked, errors naming the file and the JSON path.
#pragma once

#include "gkq/progress.h"
#include "gkq/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq {

class Transformer;

// Bins of the activation-frequency histogram: bin 0 holds the neurons that never saturated (frequency 0), bin b
// (1..7) those with frequency in (upper edge of b - 1, upper edge of b], upper edges 0.001, 0.01, 0.05, 0.1, 0.2,
// 0.5, 1 — log-like, because saturation is rare by construction.
constexpr int kSaturationHistogramBins = 8;
int saturation_histogram_bin(uint64_t count, uint64_t n_tokens);

struct LayerSaturation {
    int32_t layer_id = 0;
    int64_t neuron_count = 0;
    double scale = 0.0;                 // activation RMS of the block over the text
    double saturation_threshold = 0.0;  // T: saturated when |a| > T * scale
    double min_frequency = 0.0;         // hot when frequency > this
    std::vector<uint64_t> counts;       // (neuron_count) tokens on which the neuron saturated
    std::vector<uint8_t> hot;           // (neuron_count) 1 = hot, 0 = cold
    std::vector<uint64_t> histogram;    // (kSaturationHistogramBins) neurons by frequency (see above)
    int64_t hot_count() const;
};

struct SaturationProfile {
    std::string model;     // the model profiled (path as given)
    std::string text;      // the calibration text file
    std::string command;   // how it was made
    int64_t n_tokens = 0;  // tokens of text run (activations counted per token)
    double threshold = 0.0;
    double min_frequency = 0.0;
    std::vector<LayerSaturation> layers;  // (n_layers)
};

struct SaturationOptions {
    std::vector<double> thresholds = {1.0};  // one profile per threshold, from the same two passes
    double min_frequency = 0.0;
    int64_t window = 0;  // tokens per forward window (each starts at position 0); 0: the model's context
};

// Runs `tokens` through `model` in windows (twice: first the per-block RMS, then the counts) and returns one
// profile per threshold, in the options' order. The observer hook is removed again on return.
Result<std::vector<SaturationProfile>> profile_saturation(Transformer& model, const std::vector<int32_t>& tokens,
                                                          const SaturationOptions& options,
                                                          const ProgressFn& progress = {});

// ---- masks --------------------------------------------------------------------------------------------------------

// Run lengths of a mask: alternating cold and hot runs, starting with a (possibly empty) cold run.
std::vector<uint32_t> rle_encode_mask(const std::vector<uint8_t>& hot);
// Inverse; InvalidArgument naming `label` when the runs do not add up to neuron_count (or a run after the first
// is empty).
Result<std::vector<uint8_t>> rle_decode_mask(const std::vector<uint32_t>& runs, int64_t neuron_count,
                                             const std::string& label);
// Bytes of the runs as unsigned LEB128 varints (the mask's compressed size).
uint64_t rle_encoded_bytes(const std::vector<uint32_t>& runs);
// The raw bitmask: bit (j mod 8) of byte j / 8 is hot_j (least significant bit first), ceil(n / 8) bytes.
std::vector<uint8_t> pack_bitmask(const std::vector<uint8_t>& hot);
// "sha256:" + the hex digest of pack_bitmask(hot).
std::string bitmask_hash(const std::vector<uint8_t>& hot);

// The profile with every block's hot mask re-derived from its stored counts for another min_frequency in [0, 1)
// (hot_j <=> counts_j / n_tokens > min_frequency, the rule profile_saturation applies); counts, scales and
// histograms stay as they are. A new activation threshold T cannot be derived from the counts: it needs a new
// pass over the text (profile_saturation). InvalidArgument when the frequency is out of range, n_tokens <= 0 or a
// block's counts do not hold neuron_count values (naming the block).
Result<SaturationProfile> rederive_masks(const SaturationProfile& profile, double min_frequency);

// Per block, the hot flags (for Transformer::set_ffn_routing).
std::vector<std::vector<uint8_t>> routing_masks(const SaturationProfile& profile);

// ---- masks file ---------------------------------------------------------------------------------------------------

Status write_saturation_profile(const std::string& path, const SaturationProfile& profile);
Result<SaturationProfile> read_saturation_profile(const std::string& path);

}  // namespace gkq
