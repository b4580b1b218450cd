// gkq profile MODEL --text FILE [--threshold T] [--min-frequency F] [--tokenizer F] -o MASKS: runs a calibration
// text through the model and writes, per block and per FFN hidden neuron, how often its activation saturated
// (|silu(gate) * up| > T * the block's activation RMS), the frequency histogram and the hot/cold mask (RLE +
// sha256). Definitions: docs/rknot-format.md.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/model_file.h"
#include "gkq/saturation.h"
#include "gkq/workflows.h"

#include <cstdio>
#include <string>

namespace gkq::cli {

int cmd_profile(int argc, char** argv) {
    std::string model_path, text_path, out_path, tokenizer_path;
    double threshold = 1.0, min_frequency = 0.0;
    int64_t max_tokens = 0, threads = 0;
    ArgParser p("gkq profile MODEL --text FILE [--threshold T] [--min-frequency F] [--tokenizer F] -o MASKS",
                "Runs the calibration text FILE through MODEL (windows of the model's context, each from position 0)\n"
                "and counts, per block and per FFN hidden neuron j, the tokens on which |silu(gate) * up|_j exceeds\n"
                "T times the block's activation scale (the RMS of all its hidden activations over the text). A\n"
                "neuron is hot when that frequency is above F. Writes MASKS (JSON: counts, frequency histogram,\n"
                "run-length encoded mask with its sha256 per block) and prints a per-block summary.");
    p.positional("MODEL", "model file or folder", &model_path);
    p.option("--text", "FILE", "calibration text (UTF-8)", &text_path);
    p.option_double("--threshold", "T", "saturated when |a| > T * block RMS (default 1)", &threshold, 0.0, 1e6);
    p.option_double("--min-frequency", "F", "hot when the saturation frequency is above F, in [0, 1) (default 0)",
                    &min_frequency, 0.0, 0.999999);
    p.option("--tokenizer", "FILE", "llama2.c tokenizer.bin when the model carries none", &tokenizer_path);
    p.option_int("--max-tokens", "N", "profile only the first N tokens (0: all)", &max_tokens, 0, int64_t{1} << 40);
    p.option_int("--threads", "N", "threads (0: all)", &threads, 0, 4096);
    p.option("-o,--output", "MASKS", "masks file to write (JSON, replaced only when complete)", &out_path);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (text_path.empty() || out_path.empty()) {
        std::fprintf(stderr, "gkq: missing %s\n(see 'gkq profile --help')\n",
                     text_path.empty() ? "--text FILE" : "-o MASKS");
        return kExitBadInput;
    }
    if (int rc = refuse_output_over_input("profile", out_path, model_inputs(model_path, {text_path, tokenizer_path})))
        return rc;
    auto model = ModelFile::open(model_path);
    if (!model) {
        std::fprintf(stderr, "gkq profile: %s\n", model.message().c_str());
        return exit_code(model.status());
    }
    ProfileRequest request;
    request.model_label = model_path;
    request.text_path = text_path;
    request.tokenizer.given = tokenizer_path;
    request.tokenizer.hint = "pass --tokenizer FILE";
    request.max_tokens = max_tokens;
    request.threshold = threshold;
    request.min_frequency = min_frequency;
    request.n_threads = static_cast<int>(threads);
    Result<SaturationProfile> profile = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("profile");
        profile = profile_model(*model, request, bar.callback());
    }
    if (!profile) {
        if (profile.status().code() == StatusCode::Cancelled)
            std::fprintf(stderr, "gkq profile: %s; %s was not written\n", interrupted_text().c_str(), out_path.c_str());
        else
            std::fprintf(stderr, "gkq profile: %s\n", profile.message().c_str());
        return exit_code(profile.status());
    }
    const SaturationProfile& prof = *profile;
    if (Status s = write_saturation_profile(out_path, prof); !s) {
        std::fprintf(stderr, "gkq profile: %s\n", s.message().c_str());
        return exit_code(s);
    }
    std::printf(
        "model     %s\ntext      %s (%lld tokens)\nthreshold |a| > %g x block RMS; hot when frequency > %g\n"
        "masks     %s\n\n",
        model_path.c_str(), text_path.c_str(), static_cast<long long>(prof.n_tokens), threshold, min_frequency,
        out_path.c_str());
    std::printf("%5s  %12s  %7s  %7s  %s\n", "layer", "rms", "hot", "cold",
                "neurons by saturation frequency: 0 | <=.001 | <=.01 | <=.05 | <=.1 | <=.2 | <=.5 | <=1");
    for (const LayerSaturation& l : prof.layers) {
        std::string hist;
        for (uint64_t c : l.histogram) hist += (hist.empty() ? "" : " ") + std::to_string(c);
        std::printf("%5d  %12.6g  %7lld  %7lld  %s\n", l.layer_id, l.scale, static_cast<long long>(l.hot_count()),
                    static_cast<long long>(l.neuron_count - l.hot_count()), hist.c_str());
    }
    return kExitOk;
}

}  // namespace gkq::cli
