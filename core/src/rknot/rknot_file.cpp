// Rknot files (gzip of the JSON, atomic write; checked inflate), encoding an rknot from measurements (knot,
// source model spectra, saturation profile, evaluation report) and turning one into per-layer codec overrides.
#include "gkq/rknot.h"

#include "gkq/atomic_file.h"
#include "gkq/convert.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/quantize_fields.h"
#include "gkq/saturation.h"
#include "gkq/spectrum.h"
#include "gkq/spectrum_cache.h"

#include <zlib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace gkq {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxRknotFileBytes = uint64_t{256} << 20;
// An rknot is small JSON: a few hundred bytes per matrix (8 singular values, method, rank, metrics) and a run-length
// mask per block; the rknot of a 70B model (560 matrices, 80 masks of 28,672 neurons) is about 10 MB. Inflation
// stops at 64 MiB, several times any sane rknot, so a gzip bomb costs no more than that.
constexpr uint64_t kMaxInflatedBytes = uint64_t{64} << 20;

Result<std::string> read_whole(const std::string& path, uint64_t limit, const char* what) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return error(StatusCode::NotFound, path + ": cannot open " + what + ": " + ec.message());
    if (size > limit)
        return error(StatusCode::Unsupported,
                     path + ": " + what + " larger than " + std::to_string(limit >> 20) + " MiB");
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(StatusCode::IoError, path + ": cannot open " + what);
    std::string bytes(size, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (static_cast<uint64_t>(in.gcount()) != size) return error(StatusCode::IoError, path + ": short read");
    return bytes;
}

Result<std::string> gzip(const std::string& text, const std::string& label) {
    z_stream zs{};
    if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return error(StatusCode::Internal, label + ": deflateInit2 failed");
    std::string out(deflateBound(&zs, text.size()), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) return error(StatusCode::Internal, label + ": deflate failed");
    return out;
}

Result<std::string> gunzip(const std::string& bytes, const std::string& path) {
    if (bytes.size() < 2 || static_cast<uint8_t>(bytes[0]) != 0x1f || static_cast<uint8_t>(bytes[1]) != 0x8b)
        return error(StatusCode::Corrupt, path + ": not a gzip file (bad magic at offset 0)");
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) return error(StatusCode::Internal, path + ": inflateInit2 failed");
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs.avail_in = static_cast<uInt>(bytes.size());
    std::string out;
    char buf[65536];
    int rc = Z_OK;
    bool seen_start = false;
    while (true) {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        rc = inflate(&zs, Z_NO_FLUSH);
        const size_t got = sizeof buf - zs.avail_out;
        if (out.size() + got > kMaxInflatedBytes) {
            inflateEnd(&zs);
            return error(StatusCode::Unsupported, path + ": inflates to more than " +
                                                      std::to_string(kMaxInflatedBytes >> 20) +
                                                      " MiB, the limit for an rknot (a sane one is under 10 MB): "
                                                      "not an rknot, or a gzip bomb");
        }
        const size_t before = out.size();
        out.append(buf, got);
        // JSON text starts with an object: anything else is not an rknot, however long it inflates.
        if (!seen_start) {
            const size_t first = out.find_first_not_of(" \t\r\n", before);
            if (first != std::string::npos) {
                seen_start = true;
                if (out[first] != '{') {
                    inflateEnd(&zs);
                    return error(StatusCode::Corrupt, path +
                                                          ": not an rknot (the gzip data inflates to something "
                                                          "other than a JSON object at byte " +
                                                          std::to_string(first) + ")");
                }
            }
        }
        if (rc == Z_STREAM_END) break;
        if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0)) {
            const uint64_t at = zs.total_in;
            inflateEnd(&zs);
            return error(StatusCode::Corrupt,
                         path + ": truncated gzip stream (ends at byte " + std::to_string(at) + ")");
        }
        if (rc != Z_OK) {
            const std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
            const uint64_t at = zs.total_in;
            inflateEnd(&zs);
            return error(StatusCode::Corrupt,
                         path + ": corrupt gzip stream near byte " + std::to_string(at) + ": " + msg);
        }
    }
    const uint64_t used = zs.total_in;
    inflateEnd(&zs);
    if (used != bytes.size())
        return error(StatusCode::Corrupt, path + ": " + std::to_string(bytes.size() - used) +
                                              " trailing bytes after the gzip stream at byte " + std::to_string(used));
    return out;
}

}  // namespace

Status write_rknot(const std::string& path, const Rknot& r) {
    if (Status s = validate_rknot(r, path); !s) return s;
    auto gz = gzip(rknot_to_json(r) + "\n", path);
    if (!gz) return gz.status();
    return write_file_atomic(path, *gz);
}

