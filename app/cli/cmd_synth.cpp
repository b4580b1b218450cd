// gkq synth --like NAME -o DIR: a random checkpoint with the exact shapes and parameter count of a published model
// and trained-like (heavy-tailed) spectra, streamed tensor by tensor through the HF or GGUF writer.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/synth.h"

#include <cstdio>
#include <filesystem>

namespace gkq::cli {

namespace {

std::string model_table() {
    std::string t = "  NAME             layers   dim    ffn  heads kv    vocab  tied  params          gkq runs it\n";
    for (const SynthModel& m : synth_models()) {
        char line[256];
        std::snprintf(line, sizeof line, "  %-15s %6lld %5lld %6lld %5lld %3lld %8lld  %-4s  %-15s %s\n",
                      std::string(m.name).c_str(), static_cast<long long>(m.n_layers), static_cast<long long>(m.dim),
                      static_cast<long long>(m.hidden_dim), static_cast<long long>(m.n_heads),
                      static_cast<long long>(m.n_kv_heads), static_cast<long long>(m.vocab_size), m.tied ? "yes" : "no",
                      with_commas(static_cast<uint64_t>(m.params)).c_str(),
                      m.architecture.empty() ? ("no: " + std::string(m.model_type) + " has no architecture row").c_str()
                                             : ("yes (" + std::string(m.architecture) + ")").c_str());
        t += line;
    }
    return t;
}

}  // namespace

int cmd_synth(int argc, char** argv) {
    std::string like, out, dtype_text = "bf16", format_text = "hf";
    int64_t layers = 0, seed = 0, shard_mb = 5000;
    double alpha = 3.5;
    ArgParser p(
        "gkq synth --like NAME -o DIR [--layers N] [--dtype bf16|f16|f32] [--format hf|gguf] [--seed S]",
        "Writes a random checkpoint with the exact tensor shapes and parameter count of a published model (its\n"
        "config.json values), for trying the pipeline on a model-shaped file. Each matrix is W = U S V^T with\n"
        "singular values s_i ~ i^(-1/(2(alpha-1))), so the eigenvalues of W^T W follow a power law of exponent\n"
        "alpha (WeightWatcher's alpha), scaled to an element RMS of 0.02; U and V are exact orthogonal products of\n"
        "random permutations and random orthogonal 32x32 blocks (no SVD). Norm weights are 1, biases Gaussian.\n"
        "Deterministic: the same options and seed give the same bytes. Streams tensor by tensor (memory: the\n"
        "largest tensor in float32). HF layout: config.json and model.safetensors, or shards with\n"
        "model.safetensors.index.json above --shard-mb as save_pretrained does, plus tokenizer.bin; GGUF:\n"
        "model.gguf with the vocabulary inside. The tokenizer is synthetic, not the real model's: llama SPM with\n"
        "<unk> <s> </s>, the 256 byte tokens (every text encodes) and numbered words up to the vocabulary size, so\n"
        "generate, eval and quantize run on the checkpoint. DIR must be new or empty, so no model is ever\n"
        "replaced; files appear only when complete.\n\n"
        "Known models (the rest of gkq runs the llama and mistral architectures of its table; a qwen2 shape is\n"
        "written with its true tensors, biases included, and a config.json naming qwen2):\n" +
            model_table());
    p.option("--like", "NAME", "the model whose shapes to copy (see the table)", &like);
    p.option("-o,--output", "DIR", "folder to write (new or empty)", &out);
    p.option_int("--layers", "N", "keep only the first N layers (0: all)", &layers, 0, 1000000);
    p.option("--dtype", "T", "storage type of the weights: bf16 (default), f16, f32", &dtype_text);
    p.option("--format", "F", "hf (safetensors + config.json, default) or gguf", &format_text);
    p.option_int("--seed", "S", "random seed (default 0)", &seed, 0, INT64_MAX);
    p.option_double("--alpha", "A", "power-law exponent of the spectra (default 3.5)", &alpha, 1.05, 100.0);
    p.option_int("--shard-mb", "MB", "HF shard size limit in MB (default 5000, HF's 5GB)", &shard_mb, 1, 1000000000);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (like.empty() || out.empty()) {
        std::fprintf(stderr, "gkq synth: missing %s\n(see 'gkq synth --help')\n",
                     like.empty() ? "--like NAME" : "-o DIR");
        return kExitBadInput;
    }
    const SynthModel* m = find_synth_model(like);
    if (!m) {
        std::fprintf(stderr, "gkq synth: unknown model '%s'; known: %s\n", like.c_str(), synth_model_names().c_str());
        return kExitBadInput;
    }
    SynthOptions o;
    o.n_layers = layers;
    o.seed = static_cast<uint64_t>(seed);
    o.alpha = alpha;
    o.max_shard_bytes = static_cast<uint64_t>(shard_mb) * 1000000ULL;
    if (dtype_text == "bf16")
        o.dtype = DType::BF16;
    else if (dtype_text == "f16")
        o.dtype = DType::F16;
    else if (dtype_text == "f32")
        o.dtype = DType::F32;
    else {
        std::fprintf(stderr, "gkq synth: --dtype must be bf16, f16 or f32, not '%s'\n", dtype_text.c_str());
        return kExitBadInput;
    }
    if (format_text == "hf")
        o.format = SynthFormat::Hf;
    else if (format_text == "gguf")
        o.format = SynthFormat::Gguf;
    else {
        std::fprintf(stderr, "gkq synth: --format must be hf or gguf, not '%s'\n", format_text.c_str());
        return kExitBadInput;
    }
    if (layers > m->n_layers) {
        std::fprintf(stderr, "gkq synth: %s has %lld layers; --layers %lld is more\n", like.c_str(),
                     static_cast<long long>(m->n_layers), static_cast<long long>(layers));
        return kExitBadInput;
    }
    std::error_code ec;
    if (std::filesystem::exists(out, ec)) {
        if (!std::filesystem::is_directory(out, ec)) {
            std::fprintf(stderr, "gkq synth: %s exists and is not a folder; -o names the folder to write\n",
                         out.c_str());
            return kExitBadInput;
        }
        if (!std::filesystem::is_empty(out, ec)) {
            std::fprintf(stderr,
                         "gkq synth: %s is not empty; synth writes only into a new or empty folder, so it never "
                         "replaces a model\n",
                         out.c_str());
            return kExitBadInput;
        }
    }
    Result<SynthReport> r = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("synth");
        r = synth_model(*m, out, o, bar.callback());
    }
    if (!r) {
        if (r.status().code() == StatusCode::Cancelled)
            std::fprintf(stderr, "gkq synth: %s; %s was not written\n", interrupted_text().c_str(), out.c_str());
        else
            std::fprintf(stderr, "gkq synth: %s\n", r.message().c_str());
        return exit_code(r.status().code());
    }
    std::printf("wrote %s (%s, %s, like %s%s): %lld layers, %lld tensors, %s parameters, %s bytes\n", out.c_str(),
                format_text.c_str(), dtype_text.c_str(), like.c_str(),
                m->architecture.empty() ? "; gkq's architecture table has no row to run it" : "",
                static_cast<long long>(r->n_layers), static_cast<long long>(r->n_tensors),
                with_commas(static_cast<uint64_t>(r->n_params)).c_str(), with_commas(r->bytes).c_str());
    for (const std::string& f : r->files) std::printf("  %s\n", f.c_str());
    return kExitOk;
}

}  // namespace gkq::cli
