// The rknot schema: Rknot <-> JSON, and the validator that names the JSON path of every violation (required
// fields, unknown fields, types, ranges, then consistency: masks against hashes, formulas against inputs).
#include "gkq/rknot.h"

#include "gkq/encoded_tensor.h"
#include "gkq/saturation.h"
#include "gkq/tensor.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <initializer_list>
#include <set>

namespace gkq {

using nlohmann::json;

namespace {

// Undefined by the source documents: always null (docs/rknot-format.md, quality_metrics).
const char* const kUndefinedQuality[] = {"gnosis_efficiency",     "data_quality_score",
                                         "learning_efficiency",   "resonance_stability",
                                         "recommended_bit_width", "safe_for_aggressive_quantization"};

template <class T>
json opt(const std::optional<T>& v) {
    return v ? json(*v) : json();
}

std::string num_text(double v) {
    return json(v).dump();
}

// ---- the validating reader -------------------------------------------------------------------------------------

class Reader {
public:
    std::vector<std::string> errors;

    void fail(const std::string& path, const std::string& msg) { errors.push_back(path + ": " + msg); }

    static std::string join(const std::string& base, const std::string& key) {
        return base.empty() ? key : base + "." + key;
    }

    // True when `j` is an object; reports missing and unknown keys.
    bool object(const json& j, const std::string& path, std::initializer_list<const char*> keys) {
        if (!j.is_object()) {
            fail(path.empty() ? "(root)" : path, "expected an object, got " + std::string(j.type_name()));
            return false;
        }
        std::set<std::string> known;
        for (const char* k : keys) {
            known.insert(k);
            if (!j.contains(k)) fail(join(path, k), "missing required field");
        }
        for (auto it = j.begin(); it != j.end(); ++it)
            if (!known.count(it.key())) fail(join(path, it.key()), "unknown field");
        return true;
    }

    const json* get(const json& obj, const std::string& base, const char* key) {
        auto it = obj.find(key);
        return it == obj.end() ? nullptr : &*it;
    }

    void type_error(const std::string& path, const char* want, const json& v) {
        fail(path, "expected " + std::string(want) + ", got " + std::string(v.type_name()));
    }

    std::string str(const json& obj, const std::string& base, const char* key, bool non_empty = false) {
        const json* v = get(obj, base, key);
        if (!v) return {};
        if (!v->is_string()) {
            type_error(join(base, key), "a string", *v);
            return {};
        }
        std::string s = v->get<std::string>();
        if (non_empty && s.empty()) fail(join(base, key), "must not be empty");
        return s;
    }

    // A number in [lo, hi] (open ends when lo_open / hi_open); null allowed when `nullable`.
    std::optional<double> number(const json& obj, const std::string& base, const char* key, double lo, double hi,
                                 bool nullable, bool lo_open = false, bool hi_open = false) {
        const json* v = get(obj, base, key);
        if (!v) return std::nullopt;
        return number_value(*v, join(base, key), lo, hi, nullable, lo_open, hi_open);
    }

    std::optional<double> number_value(const json& v, const std::string& path, double lo, double hi, bool nullable,
                                       bool lo_open = false, bool hi_open = false) {
        if (v.is_null()) {
            if (!nullable) fail(path, "must not be null");
            return std::nullopt;
        }
        if (!v.is_number()) {
            type_error(path, nullable ? "a number or null" : "a number", v);
            return std::nullopt;
        }
        const double d = v.get<double>();
        const bool below = lo_open ? !(d > lo) : !(d >= lo);
        const bool above = hi_open ? !(d < hi) : !(d <= hi);
        if (below || above || !std::isfinite(d)) {
            fail(path, v.dump() + " is out of range " + std::string(lo_open ? "(" : "[") + num_text(lo) + ", " +
                           (std::isinf(hi) ? std::string("inf") : num_text(hi)) +
                           (hi_open || std::isinf(hi) ? ")" : "]"));
            return std::nullopt;
        }
        return d;
    }

    std::optional<int64_t> integer(const json& obj, const std::string& base, const char* key, int64_t lo, int64_t hi,
                                   bool nullable) {
        const json* v = get(obj, base, key);
        if (!v) return std::nullopt;
        return integer_value(*v, join(base, key), lo, hi, nullable);
    }