Result<Rknot> read_rknot(const std::string& path) {
    auto bytes = read_whole(path, kMaxRknotFileBytes, "rknot");
    if (!bytes) return bytes.status();
    auto text = gunzip(*bytes, path);
    if (!text) return text.status();
    return rknot_from_json(*text, path);
}

// ---- spectra ----------------------------------------------------------------------------------------------------

std::optional<DecayFit> fit_spectral_decay(const double* s, int64_t n) {
    std::vector<double> y;
    for (int64_t i = 0; i < n && s[i] > 0.0; ++i) y.push_back(std::log(s[i]));
    const auto m = static_cast<int64_t>(y.size());
    if (m < 3) return std::nullopt;
    double mx = 0.0, my = 0.0;
    for (int64_t i = 0; i < m; ++i) {
        mx += static_cast<double>(i);
        my += y[static_cast<size_t>(i)];
    }
    mx /= static_cast<double>(m);
    my /= static_cast<double>(m);
    double sxx = 0.0, sxy = 0.0, syy = 0.0;
    for (int64_t i = 0; i < m; ++i) {
        const double dx = static_cast<double>(i) - mx;
        const double dy = y[static_cast<size_t>(i)] - my;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    if (syy <= 0.0) return std::nullopt;
    const double b = sxy / sxx;
    // least squares with an intercept: SS_res = SS_tot - b * S_xy, so R^2 = b * S_xy / SS_tot in [0, 1]
    DecayFit f;
    f.ratio = std::exp(b);
    f.r2 = std::clamp(b * sxy / syy, 0.0, 1.0);
    return f;
}

namespace {

void fill_spectral_fields(RknotLayer& l, const std::vector<double>& s) {
    const auto n = static_cast<int64_t>(s.size());
    for (int64_t i = 0; i < std::min<int64_t>(n, kRknotBaseValues); ++i)
        l.base_singular_values.push_back(s[static_cast<size_t>(i)]);
    if (auto fit = fit_spectral_decay(s.data(), n); fit && fit->ratio <= 1.0) {
        l.spectral_decay_ratio = fit->ratio;
        l.self_similarity_confidence = fit->r2;
        l.is_self_similar = fit->r2 >= kSelfSimilarR2;
    }
    l.num_levels = 0;
    for (int64_t k = 1; k <= n && l.num_levels < 64; k *= 2) {
        const double e = relative_error_at_rank(s.data(), n, k);
        l.level_residuals.push_back(std::isfinite(e) ? std::clamp(e, 0.0, 1.0) : 0.0);
        l.num_levels++;
    }
}

double rel_frobenius(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        num += d * d;
        den += static_cast<double>(a[i]) * a[i];
    }
    return den > 0.0 ? std::sqrt(num / den) : (num > 0.0 ? INFINITY : 0.0);
}

// The number at the first of `paths` (dotted, from the root) that holds one.
std::optional<double> find_number(const json& root, std::initializer_list<const char*> paths) {
    for (const char* path : paths) {
        const json* j = &root;
        std::string p = path;
        size_t start = 0;
        while (j != nullptr && start <= p.size()) {
            const size_t dot = std::min(p.find('.', start), p.size());
            const std::string key = p.substr(start, dot - start);
            auto it = j->is_object() ? j->find(key) : j->end();
            j = (j->is_object() && it != j->end()) ? &*it : nullptr;
            start = dot + 1;
        }
        if (j != nullptr && j->is_number()) return j->get<double>();
    }
    return std::nullopt;
}

std::string string_at(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A comparing `gkq eval --json` report: kld {mean, se, p99, p99_9}, same_top {fraction}, ppl_ratio {value},
// tokens, base, candidate, text, ctx, stride (app/cli/cmd_eval.cpp).
Result<RknotEval> read_eval_report(const std::string& path) {
    auto text = read_whole(path, uint64_t{64} << 20, "eval report");
    if (!text) return text.status();
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return error(StatusCode::InvalidArgument, path + ": not a JSON object");
    RknotEval e;
    e.source = path;
    e.kld_mean = find_number(j, {"kld.mean"});
    if (!e.kld_mean)
        return error(StatusCode::InvalidArgument, path + ": no kld.mean: not a comparing `gkq eval --json` report");
    e.kld_mean_se = find_number(j, {"kld.se"});
    e.kld_p99 = find_number(j, {"kld.p99"});
    e.kld_p999 = find_number(j, {"kld.p99_9"});
    e.top1_agreement = find_number(j, {"same_top.fraction"});
    e.ppl_ratio = find_number(j, {"ppl_ratio.value"});
    if (auto n = find_number(j, {"tokens"})) e.n_tokens = static_cast<int64_t>(*n);
    e.command = string_at(j, "command");
    if (e.command.empty() && !string_at(j, "base").empty()) {
        e.command = "gkq eval --base " + string_at(j, "base") + " --candidate " + string_at(j, "candidate") +
                    " --text " + string_at(j, "text");
        if (auto c = find_number(j, {"ctx"})) e.command += " --ctx " + std::to_string(static_cast<int64_t>(*c));
        if (auto s = find_number(j, {"stride"})) e.command += " --stride " + std::to_string(static_cast<int64_t>(*s));
        e.command += " --json";
    }
    return e;
}

std::string stem_of(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    for (const char* ext : {".knot.gz", ".knot", ".gz"})
        if (name.size() > std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::string::npos, ext) == 0)
            return name.substr(0, name.size() - std::strlen(ext));
    return name;
}

}  // namespace

