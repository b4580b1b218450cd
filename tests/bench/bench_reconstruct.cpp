// bench_reconstruct: the reconstruction kernels against baselines measured in the same run — reconstruct GB/s for
// 4096 x 4096, 4096 x 11008 and 8192 x 8192 at ranks 3, 16, 64, 256 against a memset of the same bytes and OpenBLAS
// sgemm on the same product; dequantize against a memcpy of the same bytes; with a CUDA device, the GPU kernel
// against the device's memset and copy. The same report as `gkq bench reconstruct` (kernels/src/bench.cpp).
//   bench_reconstruct [--quick] [--runs N] [--threads N] [--cpu-only | --gpu-only] [--json]
#include "gkq/kernels_bench.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    gkq::kernels::BenchOptions o;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick")
            o.quick = true;
        else if (a == "--runs" && i + 1 < argc)
            o.n_runs = std::max(1, std::atoi(argv[++i]));
        else if (a == "--threads" && i + 1 < argc)
            o.n_threads = std::max(1, std::atoi(argv[++i]));
        else if (a == "--cpu-only")
            o.gpu = false;
        else if (a == "--gpu-only")
            o.cpu = false;
        else if (a == "--json")
            json = true;
        else {
            std::printf(
                "usage: bench_reconstruct [--quick] [--runs N] [--threads N] [--cpu-only | --gpu-only] [--json]\n");
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    o.progress = [](const std::string& what) {
        std::fprintf(stderr, "  %s\n", what.c_str());
        return true;
    };
    gkq::Result<gkq::kernels::BenchReport> r = gkq::kernels::run_reconstruct_bench(o);
    if (!r) {
        std::fprintf(stderr, "bench_reconstruct: %s\n", r.message().c_str());
        return 1;
    }
    std::fputs((json ? gkq::kernels::bench_report_json(*r) + "\n" : gkq::kernels::format_bench_report(*r)).c_str(),
               stdout);
    return 0;
}
