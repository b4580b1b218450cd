// gkq merge -o OUT.knot SHARD...: combine the shard knots of one `gkq quantize --shard i/N` run into the knot an
// unsharded run writes, byte for byte.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output_check.h"
#include "cli/progress_bar.h"

#include "gkq/quantize.h"

#include <cstdio>

namespace gkq::cli {

int cmd_merge(int argc, char** argv) {
    std::string out;
    std::vector<std::string> shards;
    ArgParser p("gkq merge -o OUT.knot SHARD...",
                "Merges the N shard knots of one `gkq quantize --shard i/N` run (given in any order) into one knot.\n"
                "Checks that they come from the same run (equal model config, tokenizer, metadata, preset, overrides\n"
                "and gkq version), that each shard appears once and every tensor exactly once; records are copied\n"
                "CRC-checked, not re-encoded.");
    p.positional_list("SHARD", "shard knots 0/N .. N-1/N", &shards, 1);
    p.option("-o,--output", "OUT.knot", "knot file to write", &out);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (out.empty()) {
        std::fprintf(stderr, "gkq: missing -o OUT.knot\n(see 'gkq merge --help')\n");
        return kExitBadInput;
    }
    if (int rc = refuse_output_over_input("merge", out, shards)) return rc;
    Result<MergeReport> r = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("merge");
        r = merge_knots(shards, out, bar.callback());
    }
    if (!r) {
        const StatusCode c = r.status().code();
        if (c == StatusCode::Cancelled)
            std::fprintf(stderr, "gkq merge: %s; %s was not written\n", interrupted_text().c_str(), out.c_str());
        else
            std::fprintf(stderr, "gkq merge: %s\n", r.message().c_str());
        return exit_code(c);
    }
    std::printf("wrote %s: %zu records from %zu shards, %s bytes\n", r->path.c_str(), r->n_records, r->n_shards,
                with_commas(r->file_bytes).c_str());
    return kExitOk;
}

}  // namespace gkq::cli