Result<Rknot> encode_rknot(const RknotEncodeOptions& o, const ProgressFn& progress) {
    auto knot = KnotFile::open(o.knot_path);
    if (!knot) return knot.status();
    if (knot->header().shard_count != 1)
        return error(StatusCode::InvalidArgument, o.knot_path + ": a shard; merge the shards first (gkq merge)");
    std::optional<ModelFile> model;
    if (!o.model_path.empty()) {
        auto m = ModelFile::open(o.model_path);
        if (!m) return m.status();
        model.emplace(std::move(m).value());
    }

    // The model's spectra as `gkq analyze` and the workbench cached them beside it (the same exact SVD of the same
    // float32 values), so an 8 B model's matrices are not decomposed a second time; a tensor the cache lacks, or
    // holds with another shape, is computed here.
    std::map<std::string, const TensorSpectrum*> cached;
    std::optional<std::vector<TensorSpectrum>> cache_spectra;
    if (model) {
        if (auto key = spectrum_cache_key(*model, model->path(), AnalyzeOptions{})) {
            SpectrumCacheLookup found = read_spectrum_cache(model->path(), *key);
            if (found.spectra) cache_spectra = std::move(found.spectra);
        }
        if (cache_spectra)
            for (const TensorSpectrum& t : *cache_spectra) cached.emplace(t.name, &t);
    }

    Rknot r;
    r.model_name = o.model_name.empty() ? stem_of(o.knot_path) : o.model_name;
    r.compression.method = knot->header().command;
    r.measured.knot = o.knot_path;
    r.measured.knot_command = knot->header().command;
    r.measured.encode_command = o.command;
    r.measured.file_bytes = knot->file_bytes();
    r.measured.spectrum_source = model ? "model" : "knot";

    double dense_params = 0.0, factor_params = 0.0;
    const std::vector<KnotEntry>& entries = knot->entries();
    for (size_t i = 0; i < entries.size(); ++i) {
        const KnotEntry& e = entries[i];
        r.measured.n_params += e.n_elements();
        if (e.shape.size() != 2 || !role_is_matrix(e.role)) continue;
        const int64_t rows = e.shape[0], cols = e.shape[1];
        RknotLayer l;
        l.layer_id = e.layer;
        l.tensor = e.name;
        l.role = std::string(role_name(e.role));
        l.method = std::string(method_name(e.method));
        l.rank = e.rank;
        if (e.method == Method::LowRank || e.method == Method::LowRankResidual) {
            l.bit_width = e.factor_bits;
            dense_params += static_cast<double>(rows) * static_cast<double>(cols);
            factor_params += static_cast<double>(e.rank) * static_cast<double>(rows + cols + 1);
        }
        auto encoded = knot->read(i);
        if (!encoded) return encoded.status();
        auto decoded = decode_tensor(*encoded);
        if (!decoded) return decoded.status();
        std::vector<float> original;
        if (model) {
            const Tensor* t = model->find(e.name);
            if (t == nullptr || t->shape != e.shape)
                return error(StatusCode::InvalidArgument,
                             o.model_path + ": no tensor " + e.name + " of the knot's shape");
            auto f = tensor_to_f32(*t);
            if (!f) return f.status();
            original = std::move(f).value();
            l.rel_error = rel_frobenius(original, *decoded);
        }
        std::vector<double> s;
        const auto hit = cached.find(e.name);
        if (hit != cached.end() && hit->second->rows == rows && hit->second->cols == cols &&
            static_cast<int64_t>(hit->second->singular_values.size()) == std::min(rows, cols)) {
            s = hit->second->singular_values;
        } else {
            const std::vector<float>& w = model ? original : *decoded;
            if (Status st = singular_values(w.data(), rows, cols, s); !st) return st.with_context(e.name);
        }
        fill_spectral_fields(l, s);
        r.layers.push_back(std::move(l));
        if (!report_progress(progress, static_cast<double>(i + 1) / static_cast<double>(entries.size()), e.name))
            return error(StatusCode::Cancelled, "rknot encode: cancelled");
    }
    r.measured.bits_per_weight = r.measured.n_params > 0 ? 8.0 * static_cast<double>(r.measured.file_bytes) /
                                                               static_cast<double>(r.measured.n_params)
                                                         : 0.0;
    if (factor_params > 0.0) r.compression.spectral_ratio = dense_params / factor_params;
    if (r.measured.file_bytes > 0 && r.measured.n_params > 0)
        r.compression.total_compression =
            4.0 * static_cast<double>(r.measured.n_params) / static_cast<double>(r.measured.file_bytes);

    if (!o.profile_path.empty()) {
        auto p = read_saturation_profile(o.profile_path);
        if (!p) return p.status();
        if (static_cast<int64_t>(p->layers.size()) != knot->header().config.n_layers)
            return error(StatusCode::InvalidArgument,
                         o.profile_path + ": masks for " + std::to_string(p->layers.size()) +
                             " blocks, the knot's model has " + std::to_string(knot->header().config.n_layers));
        RknotSaturationMaps m;
        m.source = o.profile_path;
        m.command = p->command;
        m.n_tokens = p->n_tokens;
        for (const LayerSaturation& ls : p->layers) {
            RknotMaskLayer ml;
            ml.layer_id = ls.layer_id;
            ml.runs = rle_encode_mask(ls.hot);
            ml.bitmask_hash = bitmask_hash(ls.hot);
            ml.compressed_size_bytes = rle_encoded_bytes(ml.runs);
            ml.neuron_count = ls.neuron_count;
            ml.saturation_threshold = ls.saturation_threshold;
            ml.min_frequency = ls.min_frequency;
            ml.scale = ls.scale;
            ml.hot_count = ls.hot_count();
            m.layers.push_back(std::move(ml));
        }
        r.saturation_maps = std::move(m);
    }
    if (!o.eval_path.empty()) {
        auto e = read_eval_report(o.eval_path);
        if (!e) return e.status();
        r.measured.eval = std::move(e).value();
        r.quality_metrics.overall_quality = std::exp(-*r.measured.eval->kld_mean);
    }
    if (Status s = validate_rknot(r, o.knot_path); !s) return s;
    return r;
}