    std::optional<int64_t> integer_value(const json& v, const std::string& path, int64_t lo, int64_t hi,
                                         bool nullable) {
        if (v.is_null()) {
            if (!nullable) fail(path, "must not be null");
            return std::nullopt;
        }
        if (!v.is_number_integer()) {
            type_error(path, nullable ? "an integer or null" : "an integer", v);
            return std::nullopt;
        }
        if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
            fail(path, v.dump() + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
            return std::nullopt;
        }
        const int64_t i = v.get<int64_t>();
        if (i < lo || i > hi) {
            fail(path, std::to_string(i) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
            return std::nullopt;
        }
        return i;
    }

    std::optional<bool> boolean(const json& obj, const std::string& base, const char* key, bool nullable) {
        const json* v = get(obj, base, key);
        if (!v) return std::nullopt;
        if (v->is_null()) {
            if (!nullable) fail(join(base, key), "must not be null");
            return std::nullopt;
        }
        if (!v->is_boolean()) {
            type_error(join(base, key), nullable ? "a boolean or null" : "a boolean", *v);
            return std::nullopt;
        }
        return v->get<bool>();
    }

    // An array (nullptr otherwise, reported).
    const json* array(const json& obj, const std::string& base, const char* key, size_t max_size) {
        const json* v = get(obj, base, key);
        if (!v) return nullptr;
        if (!v->is_array()) {
            type_error(join(base, key), "an array", *v);
            return nullptr;
        }
        if (v->size() > max_size) {
            fail(join(base, key), std::to_string(v->size()) + " entries, at most " + std::to_string(max_size));
            return nullptr;
        }
        return v;
    }

    void must_be_null(const json& obj, const std::string& base, const char* key, const char* why) {
        const json* v = get(obj, base, key);
        if (v && !v->is_null()) fail(join(base, key), std::string("must be null (") + why + ")");
    }
};

constexpr size_t kMaxLayers = 1u << 20;
constexpr size_t kMaxRuns = 1u << 30;

void read_layer(Reader& rd, const json& j, const std::string& p, RknotLayer& l) {
    if (!rd.object(j, p,
                   {"layer_id", "tensor", "role", "method", "rank", "bit_width", "base_singular_values",
                    "spectral_decay_ratio", "num_levels", "level_residuals", "is_self_similar",
                    "self_similarity_confidence", "rel_error", "expected_accuracy_loss"}))
        return;
    l.layer_id = static_cast<int32_t>(rd.integer(j, p, "layer_id", -1, 65535, false).value_or(-1));
    l.tensor = rd.str(j, p, "tensor", true);
    l.role = rd.str(j, p, "role", true);
    if (j.contains("role") && j["role"].is_string() && !l.role.empty() &&
        (role_from_name(l.role) == TensorRole::Other || !role_is_matrix(role_from_name(l.role))))
        rd.fail(Reader::join(p, "role"), "'" + l.role + "' is not a matrix role");
    l.method = rd.str(j, p, "method", true);
    if (j.contains("method") && j["method"].is_string() && !l.method.empty() && !parse_method(l.method)) {
        std::string names;
        for (Method m : all_methods()) names += (names.empty() ? "" : ", ") + std::string(method_name(m));
        rd.fail(Reader::join(p, "method"), "'" + l.method + "' is not one of " + names);
    }
    l.rank = static_cast<int32_t>(rd.integer(j, p, "rank", 0, 1 << 30, false).value_or(0));
    if (auto b = rd.integer(j, p, "bit_width", 2, 8, true)) {
        if (*b != 2 && *b != 4 && *b != 8)
            rd.fail(Reader::join(p, "bit_width"), std::to_string(*b) + " is not one of 2, 4, 8");
        else
            l.bit_width = static_cast<int>(*b);
    }
    if (const json* a = rd.array(j, p, "base_singular_values", kRknotBaseValues)) {
        for (size_t i = 0; i < a->size(); ++i)
            if (auto v =
                    rd.number_value((*a)[i], Reader::join(p, "base_singular_values") + "[" + std::to_string(i) + "]",
                                    0.0, INFINITY, false))
                l.base_singular_values.push_back(*v);
        for (size_t i = 1; i < l.base_singular_values.size(); ++i)
            if (l.base_singular_values[i] > l.base_singular_values[i - 1]) {
                rd.fail(Reader::join(p, "base_singular_values"), "not in descending order");
                break;
            }
    }
    l.spectral_decay_ratio = rd.number(j, p, "spectral_decay_ratio", 0.0, 1.0, true, true);
    l.num_levels = static_cast<int32_t>(rd.integer(j, p, "num_levels", 0, 64, false).value_or(0));
    if (const json* a = rd.array(j, p, "level_residuals", 64)) {
        for (size_t i = 0; i < a->size(); ++i)
            if (auto v = rd.number_value((*a)[i], Reader::join(p, "level_residuals") + "[" + std::to_string(i) + "]",
                                         0.0, 1.0, false))
                l.level_residuals.push_back(*v);
        if (j.contains("num_levels") && j["num_levels"].is_number_integer() &&
            a->size() != static_cast<size_t>(l.num_levels))
            rd.fail(Reader::join(p, "level_residuals"),
                    std::to_string(a->size()) + " entries, num_levels is " + std::to_string(l.num_levels));
    }
    l.is_self_similar = rd.boolean(j, p, "is_self_similar", true);
    l.self_similarity_confidence = rd.number(j, p, "self_similarity_confidence", 0.0, 1.0, true);
    if (l.is_self_similar && l.self_similarity_confidence &&
        *l.is_self_similar != (*l.self_similarity_confidence >= kSelfSimilarR2))
        rd.fail(Reader::join(p, "is_self_similar"), "must be (self_similarity_confidence >= 0.95)");
    if (l.is_self_similar.has_value() != l.self_similarity_confidence.has_value() && rd.get(j, p, "is_self_similar") &&
        rd.get(j, p, "self_similarity_confidence"))
        rd.fail(Reader::join(p, "is_self_similar"), "must be null exactly when self_similarity_confidence is");
    l.rel_error = rd.number(j, p, "rel_error", 0.0, INFINITY, true);
    l.expected_accuracy_loss = rd.number(j, p, "expected_accuracy_loss", 0.0, INFINITY, true);
}

void read_mask_layer(Reader& rd, const json& j, const std::string& p, RknotMaskLayer& m) {
    if (!rd.object(j, p,
                   {"layer_id", "bitmask_hash", "compressed_size_bytes", "neuron_count", "saturation_threshold",
                    "min_frequency", "scale", "hot_count", "runs"}))
        return;
    m.layer_id = static_cast<int32_t>(rd.integer(j, p, "layer_id", 0, 65535, false).value_or(0));
    m.bitmask_hash = rd.str(j, p, "bitmask_hash");
    const bool hash_shape = m.bitmask_hash.size() == 71 && m.bitmask_hash.rfind("sha256:", 0) == 0 &&
                            m.bitmask_hash.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
    if (j.contains("bitmask_hash") && j["bitmask_hash"].is_string() && !hash_shape)
        rd.fail(Reader::join(p, "bitmask_hash"), "not \"sha256:\" followed by 64 lower-case hex digits");
    const auto csize = rd.integer(j, p, "compressed_size_bytes", 0, INT64_MAX, false);
    const auto count = rd.integer(j, p, "neuron_count", 1, int64_t{1} << 30, false);
    m.neuron_count = count.value_or(0);
    m.compressed_size_bytes = static_cast<uint64_t>(csize.value_or(0));
    m.saturation_threshold = rd.number(j, p, "saturation_threshold", 0.0, INFINITY, false).value_or(0.0);
    m.min_frequency = rd.number(j, p, "min_frequency", 0.0, 1.0, false, false, true).value_or(0.0);
    m.scale = rd.number(j, p, "scale", 0.0, INFINITY, false).value_or(0.0);
    const auto hot = rd.integer(j, p, "hot_count", 0, int64_t{1} << 30, false);
    m.hot_count = hot.value_or(0);
    const json* runs = rd.array(j, p, "runs", kMaxRuns);
    if (!runs) return;
    bool runs_ok = true;
    for (size_t i = 0; i < runs->size(); ++i) {
        auto v =
            rd.integer_value((*runs)[i], Reader::join(p, "runs") + "[" + std::to_string(i) + "]", 0, UINT32_MAX, false);
        if (!v)
            runs_ok = false;
        else
            m.runs.push_back(static_cast<uint32_t>(*v));
    }
    if (!runs_ok || !count) return;
    // consistency: the runs give the mask; hash, hot count and compressed size must be the mask's
    auto mask = rle_decode_mask(m.runs, m.neuron_count, Reader::join(p, "runs"));
    if (!mask) {
        rd.errors.push_back(mask.message());
        return;
    }
    if (hash_shape && bitmask_hash(*mask) != m.bitmask_hash)
        rd.fail(Reader::join(p, "bitmask_hash"), "does not match the mask the runs give (" + bitmask_hash(*mask) + ")");
    int64_t n_hot = 0;
    for (uint8_t h : *mask) n_hot += h;
    if (hot && *hot != n_hot)
        rd.fail(Reader::join(p, "hot_count"),
                std::to_string(*hot) + ", but the runs mark " + std::to_string(n_hot) + " neurons hot");
    if (csize && static_cast<uint64_t>(*csize) != rle_encoded_bytes(m.runs))
        rd.fail(Reader::join(p, "compressed_size_bytes"),
                std::to_string(*csize) + ", but the runs take " + std::to_string(rle_encoded_bytes(m.runs)) + " bytes");
}

void read_eval(Reader& rd, const json& j, const std::string& p, RknotEval& e) {
    if (!rd.object(j, p,
                   {"source", "command", "kld_mean", "kld_mean_se", "kld_p99", "kld_p999", "top1_agreement",
                    "ppl_ratio", "n_tokens"}))
        return;
    e.source = rd.str(j, p, "source");
    e.command = rd.str(j, p, "command");
    e.kld_mean = rd.number(j, p, "kld_mean", 0.0, INFINITY, true);
    e.kld_mean_se = rd.number(j, p, "kld_mean_se", 0.0, INFINITY, true);
    e.kld_p99 = rd.number(j, p, "kld_p99", 0.0, INFINITY, true);
    e.kld_p999 = rd.number(j, p, "kld_p999", 0.0, INFINITY, true);
    e.top1_agreement = rd.number(j, p, "top1_agreement", 0.0, 1.0, true);
    e.ppl_ratio = rd.number(j, p, "ppl_ratio", 0.0, INFINITY, true, true);
    e.n_tokens = rd.integer(j, p, "n_tokens", 0, INT64_MAX, true);
}

Rknot read_document(Reader& rd, const json& j) {
    Rknot r;
    if (!rd.object(j, "",
                   {"model_name", "version", "compression", "folded_waves", "saturation_maps", "quality_metrics",
                    "resonance_tuning", "measured"}))
        return r;
    r.model_name = rd.str(j, "", "model_name", true);
    r.version = rd.str(j, "", "version");
    if (j.contains("version") && j["version"].is_string() && r.version != kRknotVersion)
        rd.fail("version", "'" + r.version + "' is not a version this gkq reads (1.0)");

    if (const json* c = rd.get(j, "", "compression");
        c && rd.object(*c, "compression", {"method", "spectral_ratio", "hierarchical_ratio", "total_compression"})) {
        r.compression.method = rd.str(*c, "compression", "method", true);
        r.compression.spectral_ratio = rd.number(*c, "compression", "spectral_ratio", 0.0, INFINITY, true, true);
        rd.must_be_null(*c, "compression", "hierarchical_ratio", "the knot does not record unfolded sizes");
        r.compression.total_compression = rd.number(*c, "compression", "total_compression", 0.0, INFINITY, true, true);
    }

    if (const json* f = rd.get(j, "", "folded_waves"); f && rd.object(*f, "folded_waves", {"layers"})) {
        if (const json* a = rd.array(*f, "folded_waves", "layers", kMaxLayers)) {
            r.layers.resize(a->size());
            for (size_t i = 0; i < a->size(); ++i)
                read_layer(rd, (*a)[i], "folded_waves.layers[" + std::to_string(i) + "]", r.layers[i]);
        }
    }

    if (const json* s = rd.get(j, "", "saturation_maps"); s && !s->is_null()) {
        const std::string p = "saturation_maps";
        if (rd.object(*s, p, {"version", "compression", "source", "command", "n_tokens", "layers"})) {
            RknotSaturationMaps m;
            m.version = rd.str(*s, p, "version");
            if (s->contains("version") && (*s)["version"].is_string() && m.version != "1.0")
                rd.fail(p + ".version", "'" + m.version + "' is not 1.0");
            m.compression = rd.str(*s, p, "compression");
            if (s->contains("compression") && (*s)["compression"].is_string() && m.compression != "run-length encoded")
                rd.fail(p + ".compression", "'" + m.compression + "' is not \"run-length encoded\"");
            m.source = rd.str(*s, p, "source");
            m.command = rd.str(*s, p, "command");
            m.n_tokens = rd.integer(*s, p, "n_tokens", 1, INT64_MAX, false).value_or(0);
            if (const json* a = rd.array(*s, p, "layers", kMaxLayers)) {
                m.layers.resize(a->size());
                for (size_t i = 0; i < a->size(); ++i)
                    read_mask_layer(rd, (*a)[i], p + ".layers[" + std::to_string(i) + "]", m.layers[i]);
            }
            r.saturation_maps = std::move(m);
        }
    } else if (s && s->is_null()) {
        r.saturation_maps.reset();
    }

    if (const json* m = rd.get(j, "", "measured");
        m && rd.object(*m, "measured",
                       {"knot", "knot_command", "encode_command", "n_params", "file_bytes", "bits_per_weight",
                        "spectrum_source", "eval"})) {
        const std::string p = "measured";
        r.measured.knot = rd.str(*m, p, "knot");
        r.measured.knot_command = rd.str(*m, p, "knot_command");
        r.measured.encode_command = rd.str(*m, p, "encode_command");
        r.measured.n_params = rd.integer(*m, p, "n_params", 0, INT64_MAX, false).value_or(0);
        r.measured.file_bytes = static_cast<uint64_t>(rd.integer(*m, p, "file_bytes", 0, INT64_MAX, false).value_or(0));
        r.measured.bits_per_weight = rd.number(*m, p, "bits_per_weight", 0.0, INFINITY, false).value_or(0.0);
        r.measured.spectrum_source = rd.str(*m, p, "spectrum_source");
        if (m->contains("spectrum_source") && (*m)["spectrum_source"].is_string() &&
            r.measured.spectrum_source != "model" && r.measured.spectrum_source != "knot")
            rd.fail(p + ".spectrum_source", "'" + r.measured.spectrum_source + "' is not \"model\" or \"knot\"");
        if (const json* e = rd.get(*m, p, "eval"); e && !e->is_null()) {
            RknotEval ev;
            read_eval(rd, *e, p + ".eval", ev);
            r.measured.eval = std::move(ev);
        }
    }

    if (const json* q = rd.get(j, "", "quality_metrics");
        q && rd.object(*q, "quality_metrics",
                       {"gnosis_efficiency", "data_quality_score", "learning_efficiency", "resonance_stability",
                        "overall_quality", "recommended_bit_width", "safe_for_aggressive_quantization"})) {
        for (const char* k : kUndefinedQuality)
            rd.must_be_null(*q, "quality_metrics", k, "no definition over measured values; see docs/rknot-format.md");
        r.quality_metrics.overall_quality = rd.number(*q, "quality_metrics", "overall_quality", 0.0, 1.0, true);
        // consistency: overall_quality = exp(-measured.eval.kld_mean), present exactly when the KLD is
        const std::optional<double> kld = r.measured.eval ? r.measured.eval->kld_mean : std::nullopt;
        const double expected = std::exp(-kld.value_or(0.0));
        const json* oq = rd.get(*q, "quality_metrics", "overall_quality");
        if (oq && oq->is_null() && kld)
            rd.fail("quality_metrics.overall_quality", "must be exp(-measured.eval.kld_mean) = " + num_text(expected));
        if (r.quality_metrics.overall_quality) {
            if (!kld)
                rd.fail("quality_metrics.overall_quality", "must be null without measured.eval.kld_mean");
            else if (std::fabs(*r.quality_metrics.overall_quality - expected) > 1e-12)
                rd.fail("quality_metrics.overall_quality",
                        num_text(*r.quality_metrics.overall_quality) +
                            " is not exp(-measured.eval.kld_mean) = " + num_text(expected));
        }
    }

    if (const json* t = rd.get(j, "", "resonance_tuning");
        t && rd.object(*t, "resonance_tuning",
                       {"optimal_learning_rate", "resonance_frequency", "spectral_lambda", "l2_lambda",
                        "expected_cliff_emergence_epoch"})) {
        const std::string p = "resonance_tuning";
        r.resonance_tuning.optimal_learning_rate = rd.number(*t, p, "optimal_learning_rate", 0.0, 1.0, true, true);
        r.resonance_tuning.resonance_frequency = rd.number(*t, p, "resonance_frequency", 0.0, 1.0, true, true);
        r.resonance_tuning.spectral_lambda = rd.number(*t, p, "spectral_lambda", 0.0, 100.0, true);
        r.resonance_tuning.l2_lambda = rd.number(*t, p, "l2_lambda", 0.0, 100.0, true);
        r.resonance_tuning.expected_cliff_emergence_epoch =
            rd.integer(*t, p, "expected_cliff_emergence_epoch", 0, 1000000, true);
    }
    return r;
}

json to_json_value(const Rknot& r) {
    json layers = json::array();
    for (const RknotLayer& l : r.layers)
        layers.push_back({{"layer_id", l.layer_id},
                          {"tensor", l.tensor},
                          {"role", l.role},
                          {"method", l.method},
                          {"rank", l.rank},
                          {"bit_width", opt(l.bit_width)},
                          {"base_singular_values", l.base_singular_values},
                          {"spectral_decay_ratio", opt(l.spectral_decay_ratio)},
                          {"num_levels", l.num_levels},
                          {"level_residuals", l.level_residuals},
                          {"is_self_similar", opt(l.is_self_similar)},
                          {"self_similarity_confidence", opt(l.self_similarity_confidence)},
                          {"rel_error", opt(l.rel_error)},
                          {"expected_accuracy_loss", opt(l.expected_accuracy_loss)}});
    json sat;
    if (r.saturation_maps) {
        const RknotSaturationMaps& m = *r.saturation_maps;
        json ml = json::array();
        for (const RknotMaskLayer& x : m.layers)
            ml.push_back({{"layer_id", x.layer_id},
                          {"bitmask_hash", x.bitmask_hash},
                          {"compressed_size_bytes", x.compressed_size_bytes},
                          {"neuron_count", x.neuron_count},
                          {"saturation_threshold", x.saturation_threshold},
                          {"min_frequency", x.min_frequency},
                          {"scale", x.scale},
                          {"hot_count", x.hot_count},
                          {"runs", x.runs}});
        sat = {{"version", m.version}, {"compression", m.compression}, {"source", m.source},
               {"command", m.command}, {"n_tokens", m.n_tokens},       {"layers", std::move(ml)}};
    }
    json quality = json::object();
    for (const char* k : kUndefinedQuality) quality[k] = nullptr;
    quality["overall_quality"] = opt(r.quality_metrics.overall_quality);
    json eval;
    if (r.measured.eval) {
        const RknotEval& e = *r.measured.eval;
        eval = {{"source", e.source},
                {"command", e.command},
                {"kld_mean", opt(e.kld_mean)},
                {"kld_mean_se", opt(e.kld_mean_se)},
                {"kld_p99", opt(e.kld_p99)},
                {"kld_p999", opt(e.kld_p999)},
                {"top1_agreement", opt(e.top1_agreement)},
                {"ppl_ratio", opt(e.ppl_ratio)},
                {"n_tokens", opt(e.n_tokens)}};
    }
    const RknotResonanceTuning& t = r.resonance_tuning;
    json j = json::object();
    j["model_name"] = r.model_name;
    j["version"] = r.version;
    j["compression"] = {{"method", r.compression.method},
                        {"spectral_ratio", opt(r.compression.spectral_ratio)},
                        {"hierarchical_ratio", opt(r.compression.hierarchical_ratio)},
                        {"total_compression", opt(r.compression.total_compression)}};
    j["folded_waves"] = {{"layers", std::move(layers)}};
    j["saturation_maps"] = std::move(sat);
    j["quality_metrics"] = std::move(quality);
    j["resonance_tuning"] = {{"optimal_learning_rate", opt(t.optimal_learning_rate)},
                             {"resonance_frequency", opt(t.resonance_frequency)},
                             {"spectral_lambda", opt(t.spectral_lambda)},
                             {"l2_lambda", opt(t.l2_lambda)},
                             {"expected_cliff_emergence_epoch", opt(t.expected_cliff_emergence_epoch)}};
    j["measured"] = {{"knot", r.measured.knot},
                     {"knot_command", r.measured.knot_command},
                     {"encode_command", r.measured.encode_command},
                     {"n_params", r.measured.n_params},
                     {"file_bytes", r.measured.file_bytes},
                     {"bits_per_weight", r.measured.bits_per_weight},
                     {"spectrum_source", r.measured.spectrum_source},
                     {"eval", std::move(eval)}};
    return j;
}

Result<Rknot> from_json_value(const json& j, const std::string& label) {
    Reader rd;
    Rknot r = read_document(rd, j);
    if (rd.errors.empty()) return r;
    std::string msg;
    for (const std::string& e : rd.errors) msg += (msg.empty() ? "" : "\n") + label + ": " + e;
    return error(StatusCode::InvalidArgument, msg);
}

}  // namespace

std::string rknot_to_json(const Rknot& r, int indent) {
    try {
        return to_json_value(r).dump(indent, ' ', false, json::error_handler_t::replace);
    } catch (const std::exception&) {
        return {};  // dump with `replace` does not throw on text; only allocation could
    }
}

Result<Rknot> rknot_from_json(std::string_view text, const std::string& label) {
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        return error(StatusCode::InvalidArgument,
                     label + ": not valid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
    } catch (const std::exception& e) {
        return error(StatusCode::InvalidArgument, label + ": not valid JSON: " + e.what());
    }
    return from_json_value(j, label);
}

Status validate_rknot(const Rknot& r, const std::string& label) {
    auto back = from_json_value(to_json_value(r), label);
    return back ? Status::ok() : back.status();
}

// ---- editing -------------------------------------------------------------------------------------------------------

namespace {

// Applies one PATH=VALUE to the JSON document (no validation yet).
Status assign(json& doc, std::string_view assignment) {
    const size_t eq = assignment.find('=');
    if (eq == std::string_view::npos || eq == 0)
        return error(StatusCode::InvalidArgument, "'" + std::string(assignment) + "' is not PATH=VALUE");
    const std::string path(assignment.substr(0, eq));
    const std::string value_text(assignment.substr(eq + 1));
    json value = json::parse(value_text, nullptr, false);
    if (value.is_discarded()) value = value_text;  // a bare word: a string

    json* node = &doc;
    std::string walked;
    size_t i = 0;
    while (i < path.size()) {
        if (path[i] == '[') {
            const size_t close = path.find(']', i);
            if (close == std::string::npos) return error(StatusCode::InvalidArgument, path + ": missing ']'");
            const std::string digits = path.substr(i + 1, close - i - 1);
            if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9)
                return error(StatusCode::InvalidArgument, path + ": '[" + digits + "]' is not an array index");
            const size_t idx = std::stoul(digits);
            if (!node->is_array())
                return error(StatusCode::InvalidArgument, (walked.empty() ? "(root)" : walked) + ": not an array");
            walked += "[" + digits + "]";
            if (idx >= node->size())
                return error(StatusCode::InvalidArgument,
                             walked + ": index out of range (" + std::to_string(node->size()) + " entries)");
            node = &(*node)[idx];
            i = close + 1;
            if (i < path.size() && path[i] == '.') ++i;
            continue;
        }
        size_t end = path.find_first_of(".[", i);
        if (end == std::string::npos) end = path.size();
        const std::string key = path.substr(i, end - i);
        if (key.empty()) return error(StatusCode::InvalidArgument, path + ": empty field name");
        walked = walked.empty() ? key : walked + "." + key;
        if (!node->is_object() || !node->contains(key))
            return error(StatusCode::InvalidArgument, walked + ": no such field");
        node = &(*node)[key];
        i = end;
        if (i < path.size() && path[i] == '.') ++i;
    }
    if (node == &doc) return error(StatusCode::InvalidArgument, "empty path");
    *node = value;
    return Status::ok();
}

}  // namespace

Status rknot_set(Rknot& r, const std::vector<std::string>& assignments, const std::string& label) {
    json doc = to_json_value(r);
    for (const std::string& a : assignments)
        if (Status s = assign(doc, a); !s) return s.with_context(label);
    auto edited = from_json_value(doc, label);
    if (!edited) return edited.status();
    r = std::move(edited).value();
    return Status::ok();
}

}  // namespace gkq
