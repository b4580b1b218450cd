// gkq eval --base MODEL --candidate MODEL|KNOT --text FILE [...]: llama.cpp's --kl-divergence report of a
// candidate against its base over a text; gkq eval --model MODEL --text FILE: perplexity and bits per byte.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/evaluate.h"
#include "gkq/knot_model.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gkq::cli {

namespace {

int fail(const Status& s) {
    std::fprintf(stderr, "gkq eval: %s\n", s.message().c_str());
    return exit_code(s);
}

// The tokenizer: --tokenizer, else the model's own vocabulary, else the one tokenizer.bin / tok*.bin beside it.
Result<Tokenizer> pick_tokenizer(const LoadedModel& m, const std::string& given) {
    auto t = tokenizer_for_model(m.path, m.vocab, m.config.vocab_size, given);
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

// How the text was cut into what is scored (printed in every report).
struct Protocol {
    bool per_document = false;
    std::vector<std::string> separators;  // the document separators recognised
    int64_t n_separators = 0;             // occurrences in the text
    int64_t n_documents = 1;

    std::string name() const { return per_document ? "per-document" : "llama.cpp --kl-divergence"; }
    std::string describe() const {
        std::string seps;
        for (const std::string& x : separators) {
            std::string shown;  // control characters as \n, \t, \xNN so the line stays one line
            for (unsigned char ch : x) {
                char buf[8];
                if (ch == '\n')
                    shown += "\\n";
                else if (ch == '\t')
                    shown += "\\t";
                else if (ch < 0x20 || ch == 0x7f)
                    std::snprintf(buf, sizeof buf, "\\x%02x", ch), shown += buf;
                else
                    shown += static_cast<char>(ch);
            }
            seps += (seps.empty() ? "'" : ", '") + shown + "'";
        }
        if (per_document)
            return "per-document: " + std::to_string(n_documents) + " documents split at " + seps +
                   " (separators and the whitespace around them not scored), BOS at each document's start, windows "
                   "never cross documents";
        std::string s = "llama.cpp --kl-divergence: the text as one token stream, BOS at each window's start";
        if (n_separators > 0)
            s += "; its " + std::to_string(n_separators) + " document separators (" + seps +
                 ") are scored as text and documents get no BOS: --per-document scores each document on its own";
        return s;
    }
};

// The earliest occurrence at or after `from` of any separator: (position, length), or npos.
std::pair<size_t, size_t> find_separator(const std::string& text, const std::vector<std::string>& seps, size_t from) {
    std::pair<size_t, size_t> best{std::string::npos, 0};
    for (const std::string& s : seps) {
        const size_t at = text.find(s, from);
        if (at != std::string::npos && (at < best.first || (at == best.first && s.size() > best.second)))
            best = {at, s.size()};
    }
    return best;
}

std::string_view trim(std::string_view s) {
    const char* ws = " \t\r\n";
    const size_t a = s.find_first_not_of(ws);
    if (a == std::string_view::npos) return {};
    return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

// The scored tokens under `protocol` (its counts filled in).
EvalText make_eval_text(const std::string& text, const Tokenizer& tokenizer, Protocol& protocol) {
    EvalText et;
    et.bos_id = tokenizer.bos_id();
    std::vector<std::string_view> docs;
    size_t from = 0;
    for (;;) {
        const auto [at, len] = find_separator(text, protocol.separators, from);
        docs.push_back(std::string_view(text).substr(from, at == std::string::npos ? std::string::npos : at - from));
        if (at == std::string::npos) break;
        ++protocol.n_separators;
        from = at + len;
    }
    if (!protocol.per_document) {
        et.tokens = tokenizer.encode(text, false, false);
        et.n_bytes = text.size();
        et.text_hash = fnv1a64(text.data(), text.size());
        return et;
    }
    // The hash covers each document and where it ends, so saved base logits of another cut do not match.
    et.text_hash = fnv1a64("per-document", 12);
    protocol.n_documents = 0;
    for (std::string_view d : docs) {
        d = trim(d);
        if (d.empty()) continue;
        ++protocol.n_documents;
        et.doc_starts.push_back(static_cast<int64_t>(et.tokens.size()));
        const std::vector<int32_t> t = tokenizer.encode(d, false, false);
        et.tokens.insert(et.tokens.end(), t.begin(), t.end());
        et.n_bytes += d.size();
        et.text_hash = fnv1a64(d.data(), d.size(), et.text_hash);
        const uint64_t size = d.size();
        et.text_hash = fnv1a64(&size, sizeof size, et.text_hash);
    }
    return et;
}

nlohmann::json ppl_json(const PerplexityStats& s) {
    return {{"tokens", s.n_tokens},         {"bytes", s.n_bytes},         {"mean_nll", s.mean_nll},
            {"mean_nll_se", s.mean_nll_se}, {"perplexity", s.perplexity}, {"bits_per_byte", s.bits_per_byte}};
}

void print_report(const EvalReport& r, const Protocol& protocol, const std::string& base, const std::string& cand,
                  bool json) {
    if (json) {
        nlohmann::json j = {{"text", r.text_label},   {"ctx", r.n_ctx},       {"stride", r.stride},
                            {"windows", r.n_windows}, {"tokens", r.n_tokens}, {"bytes", r.n_bytes},
                            {"seconds", r.seconds}};
        j["protocol"] = {{"name", protocol.name()},
                         {"description", protocol.describe()},
                         {"separators", protocol.separators},
                         {"n_separators", protocol.n_separators},
                         {"n_documents", protocol.n_documents}};
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
    std::printf("protocol: %s\n", protocol.describe().c_str());
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
    bool json = false, per_document = false;
    std::string separator;
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
    p.option("--save-base", "FILE", "also write the base logits to FILE for later runs", &save_base);
    p.option("--base-logits", "FILE",
             "reuse base logits saved by --save-base instead of running --base (the file names its base model, "
             "which is the default --base)",
             &base_logits);
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
    // Saved base logits name the base model they came from: that one is the base, never the demo model.
    if (!base_logits.empty() && base_path.empty() && model_path.empty()) {
        auto named = base_logits_model(base_logits);
        if (!named) return fail(named.status());
        if (named->empty())
            return usage(base_logits + " does not name its base model (saved by an older gkq): pass --base MODEL, " +
                         "the model it was saved with");
        std::error_code ec;
        if (!std::filesystem::exists(*named, ec))
            return usage(base_logits + " was saved with base model " + *named +
                         ", which is not there: pass --base MODEL with that model");
        base_path = *named;
    }
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

    if (!save_base.empty()) {
        std::vector<std::string> inputs = model_inputs(base_path, {text_path, tokenizer_path});
        for (const std::string& f : model_inputs(cand_path)) inputs.push_back(f);
        if (int rc = refuse_output_over_input("eval", save_base, inputs)) return rc;
    }
    auto text = read_text(text_path);
    if (!text) return fail(text.status());
    TransformerOptions topt;
    topt.n_threads = static_cast<int>(threads);
    topt.max_batch = 64;

    auto first = load_model(single ? model_path : base_path, topt);
    if (!first) return fail(first.status());
    auto tokenizer = pick_tokenizer(*first, tokenizer_path);
    if (!tokenizer) return fail(tokenizer.status());
    if (p.given("--doc-separator") && separator.empty()) return usage("--doc-separator: an empty separator");
    Protocol protocol;
    protocol.per_document = per_document;
    if (!separator.empty()) {
        protocol.separators = {separator};
    } else {
        protocol.separators = {"<|endoftext|>"};
        // llama2.c's tokenizer.bin spells EOS "\n</s>\n": the text between documents is the tag itself.
        const std::string eos(trim(tokenizer->piece(tokenizer->eos_id())));
        if (!eos.empty() && eos != protocol.separators[0]) protocol.separators.push_back(eos);
    }
    EvalText et = make_eval_text(*text, *tokenizer, protocol);
    EvalOptions eo;
    eo.n_ctx = ctx;
    eo.stride = stride;

    ProgressBar bar("eval");
    Result<EvalReport> report = Status(StatusCode::Internal, "unset");
    if (single) {
        report = evaluate_perplexity(*first->transformer, et, eo, bar.callback());
    } else {
        auto cand = load_model(cand_path, topt);
        if (!cand) return fail(cand.status());
        if (!base_logits.empty()) {
            auto resolved =
                resolve_eval_options(eo, std::min(first->config.context_length, first->transformer->n_context()));
            if (!resolved) return fail(resolved.status());
            auto saved = load_base_logits(base_logits, et, cand->config.vocab_size, *resolved);
            if (!saved) return fail(saved.status());
            saved->text.doc_starts = et.doc_starts;  // the tokens and the cut (in the text hash) are the saved ones
            report = evaluate_compare_saved(*saved, *cand->transformer, bar.callback());
        } else {
            BaseLogits keep;
            report = evaluate_compare(*first->transformer, *cand->transformer, et, eo, bar.callback(),
                                      save_base.empty() ? nullptr : &keep);
            if (report && !save_base.empty()) {
                keep.path = save_base;
                std::error_code ec;
                const std::filesystem::path abs = std::filesystem::absolute(base_path, ec);
                keep.model = ec ? base_path : abs.lexically_normal().string();
                if (Status s = save_base_logits(save_base, keep); !s) return fail(s);
            }
        }
    }
    bar.clear();
    if (!report && report.status().code() == StatusCode::Cancelled)
        return fail(Status(StatusCode::Cancelled,
                           interrupted_text() + (save_base.empty() ? "" : "; " + save_base + " was not written")));
    if (!report) return fail(report.status());
    report->text_label = text_path;
    print_report(*report, protocol, single ? model_path : base_path, cand_path, json);
    return kExitOk;
}

}  // namespace gkq::cli
