// gkq generate [MODEL|KNOT] [--tokenizer F] [-p PROMPT | --ids LIST] [--print-ids] [-n N] [--temp T] [--top-p P]
// [--seed S] [--threads N]: text (or token ids) from a model, as llama2.c's run.c prints it; prompt and generation
// speed on stderr.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"

#include "gkq/generate.h"
#include "gkq/model_file.h"
#include "gkq/sampler.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "gkq/workflows.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace gkq::cli {

namespace {

// run.c's safe_printf: a lone control byte (a raw byte token) is not printed. Bytes >= 0x80 are kept, unlike
// run.c, so characters that came out of byte-fallback tokens reach the terminal as UTF-8.
bool printable(std::string_view piece) {
    if (piece.empty()) return false;
    if (piece.size() > 1) return true;
    const auto c = static_cast<unsigned char>(piece[0]);
    return c >= 0x80 || std::isprint(c) || std::isspace(c);
}

std::string rate(int64_t n, double seconds) {
    char buf[160];
    if (n <= 0) return "none";
    if (seconds <= 0) {
        std::snprintf(buf, sizeof buf, "%lld tokens (too fast to time)", static_cast<long long>(n));
        return buf;
    }
    std::snprintf(buf, sizeof buf, "%lld tokens in %.2f ms, %.1f tokens/s", static_cast<long long>(n), seconds * 1e3,
                  static_cast<double>(n) / seconds);
    return buf;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
    std::string model_path;
    std::string tokenizer_path;
    std::string prompt;
    int64_t steps = 256;
    double temperature = 1.0;
    double top_p = 0.9;
    int64_t seed = 0;
    int64_t threads = 0;
    std::vector<int32_t> ids;
    bool print_ids = false;
    std::string activations = "q8";
    ArgParser p(
        "gkq generate [MODEL|KNOT] [--tokenizer F] [-p PROMPT | --ids LIST] [--print-ids] [-n N] [--temp T] "
        "[--top-p P] [--seed S] [--threads N] [--activations q8|f32]",
        "Generates text as llama2.c's run.c does: the prompt after BOS, then one sampled token per position,\n"
        "ending after N positions or at BOS/EOS. Prints the text (prompt included) to stdout, and the prompt\n"
        "and generation speed in tokens/s to stderr. The tokenizer is the model's own vocabulary (GGUF), else\n"
        "the one tokenizer.bin or tok*.bin beside the model, else --tokenizer. A knot runs directly: its\n"
        "low-rank records factored where that is cheaper, its vocabulary as the tokenizer.");
    p.positional("MODEL", "model file or folder (llama2.c .bin, GGUF, safetensors) or a knot " + demo_model_help(),
                 &model_path, false);
    p.option("--tokenizer", "FILE", "llama2.c tokenizer.bin to use instead of the model's own", &tokenizer_path);
    p.option("-p,--prompt", "TEXT", "text to start from (default: none, BOS only)", &prompt);
    p.option_ids("--ids", "LIST", "token ids to start from instead of a prompt, run exactly as given (no BOS added)",
                 &ids);
    p.flag("--print-ids", "print the token ids (the prompt's, then the generated ones) instead of the text",
           &print_ids);
    p.option_int("-n,--steps", "N",
                 "positions to run, the prompt's included, as run.c's -n (default 256; 0: the whole context)", &steps,
                 0, int64_t{1} << 31);
    p.option_double("--temp", "T", "temperature; 0 is greedy (default 1.0)", &temperature, 0.0, 100.0);
    p.option_double("--top-p", "P", "nucleus sampling threshold; 0 or 1 samples the whole distribution (default 0.9)",
                    &top_p, 0.0, 1.0);
    p.option_int("--seed", "S", "random seed (default: from the clock; printed on stderr)", &seed, 1, INT64_MAX);
    p.option_int("--threads", "N", "threads per matrix product (default 0: all cores)", &threads, 0, 1024);
    p.option_choice("--activations", "A", kActivationsQ8Help, &activations, {"q8", "f32"});
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (p.given("--ids") && p.given("--prompt")) {
        std::fprintf(stderr, "gkq generate: give --prompt or --ids, not both\n");
        return kExitBadInput;
    }
    if (!p.given("--seed"))
        seed = std::max<int64_t>(1, std::chrono::system_clock::now().time_since_epoch().count() & INT64_MAX);

    if (model_path.empty()) model_path = demo_model_dir();
    if (model_path.empty()) {
        std::fprintf(stderr, "gkq generate: missing MODEL (no bundled demo model was found; see --help)\n");
        return kExitBadInput;
    }
    TransformerOptions options;
    options.n_threads = static_cast<int>(threads);
    options.q8_activations = activations == "q8";
    TokenizerChoice choice;
    choice.given = tokenizer_path;
    choice.hint = "pass --tokenizer FILE";
    auto model = open_model_to_run(model_path, options, &choice);  // the tokenizer first, then the weights
    if (!model) {
        std::fprintf(stderr, "gkq generate: %s\n", model.message().c_str());
        return exit_code(model.status());
    }
    const Tokenizer* tokenizer = &*model->tokenizer;
    if (tokenizer->vocab_size() != model->config.vocab_size)
        std::fprintf(stderr, "gkq generate: warning: the tokenizer has %d tokens, the model %lld\n",
                     tokenizer->vocab_size(), static_cast<long long>(model->config.vocab_size));
    Transformer* transformer = model->transformer.get();

    SamplerOptions sampling;
    sampling.temperature = static_cast<float>(temperature);
    sampling.top_p = static_cast<float>(top_p);
    sampling.seed = static_cast<uint64_t>(seed);
    Sampler sampler(static_cast<int32_t>(model->config.vocab_size), sampling);
    GenerateOptions generate_options;
    generate_options.steps = steps;
    auto print_piece = [print_ids](std::string_view piece) {
        if (!print_ids && printable(piece)) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
        }
        return true;
    };
    bool first_id = true;
    auto print_id = [&](int32_t id) {
        if (!print_ids) return;
        std::printf("%s%d", first_id ? "" : ",", id);
        first_id = false;
    };
    if (!p.given("--ids") && print_ids) ids = tokenizer->encode(prompt, true, false);
    if (p.given("--ids") || print_ids) {
        for (int32_t id : ids) print_id(id);
        for (int32_t id : ids)
            if (id >= model->config.vocab_size) {
                std::fprintf(stderr, "\ngkq generate: token id %d is outside the vocabulary of %lld\n", id,
                             static_cast<long long>(model->config.vocab_size));
                return kExitBadInput;
            }
    }
    auto stats = p.given("--ids") || print_ids
                     ? generate(*transformer, *tokenizer, sampler, ids, generate_options, print_piece, print_id)
                     : generate(*transformer, *tokenizer, sampler, prompt, generate_options, print_piece);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!stats) {
        std::fprintf(stderr, "gkq generate: %s\n", stats.message().c_str());
        return exit_code(stats.status());
    }
    std::fprintf(stderr, "prompt:     %s\n", rate(stats->n_prompt_tokens, stats->prompt_seconds).c_str());
    std::fprintf(stderr, "generation: %s\n", rate(stats->n_generate_forwards, stats->generate_seconds).c_str());
    std::fprintf(stderr, "seed %lld, temperature %g, top-p %g, %d threads\n", static_cast<long long>(seed), temperature,
                 top_p, transformer->n_threads());
    return kExitOk;
}

}  // namespace gkq::cli
