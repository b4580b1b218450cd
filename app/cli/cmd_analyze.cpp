// gkq analyze MODEL [--topk K] [--full] [--json|--csv] [-o FILE]: the singular-value spectrum of every 2-D weight,
// with what each rank would cost (exact Eckart-Young errors) and WeightWatcher-style heavy-tail metrics. Spectra are
// read from and written to the spectra cache (gkq/spectrum_cache.h) unless --no-cache.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/atomic_file.h"
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/imatrix.h"
#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/spectrum.h"
#include "gkq/spectrum_cache.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace gkq::cli {

namespace {

constexpr int64_t kErrorRanks[] = {1, 3, 8, 32, 128};

std::string fmt(const char* f, double v) {
    if (!std::isfinite(v)) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string rank_text(int64_t r, int64_t known) {
    return r >= 0 ? std::to_string(r) : ">" + std::to_string(known);
}

// The alpha column: the number, or a short code for why there is none (the full reason is in --json / --csv).
std::string alpha_text(const PowerLawFit& f) {
    if (f.reliable) return fmt("%.2f", f.alpha);
    switch (f.problem) {
        case FitProblem::TooFewEigenvalues: return "n<50";
        case FitProblem::AlphaTooLarge: return ">8";
        case FitProblem::PartialSpectrum: return "top-k";
        default: return "no fit";
    }
}

// Singular values the metrics came from (full spectrum, else the randomized top-k).
const std::vector<double>& values_of(const TensorSpectrum& t) {
    return t.singular_values.empty() ? t.top_k_values : t.singular_values;
}

// Relative error at rank k, or NaN when k does not fit (k >= min(rows, cols)) or is beyond the known values.
double error_at(const TensorSpectrum& t, int64_t k) {
    const int64_t n = std::min(t.rows, t.cols);
    const auto& s = values_of(t);
    if (k >= n || s.empty()) return NAN;
    if (!t.metrics.complete) return relative_error_at_rank(s.data(), int64_t(s.size()), k, t.frobenius_sq);
    return relative_error_at_rank(s.data(), int64_t(s.size()), k);
}

struct RoleSummary {
    int n = 0;
    double sum_stable = 0.0;
    double sum_rank99 = 0.0;
    int n_rank99 = 0;  // matrices whose rank@99 is known (a top-k spectrum may not reach 99 %)
};

std::map<TensorRole, RoleSummary> summarize(const std::vector<TensorSpectrum>& r) {
    std::map<TensorRole, RoleSummary> m;
    for (const TensorSpectrum& t : r) {
        if (!t.skipped.empty()) continue;
        RoleSummary& s = m[t.role];
        ++s.n;
        s.sum_stable += t.metrics.stable_rank;
        if (t.metrics.rank_99 >= 0) {
            s.sum_rank99 += double(t.metrics.rank_99);
            ++s.n_rank99;
        }
    }
    return m;
}

std::string method_text(const AnalyzeOptions& o) {
    std::string s;
    if (o.full) s = "exact full spectrum (Gram matrix in double + dsyevd)";
    if (o.top_k > 0) {
        if (!s.empty()) s += "; ";
        s += "randomized top-" + std::to_string(o.top_k) + " (oversampling " +
             std::to_string(o.randomized.oversampling) + ", " + std::to_string(o.randomized.n_power_iterations) +
             " power iterations, seed " + std::to_string(o.randomized.seed) + ")";
        if (o.full) s += ", compared with the exact values";
    }
    return s;
}

// --gram: the spectrum of W L per matrix that has a Gram matrix, by tensor name.
using Whitened = std::map<std::string, WhitenedSpectrum>;

std::string whitened_table(const std::vector<TensorSpectrum>& r, const Whitened& wh, const std::string& gram_path) {
    std::string out;
    char line[2048];
    size_t name_w = 4;
    for (const auto& t : r) name_w = std::max(name_w, t.name.size());
    const int nw = int(name_w);
    out += "\nas the data sees it (" + gram_path +
           "): the spectrum of W L, L the Cholesky factor of the inputs' Gram matrix X^T X;\n"
           "its energy is the layer's output energy on the calibration text, so oerr@k is the best rank-k "
           "approximation's relative output error\n";
    std::snprintf(line, sizeof line, "%-*s  %8s %8s  %5s %5s %6s  %5s %5s %6s %8s %8s %8s %8s %8s  %s\n", nw, "name",
                  "st.rank", "W L st.", "r@90", "r@99", "r@99.9", "WL@90", "WL@99", "WL@99.9", "oerr@1", "oerr@3",
                  "oerr@8", "oerr@32", "oerr@128", "shift");
    out += line;
    for (const TensorSpectrum& t : r) {
        const auto it = wh.find(t.name);
        if (it == wh.end() || !t.skipped.empty()) continue;
        const SpectrumMetrics& x = t.metrics;
        const SpectrumMetrics& y = it->second.metrics;
        const std::vector<double>& s = it->second.singular_values;
        std::snprintf(line, sizeof line, "%-*s  %8s %8s  %5s %5s %6s  %5s %5s %6s", nw, t.name.c_str(),
                      fmt("%.2f", x.stable_rank).c_str(), fmt("%.2f", y.stable_rank).c_str(),
                      rank_text(x.rank_90, x.n_values).c_str(), rank_text(x.rank_99, x.n_values).c_str(),
                      rank_text(x.rank_999, x.n_values).c_str(), rank_text(y.rank_90, y.n_values).c_str(),
                      rank_text(y.rank_99, y.n_values).c_str(), rank_text(y.rank_999, y.n_values).c_str());
        out += line;
        for (int64_t k : kErrorRanks) {
            std::snprintf(line, sizeof line, " %8s",
                          fmt("%.4f", relative_error_at_rank(s.data(), int64_t(s.size()), k)).c_str());
            out += line;
        }
        out += "  " + fmt("%.3g", it->second.shift) + "\n";
    }
    return out;
}

std::string table(const ModelFile& m, const AnalyzeOptions& o, const std::vector<TensorSpectrum>& r, double seconds,
                  const std::string& cache_hit) {
    std::string out;
    char line[2048];  // one row; a longer tensor name is cut, never overflowed
    size_t name_w = 4;
    for (const auto& t : r) name_w = std::max(name_w, t.name.size());
    const int nw = int(name_w);
    std::snprintf(line, sizeof line, "model    %s (%s)\nmethod   %s\ntime     %.2f s for %zu matrices%s\n\n",
                  m.path().c_str(), m.format_detail().c_str(), method_text(o).c_str(), seconds, r.size(),
                  cache_hit.empty() ? "" : (", read from the spectra cache " + cache_hit).c_str());
    out += line;
    std::snprintf(line, sizeof line, "%-*s  %-10s %5s  %-12s %8s %8s %5s %5s %6s %7s %6s %9s %7s %7s %7s %7s %7s", nw,
                  "name", "role", "layer", "shape", "st.rank", "eff.rank", "r@90", "r@99", "r@99.9", "s1/s2", "alpha",
                  "||W||_2", "err@1", "err@3", "err@8", "err@32", "err@128");
    out += line;
    if (o.full && o.top_k > 0) out += "  topk.err";
    out += "\n";
    for (const TensorSpectrum& t : r) {
        const std::string layer = t.layer >= 0 ? std::to_string(t.layer) : "-";
        const std::string shape = std::to_string(t.rows) + " x " + std::to_string(t.cols);
        if (!t.skipped.empty()) {
            std::snprintf(line, sizeof line, "%-*s  %-10s %5s  %-12s ", nw, t.name.c_str(),
                          std::string(role_name(t.role)).c_str(), layer.c_str(), shape.c_str());
            out += line + ("skipped: " + t.skipped) + "\n";
            continue;
        }
        const SpectrumMetrics& x = t.metrics;
        const int64_t known = x.n_values;
        std::snprintf(line, sizeof line, "%-*s  %-10s %5s  %-12s %8s %8s %5s %5s %6s %7s %6s %9s", nw, t.name.c_str(),
                      std::string(role_name(t.role)).c_str(), layer.c_str(), shape.c_str(),
                      fmt("%.2f", x.stable_rank).c_str(), fmt("%.1f", x.effective_rank).c_str(),
                      rank_text(x.rank_90, known).c_str(), rank_text(x.rank_99, known).c_str(),
                      rank_text(x.rank_999, known).c_str(), fmt("%.3f", x.s1_over_s2).c_str(),
                      alpha_text(t.heavy_tail.power_law).c_str(), fmt("%.4g", x.s1).c_str());
        out += line;
        for (int64_t k : kErrorRanks) {
            std::snprintf(line, sizeof line, " %7s", fmt("%.4f", error_at(t, k)).c_str());
            out += line;
        }
        if (o.full && o.top_k > 0) out += "  " + fmt("%.2e", t.top_k_max_rel_error);
        out += "\n";
    }
    out += "\nper role (mean over its matrices)\n";
    for (const auto& [role, s] : summarize(r)) {
        std::snprintf(line, sizeof line, "%-11s %3d matrices  mean stable rank %8.2f  mean rank@99 %s\n",
                      std::string(role_name(role)).c_str(), s.n, s.sum_stable / s.n,
                      s.n_rank99 ? fmt("%.1f", s.sum_rank99 / s.n_rank99).c_str() : "- (beyond the top-k values)");
        out += line;
    }
    out +=
        "\nerr@k: exact relative Frobenius error of the best rank-k approximation, sqrt(sum_{i>k} s_i^2 / sum s_i^2)\n"
        "       (\"-\" where k >= min(rows, cols)); r@p: smallest rank keeping p % of the energy sum s_i^2;\n"
        "alpha: power-law exponent of the eigenvalues of W^T W (n<50: too few eigenvalues; >8: no heavy tail;\n"
        "       top-k: needs the full spectrum); reasons in full with --json or --csv.\n";
    return out;
}

nlohmann::ordered_json number(double v) {
    return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json whitened_json(const WhitenedSpectrum& w) {
    const SpectrumMetrics& y = w.metrics;
    nlohmann::ordered_json err = nlohmann::ordered_json::object();
    for (int64_t k : kErrorRanks) {
        const double e = relative_error_at_rank(w.singular_values.data(), int64_t(w.singular_values.size()), k);
        if (std::isfinite(e)) err[std::to_string(k)] = e;
    }
    return {{"what", "singular values of W L, L the Cholesky factor of the inputs' Gram matrix (gkq analyze --gram)"},
            {"gram_shift", w.shift},
            {"stable_rank", y.stable_rank},
            {"effective_rank", number(y.effective_rank)},
            {"rank_90", y.rank_90},
            {"rank_99", y.rank_99},
            {"rank_999", y.rank_999},
            {"relative_output_error_at_rank", std::move(err)},
            {"singular_values", w.singular_values}};
}

nlohmann::ordered_json tensor_json(const TensorSpectrum& t) {
    nlohmann::ordered_json j = {
        {"name", t.name}, {"role", std::string(role_name(t.role))}, {"layer", t.layer}, {"shape", {t.rows, t.cols}}};
    if (!t.skipped.empty()) {
        j["skipped"] = t.skipped;
        return j;
    }
    const SpectrumMetrics& x = t.metrics;
    auto rank = [](int64_t r) { return r >= 0 ? nlohmann::ordered_json(r) : nlohmann::ordered_json(nullptr); };
    j["complete_spectrum"] = x.complete;
    j["frobenius_sq"] = t.frobenius_sq;
    j["spectral_norm"] = x.s1;
    j["s2"] = x.s2;
    j["s1_over_s2"] = number(x.s1_over_s2);
    j["stable_rank"] = x.stable_rank;
    j["effective_rank"] = number(x.effective_rank);
    j["rank_90"] = rank(x.rank_90);
    j["rank_99"] = rank(x.rank_99);
    j["rank_999"] = rank(x.rank_999);
    nlohmann::ordered_json err = nlohmann::ordered_json::object();
    for (int64_t k : kErrorRanks)
        if (std::isfinite(error_at(t, k))) err[std::to_string(k)] = error_at(t, k);
    j["relative_error_at_rank"] = std::move(err);
    const HeavyTailMetrics& h = t.heavy_tail;
    const PowerLawFit& p = h.power_law;
    j["power_law"] = {{"reliable", p.reliable},
                      {"reason", p.reason},
                      {"alpha", number(p.alpha)},
                      {"alpha_hat", number(h.alpha_hat)},
                      {"xmin", number(p.xmin)},
                      {"xmax", number(p.xmax)},
                      {"ks_distance", number(p.ks_distance)},
                      {"sigma", number(p.sigma)},
                      {"n_fit", p.n_fit},
                      {"n_tail", p.n_tail}};
    const MarchenkoPasturFit& mp = h.marchenko_pastur;
    j["marchenko_pastur"] = {{"reliable", mp.reliable},
                             {"reason", mp.reason},
                             {"q", number(mp.q)},
                             {"sigma", number(mp.sigma)},
                             {"bulk_min", number(mp.bulk_min)},
                             {"bulk_max", number(mp.bulk_max)},
                             {"softrank", number(mp.softrank)},
                             {"n_spikes", mp.n_spikes}};
    j["lambda_max"] = h.lambda_max;
    j["log_spectral_norm"] = number(h.log_spectral_norm);
    j["log_norm"] = number(h.log_norm);
    if (!t.singular_values.empty()) j["singular_values"] = t.singular_values;
    if (!t.top_k_values.empty()) j["top_k_values"] = t.top_k_values;
    if (std::isfinite(t.top_k_max_rel_error)) j["top_k_max_rel_error"] = t.top_k_max_rel_error;
    j["seconds"] = t.seconds;
    return j;
}

std::string json_text(const ModelFile& m, const AnalyzeOptions& o, const std::vector<TensorSpectrum>& r, double seconds,
                      const Whitened& wh, const std::string& cache_hit) {
    nlohmann::ordered_json j;
    j["path"] = m.path();
    j["format"] = m.format_detail();
    j["method"] = method_text(o);
    if (!cache_hit.empty()) j["from_cache"] = cache_hit;  // the spectra were read from this file, not computed
    j["options"] = {{"full", o.full},
                    {"top_k", o.top_k},
                    {"oversampling", o.randomized.oversampling},
                    {"power_iterations", o.randomized.n_power_iterations},
                    {"seed", o.randomized.seed}};
    nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
    for (const TensorSpectrum& t : r) {
        nlohmann::ordered_json tj = tensor_json(t);
        if (const auto it = wh.find(t.name); it != wh.end()) tj["as_the_data_sees_it"] = whitened_json(it->second);
        tensors.push_back(std::move(tj));
    }
    j["tensors"] = std::move(tensors);
    nlohmann::ordered_json roles = nlohmann::ordered_json::array();
    for (const auto& [role, s] : summarize(r))
        roles.push_back({{"role", std::string(role_name(role))},
                         {"n_matrices", s.n},
                         {"mean_stable_rank", s.sum_stable / s.n},
                         {"mean_rank_99", s.n_rank99 ? nlohmann::ordered_json(s.sum_rank99 / s.n_rank99) : nullptr}});
    j["summary"] = std::move(roles);
    j["seconds"] = seconds;
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string csv_number(double v) {
    return std::isfinite(v) ? fmt("%.10g", v) : "";
}

std::string csv_text(const std::vector<TensorSpectrum>& r) {
    std::string out =
        "name,role,layer,rows,cols,skipped,stable_rank,effective_rank,rank_90,rank_99,rank_999,"
        "s1_over_s2,spectral_norm,alpha,alpha_reason,alpha_hat,ks_distance,xmin,log_spectral_norm,"
        "mp_bulk_max,mp_spikes,err_rank_1,err_rank_3,err_rank_8,err_rank_32,err_rank_128,seconds\n";
    for (const TensorSpectrum& t : r) {
        out += csv_field(t.name) + "," + std::string(role_name(t.role)) + "," + std::to_string(t.layer) + "," +
               std::to_string(t.rows) + "," + std::to_string(t.cols) + "," + csv_field(t.skipped);
        if (!t.skipped.empty()) {
            out += std::string(21, ',') + "\n";
            continue;
        }
        const SpectrumMetrics& x = t.metrics;
        const HeavyTailMetrics& h = t.heavy_tail;
        auto rank = [](int64_t v) { return v >= 0 ? std::to_string(v) : std::string(); };
        out += "," + csv_number(x.stable_rank) + "," + csv_number(x.effective_rank) + "," + rank(x.rank_90) + "," +
               rank(x.rank_99) + "," + rank(x.rank_999) + "," + csv_number(x.s1_over_s2) + "," + csv_number(x.s1) +
               "," + csv_number(h.power_law.alpha) + "," + csv_field(h.power_law.reason) + "," +
               csv_number(h.alpha_hat) + "," + csv_number(h.power_law.ks_distance) + "," +
               csv_number(h.power_law.xmin) + "," + csv_number(h.log_spectral_norm) + "," +
               csv_number(h.marchenko_pastur.bulk_max) + "," +
               (h.marchenko_pastur.reliable ? std::to_string(h.marchenko_pastur.n_spikes) : std::string());
        for (int64_t k : kErrorRanks) out += "," + csv_number(error_at(t, k));
        out += "," + csv_number(t.seconds) + "\n";
    }
    return out;
}

}  // namespace

int cmd_analyze(int argc, char** argv) {
    std::string path, output, gram_path;
    bool json = false, csv = false, full = false, no_cache = false;
    int64_t top_k = 0, threads = 0, oversampling = RandomizedSvdOptions{}.oversampling,
            power_iterations = RandomizedSvdOptions{}.n_power_iterations;
    ArgParser p(
        "gkq analyze MODEL [--topk K] [--full] [--json|--csv] [-o FILE]",
        "Singular values of every 2-D weight matrix and what each rank would cost. Per matrix: stable rank,\n"
        "entropy effective rank, ranks keeping 90/99/99.9 % of the energy, s1/s2, power-law alpha of the\n"
        "eigenvalues of W^T W (WeightWatcher's fit), spectral norm, and the exact relative error of the best\n"
        "rank-1/3/8/32/128 approximation; a mean per role ends the table. The spectrum is exact (all singular\n"
        "values) unless --topk is given alone: then ranks beyond K, the effective rank and alpha are unknown; with\n"
        "--full as well, a column shows the top-K values' largest relative error against the exact ones.\n"
        "Spectra are cached beside the model file (FILE.gkq-spectra; for a folder, beside the file it holds; else\n"
        "under $XDG_CACHE_HOME/gkq/spectra), keyed by the files' sizes and modification times, the tensor index and\n"
        "the options: a second run with the same options reads them (and says so on stderr) instead of computing.\n"
        "A progress bar goes to stderr when it is a terminal; SIGINT or SIGTERM cancels (exit 130 or 143).");
    p.positional("MODEL", "model file or folder (safetensors, GGUF, llama2.c)", &path);
    p.option_int("--topk", "K",
                 "top K singular values by randomized SVD (alone: instead of the full spectrum; with --full: both)",
                 &top_k, 1, 1000000);
    p.flag("--full", "the exact full spectrum (the default unless --topk is given)", &full);
    p.flag("--json", "one JSON document, including every singular value, instead of the table", &json);
    p.flag("--csv", "one CSV row per matrix instead of the table", &csv);
    p.option("-o,--output", "FILE", "write to FILE (replaced atomically) instead of stdout", &output);
    p.option("--gram", "FILE",
             "activation Gram matrices (gkq imatrix --gram): also the spectrum \"as the data sees it\", of W L with L "
             "the Cholesky factor of each matrix's inputs' X^T X, whose ranks and errors are the layer output's on the "
             "calibration text (table and --json; not --csv)",
             &gram_path);
    p.flag("--no-cache", "neither read nor write the spectra cache: compute every spectrum", &no_cache);
    p.option_int("--threads", "N", "matrices analyzed at once (default: one per CPU core)", &threads, 1, 1024);
    p.option_int("--oversampling", "P", "randomized SVD: extra sketch columns (default 10)", &oversampling, 0, 100000);
    p.option_int("--power-iterations", "Q", "randomized SVD: power iterations (default 2)", &power_iterations, 0, 100);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (json && csv) {
        std::fprintf(stderr, "gkq analyze: --json and --csv exclude each other (see --help)\n");
        return kExitBadInput;
    }
    AnalyzeOptions opt;
    opt.full = full || top_k == 0;
    opt.top_k = top_k;
    opt.n_threads = int(threads);
    opt.randomized.oversampling = oversampling;
    opt.randomized.n_power_iterations = int(power_iterations);

    if (csv && !gram_path.empty()) {
        std::fprintf(stderr, "gkq analyze: --gram adds to the table and --json, not to --csv (see --help)\n");
        return kExitBadInput;
    }
    if (!output.empty()) {
        std::vector<std::string> inputs = model_inputs(path);
        if (!gram_path.empty()) inputs.push_back(gram_path);
        if (int rc = refuse_output_over_input("analyze", output, inputs)) return rc;
    }
    auto model = ModelFile::open(path);
    if (!model) {
        std::fprintf(stderr, "gkq analyze: %s\n", model.message().c_str());
        return exit_code(model.status());
    }
    // Spectra are measured whatever the config says; what keeps the model from running is said, not refused.
    for (const std::string& w : model_problems(model->config(), model->tensors()))
        std::fprintf(stderr, "gkq analyze: warning: %s: %s\n", model->path().c_str(), w.c_str());
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::vector<TensorSpectrum>> result = error(StatusCode::Internal, "not run");
    std::optional<SpectrumCacheKey> cache_key;
    std::string cache_hit;  // the cache file the spectra came from
    if (!no_cache) {
        // The file a folder resolves to (as the workbench names it), so both share one cache.
        const std::string& model_path = model->path();
        auto key = spectrum_cache_key(*model, model_path, opt);
        if (key) {
            cache_key = std::move(key).value();
            SpectrumCacheLookup found = read_spectrum_cache(model_path, *cache_key);
            for (const std::string& note : found.notes) std::fprintf(stderr, "gkq analyze: cache: %s\n", note.c_str());
            if (found.spectra) {
                cache_hit = found.path;
                result = std::move(*found.spectra);
                std::fprintf(stderr, "gkq analyze: spectra read from the cache %s (--no-cache computes them)\n",
                             cache_hit.c_str());
            }
        } else {
            std::fprintf(stderr, "gkq analyze: cache not used: %s\n", key.message().c_str());
        }
    }
    if (cache_hit.empty()) {
        ProgressBar bar("analyze");
        result = analyze_model(*model, opt, bar.callback());
        if (result && cache_key)
            if (auto written = write_spectrum_cache(model->path(), *cache_key, *result); !written)
                std::fprintf(stderr, "gkq analyze: warning: the spectra cache was not written: %s\n",
                             written.message().c_str());
    }
    if (!result && result.status().code() == StatusCode::Cancelled) {
        std::fprintf(stderr, "gkq analyze: %s; %s\n", interrupted_text().c_str(),
                     output.empty() ? "nothing was printed" : (output + " was not written").c_str());
        return exit_code(result.status());
    }
    if (!result) {
        std::fprintf(stderr, "gkq analyze: %s\n", result.message().c_str());
        return exit_code(result.status());
    }
    Whitened whitened;
    if (!gram_path.empty()) {
        auto gram = load_model_gram(gram_path, *model);
        if (!gram) {
            std::fprintf(stderr, "gkq analyze: %s\n", gram.message().c_str());
            return exit_code(gram.status());
        }
        ProgressBar bar("as the data sees it");
        for (size_t i = 0; i < model->tensors().size(); ++i) {
            if (i >= gram->by_tensor.size() || !gram->by_tensor[i]) continue;
            const Tensor& t = model->tensors()[i];
            auto values = tensor_to_f32(t);
            if (!values) {
                std::fprintf(stderr, "gkq analyze: %s\n", values.message().c_str());
                return exit_code(values.status());
            }
            model->drop_resident(i, 0, t.n_bytes);
            auto w = whitened_spectrum(values->data(), t.rows(), t.cols(), gram->by_tensor[i]->data(),
                                       model->path() + ": tensor '" + t.name + "'");
            if (!w) {
                std::fprintf(stderr, "gkq analyze: %s\n", w.message().c_str());
                return exit_code(w.status());
            }
            whitened[t.name] = std::move(w).value();
            if (!bar.callback()(static_cast<double>(i + 1) / static_cast<double>(model->tensors().size()), t.name)) {
                std::fprintf(stderr, "gkq analyze: %s; nothing was printed\n", interrupted_text().c_str());
                return exit_code(error(StatusCode::Cancelled, "cancelled"));
            }
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string text = json  ? json_text(*model, opt, *result, seconds, whitened, cache_hit)
                             : csv ? csv_text(*result)
                                   : table(*model, opt, *result, seconds, cache_hit) +
                                         (whitened.empty() ? "" : whitened_table(*result, whitened, gram_path));
    if (output.empty()) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        return kExitOk;
    }
    if (Status s = write_file_atomic(output, text); !s) {
        std::fprintf(stderr, "gkq analyze: %s\n", s.message().c_str());
        return exit_code(s);
    }
    return kExitOk;
}

}  // namespace gkq::cli
