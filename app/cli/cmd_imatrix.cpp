// gkq imatrix MODEL|KNOT --text FILE -o FILE: the importance matrix of a calibration text, computed and written as
// llama.cpp's llama-imatrix does (gkq/imatrix.h), for `gkq quantize --imatrix` and llama-quantize alike.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/imatrix.h"
#include "gkq/workflows.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace gkq::cli {

namespace {

int fail(const Status& s) {
    std::fprintf(stderr, "gkq imatrix: %s\n", s.message().c_str());
    return exit_code(s);
}

struct EntrySummary {
    double mean_sq = 0.0;  // mean over columns of sum / count: the mean square activation
    double max_sq = 0.0;   // largest column's sum / count
};

EntrySummary summarize(const ImatrixEntry& e) {
    EntrySummary s;
    const double count = e.counts.empty() ? 0.0 : static_cast<double>(e.counts[0]);
    if (count <= 0 || e.sums.empty()) return s;
    for (float v : e.sums) {
        const double a = static_cast<double>(v) / count;
        s.mean_sq += a;
        s.max_sq = std::max(s.max_sq, a);
    }
    s.mean_sq /= static_cast<double>(e.sums.size());
    return s;
}

// "12 s", "3 min 5 s"
std::string duration_text(double seconds) {
    const auto s = static_cast<long long>(seconds + 0.5);
    if (s < 60) return std::to_string(s) + " s";
    return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
}

}  // namespace