Result<std::vector<LayerOverride>> rknot_layer_overrides(const Rknot& r, const std::string& label) {
    std::vector<LayerOverride> out;
    for (size_t i = 0; i < r.layers.size(); ++i) {
        const RknotLayer& l = r.layers[i];
        const std::string where = label + ": folded_waves.layers[" + std::to_string(i) + "]";
        LayerOverride o;
        o.layer = l.layer_id;
        o.role = role_from_name(l.role);
        // The layer's fields as the override table's rows "method", "rank" and "bits" read them.
        auto set = [&](std::string_view flag, const std::string& json_field, const std::string& text) {
            Status s = set_override(*find_override_field(flag), o.params, text);
            return s ? s : error(StatusCode::InvalidArgument, where + "." + json_field + ": " + s.message());
        };
        if (Status s = set("method", "method", l.method); !s) return s;
        const bool low_rank = *o.params.method == Method::LowRank || *o.params.method == Method::LowRankResidual;
        if (low_rank && l.rank > 0)
            if (Status s = set("rank", "rank", std::to_string(l.rank)); !s) return s;
        if (low_rank && l.bit_width)
            if (Status s = set("bits", "bit_width", std::to_string(*l.bit_width)); !s) return s;
        out.push_back(std::move(o));
    }
    return out;
}

Status check_rknot_model(const Rknot& r, const Weights& model, const std::string& label) {
    const std::string made_for = "the rknot was made for '" + r.model_name + "'";
    for (size_t i = 0; i < r.layers.size(); ++i) {
        const RknotLayer& l = r.layers[i];
        const std::string where = label + ": folded_waves.layers[" + std::to_string(i) + "]";
        const int64_t index = model.index_of(l.tensor);
        if (index < 0)
            return error(StatusCode::InvalidArgument, where + ": " + model.label() + " has no tensor '" + l.tensor +
                                                          "' (" + made_for + "; --force applies it anyway)");
        const TensorInfo* t = &model.tensor_info(static_cast<size_t>(index));
        if (std::string(role_name(t->role)) != l.role || t->layer != l.layer_id)
            return error(StatusCode::InvalidArgument,
                         where + ": tensor '" + l.tensor + "' is " + std::string(role_name(t->role)) + " of layer " +
                             std::to_string(t->layer) + " in " + model.label() + ", " + l.role + " of layer " +
                             std::to_string(l.layer_id) + " in the rknot (" + made_for +
                             "; --force applies it anyway)");
    }
    if (r.measured.n_params > 0 && r.measured.n_params != model.n_params())
        return error(StatusCode::InvalidArgument, label + ": measured.n_params " + std::to_string(r.measured.n_params) +
                                                      " but " + model.label() + " has " +
                                                      std::to_string(model.n_params()) + " parameters (" + made_for +
                                                      "; --force applies it anyway)");
    return Status::ok();
}

}  // namespace gkq
