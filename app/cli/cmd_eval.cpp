// gkq eval --base MODEL --candidate MODEL|KNOT --text FILE [...]: llama.cpp's --kl-divergence report of a
// candidate against its base over a text; gkq eval --model MODEL --text FILE: perplexity and bits per byte.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/progress_bar.h"

#include "gkq/evaluate.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gkq::cli {

namespace {

int exit_code_for(const Status& s) {
    if (s.code() == StatusCode::Cancelled) return kExitCancelled;
    return s.code() == StatusCode::Internal || s.code() == StatusCode::IoError ? kExitFailure : kExitBadInput;
}

int fail(const Status& s) {
    std::fprintf(stderr, "gkq eval: %s\n", s.message().c_str());
    return exit_code_for(s);
}

// The tokenizer: --tokenizer, else the model's own vocabulary, else the one tokenizer.bin / tok*.bin beside it.
Result<Tokenizer> pick_tokenizer(const Weights& m, int64_t vocab_size, const std::string& given) {
    auto t = tokenizer_for_model(m.label(), m.vocabulary(), vocab_size, given);
    if (!t && given.empty()) return error(t.status().code(), t.status().message() + ": pass --tokenizer FILE");
    return t;
}

Result<std::string> read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(StatusCode::NotFound, path + ": cannot open the text file");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return error(StatusCode::IoError, path + ": read failed");
    return ss.str();
}

nlohmann::json ppl_json(const PerplexityStats& s) {
    return {{"tokens", s.n_tokens},         {"bytes", s.n_bytes},         {"mean_nll", s.mean_nll},
            {"mean_nll_se", s.mean_nll_se}, {"perplexity", s.perplexity}, {"bits_per_byte", s.bits_per_byte}};
}

void print_report(const EvalReport& r, const std::string& base, const std::string& cand, bool json) {
    if (json) {
        nlohmann::json j = {{"text", r.text_label},   {"ctx", r.n_ctx},       {"stride", r.stride},
                            {"windows", r.n_windows}, {"tokens", r.n_tokens}, {"bytes", r.n_bytes},
                            {"seconds", r.seconds}};
        if (!r.compared) {
            j["model"] = base;
            j["perplexity"] = ppl_json(r.single);
        } else {
            const CompareStats& c = r.compare;
            j["base"] = base;
            j["candidate"] = cand;
            j["base_perplexity"] = ppl_json(c.base);
            j["candidate_perplexity"] = ppl_json(c.candidate);
            j["kld"] = {{"mean", c.mean_kld}, {"se", c.mean_kld_se}, {"median", c.median_kld},
                        {"p99", c.kld_p99},   {"p99_9", c.kld_p999}, {"max", c.max_kld}};
            j["same_top"] = {{"fraction", c.same_top}, {"se", c.same_top_se}};
            j["rms_delta_p"] = {{"value", c.rms_delta_p}, {"se", c.rms_delta_p_se}};
            j["ppl_ratio"] = {
                {"value", c.ppl_ratio}, {"se", c.ppl_ratio_se}, {"ln", c.ln_ppl_ratio}, {"ln_se", c.ln_ppl_ratio_se}};
        }
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    std::printf("text: %s, %llu bytes, %lld tokens scored; context %lld, stride %lld, %lld windows (%.1f s)\n",
                r.text_label.c_str(), static_cast<unsigned long long>(r.n_bytes), static_cast<long long>(r.n_tokens),
                static_cast<long long>(r.n_ctx), static_cast<long long>(r.stride), static_cast<long long>(r.n_windows),
                r.seconds);
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
    std::printf("Median  KLD: %12.6f\n\n", c.median_kld);
    std::printf("====== Token probability statistics ======\n");
    std::printf("RMS Δp     : %9.3f ± %.3f %%\n", 100.0 * c.rms_delta_p, 100.0 * c.rms_delta_p_se);
    std::printf("Same top p : %9.3f ± %.3f %%\n", 100.0 * c.same_top, 100.0 * c.same_top_se);
}

}  // namespace

