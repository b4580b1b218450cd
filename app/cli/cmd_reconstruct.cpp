// gkq reconstruct IN.knot -o OUT.{safetensors,gguf,bin}: decode every record to float32 and write a dense model that
// the readers (and llama.cpp / transformers / llama2.c) load.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/quantize.h"

#include <cstdio>

namespace gkq::cli {

int cmd_reconstruct(int argc, char** argv) {
    std::string in, out;
    int64_t threads = 0;
    bool force = false;
    ArgParser p("gkq reconstruct IN.knot -o OUT.{safetensors,gguf,bin}",
                "Decodes every record of a whole (merged) knot to float32 and writes the model in the format the\n"
                "output name ends with: .safetensors (HF naming, config.json beside it), .gguf (llama, with the\n"
                "knot's tokenizer), .bin (llama2.c version 0 checkpoint). The file appears only when complete;\n"
                "config.json is written after the tensors. A config.json beside the output that describes another\n"
                "model (architecture, sizes, vocabulary), or tokenizer files without one, is not replaced unless\n"
                "--force. SIGINT or SIGTERM cancels and writes nothing.");
    p.positional("IN.knot", "knot file (or .knot.gz)", &in);
    p.option("-o,--output", "OUT", "model file to write", &out);
    p.option_int("--threads", "N", "worker threads (0: one per CPU)", &threads, 0, 4096);
    p.flag("--force", "replace a config.json that describes another model", &force);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (out.empty()) {
        std::fprintf(stderr, "gkq: missing -o OUT.{safetensors,gguf,bin}\n(see 'gkq reconstruct --help')\n");
        return kExitBadInput;
    }
    if (int rc = refuse_output_over_input("reconstruct", out, {in})) return rc;
    Result<ReconstructReport> r = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("reconstruct");
        r = reconstruct(in, out, static_cast<int>(threads), bar.callback(), force);
    }
    if (!r) {
        const StatusCode c = r.status().code();
        if (c == StatusCode::Cancelled)
            std::fprintf(stderr, "gkq reconstruct: %s; %s was not written\n", interrupted_text().c_str(), out.c_str());
        else
            std::fprintf(stderr, "gkq reconstruct: %s\n", r.message().c_str());
        return exit_code(c);
    }
    if (!r->vocabulary_note.empty()) std::printf("vocabulary: %s\n", r->vocabulary_note.c_str());
    std::printf("wrote %s (%s): %zu tensors, %s parameters, %s bytes\n", r->path.c_str(), r->format.c_str(),
                r->n_tensors, with_commas(static_cast<uint64_t>(r->n_params)).c_str(),
                with_commas(r->file_bytes).c_str());
    return kExitOk;
}

}  // namespace gkq::cli
