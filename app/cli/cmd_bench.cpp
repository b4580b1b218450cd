// gkq bench reconstruct [--quick] [--runs N] [--threads N] [--cpu-only | --gpu-only] [--json]: the reconstruction
// kernels against baselines measured in the same run (kernels/include/gkq/kernels_bench.h).
#include "cli/args.h"
#include "cli/commands.h"

#include "gkq/kernels_bench.h"

#include <cstdio>
#include <iostream>

namespace gkq::cli {

int cmd_bench(int argc, char** argv) {
    std::string what;
    bool quick = false, json = false, cpu_only = false, gpu_only = false;
    int64_t runs = 5, threads = 0;
    ArgParser p("gkq bench reconstruct [--quick] [--runs N] [--threads N] [--cpu-only | --gpu-only] [--json]",
                "Measures the reconstruction kernels against baselines from the same run: reconstruct GB/s for\n"
                "4096 x 4096, 4096 x 11008 and 8192 x 8192 at ranks 3, 16, 64, 256 against a memset of the same bytes\n"
                "and OpenBLAS sgemm on the same product; dequantization against a memcpy of the same bytes; and, with\n"
                "a CUDA device, the GPU kernel against the device's memset and copy. Times are medians.");
    p.positional("WHAT", "what to measure: reconstruct", &what);
    p.flag("--quick", "small sizes (seconds; in-cache, so not a bandwidth measurement)", &quick);
    p.option_int("--runs", "N", "timed runs per number, after one warm-up (default 5)", &runs, 1, 1000);
    p.option_int("--threads", "N", "CPU threads for kernels and baselines (default: one per CPU core)", &threads, 1,
                 1024);
    p.flag("--cpu-only", "skip the GPU section", &cpu_only);
    p.flag("--gpu-only", "skip the CPU sections", &gpu_only);
    p.flag("--json", "print one JSON document instead of the tables", &json);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (what != "reconstruct") {
        std::fprintf(stderr, "gkq bench: unknown benchmark '%s' (benchmarks: reconstruct)\n", what.c_str());
        return kExitBadInput;
    }
    if (cpu_only && gpu_only) {
        std::fprintf(stderr, "gkq bench: --cpu-only and --gpu-only exclude each other\n");
        return kExitBadInput;
    }
    kernels::BenchOptions o;
    o.quick = quick;
    o.n_runs = static_cast<int>(runs);
    o.n_threads = static_cast<int>(threads);
    o.cpu = !gpu_only;
    o.gpu = !cpu_only;
    o.progress = [](const std::string& step) {
        std::fprintf(stderr, "gkq bench: %s\n", step.c_str());
        return true;
    };
    Result<kernels::BenchReport> r = kernels::run_reconstruct_bench(o);
    if (!r) {
        std::fprintf(stderr, "gkq bench: %s\n", r.message().c_str());
        return exit_code(r.status());
    }
    std::cout << (json ? kernels::bench_report_json(*r) + "\n" : kernels::format_bench_report(*r));
    return kExitOk;
}

}  // namespace gkq::cli
