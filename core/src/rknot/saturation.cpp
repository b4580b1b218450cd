// Saturation profiling (two passes over the calibration text through the FFN observer hook), mask run-length
// coding and hashing, and the masks file. Definitions: gkq/saturation.h and docs/rknot-format.md.
#include "gkq/saturation.h"

#include "gkq/atomic_file.h"
#include "gkq/transformer.h"

#include "common/sha256.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace gkq {

int64_t LayerSaturation::hot_count() const {
    int64_t n = 0;
    for (uint8_t h : hot) n += h ? 1 : 0;
    return n;
}

int saturation_histogram_bin(uint64_t count, uint64_t n_tokens) {
    if (count == 0 || n_tokens == 0) return 0;
    // upper edges as fractions num / den, compared on integers: count / n <= num / den
    static const uint64_t kNum[] = {1, 1, 1, 1, 1, 1, 1};
    static const uint64_t kDen[] = {1000, 100, 20, 10, 5, 2, 1};
    for (int b = 0; b < 7; ++b)
        if (count * kDen[b] <= n_tokens * kNum[b]) return b + 1;
    return kSaturationHistogramBins - 1;
}

// ---- profiling ----------------------------------------------------------------------------------------------------

namespace {

// The one hot rule, shared by profiling and re-deriving so both decide every neuron identically.
bool is_hot(uint64_t count, int64_t n_tokens, double min_frequency) {
    return static_cast<double>(count) / static_cast<double>(n_tokens) > min_frequency;
}

// Runs the tokens window by window; `what` labels the pass in progress reports (fraction from..to).
Status run_windows(Transformer& model, const std::vector<int32_t>& tokens, int64_t window, double from, double to,
                   const char* what, const ProgressFn& progress) {
    const auto n = static_cast<int64_t>(tokens.size());
    for (int64_t start = 0; start < n; start += window) {
        const int64_t len = std::min(window, n - start);
        auto r = model.forward_batch(tokens.data() + start, len, 0);
        if (!r) return r.status();
        const double f = from + (to - from) * static_cast<double>(start + len) / static_cast<double>(n);
        if (!report_progress(progress, f, what)) return error(StatusCode::Cancelled, "profile: cancelled");
    }
    return Status::ok();
}

struct ObserverGuard {
    Transformer& t;
    ~ObserverGuard() { t.set_ffn_observer({}); }
};

}  // namespace

