// gkq eval --base MODEL --candidate MODEL|KNOT --text FILE [...]: llama.cpp's --kl-divergence report of a
// candidate against its base over a text; gkq eval --model MODEL --text FILE: perplexity and bits per byte.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/workflows.h"

#include <cstdio>
#include <string>
#include <vector>

namespace gkq::cli {

namespace {

int fail(const Status& s) {
    std::fprintf(stderr, "gkq eval: %s\n", s.message().c_str());
    return exit_code(s);
}

// The report as `gkq eval` prints it: the JSON document of the workflows layer, or llama.cpp's text layout.
void print_report(const EvalRun& run, bool json) {
    if (json) {
        std::printf("%s\n", eval_run_json(run).c_str());
        return;
    }
    const EvalReport& r = run.report;
    const std::string& base = run.model;
    const std::string& cand = run.candidate;
    std::printf("text: %s, %llu bytes, %lld tokens scored; context %lld, stride %lld, %lld windows (%.1f s)\n",
                r.text_label.c_str(), static_cast<unsigned long long>(r.n_bytes), static_cast<long long>(r.n_tokens),
                static_cast<long long>(r.n_ctx), static_cast<long long>(r.stride), static_cast<long long>(r.n_windows),
                r.seconds);
    std::printf("protocol: %s\n", run.protocol.describe().c_str());
    if (!r.compared) {
        std::printf("model: %s\n", base.c_str());
        std::printf("PPL            : %12.6f   (mean NLL %.6f ± %.6f nats)\n", r.single.perplexity, r.single.mean_nll,
                    r.single.mean_nll_se);
        std::printf("bits per byte  : %12.6f\n", r.single.bits_per_byte);
        return;
    }
    const CompareStats& c = r.compare;
    std::printf("base:      %s\ncandidate: %s\n\n", base.c_str(), cand.c_str());
    std::printf("====== Perplexity statistics ======\n");
    std::printf("PPL(base)             : %12.6f   (bits per byte %.6f)\n", c.base.perplexity, c.base.bits_per_byte);
    std::printf("PPL(Q)                : %12.6f   (bits per byte %.6f)\n", c.candidate.perplexity,
                c.candidate.bits_per_byte);
    std::printf("Mean ln(PPL(Q)/PPL(base)): %10.6f ± %10.6f\n", c.ln_ppl_ratio, c.ln_ppl_ratio_se);
    std::printf("Mean PPL(Q)/PPL(base) : %12.6f ± %10.6f\n\n", c.ppl_ratio, c.ppl_ratio_se);
    std::printf("====== KL divergence statistics ======\n");
    std::printf("Mean    KLD: %12.6f ± %10.6f\n", c.mean_kld, c.mean_kld_se);
    std::printf("Maximum KLD: %12.6f\n", c.max_kld);
    std::printf("99.9%%   KLD: %12.6f\n", c.kld_p999);
    std::printf("99.0%%   KLD: %12.6f\n", c.kld_p99);
    std::printf("Median  KLD: %12.6f\n", c.median_kld);
    if (c.kld_exact())
        std::printf("KLD over   : the whole vocabulary (%lld tokens)\n\n", static_cast<long long>(c.n_vocab));
    else
        std::printf(
            "KLD over   : the base's top %lld of %lld tokens a position and one bucket for the rest "
            "(--exact-base: the whole vocabulary)\n\n",
            static_cast<long long>(c.kld_top_k), static_cast<long long>(c.n_vocab));
    std::printf("====== Token probability statistics ======\n");
    std::printf("RMS Δp     : %9.3f ± %.3f %%\n", 100.0 * c.rms_delta_p, 100.0 * c.rms_delta_p_se);
    std::printf("Same top p : %9.3f ± %.3f %%\n", 100.0 * c.same_top, 100.0 * c.same_top_se);
}

}  // namespace

int cmd_eval(int argc, char** argv) {
    std::string base_path, cand_path, model_path, text_path, tokenizer_path, save_base, base_logits;
    int64_t ctx = 0, stride = 0, threads = 0, top_k = kDefaultBaseTopK;
    bool json = false, per_document = false, exact_base = false;
    std::string separator;
    std::string activations = "f32";
    ArgParser p(
        "gkq eval --base MODEL --candidate MODEL|KNOT --text FILE [--ctx N] [--stride N] [--json]\n"
        "       gkq eval --model MODEL|KNOT --text FILE [--ctx N] [--stride N] [--json]",
        "Compares a candidate's next-token distributions with its base model's over sliding windows of a text,\n"
        "with the quantities of llama.cpp's --kl-divergence report: mean KLD (base || candidate) ± SE, median,\n"
        "99th / 99.9th percentile and maximum KLD, top-token agreement (same top p), RMS of the correct token's\n"
        "probability change, perplexity of both and their ratio, and bits per byte of both. With --model alone:\n"
        "perplexity and bits per byte. Each window is BOS + N-1 text tokens; windows start every --stride tokens\n"
        "and score only tokens no earlier window scored, so every token is scored once. The tokenizer is the\n"
        "base model's own vocabulary (GGUF, knot), else the one tokenizer.bin / tok*.bin beside it, else --tokenizer.\n"
        "The report names its protocol: llama.cpp's --kl-divergence one (the default: the text as one token stream,\n"
        "document separators scored as text, and counted) or --per-document (each document from BOS).");
    p.option("--base", "MODEL", "the reference model (llama2.c .bin, GGUF, safetensors, knot) " + demo_model_help(),
             &base_path);
    p.option("--candidate", "MODEL", "the model to compare with it (any model file or a knot)", &cand_path);
    p.option("--model", "MODEL",
             "perplexity and bits per byte of this model alone; without --model, --base and --candidate: the "
             "bundled demo model " +
                 demo_model_help(),
             &model_path);
    p.option("--text", "FILE", "UTF-8 text to score (required)", &text_path);
    p.option_int("--ctx", "N", "positions per window, BOS included (default: the model's context, at most 512)", &ctx,
                 2, int64_t{1} << 20);
    p.option_int("--stride", "N", "text tokens between window starts, 1..ctx (default ctx/2)", &stride, 1,
                 int64_t{1} << 20);
    p.option("--tokenizer", "FILE", "llama2.c tokenizer.bin to use instead of the model's own", &tokenizer_path);
    p.option_int("--threads", "N", "threads per matrix product (default 0: all cores); results do not depend on it",
                 &threads, 0, 1024);
    p.option_choice("--activations", "A", kActivationsF32Help, &activations, {"q8", "f32"});
    p.option("--save-base", "FILE", "also write the base logits to FILE for later runs", &save_base);
    p.option("--base-logits", "FILE",
             "reuse base logits saved by --save-base instead of running --base (the file names its base model, "
             "which is the default --base)",
             &base_logits);
    p.option_int("--base-top-k", "N",
                 "base logits kept per position: the N largest, log Z and the rest's mass (default " +
                     std::to_string(kDefaultBaseTopK) + "); KLD sums them plus one bucket for the rest",
                 &top_k, 1, int64_t{1} << 24);
    p.flag("--exact-base",
           "run base and candidate window by window with full logits (KLD over the whole vocabulary; both models in "
           "memory at once). Default: the base runs first, its compact logits kept, then it is released",
           &exact_base);
    p.option("--doc-separator", "S",
             "the text between documents (default: '<|endoftext|>' and the tokenizer's EOS piece, e.g. '</s>')",
             &separator);
    p.flag("--per-document",
           "score each document on its own: split at the separators (not scored), BOS at each document's start, "
           "windows never crossing documents (default: llama.cpp's --kl-divergence protocol, the text as one stream)",
           &per_document);
    p.flag("--json", "print the report as JSON", &json);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    auto usage = [](const std::string& m) {
        std::fprintf(stderr, "gkq eval: %s (see --help)\n", m.c_str());
        return kExitBadInput;
    };
    if (text_path.empty()) return usage("missing --text FILE");
    if (p.given("--doc-separator") && separator.empty()) return usage("--doc-separator: an empty separator");
    // Saved base logits name the base model they came from: without --base, the session takes that one (never the
    // demo model). Otherwise the bundled demo model stands in for a missing --model (nothing else given) or --base
    // (a candidate given).
    const bool base_from_logits = !base_logits.empty() && base_path.empty() && model_path.empty();
    if (model_path.empty() && base_path.empty() && !base_from_logits) {
        if (cand_path.empty() && save_base.empty())
            model_path = demo_model_dir();
        else
            base_path = demo_model_dir();
    }
    const bool single = !model_path.empty();
    if (single && (!base_path.empty() || !cand_path.empty() || !save_base.empty() || !base_logits.empty()))
        return usage("--model cannot be combined with --base, --candidate, --save-base or --base-logits");
    if (!single && cand_path.empty()) return usage("missing --candidate MODEL (or --model MODEL for perplexity alone)");
    if (!single && base_path.empty() && !base_from_logits)
        return usage("missing --base MODEL (no bundled demo model was found)");
    if (!base_logits.empty() && !save_base.empty()) return usage("--save-base and --base-logits exclude each other");
    if (!save_base.empty()) {
        std::vector<std::string> inputs = model_inputs(base_path, {text_path, tokenizer_path});
        for (const std::string& f : model_inputs(cand_path)) inputs.push_back(f);
        if (int rc = refuse_output_over_input("eval", save_base, inputs)) return rc;
    }

    EvalRequest request;
    request.base = single ? model_path : base_path;
    request.text_path = text_path;
    request.tokenizer.given = tokenizer_path;
    request.tokenizer.hint = "pass --tokenizer FILE";
    request.windows.n_ctx = ctx;
    request.windows.stride = stride;
    request.n_threads = static_cast<int>(threads);
    request.q8_activations = activations == "q8";
    request.save_base = save_base;
    request.base_logits = base_logits;
    request.per_document = per_document;
    request.doc_separator = separator;
    request.exact_base = exact_base;
    request.base_top_k = top_k;
    auto session = EvalSession::open(request);
    if (!session) return fail(session.status());

    ProgressBar bar("eval");
    Result<EvalRun> run = single ? session->perplexity(bar.callback()) : session->compare(cand_path, bar.callback());
    bar.clear();
    if (!run && run.status().code() == StatusCode::Cancelled)
        return fail(Status(StatusCode::Cancelled,
                           interrupted_text() + (save_base.empty() ? "" : "; " + save_base + " was not written")));
    if (!run) return fail(run.status());
    print_report(*run, json);
    return kExitOk;
}

}  // namespace gkq::cli
