// gkq: the command-line face of GKQ Workbench. Every subcommand calls the same core functions as the GUI.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "gkq/libraries.h"

#include <cstdio>
#include <cstring>
#include <string>

#ifndef GKQ_VERSION
#define GKQ_VERSION "unknown"
#endif

namespace {

struct Command {
    const char* name;
    const char* summary;
    int (*run)(int argc, char** argv);
};

const Command kCommands[] = {
    {"inspect", "list the format, architecture and tensors of a model file", gkq::cli::cmd_inspect},
    {"generate", "generate text from a model (greedy or sampled), with tokens/s", gkq::cli::cmd_generate},
    {"analyze", "singular-value spectrum of every weight matrix: ranks, errors, heavy-tail metrics",
     gkq::cli::cmd_analyze},
    {"quantize", "encode a model into a knot with a preset; per-tensor size and error table", gkq::cli::cmd_quantize},
    {"verify", "check every record of a knot: CRC32, descriptor, payload decodes", gkq::cli::cmd_verify},
    {"reconstruct", "decode a knot into a safetensors, GGUF or llama2.c model", gkq::cli::cmd_reconstruct},
    {"export", "GGUF that llama.cpp runs: native quant types kept or made (q4_k_m ...), llama.cpp's tokenizer keys",
     gkq::cli::cmd_export},
    {"merge", "combine the shard knots of a `quantize --shard i/N` run into one knot", gkq::cli::cmd_merge},
    {"eval", "KL divergence, top-token agreement and perplexity of a candidate against its base model",
     gkq::cli::cmd_eval},
    {"profile", "FFN neuron saturation masks from a calibration text (per block: counts, histogram, RLE mask)",
     gkq::cli::cmd_profile},
    {"imatrix", "importance matrix of a calibration text in llama.cpp's imatrix format (for quantize --imatrix)",
     gkq::cli::cmd_imatrix},
    {"rknot", "rknot tuning files: encode from a knot, show, verify, set fields (validated)", gkq::cli::cmd_rknot},
    {"bench", "reconstruction kernels: GB/s against memset, sgemm and memcpy measured in the same run",
     gkq::cli::cmd_bench},
    {"tokenize", "token ids and pieces of a text (SPM and byte-level BPE vocabularies), like llama-tokenize",
     gkq::cli::cmd_tokenize},
    {"logits", "the logits of every position of a token sequence, raw float32 or .npy (to compare runtimes)",
     gkq::cli::cmd_logits},
    {"serve", "HTTP inference endpoint (io_uring/epoll): /health /infer /metrics /v1/completions ...",
     gkq::cli::cmd_serve},
    {"synth", "random checkpoint with the exact shapes of a named model and heavy-tailed spectra", gkq::cli::cmd_synth},
};

void print_help() {
    std::printf(
        "usage: gkq COMMAND [options]   (gkq COMMAND --help for a command's options)\n\n"
        "GKQ Workbench command line: the workbench's engine, scriptable.\n\ncommands:\n");
    for (const auto& c : kCommands) std::printf("  %-12s%s\n", c.name, c.summary);
    std::printf(
        "\noptions:\n  -h, --help  show this help\n  --version   print the version\n\n"
        "exit codes: 0 success, 1 failure, 2 bad options or bad input file, 130 cancelled by SIGINT, 143 by SIGTERM\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        print_help();
        return gkq::cli::kExitBadInput;
    }
    const char* cmd = argv[1];
    if (!std::strcmp(cmd, "-h") || !std::strcmp(cmd, "--help") || !std::strcmp(cmd, "help")) {
        print_help();
        return gkq::cli::kExitOk;
    }
    if (!std::strcmp(cmd, "--version")) {
        std::printf("gkq %s\n", GKQ_VERSION);
        for (const gkq::LibraryVersion& l : gkq::library_versions())
            std::printf("  %s %s%s\n", l.name.c_str(), l.version.c_str(), l.run_time ? "" : " (headers)");
        return gkq::cli::kExitOk;
    }
    for (const auto& c : kCommands)
        if (!std::strcmp(cmd, c.name)) return gkq::cli::exit_code_after_signals(c.run(argc - 1, argv + 1));
    std::fprintf(stderr, "gkq: unknown command '%s' (see 'gkq --help')\n", cmd);
    return gkq::cli::kExitBadInput;
}