Result<std::vector<SaturationProfile>> profile_saturation(Transformer& model, const std::vector<int32_t>& tokens,
                                                          const SaturationOptions& options,
                                                          const ProgressFn& progress) {
    if (tokens.empty()) return error(StatusCode::InvalidArgument, "profile: the calibration text has no tokens");
    if (options.thresholds.empty()) return error(StatusCode::InvalidArgument, "profile: no threshold given");
    for (double t : options.thresholds)
        if (!std::isfinite(t) || t < 0.0)
            return error(StatusCode::InvalidArgument, "profile: threshold " + std::to_string(t) + " is not >= 0");
    if (!std::isfinite(options.min_frequency) || options.min_frequency < 0.0 || options.min_frequency >= 1.0)
        return error(StatusCode::InvalidArgument, "profile: min_frequency must be in [0, 1)");
    if (model.ffn_routing())
        return error(StatusCode::InvalidArgument, "profile: the model runs with FFN routing; profile it without");
    const int64_t n_layers = model.config().n_layers;
    const int64_t hidden = model.config().hidden_dim;
    const int64_t window = options.window > 0 ? std::min(options.window, model.n_context()) : model.n_context();
    ObserverGuard guard{model};

    // pass 1: sum of squares per block, in double
    std::vector<double> sum_sq(static_cast<size_t>(n_layers), 0.0);
    model.set_ffn_observer([&](int64_t layer, const float* act, int64_t n) {
        double s = 0.0;
        for (int64_t i = 0; i < n * hidden; ++i) s += static_cast<double>(act[i]) * act[i];
        sum_sq[static_cast<size_t>(layer)] += s;
    });
    if (Status s = run_windows(model, tokens, window, 0.0, 0.5, "activation scale", progress); !s) return s;
    const auto n_tokens = static_cast<int64_t>(tokens.size());
    std::vector<double> scale(static_cast<size_t>(n_layers));
    for (int64_t l = 0; l < n_layers; ++l)
        scale[static_cast<size_t>(l)] =
            std::sqrt(sum_sq[static_cast<size_t>(l)] / (static_cast<double>(n_tokens) * static_cast<double>(hidden)));

    // pass 2: per threshold, per block, per neuron: tokens with |a| > T * scale
    const size_t n_thr = options.thresholds.size();
    std::vector<uint64_t> counts(n_thr * static_cast<size_t>(n_layers * hidden), 0);
    model.set_ffn_observer([&](int64_t layer, const float* act, int64_t n) {
        for (size_t k = 0; k < n_thr; ++k) {
            const double limit = options.thresholds[k] * scale[static_cast<size_t>(layer)];
            uint64_t* c = counts.data() + (k * static_cast<size_t>(n_layers) + static_cast<size_t>(layer)) *
                                              static_cast<size_t>(hidden);
            for (int64_t t = 0; t < n; ++t)
                for (int64_t j = 0; j < hidden; ++j)
                    if (std::fabs(static_cast<double>(act[t * hidden + j])) > limit) c[j]++;
        }
    });
    if (Status s = run_windows(model, tokens, window, 0.5, 1.0, "saturation counts", progress); !s) return s;

    std::vector<SaturationProfile> out(n_thr);
    for (size_t k = 0; k < n_thr; ++k) {
        SaturationProfile& p = out[k];
        p.n_tokens = n_tokens;
        p.threshold = options.thresholds[k];
        p.min_frequency = options.min_frequency;
        for (int64_t l = 0; l < n_layers; ++l) {
            LayerSaturation ls;
            ls.layer_id = static_cast<int32_t>(l);
            ls.neuron_count = hidden;
            ls.scale = scale[static_cast<size_t>(l)];
            ls.saturation_threshold = p.threshold;
            ls.min_frequency = p.min_frequency;
            const uint64_t* c = counts.data() + (k * static_cast<size_t>(n_layers) + static_cast<size_t>(l)) *
                                                    static_cast<size_t>(hidden);
            ls.counts.assign(c, c + hidden);
            ls.hot.resize(static_cast<size_t>(hidden));
            ls.histogram.assign(kSaturationHistogramBins, 0);
            for (int64_t j = 0; j < hidden; ++j) {
                ls.hot[static_cast<size_t>(j)] = is_hot(c[j], n_tokens, p.min_frequency) ? 1 : 0;
                ls.histogram[static_cast<size_t>(saturation_histogram_bin(c[j], static_cast<uint64_t>(n_tokens)))]++;
            }
            p.layers.push_back(std::move(ls));
        }
    }
    return out;
}

Result<SaturationProfile> rederive_masks(const SaturationProfile& profile, double min_frequency) {
    if (!std::isfinite(min_frequency) || min_frequency < 0.0 || min_frequency >= 1.0)
        return error(StatusCode::InvalidArgument, "profile: min_frequency must be in [0, 1)");
    if (profile.n_tokens <= 0) return error(StatusCode::InvalidArgument, "profile: n_tokens must be > 0");
    SaturationProfile out = profile;
    out.min_frequency = min_frequency;
    for (size_t l = 0; l < out.layers.size(); ++l) {
        LayerSaturation& ls = out.layers[l];
        if (ls.neuron_count < 0 || ls.counts.size() != static_cast<size_t>(ls.neuron_count))
            return error(StatusCode::InvalidArgument, "profile: layers[" + std::to_string(l) +
                                                          "]: " + std::to_string(ls.counts.size()) + " counts for " +
                                                          std::to_string(ls.neuron_count) + " neurons");
        ls.min_frequency = min_frequency;
        ls.hot.resize(ls.counts.size());
        for (size_t j = 0; j < ls.counts.size(); ++j)
            ls.hot[j] = is_hot(ls.counts[j], out.n_tokens, min_frequency) ? 1 : 0;
    }
    return out;
}