int cmd_eval(int argc, char** argv) {
    std::string base_path, cand_path, model_path, text_path, tokenizer_path, save_base, base_logits;
    int64_t ctx = 0, stride = 0, threads = 0;
    bool json = false;
    ArgParser p(
        "gkq eval --base MODEL --candidate MODEL|KNOT --text FILE [--ctx N] [--stride N] [--json]\n"
        "       gkq eval --model MODEL|KNOT --text FILE [--ctx N] [--stride N] [--json]",
        "Compares a candidate's next-token distributions with its base model's over sliding windows of a text,\n"
        "with the quantities of llama.cpp's --kl-divergence report: mean KLD (base || candidate) ± SE, median,\n"
        "99th / 99.9th percentile and maximum KLD, top-token agreement (same top p), RMS of the correct token's\n"
        "probability change, perplexity of both and their ratio, and bits per byte of both. With --model alone:\n"
        "perplexity and bits per byte. Each window is BOS + N-1 text tokens; windows start every --stride tokens\n"
        "and score only tokens no earlier window scored, so every token is scored once. The tokenizer is the\n"
        "base model's own vocabulary (GGUF, knot), else the one tokenizer.bin / tok*.bin beside it, else --tokenizer.");
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
    p.option("--save-base", "FILE", "also write the base logits to FILE for later runs", &save_base);
    p.option("--base-logits", "FILE", "reuse base logits saved by --save-base instead of running --base", &base_logits);
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
    // The bundled demo model stands in for a missing --model (nothing else given) or --base (a candidate given).
    if (model_path.empty() && base_path.empty()) {
        if (cand_path.empty() && save_base.empty() && base_logits.empty())
            model_path = demo_model_dir();
        else
            base_path = demo_model_dir();
    }
    const bool single = !model_path.empty();
    if (single && (!base_path.empty() || !cand_path.empty() || !save_base.empty() || !base_logits.empty()))
        return usage("--model cannot be combined with --base, --candidate, --save-base or --base-logits");
    if (!single && cand_path.empty()) return usage("missing --candidate MODEL (or --model MODEL for perplexity alone)");
    if (!single && base_path.empty()) return usage("missing --base MODEL (no bundled demo model was found)");
    if (!base_logits.empty() && !save_base.empty()) return usage("--save-base and --base-logits exclude each other");

    auto text = read_text(text_path);
    if (!text) return fail(text.status());
    TransformerOptions topt;
    topt.n_threads = static_cast<int>(threads);
    topt.max_batch = 64;

    auto first_weights = open_weights(single ? model_path : base_path);
    if (!first_weights) return fail(first_weights.status());
    auto first = Transformer::load(**first_weights, topt);
    if (!first) return fail(first.status());
    auto tokenizer = pick_tokenizer(**first_weights, first->config().vocab_size, tokenizer_path);
    if (!tokenizer) return fail(tokenizer.status());
    EvalText et;
    et.tokens = tokenizer->encode(*text, false, false);
    et.bos_id = tokenizer->bos_id();
    et.n_bytes = text->size();
    et.text_hash = fnv1a64(text->data(), text->size());
    EvalOptions eo;
    eo.n_ctx = ctx;
    eo.stride = stride;

    ProgressBar bar("eval");
    Result<EvalReport> report = Status(StatusCode::Internal, "unset");
    if (single) {
        report = evaluate_perplexity(*first, et, eo, bar.callback());
    } else {
        auto cand_weights = open_weights(cand_path);
        if (!cand_weights) return fail(cand_weights.status());
        auto cand = Transformer::load(**cand_weights, topt);
        if (!cand) return fail(cand.status());
        if (!base_logits.empty()) {
            auto resolved = resolve_eval_options(eo, std::min(first->config().context_length, first->n_context()));
            if (!resolved) return fail(resolved.status());
            auto saved = load_base_logits(base_logits, et, cand->config().vocab_size, *resolved);
            if (!saved) return fail(saved.status());
            report = evaluate_compare_saved(*saved, *cand, bar.callback());
        } else {
            BaseLogits keep;
            report = evaluate_compare(*first, *cand, et, eo, bar.callback(), save_base.empty() ? nullptr : &keep);
            if (report && !save_base.empty()) {
                keep.path = save_base;
                if (Status s = save_base_logits(save_base, keep); !s) return fail(s);
            }
        }
    }
    bar.clear();
    if (!report) return fail(report.status());
    report->text_label = text_path;
    print_report(*report, single ? model_path : base_path, cand_path, json);
    return kExitOk;
}

}  // namespace gkq::cli
