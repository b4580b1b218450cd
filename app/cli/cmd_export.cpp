// gkq export KNOT|MODEL -o OUT.gguf [--type T | --keep] [--dense f16|f32]: a GGUF that llama.cpp runs (gkq/export.h),
// with one line per tensor saying what was written and why.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/export.h"

#include <cstdio>

namespace gkq::cli {

int cmd_export(int argc, char** argv) {
    std::string in, out, type, dense = "f16";
    bool keep = false;
    std::string types;
    for (const std::string& n : export_type_names()) types += (types.empty() ? "" : ", ") + n;
    ArgParser p("gkq export KNOT|MODEL -o OUT.gguf [--type T | --keep]",
                "Writes a GGUF that llama.cpp loads: the llama architecture keys and the vocabulary in llama.cpp's\n"
                "tokenizer keys (a llama2.c tokenizer as the llama sentencepiece vocabulary). --keep (the default):\n"
                "every matrix keeps its stored type where GGUF has it (a knot's q8_0 / q4_0 records, a model's\n"
                "f16 / q4_k / ... tensors: their bytes copied), dense --dense otherwise (low-rank records, decoded).\n"
                "--type T: every matrix quantized from its values to T without an importance matrix, with the\n"
                "per-tensor types llama-quantize writes for that file type (q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k) or\n"
                "T for every matrix as llama-quantize --pure; rows that T's blocks do not divide fall back as\n"
                "llama-quantize does (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, q2_k / q3_k -> q4_0, then f16),\n"
                "and the table marks them. Norms are f32. The file appears only when complete.");
    p.positional("KNOT|MODEL", "knot (.knot, .knot.gz) or model file / folder", &in);
    p.option("-o,--output", "OUT.gguf", "GGUF file to write", &out);
    p.option("--type", "T", "quantize every matrix: " + types, &type);
    p.flag("--keep", "keep the stored types (the default)", &keep);
    p.option("--dense", "f16|f32", "type of matrices GGUF has no stored type for (default f16)", &dense);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (out.empty()) {
        std::fprintf(stderr, "gkq: missing -o OUT.gguf\n(see 'gkq export --help')\n");
        return kExitBadInput;
    }
    if (keep && !type.empty()) {
        std::fprintf(stderr, "gkq export: --keep and --type %s exclude each other\n", type.c_str());
        return kExitBadInput;
    }
    ExportOptions o;
    o.type = type;
    if (dense == "f16")
        o.dense = DType::F16;
    else if (dense == "f32")
        o.dense = DType::F32;
    else {
        std::fprintf(stderr, "gkq export: --dense %s: f16 or f32\n", dense.c_str());
        return kExitBadInput;
    }
    if (int rc = refuse_output_over_input("export", out, {in})) return rc;
    Result<ExportReport> r = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("export");
        r = export_gguf(in, out, o, bar.callback());
    }
    if (!r) {
        if (r.status().code() == StatusCode::Cancelled)
            std::fprintf(stderr, "gkq export: %s; %s was not written\n", interrupted_text().c_str(), out.c_str());
        else
            std::fprintf(stderr, "gkq export: %s\n", r.message().c_str());
        return exit_code(r.status().code());
    }
    std::printf("%-28s %-14s %-8s %-8s %12s  %s\n", "tensor", "shape", "stored", "written", "bytes", "how");
    for (const ExportedTensor& t : r->tensors) {
        std::string shape;
        for (int64_t d : t.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
        std::string how = t.copied ? "stored bytes copied" : "from the values";
        if (t.written != t.wanted)
            how += "; rows of " + std::to_string(t.shape.back()) + " are not whole " +
                   std::string(dtype_name(t.wanted)) + " blocks: fell back to " + std::string(dtype_name(t.written));
        std::printf("%-28s %-14s %-8s %-8s %12s  %s\n", t.name.c_str(), shape.c_str(),
                    std::string(dtype_name(t.stored)).c_str(), std::string(dtype_name(t.written)).c_str(),
                    with_commas(t.bytes).c_str(), how.c_str());
    }
    if (!r->vocabulary_note.empty()) std::printf("vocabulary: %s\n", r->vocabulary_note.c_str());
    std::printf("wrote %s (gguf): %zu tensors, %s parameters, %s bytes; %zu fell back\n", r->path.c_str(),
                r->n_file_tensors, with_commas(static_cast<uint64_t>(r->n_params)).c_str(),
                with_commas(r->file_bytes).c_str(), r->n_fell_back);
    return kExitOk;
}

}  // namespace gkq::cli