int cmd_imatrix(int argc, char** argv) {
    std::string model_path, text_path, out_path, tokenizer_path, gram_path, format_name = "gguf";
    int64_t ctx = 0, chunks = -1, threads = 0;
    bool json = false, process_output = false;
    ArgParser p(
        "gkq imatrix [MODEL|KNOT] --text FILE -o FILE [--gram FILE] [--chunks N] [--ctx N] [--output-format gguf|dat] "
        "[--json]",
        "Runs the model over a calibration text and writes, for every matrix of the transformer blocks (by their GGUF\n"
        "tensor names), the sum of squares of each input column's activations and the number of tokens:\n"
        "llama.cpp's importance matrix, as llama-imatrix computes it (the text with BOS cut into chunks of --ctx\n"
        "tokens, each chunk from BOS at position 0, every token counted) and in its file format (GGUF by default,\n"
        "the legacy .dat with --output-format dat), for `gkq quantize --imatrix` and llama-quantize --imatrix.\n"
        "A progress bar with the remaining time goes to stderr when it is a terminal; SIGINT (Ctrl-C) or SIGTERM\n"
        "cancels and writes nothing (exit 130 or 143).");
    p.positional("MODEL", "model file, folder or knot " + demo_model_help(), &model_path, false);
    p.option("--text", "FILE", "UTF-8 calibration text (required)", &text_path);
    p.option("-o,--output", "FILE", "imatrix file to write (replaced only when complete; required)", &out_path);
    p.option_int("--ctx", "N", "tokens per chunk, BOS included (default 512, at most the model's context)", &ctx, 1,
                 int64_t{1} << 20);
    p.option_int("--chunks", "N", "at most N chunks (default: every whole chunk of the text)", &chunks, 1,
                 int64_t{1} << 30);
    p.option("--output-format", "F", "gguf (llama.cpp's default) or dat (its legacy format)", &format_name);
    p.option("--gram", "FILE",
             "also write the activation Gram matrices X^T X (in double, one per distinct matrix input: q/k/v share "
             "one, gate/up share one) for quantize --gram and the whitened presets (svd-llm, q4_0-lqer); all are "
             "held in memory while collecting (the size is printed)",
             &gram_path);
    p.flag("--process-output",
           "also collect the classifier when it is not tied to the embedding (llama-imatrix --process-output)",
           &process_output);
    p.option("--tokenizer", "FILE", "llama2.c tokenizer.bin to use instead of the model's own", &tokenizer_path);
    p.option_int("--threads", "N", "threads per matrix product (default 0: all cores); results do not depend on it",
                 &threads, 0, 1024);
    p.flag("--json", "print the summary as JSON", &json);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    auto usage = [](const std::string& m) {
        std::fprintf(stderr, "gkq imatrix: %s (see --help)\n", m.c_str());
        return kExitBadInput;
    };
    if (text_path.empty()) return usage("missing --text FILE");
    if (out_path.empty()) return usage("missing -o FILE");
    if (format_name != "gguf" && format_name != "dat")
        return usage("--output-format: '" + format_name + "' is neither gguf nor dat");
    const ImatrixFormat format = format_name == "dat" ? ImatrixFormat::Legacy : ImatrixFormat::Gguf;
    if (model_path.empty()) {
        model_path = demo_model_dir();
        if (model_path.empty()) return usage("missing MODEL (no bundled demo model was found)");
    }
    if (int rc = refuse_output_over_input("imatrix", out_path, model_inputs(model_path, {text_path, tokenizer_path})))
        return rc;
    if (!gram_path.empty()) {
        if (gram_path == out_path) return usage("--gram and -o name the same file");
        if (int rc =
                refuse_output_over_input("imatrix", gram_path, model_inputs(model_path, {text_path, tokenizer_path})))
            return rc;
    }

    auto text = read_eval_text(text_path);
    if (!text) return fail(text.status());
    TransformerOptions topt;
    topt.n_threads = static_cast<int>(threads);
    topt.max_context = ctx;
    topt.release_mapped = true;
    TokenizerChoice choice;
    choice.given = tokenizer_path;
    choice.hint = "pass --tokenizer FILE";
    auto model = open_model_to_run(model_path, topt, &choice);  // the tokenizer first, then the weights
    if (!model) return fail(model.status());
    const Tokenizer* tok = &*model->tokenizer;
    const std::vector<int32_t> tokens = tok->encode(*text, tok->add_bos(), false);

    ImatrixOptions options;
    options.n_ctx = ctx > 0 ? ctx : std::min<int64_t>(512, model->transformer->n_context());
    options.n_chunks = chunks;
    options.process_output = process_output;
    options.dataset = text_path;

    const auto t0 = std::chrono::steady_clock::now();
    Result<Imatrix> m = error(StatusCode::Internal, "not run");
    GramSet gram;
    {
        ProgressBar bar("imatrix");
        ProgressFn draw = bar.callback();
        // The bar's label carries the time left, extrapolated from the chunks done so far.
        m = compute_imatrix(
            *model->transformer, tokens, tok->add_bos() ? tok->bos_id() : -1, options,
            [&](double fraction, std::string_view what) {
                const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                std::string label(what);
                if (fraction > 0 && fraction < 1)
                    label += ", " + duration_text(elapsed * (1 - fraction) / fraction) + " left";
                return draw(fraction, label);
            },
            gram_path.empty() ? nullptr : &gram);
        if (m) {
            if (Status s = write_imatrix(*m, out_path, format); !s) m = s;
        }
        if (m && !gram_path.empty()) {
            if (Status s = write_gram(gram, gram_path); !s) m = s;
        }
    }
    if (!m && m.status().code() == StatusCode::Cancelled)
        return fail(Status(StatusCode::Cancelled, interrupted_text() + "; " + out_path + " was not written"));
    if (!m) return fail(m.status());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (json) {
        nlohmann::ordered_json j;
        j["file"] = out_path;
        j["format"] = format_name;
        j["model"] = model->path;
        j["text"] = text_path;
        j["n_text_tokens"] = tokens.size();
        j["n_ctx"] = m->chunk_size;
        j["n_chunks"] = m->chunk_count;
        j["seconds"] = seconds;
        nlohmann::ordered_json entries = nlohmann::ordered_json::array();
        for (const ImatrixEntry& e : m->entries) {
            const EntrySummary s = summarize(e);
            entries.push_back({{"name", e.name},
                               {"n_cols", e.n_cols},
                               {"count", e.counts.empty() ? 0 : e.counts[0]},
                               {"mean_sq_activation", s.mean_sq},
                               {"max_sq_activation", s.max_sq}});
        }
        j["entries"] = entries;
        if (!gram_path.empty()) {
            j["gram_file"] = gram_path;
            j["gram_entries"] = gram.entries.size();
            j["gram_bytes"] = gram_collect_bytes(gram);
        }
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("text: %s, %zu tokens; %d chunks of %d tokens (%.1f s)\n", text_path.c_str(), tokens.size(),
                m->chunk_count, m->chunk_size, seconds);
    std::printf("%-28s %7s %9s %14s %14s\n", "tensor", "cols", "tokens", "mean x^2", "max x^2");
    for (const ImatrixEntry& e : m->entries) {
        const EntrySummary s = summarize(e);
        std::printf("%-28s %7lld %9lld %14.6g %14.6g\n", e.name.c_str(), static_cast<long long>(e.n_cols),
                    static_cast<long long>(e.counts.empty() ? 0 : e.counts[0]), s.mean_sq, s.max_sq);
    }
    std::printf("wrote %s (%s, %zu entries)\n", out_path.c_str(), format_name.c_str(), m->entries.size());
    if (!gram_path.empty())
        std::printf("wrote %s (Gram matrices of %zu inputs, %llu bytes of doubles held while collecting)\n",
                    gram_path.c_str(), gram.entries.size(), static_cast<unsigned long long>(gram_collect_bytes(gram)));
    return kExitOk;
}

}  // namespace gkq::cli