// ---- masks --------------------------------------------------------------------------------------------------------

std::vector<uint32_t> rle_encode_mask(const std::vector<uint8_t>& hot) {
    std::vector<uint32_t> runs;
    bool current = false;  // the first run is cold
    uint32_t len = 0;
    for (uint8_t h : hot) {
        const bool b = h != 0;
        if (b != current) {
            runs.push_back(len);
            current = b;
            len = 0;
        }
        len++;
    }
    if (len > 0 || runs.empty()) runs.push_back(len);
    return runs;
}

Result<std::vector<uint8_t>> rle_decode_mask(const std::vector<uint32_t>& runs, int64_t neuron_count,
                                             const std::string& label) {
    if (neuron_count < 0) return error(StatusCode::InvalidArgument, label + ": negative neuron count");
    uint64_t total = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
        if (i > 0 && runs[i] == 0)
            return error(StatusCode::InvalidArgument, label + "[" + std::to_string(i) + "]: empty run after the first");
        total += runs[i];
        if (total > static_cast<uint64_t>(neuron_count))
            return error(StatusCode::InvalidArgument,
                         label + ": the runs cover more than " + std::to_string(neuron_count) + " neurons");
    }
    if (total != static_cast<uint64_t>(neuron_count))
        return error(StatusCode::InvalidArgument, label + ": the runs cover " + std::to_string(total) +
                                                      " neurons, not " + std::to_string(neuron_count));
    std::vector<uint8_t> hot;
    hot.reserve(static_cast<size_t>(neuron_count));
    for (size_t i = 0; i < runs.size(); ++i) hot.insert(hot.end(), runs[i], static_cast<uint8_t>(i % 2));
    return hot;
}

uint64_t rle_encoded_bytes(const std::vector<uint32_t>& runs) {
    uint64_t n = 0;
    for (uint32_t r : runs) {
        do {
            n++;
            r >>= 7;
        } while (r != 0);
    }
    return n;
}

std::vector<uint8_t> pack_bitmask(const std::vector<uint8_t>& hot) {
    std::vector<uint8_t> bytes((hot.size() + 7) / 8, 0);
    for (size_t j = 0; j < hot.size(); ++j)
        if (hot[j]) bytes[j / 8] |= static_cast<uint8_t>(1u << (j % 8));
    return bytes;
}

std::string bitmask_hash(const std::vector<uint8_t>& hot) {
    const std::vector<uint8_t> packed = pack_bitmask(hot);
    return "sha256:" + sha256_hex(packed.data(), packed.size());
}

std::vector<std::vector<uint8_t>> routing_masks(const SaturationProfile& profile) {
    std::vector<std::vector<uint8_t>> m;
    for (const LayerSaturation& l : profile.layers) m.push_back(l.hot);
    return m;
}

// ---- masks file ---------------------------------------------------------------------------------------------------

namespace {

constexpr const char* kMasksFormat = "gkq-saturation-masks";
constexpr uint64_t kMaxMasksFileBytes = uint64_t{1} << 30;

using nlohmann::json;

}  // namespace

Status write_saturation_profile(const std::string& path, const SaturationProfile& p) {
    json j;
    j["format"] = kMasksFormat;
    j["version"] = 1;
    j["model"] = p.model;
    j["text"] = p.text;
    j["command"] = p.command;
    j["n_tokens"] = p.n_tokens;
    j["threshold"] = p.threshold;
    j["min_frequency"] = p.min_frequency;
    json layers = json::array();
    for (const LayerSaturation& l : p.layers) {
        const std::vector<uint32_t> runs = rle_encode_mask(l.hot);
        layers.push_back({{"layer_id", l.layer_id},
                          {"neuron_count", l.neuron_count},
                          {"scale", l.scale},
                          {"saturation_threshold", l.saturation_threshold},
                          {"min_frequency", l.min_frequency},
                          {"hot_count", l.hot_count()},
                          {"histogram", l.histogram},
                          {"counts", l.counts},
                          {"runs", runs},
                          {"compressed_size_bytes", rle_encoded_bytes(runs)},
                          {"bitmask_hash", bitmask_hash(l.hot)}});
    }
    j["layers"] = std::move(layers);
    std::string text;
    try {
        text = j.dump(1) + "\n";
    } catch (const std::exception& e) {
        return error(StatusCode::Internal, path + ": cannot serialize the masks: " + e.what());
    }
    return write_file_atomic(path, text);
}

