// gkq rknot encode|show|verify|set: make, read, check and edit rknot tuning files (gzipped JSON,
// docs/rknot-format.md). Every edit is validated before the file is replaced (atomically).
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/rknot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace gkq::cli {

namespace {

int fail(const char* sub, const Status& s) {
    std::fprintf(stderr, "gkq rknot %s: %s\n", sub, s.message().c_str());
    return exit_code(s);
}

std::string opt_text(const std::optional<double>& v, const char* f = "%.4g") {
    if (!v) return "null";
    char buf[64];
    std::snprintf(buf, sizeof buf, f, *v);
    return buf;
}

int run_encode(int argc, char** argv) {
    RknotEncodeOptions o;
    std::string out;
    int64_t threads = 0;
    ArgParser p("gkq rknot encode --knot K [--model M] [--profile P] [--eval E] [--name N] -o X.rknot",
                "Writes the rknot of knot K: per matrix its method, rank and bit width (from the knot), the spectrum\n"
                "fields (from the source model M's matrices when given, else from the decoded records), the\n"
                "saturation masks of the masks file P (gkq profile) and the evaluation report E (gkq eval --json).");
    p.option("--knot", "K", "knot file (required)", &o.knot_path);
    p.option("--model", "M", "source model the knot was made from (spectra and rel_error of the originals)",
             &o.model_path);
    p.option("--profile", "P", "masks file of gkq profile", &o.profile_path);
    p.option("--eval", "E", "evaluation report of gkq eval --json (base vs this knot)", &o.eval_path);
    p.option("--name", "N", "model_name (default: the knot's file name)", &o.model_name);
    p.option_int("--threads", "N", "threads (0: all)", &threads, 0, 4096);
    p.option("-o,--output", "X.rknot", "rknot to write", &out);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (o.knot_path.empty() || out.empty()) {
        std::fprintf(stderr, "gkq: missing %s\n(see 'gkq rknot encode --help')\n",
                     out.empty() ? "-o X.rknot" : "--knot K");
        return kExitBadInput;
    }
    if (int rc = refuse_output_over_input("rknot encode", out,
                                          model_inputs(o.model_path, {o.knot_path, o.profile_path, o.eval_path})))
        return rc;
    o.n_threads = static_cast<int>(threads);
    o.command = "gkq rknot encode --knot " + o.knot_path;
    if (!o.model_path.empty()) o.command += " --model " + o.model_path;
    if (!o.profile_path.empty()) o.command += " --profile " + o.profile_path;
    if (!o.eval_path.empty()) o.command += " --eval " + o.eval_path;
    Result<Rknot> r = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("rknot");
        r = encode_rknot(o, bar.callback());
    }
    if (!r && r.status().code() == StatusCode::Cancelled)
        return fail("encode", Status(StatusCode::Cancelled, interrupted_text() + "; " + out + " was not written"));
    if (!r) return fail("encode", r.status());
    if (Status s = write_rknot(out, *r); !s) return fail("encode", s);
    std::printf(
        "wrote %s: %zu matrices, %s, %s\n", out.c_str(), r->layers.size(),
        r->saturation_maps ? (std::to_string(r->saturation_maps->layers.size()) + " masks").c_str() : "no masks",
        r->measured.eval ? "with evaluation" : "no evaluation");
    return kExitOk;
}

int run_show(int argc, char** argv) {
    std::string path;
    bool json = false;
    ArgParser p("gkq rknot show X.rknot [--json]", "Prints an rknot (validated) as a table, or its JSON.");
    p.positional("X.rknot", "rknot file", &path);
    p.flag("--json", "print the JSON document", &json);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    auto r = read_rknot(path);
    if (!r) return fail("show", r.status());
    if (json) {
        std::cout << rknot_to_json(*r) << "\n";
        return kExitOk;
    }
    std::printf("model      %s (rknot %s)\nknot       %s\ncommand    %s\n", r->model_name.c_str(), r->version.c_str(),
                r->measured.knot.c_str(), r->compression.method.c_str());
    std::printf("size       %lld params, %llu bytes, %.4f bits per weight; total_compression %s, spectral_ratio %s\n",
                static_cast<long long>(r->measured.n_params), static_cast<unsigned long long>(r->measured.file_bytes),
                r->measured.bits_per_weight, opt_text(r->compression.total_compression).c_str(),
                opt_text(r->compression.spectral_ratio).c_str());
    if (r->measured.eval)
        std::printf("eval       mean KLD %s, top-1 agreement %s, PPL ratio %s (%s)\n",
                    opt_text(r->measured.eval->kld_mean, "%.6g").c_str(),
                    opt_text(r->measured.eval->top1_agreement).c_str(), opt_text(r->measured.eval->ppl_ratio).c_str(),
                    r->measured.eval->source.c_str());
    int w = 6;
    for (const RknotLayer& l : r->layers) w = std::max(w, static_cast<int>(l.tensor.size()));
    std::printf("\n%4s  %-*s  %-16s  %5s  %4s  %10s  %7s  %6s  %10s\n", "#", w, "tensor", "method", "rank", "bits",
                "s1", "decay", "R^2", "rel_err");
    for (size_t i = 0; i < r->layers.size(); ++i) {
        const RknotLayer& l = r->layers[i];
        std::printf("%4zu  %-*s  %-16s  %5d  %4s  %10s  %7s  %6s  %10s\n", i, w, l.tensor.c_str(), l.method.c_str(),
                    l.rank, l.bit_width ? std::to_string(*l.bit_width).c_str() : "-",
                    l.base_singular_values.empty() ? "-" : opt_text(l.base_singular_values[0]).c_str(),
                    opt_text(l.spectral_decay_ratio).c_str(), opt_text(l.self_similarity_confidence, "%.3f").c_str(),
                    opt_text(l.rel_error, "%.3e").c_str());
    }
    if (r->saturation_maps) {
        std::printf("\nsaturation masks (%s, %lld tokens)\n%5s  %7s  %7s  %9s  %s\n",
                    r->saturation_maps->source.c_str(), static_cast<long long>(r->saturation_maps->n_tokens), "layer",
                    "hot", "neurons", "rle bytes", "hash");
        for (const RknotMaskLayer& m : r->saturation_maps->layers)
            std::printf("%5d  %7lld  %7lld  %9llu  %s\n", m.layer_id, static_cast<long long>(m.hot_count),
                        static_cast<long long>(m.neuron_count),
                        static_cast<unsigned long long>(m.compressed_size_bytes), m.bitmask_hash.c_str());
    }
    return kExitOk;
}

int run_verify(int argc, char** argv) {
    std::string path;
    ArgParser p("gkq rknot verify X.rknot",
                "Checks gzip integrity, the JSON, the schema (required and unknown fields, types, ranges) and the\n"
                "consistency of masks and formulas; prints every problem with its JSON path. Exit 0 when valid.");
    p.positional("X.rknot", "rknot file", &path);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    auto r = read_rknot(path);
    if (!r) return fail("verify", r.status());
    std::printf("%s: ok (%zu matrices, %zu masks)\n", path.c_str(), r->layers.size(),
                r->saturation_maps ? r->saturation_maps->layers.size() : size_t{0});
    return kExitOk;
}

int run_set(int argc, char** argv) {
    std::string path;
    std::vector<std::string> assignments;
    ArgParser p("gkq rknot set X.rknot PATH=VALUE ...",
                "Edits fields (e.g. folded_waves.layers[3].bit_width=4, resonance_tuning.l2_lambda=0.001); VALUE is a\n"
                "JSON literal (null, 4, 0.5, true, \"text\"). The edited document must validate, else nothing is\n"
                "written; the file is replaced atomically.");
    p.positional("X.rknot", "rknot file", &path);
    p.positional_list("PATH=VALUE", "fields to set", &assignments, 1);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    auto r = read_rknot(path);
    if (!r) return fail("set", r.status());
    if (Status s = rknot_set(*r, assignments, path); !s) return fail("set", s);
    if (Status s = write_rknot(path, *r); !s) return fail("set", s);
    std::printf("%s: set %zu field%s\n", path.c_str(), assignments.size(), assignments.size() == 1 ? "" : "s");
    return kExitOk;
}

}  // namespace

int cmd_rknot(int argc, char** argv) {
    const char* usage = "usage: gkq rknot encode|show|verify|set ... (gkq rknot SUBCOMMAND --help)\n";
    if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
        std::printf("%s", usage);
        return argc < 2 ? kExitBadInput : kExitOk;
    }
    const std::string sub = argv[1];
    if (sub == "encode") return run_encode(argc - 1, argv + 1);
    if (sub == "show") return run_show(argc - 1, argv + 1);
    if (sub == "verify") return run_verify(argc - 1, argv + 1);
    if (sub == "set") return run_set(argc - 1, argv + 1);
    std::fprintf(stderr, "gkq rknot: unknown subcommand '%s'\n%s", sub.c_str(), usage);
    return kExitBadInput;
}

}  // namespace gkq::cli
