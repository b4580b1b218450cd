// gkq quantize MODEL -o OUT.knot --preset P [...]: encode a model into a knot and print, per tensor and for the
// whole model, what it costs and what it changes — every number measured from what was written and decoded.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/imatrix.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/quantize_fields.h"
#include "gkq/rknot.h"
#include "gkq/tokenizer.h"
#include "gkq/workflows.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#ifndef GKQ_VERSION
#define GKQ_VERSION "unknown"
#endif

namespace gkq::cli {

namespace {

// "i/N" with 0 <= i < N.
bool parse_shard(const std::string& s, uint32_t& index, uint32_t& count) {
    const size_t slash = s.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == s.size()) return false;
    try {
        size_t a = 0, b = 0;
        const unsigned long i = std::stoul(s.substr(0, slash), &a);
        const unsigned long n = std::stoul(s.substr(slash + 1), &b);
        if (a != slash || b != s.size() - slash - 1 || n == 0 || i >= n || n > 1000000) return false;
        index = static_cast<uint32_t>(i);
        count = static_cast<uint32_t>(n);
        return true;
    } catch (...) {
        return false;
    }
}

std::string fmt(const char* f, double v) {
    if (!std::isfinite(v)) return std::isnan(v) ? "nan" : "inf";
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// Bits per stored weight as a label: the factor bits, plus the residual's type ("2", "8+q4_0"); the code or
// value width of the other methods ("8", "4", "16" for f16, "32" for f32).
std::string bits_text(const TensorReport& r) {
    switch (r.method) {
        case Method::LowRank: return std::to_string(r.factor_bits);
        case Method::LowRankResidual:
            return std::to_string(r.factor_bits) + "+" + std::string(dtype_name(r.residual_type));
        default: return std::to_string(method_code_bits(r.method));
    }
}

nlohmann::json number_or_null(double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// What the total bits per weight hold beyond the encoding asked for: tensors the codec stored in another type than
// the preset's (a fallback, e.g. f16 for a row length that is not a multiple of 32), tensors of fewer than two
// dimensions (norms: always f32, each with its own record), and the container. All from bytes on disk.
struct Overhead {
    size_t n_fallback = 0;
    uint64_t fallback_bytes = 0;
    int64_t fallback_params = 0;
    size_t n_vectors = 0;
    uint64_t vector_bytes = 0;
    int64_t vector_params = 0;
};

bool is_vector(const TensorReport& c) {
    return c.shape.size() < 2;
}

Overhead overhead_of(const QuantizeReport& r) {
    Overhead o;
    for (const QuantizedTensor& q : r.tensors) {
        if (!q.codec.fallback.empty() && !is_vector(q.codec)) {
            ++o.n_fallback;
            o.fallback_bytes += q.bytes_on_disk();
            o.fallback_params += q.codec.n_elements();
        } else if (is_vector(q.codec)) {
            ++o.n_vectors;
            o.vector_bytes += q.bytes_on_disk();
            o.vector_params += q.codec.n_elements();
        }
    }
    return o;
}

// The share of the whole file's bits per weight that `bytes` make up.
double share_bpw(uint64_t bytes, const QuantizeReport& r) {
    return r.n_params > 0 ? 8.0 * static_cast<double>(bytes) / static_cast<double>(r.n_params) : 0.0;
}

double own_bpw(uint64_t bytes, int64_t params) {
    return params > 0 ? 8.0 * static_cast<double>(bytes) / static_cast<double>(params) : 0.0;
}

// The --target-bpw choice: per matrix the candidates measured and the one taken.
nlohmann::json plan_json(const BpwPlan& plan) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const BpwPlanTensor& t : plan.tensors) {
        nlohmann::json cands = nlohmann::json::array();
        for (const BpwCandidate& c : t.candidates)
            cands.push_back({{"method", std::string(method_name(c.method))},
                             {"bits_per_weight", c.bits_per_weight},
                             {"error", c.error}});
        tensors.push_back({{"name", t.name},
                           {"role", std::string(role_name(t.role))},
                           {"layer", t.layer},
                           {"chosen", std::string(method_name(t.candidates[t.chosen].method))},
                           {"probe_kld", t.probe_kld},
                           {"sensitivity", t.sensitivity},
                           {"candidates", std::move(cands)}});
    }
    return {{"target_bpw", plan.target_bpw},
            {"planned_payload_bpw", plan.planned_bpw},
            {"lowest_payload_bpw", plan.lowest_bpw},
            {"error", plan.weighted ? "sum_j imatrix_j * sum_i (W - W')_ij^2" : "sum_ij (W - W')_ij^2"},
            {"output_measured", plan.output_measured},
            {"tensors", std::move(tensors)}};
}

void print_plan(const BpwPlan& plan) {
    std::printf("target   %.3f bits per weight: planned %.3f of payload (lowest reachable %.3f); errors %s\n",
                plan.target_bpw, plan.planned_bpw, plan.lowest_bpw,
                plan.weighted ? "weighted by the importance matrix (squared output error, diagonal)"
                              : "unweighted (squared Frobenius; pass --imatrix to weight them by the activations)");
    if (plan.output_measured)
        std::printf("         each projection's errors scaled by its measured output KLD (--sensitivity-text)\n");
    std::map<std::string, int> count;
    for (const BpwPlanTensor& t : plan.tensors) ++count[std::string(method_name(t.candidates[t.chosen].method))];
    std::printf("chosen  ");
    for (const auto& [m, n] : count) std::printf(" %s x%d", m.c_str(), n);
    std::printf("\n");
}

void print_json(const ModelFile& model, const QuantizeReport& r, const BpwPlan* plan) {
    nlohmann::json j;
    if (plan != nullptr) j["target_bpw"] = plan_json(*plan);
    j["model"] = model.path();
    j["knot"] = r.path;
    j["preset"] = r.preset;
    j["command"] = r.command;
    j["shard"] = {{"index", r.shard_index}, {"count", r.shard_count}};
    nlohmann::json tensors = nlohmann::json::array();
    for (const QuantizedTensor& q : r.tensors) {
        const TensorReport& c = q.codec;
        tensors.push_back({
            {"name", c.name},
            {"role", std::string(role_name(c.role))},
            {"layer", c.layer},
            {"shape", c.shape},
            {"n_elements", c.n_elements()},
            {"method", std::string(method_name(c.method))},
            {"rank", c.rank},
            {"factor_bits", c.factor_bits},
            {"residual", c.residual_type != DType::Other ? nlohmann::json(std::string(dtype_name(c.residual_type)))
                                                         : nlohmann::json()},
            {"residual_bits",
             c.residual_type != DType::Other ? method_code_bits(*block_method_for(c.residual_type)) : 0},
            {"flags", c.flags},
            {"payload_bytes", c.payload_bytes},
            {"compression", q.compression == KnotCompression::Zlib ? "zlib" : "none"},
            {"stored_bytes", q.stored_bytes},
            {"record_bytes", q.record_bytes},
            {"index_entry_bytes", q.index_entry_bytes},
            {"bytes_on_disk", q.bytes_on_disk()},
            {"bits_per_weight", q.bits_per_weight()},
            {"rel_error", number_or_null(c.rel_error)},
            {"max_abs_error", number_or_null(c.max_abs_error)},
            {"energy_kept", c.energy_kept ? number_or_null(*c.energy_kept) : nlohmann::json()},
            {"fold_applied", c.fold_applied},
            {"fold_bytes_saved", c.fold_bytes_saved},
            {"fold_fit_error", c.fold_fit_error ? number_or_null(*c.fold_fit_error) : nlohmann::json()},
            {"fold_note", c.fold_note},
            {"fallback", c.fallback},
            {"stored_as_fallback", !c.fallback.empty() && !is_vector(c)},
        });
    }
    j["tensors"] = std::move(tensors);
    j["totals"] = {{"n_tensors", r.tensors.size()},
                   {"n_params", r.n_params},
                   {"file_bytes", r.file_bytes},
                   {"container_bytes", r.container_bytes},
                   {"bits_per_weight", r.bits_per_weight()},
                   {"ratio_vs_bf16", r.ratio_vs_bf16()},
                   {"ratio_vs_fp32", r.ratio_vs_fp32()}};
    // zlib per record where a trial on the payload's start saves enough (docs/knot-format.md)
    j["totals"]["entropy_coding"] = {{"n_deflated", r.n_deflated()},
                                     {"raw_payload_bytes", r.raw_payload_bytes()},
                                     {"stored_payload_bytes", r.stored_payload_bytes()},
                                     {"saved_bytes", r.raw_payload_bytes() - r.stored_payload_bytes()},
                                     {"bits_per_weight_uncompressed", r.bits_per_weight_uncompressed()},
                                     {"bits_per_weight", r.bits_per_weight()}};
    const Overhead o = overhead_of(r);
    // Each part's bytes, its own bits per weight, and the bits per weight it adds to the total.
    j["totals"]["overhead"] = {
        {"fallback",
         {{"n_tensors", o.n_fallback},
          {"bytes", o.fallback_bytes},
          {"bits_per_weight", own_bpw(o.fallback_bytes, o.fallback_params)},
          {"share_of_total_bits_per_weight", share_bpw(o.fallback_bytes, r)}}},
        {"vectors_f32",
         {{"n_tensors", o.n_vectors},
          {"bytes", o.vector_bytes},
          {"bits_per_weight", own_bpw(o.vector_bytes, o.vector_params)},
          {"share_of_total_bits_per_weight", share_bpw(o.vector_bytes, r)}}},
        {"container",
         {{"bytes", r.container_bytes}, {"share_of_total_bits_per_weight", share_bpw(r.container_bytes, r)}}}};
    j["seconds"] = r.seconds;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_table(const ModelFile& model, const QuantizeReport& r) {
    std::printf("model    %s (%s)\n", model.path().c_str(), model.format_detail().c_str());
    std::printf("knot     %s\n", r.path.c_str());
    std::printf("command  %s\n", r.command.c_str());
    if (r.shard_count > 1) std::printf("shard    %u/%u\n", r.shard_index, r.shard_count);
    size_t name_w = 4;
    for (const QuantizedTensor& q : r.tensors) name_w = std::max(name_w, q.codec.name.size());
    const int w = static_cast<int>(name_w);
    std::printf("\n%-*s  %-16s  %4s  %5s  %12s  %7s  %10s  %10s  %8s\n", w, "name", "method", "rank", "bits", "bytes",
                "bpw", "rel_err", "max_abs", "energy");
    for (const QuantizedTensor& q : r.tensors) {
        const TensorReport& c = q.codec;
        const std::string rank = c.rank > 0 ? std::to_string(c.rank) : "-";
        const std::string energy = c.energy_kept ? fmt("%.5f", *c.energy_kept) : "-";
        std::printf("%-*s  %-16s  %4s  %5s  %12s  %7s  %10s  %10s  %8s\n", w, c.name.c_str(),
                    std::string(method_name(c.method)).c_str(), rank.c_str(), bits_text(c).c_str(),
                    with_commas(q.bytes_on_disk()).c_str(), fmt("%.3f", q.bits_per_weight()).c_str(),
                    fmt("%.3e", c.rel_error).c_str(), fmt("%.3e", c.max_abs_error).c_str(), energy.c_str());
    }
    const Overhead o = overhead_of(r);
    for (const QuantizedTensor& q : r.tensors)
        if (!q.codec.fallback.empty() && !is_vector(q.codec))
            std::printf("fallback: %s: %s (%s bpw, %s bytes)\n", q.codec.name.c_str(), q.codec.fallback.c_str(),
                        fmt("%.2f", q.bits_per_weight()).c_str(), with_commas(q.bytes_on_disk()).c_str());
    if (o.n_vectors > 0)
        std::printf("f32:      %zu tensors of fewer than 2 dimensions (norms) are stored f32: %s bytes, %.2f bpw\n",
                    o.n_vectors, with_commas(o.vector_bytes).c_str(), own_bpw(o.vector_bytes, o.vector_params));
    std::printf(
        "\ntotal    %zu tensors, %s parameters; knot %s bytes (%s) = %.3f bits per weight; "
        "%.2fx smaller than bf16, %.2fx smaller than fp32\n",
        r.tensors.size(), with_commas(static_cast<uint64_t>(r.n_params)).c_str(), with_commas(r.file_bytes).c_str(),
        human_bytes(r.file_bytes).c_str(), r.bits_per_weight(), r.ratio_vs_bf16(), r.ratio_vs_fp32());
    std::printf(
        "         per-tensor bytes count the record (descriptor, stored payload, CRC) and its index entry; "
        "the other %s bytes are the file header, config/tokenizer block, index head and trailer\n",
        with_commas(r.container_bytes).c_str());
    std::printf(
        "         of the %.3f bits per weight: %.3f fallbacks (%zu tensors), %.3f f32 vectors (%zu tensors), %.3f "
        "the container; %.3f the encoding asked for\n",
        r.bits_per_weight(), share_bpw(o.fallback_bytes, r), o.n_fallback, share_bpw(o.vector_bytes, r), o.n_vectors,
        share_bpw(r.container_bytes, r),
        r.bits_per_weight() - share_bpw(o.fallback_bytes, r) - share_bpw(o.vector_bytes, r) -
            share_bpw(r.container_bytes, r));
    const uint64_t raw = r.raw_payload_bytes(), stored = r.stored_payload_bytes();
    std::printf(
        "zlib     %zu of %zu payloads deflated (those whose first bytes deflated well in a trial, "
        "docs/knot-format.md): %s raw -> %s stored bytes, %s saved (%.2f%%); %.3f bits per weight uncompressed, %.3f "
        "on disk\n",
        r.n_deflated(), r.tensors.size(), with_commas(raw).c_str(), with_commas(stored).c_str(),
        with_commas(raw - stored).c_str(), raw > 0 ? 100.0 * static_cast<double>(raw - stored) / raw : 0.0,
        r.bits_per_weight_uncompressed(), r.bits_per_weight());
}

std::string presets_help() {
    std::string h = "\npresets:\n";
    for (const std::string& name : preset_names()) {
        auto p = find_preset(name);
        std::string text = p ? p->description : "";
        h += "  " + name + "\n";
        // wrap at about 100 columns, indented
        std::string line = "     ";
        size_t start = 0;
        while (start < text.size()) {
            size_t end = text.find(' ', start);
            if (end == std::string::npos) end = text.size();
            const std::string word = text.substr(start, end - start);
            if (line.size() + word.size() + 1 > 100) {
                h += line + "\n";
                line = "     ";
            }
            line += " " + word;
            start = end + 1;
        }
        h += line + "\n";
    }
    return h;
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
    std::string model_path, out_path, preset, shard, tokenizer, tuning, imatrix_path, gram_path, sensitivity_text;
    int64_t threads = 0, sensitivity_tokens = 0, sensitivity_ctx = 0;
    double target_bpw = 0.0;
    bool json = false, no_tokenizer = false, allow_requantize = false, force = false;
    std::string names;
    for (const std::string& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    ArgParser p(
        "gkq quantize [MODEL] -o OUT.knot [--preset P] [--rank K] [--energy E] [--bits B] [--shard i/N] [--json]",
        "Encodes every tensor of MODEL (safetensors, GGUF, llama2.c) with a preset into a knot file, with the\n"
        "model's config and tokenizer, then prints per tensor: method, rank, bits, bytes on disk (record and\n"
        "index entry), bits per weight, relative Frobenius error and max abs error of the decoded tensor,\n"
        "energy kept by the truncated SVD; and the whole-model size, bits per weight and ratio against bf16\n"
        "and fp32. A progress bar goes to stderr when it is a terminal; SIGINT (Ctrl-C) or SIGTERM cancels and writes\n"
        "nothing (exit 130 or 143)." +
            presets_help());
    p.positional("MODEL", "model file or folder " + demo_model_help(), &model_path, false);
    p.option("-o,--output", "OUT.knot", "knot file to write (replaced only when complete)", &out_path);
    // Default chosen by measurement: docs/presets-measured.md (lowest KLD at <= 5 bits per weight on the demo model).
    p.option("--preset", "P",
             "encoding preset: " + names + " (default " + kDefaultPreset +
                 ": the lowest measured KLD at or under 5 bits per weight on the demo model; "
                 "docs/presets-measured.md)",
             &preset);
    // The override flags: one per row of the override table (gkq/quantize_fields.h), parsed by the table.
    const std::span<const OverrideField> fields = override_fields();
    std::vector<std::string> field_values(fields.size());
    for (size_t i = 0; i < fields.size(); ++i)
        p.option("--" + std::string(fields[i].flag), std::string(fields[i].metavar), std::string(fields[i].help),
                 &field_values[i]);
    p.option("--shard", "i/N", "encode only shard i of N (tensor groups g with g mod N = i; see docs/knot-format.md)",
             &shard);
    p.option("--tokenizer", "FILE",
             "llama2.c tokenizer.bin stored in the knot when the model carries none (default: the one "
             "tokenizer.bin or tok*.bin beside the model, as generate and eval find it)",
             &tokenizer);
    p.flag("--no-tokenizer", "write a knot without a vocabulary when the model has none (it cannot then generate)",
           &no_tokenizer);
    p.option("--tuning", "X.rknot",
             "per-matrix method, rank and bit width from an rknot (over the preset and "
             "the options above)",
             &tuning);
    p.option("--imatrix", "FILE",
             "importance matrix (gkq imatrix or llama-imatrix; GGUF or legacy .dat): each matrix's blocks (the method "
             "or a low-rank residual; every block type but Q8_0) are fitted weighted by its columns' importance, as "
             "llama-quantize --imatrix does; the file's name and sha256 are recorded in the knot",
             &imatrix_path);
    p.option("--gram", "FILE",
             "activation Gram matrices (gkq imatrix --gram): the whitened presets (svd-llm, q4_0-lqer, q4_k-lqer) take "
             "the SVD in the metric of each matrix's inputs; required by them, ignored by the others; the file's name "
             "and sha256 are recorded in the knot",
             &gram_path);
    p.option_double(
        "--target-bpw", "B",
        "mixed precision by measurement: every attention and FFN projection measured with Q2_K, Q3_K, "
        "Q4_K, IQ4_NL, Q5_K, Q6_K and Q8_0 (of two at the same bits, the smaller error kept; its squared error, "
        "weighted by --imatrix's column importance when "
        "given), then the type of each chosen greedily by error reduction per bit so that the payload "
        "fits B bits per weight; token_embd Q4_K, output Q6_K (searched too with --sensitivity-text), norms f32 "
        "(llama-quantize's fallbacks; a tied token_embd takes the output's type). "
        "The base preset is q4_k_m (or --preset, a k-quant mixture, q8_0 or q4_0); not with --tuning",
        &target_bpw, 0.0, 32.0);
    p.option("--sensitivity-text", "FILE",
             "with --target-bpw: measure each matrix's effect on the output instead of trusting its weight error "
             "alone: the model runs over FILE once, then once more per projection with that projection alone at its "
             "cheapest type; the mean KLD against the first run, divided by that type's error, scales the "
             "projection's errors before the greedy choice (so matrices whose errors later layers amplify are "
             "upgraded first). Costs one model load and one pass over FILE per projection",
             &sensitivity_text);
    p.option_int("--sensitivity-tokens", "N", "score only the first N tokens of --sensitivity-text (0: all)",
                 &sensitivity_tokens, 0, int64_t{1} << 30);
    p.option_int("--sensitivity-ctx", "N",
                 "positions per window for --sensitivity-text, as gkq eval --ctx (0: eval's default)", &sensitivity_ctx,
                 0, int64_t{1} << 20);
    p.option_int("--threads", "N", "worker threads (0: one per CPU)", &threads, 0, 4096);
    p.flag("--allow-requantize",
           "encode tensors that are already block-quantized (q8_0, q4_0, q8_g) although that adds a second rounding "
           "error",
           &allow_requantize);
    p.flag("--force",
           "apply a --rank above a matrix's smallest dimension (capped there) and an rknot made for another model",
           &force);
    p.flag("--json", "print one JSON document (tensors[], totals) instead of the table", &json);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    auto usage_error = [](const std::string& msg) {
        std::fprintf(stderr, "gkq: %s\n(see 'gkq quantize --help')\n", msg.c_str());
        return kExitBadInput;
    };
    // Bad values are reported first, as the parser reports its own options' values.
    QuantizeOptions options;
    for (size_t i = 0; i < fields.size(); ++i) {
        const std::string flag = "--" + std::string(fields[i].flag);
        if (!p.given(flag)) continue;
        if (Status s = set_override(fields[i], options.global, field_values[i]); !s)
            return usage_error("option '" + flag + "': " + s.message());
    }
    if (out_path.empty()) return usage_error("missing -o OUT.knot");
    if (no_tokenizer && p.given("--tokenizer")) return usage_error("--tokenizer and --no-tokenizer exclude each other");
    const bool targeted = p.given("--target-bpw");
    if (!targeted && (!sensitivity_text.empty() || p.given("--sensitivity-tokens") || p.given("--sensitivity-ctx")))
        return usage_error("--sensitivity-text, --sensitivity-tokens and --sensitivity-ctx go with --target-bpw");
    if (targeted) {
        if (!tuning.empty()) return usage_error("--target-bpw and --tuning exclude each other");
        if (options.global.method) return usage_error("--target-bpw chooses the methods: it excludes --method");
        if (preset.empty()) preset = "q4_k_m";
        // An unknown name is reported below, as without --target-bpw.
        if (Status s = check_target_bpw_preset(preset); !s && s.code() != StatusCode::NotFound)
            return usage_error(s.message());
    }
    if (preset.empty()) preset = kDefaultPreset;

    options.preset = preset;
    options.n_threads = static_cast<int>(threads);
    options.producer = std::string("gkq ") + GKQ_VERSION;
    if (!shard.empty() && !parse_shard(shard, options.shard_index, options.shard_count))
        return usage_error("option '--shard': '" + shard + "' is not i/N with 0 <= i < N");
    if (!find_preset(preset)) return usage_error(find_preset(preset).message());
    if (gram_path.empty()) {
        const Preset pr = *find_preset(preset);
        for (const CodecParams& c : pr.by_role)
            if (c.whiten)
                return usage_error("preset " + preset +
                                   " whitens by the activations and needs their Gram matrices: pass --gram FILE "
                                   "(written by gkq imatrix MODEL --text FILE -o IMATRIX --gram FILE)");
    }
    options.allow_requantize = allow_requantize;
    options.force = force;
    Result<Rknot> rk = error(StatusCode::NotFound, "no tuning");
    if (!tuning.empty()) {
        rk = read_rknot(tuning);
        auto overrides = rk ? rknot_layer_overrides(*rk, tuning) : Result<std::vector<LayerOverride>>(rk.status());
        if (!overrides) {
            std::fprintf(stderr, "gkq quantize: %s\n", overrides.message().c_str());
            return exit_code(overrides.status());
        }
        options.per_layer = std::move(overrides).value();
    }

    if (model_path.empty()) {
        model_path = demo_model_dir();
        if (model_path.empty()) return usage_error("missing MODEL (no bundled demo model was found)");
        // The demo model keeps its vocabulary in tokenizer.bin beside it; the knot should carry it.
        if (tokenizer.empty()) tokenizer = model_path + "/tokenizer.bin";
    }
    if (int rc = refuse_output_over_input("quantize", out_path,
                                          model_inputs(model_path, {tokenizer, tuning, imatrix_path, gram_path})))
        return rc;
    auto model = ModelFile::open(model_path);
    if (!model) {
        std::fprintf(stderr, "gkq quantize: %s\n", model.message().c_str());
        return exit_code(model.status());
    }
    if (!tuning.empty() && !force) {
        if (Status s = check_rknot_model(*rk, *model, tuning); !s) {
            std::fprintf(stderr, "gkq quantize: %s\n", s.message().c_str());
            return exit_code(s);
        }
    }
    if (!imatrix_path.empty()) {
        auto importance = load_model_importance(imatrix_path, *model);
        if (!importance) {
            std::fprintf(stderr, "gkq quantize: %s\n", importance.message().c_str());
            return exit_code(importance.status());
        }
        if (!json)
            std::printf("imatrix: %s (sha256 %s): importance for %lld matrices, %zu without an entry\n",
                        imatrix_path.c_str(), importance->sha256.c_str(),
                        static_cast<long long>(importance->n_weighted), importance->without.size());
        options.importance = std::move(importance->by_tensor);
        options.importance_command = importance->command;
        options.importance_metadata = std::move(importance->metadata);
    }
    if (!gram_path.empty()) {
        auto gram = load_model_gram(gram_path, *model);
        if (!gram) {
            std::fprintf(stderr, "gkq quantize: %s\n", gram.message().c_str());
            return exit_code(gram.status());
        }
        if (!json)
            std::printf("gram: %s (sha256 %s): Gram matrices for %lld matrices\n", gram_path.c_str(),
                        gram->sha256.c_str(), static_cast<long long>(gram->n_matrices));
        options.gram = std::move(gram->by_tensor);
        options.gram_command = gram->command;
    }
    if (!no_tokenizer) {
        // The lookup generate and eval use, so that a knot carries the tokenizer they would run the model with.
        auto found = vocabulary_for_model(model->path(), model->vocabulary(), model->config().vocab_size, tokenizer);
        if (!found) {
            std::string why = found.message();
            if (found.status().code() == StatusCode::NotFound)
                why += ": pass --tokenizer FILE, or --no-tokenizer to write a knot that cannot generate text";
            else if (tokenizer.empty())
                why += ": pass --tokenizer FILE";
            std::fprintf(stderr, "gkq quantize: %s\n", why.c_str());
            return exit_code(found.status());
        }
        if (!found->source.empty()) {
            options.vocab = std::move(found->vocab);
            options.vocab_keys = std::move(found->keys);
        }
    }
    std::optional<BpwPlan> plan;
    if (targeted) {
        Result<BpwPlan> planned = error(StatusCode::Internal, "not run");
        {
            BpwOutputProbe probe;
            if (!sensitivity_text.empty()) {
                OutputProbeRequest pr;
                pr.text_path = sensitivity_text;
                pr.tokenizer.given = tokenizer;
                pr.tokenizer.hint = "pass --tokenizer FILE";
                pr.windows.n_ctx = sensitivity_ctx;
                pr.n_threads = static_cast<int>(threads);
                pr.max_tokens = sensitivity_tokens;
                ProgressBar base_bar("sensitivity base");
                auto made = make_output_probe(*model, pr, base_bar.callback());
                if (!made) {
                    std::fprintf(stderr, "gkq quantize: %s\n", made.message().c_str());
                    return exit_code(made.status());
                }
                probe = std::move(made).value();
            }
            ProgressBar bar("measure");
            planned = plan_target_bpw(*model, target_bpw, options.importance, options.n_threads, bar.callback(), probe);
        }
        if (!planned) {
            std::fprintf(stderr, "gkq quantize: %s\n", planned.message().c_str());
            return exit_code(planned.status());
        }
        plan = std::move(planned).value();
        options.per_layer = plan->overrides;
        if (!json) print_plan(*plan);
    }
    Result<QuantizeReport> report = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("quantize");
        report = quantize_model(*model, options, out_path, bar.callback());
    }
    if (!report) {
        if (report.status().code() == StatusCode::Cancelled)
            std::fprintf(stderr, "gkq quantize: %s; %s was not written\n", interrupted_text().c_str(),
                         out_path.c_str());
        else
            std::fprintf(stderr, "gkq quantize: %s\n", report.message().c_str());
        return exit_code(report.status());
    }
    if (json)
        print_json(*model, *report, plan ? &*plan : nullptr);
    else
        print_table(*model, *report);
    return kExitOk;
}

}  // namespace gkq::cli