Result<SaturationProfile> read_saturation_profile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(StatusCode::NotFound, path + ": cannot open the masks file");
    in.seekg(0, std::ios::end);
    const auto size = static_cast<uint64_t>(in.tellg());
    if (size > kMaxMasksFileBytes) return error(StatusCode::Unsupported, path + ": masks file larger than 1 GiB");
    in.seekg(0);
    std::string text(size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return error(StatusCode::Corrupt, path + ": not a JSON object");
    auto bad = [&](const std::string& where, const std::string& what) {
        return error(StatusCode::Corrupt, path + ": " + where + ": " + what);
    };
    try {
        if (!j.contains("format") || j["format"] != kMasksFormat)
            return bad("format", "not " + std::string(kMasksFormat));
        if (!j.contains("version") || j["version"] != 1) return bad("version", "only version 1 is known");
        SaturationProfile p;
        p.model = j.at("model").get<std::string>();
        p.text = j.at("text").get<std::string>();
        p.command = j.at("command").get<std::string>();
        p.n_tokens = j.at("n_tokens").get<int64_t>();
        p.threshold = j.at("threshold").get<double>();
        p.min_frequency = j.at("min_frequency").get<double>();
        if (p.n_tokens <= 0) return bad("n_tokens", "must be > 0");
        const json& layers = j.at("layers");
        if (!layers.is_array()) return bad("layers", "not an array");
        for (size_t i = 0; i < layers.size(); ++i) {
            const json& lj = layers[i];
            const std::string where = "layers[" + std::to_string(i) + "]";
            LayerSaturation l;
            l.layer_id = lj.at("layer_id").get<int32_t>();
            l.neuron_count = lj.at("neuron_count").get<int64_t>();
            if (l.neuron_count < 0 || l.neuron_count > (int64_t{1} << 30))
                return bad(where + ".neuron_count", "out of range");
            l.scale = lj.at("scale").get<double>();
            l.saturation_threshold = lj.at("saturation_threshold").get<double>();
            l.min_frequency = lj.at("min_frequency").get<double>();
            l.histogram = lj.at("histogram").get<std::vector<uint64_t>>();
            l.counts = lj.at("counts").get<std::vector<uint64_t>>();
            if (l.histogram.size() != kSaturationHistogramBins) return bad(where + ".histogram", "not 8 bins");
            if (static_cast<int64_t>(l.counts.size()) != l.neuron_count)
                return bad(where + ".counts", std::to_string(l.counts.size()) + " values for " +
                                                  std::to_string(l.neuron_count) + " neurons");
            const auto runs = lj.at("runs").get<std::vector<uint32_t>>();
            auto hot = rle_decode_mask(runs, l.neuron_count, path + ": " + where + ".runs");
            if (!hot) return error(StatusCode::Corrupt, hot.message());
            l.hot = std::move(hot).value();
            if (lj.at("bitmask_hash").get<std::string>() != bitmask_hash(l.hot))
                return bad(where + ".bitmask_hash", "does not match the mask the runs give");
            if (lj.at("hot_count").get<int64_t>() != l.hot_count())
                return bad(where + ".hot_count", "does not match the mask");
            if (lj.at("compressed_size_bytes").get<uint64_t>() != rle_encoded_bytes(runs))
                return bad(where + ".compressed_size_bytes", "does not match the runs");
            p.layers.push_back(std::move(l));
        }
        return p;
    } catch (const std::exception& e) {
        return error(StatusCode::Corrupt, path + ": " + e.what());
    }
}

}  // namespace gkq
