// The reconstruction benchmark behind `gkq bench reconstruct` and tests/bench/bench_reconstruct: every kernel time
// next to a baseline measured in the same run on the same bytes — a memset of the output (the machine's streaming-
// store bandwidth), OpenBLAS sgemm on the same product (U diag(sigma)) V^T, a memcpy of the output bytes for the
// dequantizers and, with a CUDA device, the device's own memset and copy bandwidth. Every time is the median of
// n_runs runs after one untimed warm-up (which pays the page faults). Targets (issue #8): reconstruct >= 0.7x memset
// at rank <= 16, >= 0.8x sgemm at rank >= 64; dequantize >= 0.7x memcpy; GPU >= 0.7x device copy bandwidth.
#pragma once

#include "gkq/status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gkq::kernels {

struct BenchOptions {
    bool quick = false;  // small sizes (512 x 512, 512 x 1376, 1024 x 1024): seconds, and in-cache, not bandwidth
    int n_runs = 5;
    int n_threads = 0;  // CPU threads for the kernels and the baselines (memset, memcpy, sgemm); 0 = all
    bool cpu = true;    // the CPU sections
    bool gpu = true;    // the GPU section (reports why when it cannot run)
    // Called before each measurement with a short description; return false to stop (Cancelled).
    std::function<bool(const std::string&)> progress;
};

struct ReconstructRow {
    int64_t rows = 0, cols = 0, rank = 0;
    double seconds = 0.0;         // reconstruct (f32 factors in, W out)
    double decode_seconds = 0.0;  // the whole decode of an 8-bit-factor LowRank record (payload in, W out)
    double memset_seconds = 0.0;  // memset of the same output bytes
    double sgemm_seconds = 0.0;   // cblas_sgemm of (rows, k) x (k, cols) into the same bytes
    double gb_per_s() const;      // output bytes / seconds
    double vs_memset() const;     // memset_seconds / seconds (1.0 = as fast as writing the bytes)
    double vs_sgemm() const;      // sgemm_seconds / seconds
};

struct DequantizeRow {
    std::string what;  // "factors 4-bit delta", "q4_0 blocks", ...
    uint64_t n = 0;    // output floats
    double seconds = 0.0;
    double memcpy_seconds = 0.0;  // memcpy of the same output bytes (4n read + 4n written)
    double gb_per_s() const;      // output bytes / seconds
    double vs_memcpy() const;     // memcpy_seconds / seconds
};

struct GpuRow {
    int64_t rows = 0, cols = 0, rank = 0;
    double seconds = 0.0;         // the reconstruct kernel alone, device memory in and out (CUDA events)
    double memset_seconds = 0.0;  // cudaMemset of the output bytes
    double copy_seconds = 0.0;    // device-to-device cudaMemcpy of the output bytes
    double gb_per_s() const;
    double vs_copy() const;  // copy bandwidth counted as the bytes copied once: copy_seconds / seconds
};

struct BenchReport {
    std::string cpu;  // backend_device(CpuSimd), or why it is unavailable
    int n_threads = 1;
    int n_runs = 0;
    bool quick = false;
    std::vector<ReconstructRow> reconstruct;
    std::vector<DequantizeRow> dequantize;
    std::string gpu;  // the device, or why there is no GPU section
    bool gpu_ran = false;
    std::vector<GpuRow> gpu_rows;
};

Result<BenchReport> run_reconstruct_bench(const BenchOptions& options);

// The report as the tables `gkq bench reconstruct` prints (with the targets and a note that the machine may be
// shared), and as one JSON document.
std::string format_bench_report(const BenchReport& report);
std::string bench_report_json(const BenchReport& report);

}  // namespace gkq::kernels
