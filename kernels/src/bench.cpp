// run_reconstruct_bench: the kernels against baselines measured in the same run (see gkq/kernels_bench.h).
#include "gkq/kernels_bench.h"

#include "gkq/convert.h"
#include "gkq/encoded_tensor.h"
#include "gkq/kernels.h"

#include "cpu/aligned.h"
#include "cpu/parallel.h"

#if defined(GKQ_KERNELS_CUDA)
#include "cuda/cuda_api.h"
#endif

#include <cblas.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace gkq::kernels {

double ReconstructRow::gb_per_s() const {
    return seconds > 0 ? 4.0 * static_cast<double>(rows * cols) / seconds / 1e9 : 0.0;
}
double ReconstructRow::vs_memset() const {
    return seconds > 0 ? memset_seconds / seconds : 0.0;
}
double ReconstructRow::vs_sgemm() const {
    return seconds > 0 ? sgemm_seconds / seconds : 0.0;
}
double DequantizeRow::gb_per_s() const {
    return seconds > 0 ? 4.0 * static_cast<double>(n) / seconds / 1e9 : 0.0;
}
double DequantizeRow::vs_memcpy() const {
    return seconds > 0 ? memcpy_seconds / seconds : 0.0;
}
double GpuRow::gb_per_s() const {
    return seconds > 0 ? 4.0 * static_cast<double>(rows * cols) / seconds / 1e9 : 0.0;
}
double GpuRow::vs_copy() const {
    return seconds > 0 ? copy_seconds / seconds : 0.0;
}

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median of n_runs timed calls after one untimed warm-up; the first failing call's status ends it.
Result<double> time_median(int n_runs, const std::function<Status()>& once) {
    if (Status s = once(); !s) return s;
    std::vector<double> t;
    for (int i = 0; i < n_runs; ++i) {
        const double t0 = now();
        if (Status s = once(); !s) return s;
        t.push_back(now() - t0);
    }
    std::sort(t.begin(), t.end());
    const size_t m = t.size();
    return m % 2 ? t[m / 2] : 0.5 * (t[m / 2 - 1] + t[m / 2]);
}

// memset / memcpy split over the same threads as the kernels, 64-byte aligned pieces.
// The memset writes a non-zero byte: on the Zen 4 build VM zeros are written 1.4-2.7x faster than any other bytes
// (2 threads, 64 MB: 52-73 GB/s for 0x00 against 21-28 GB/s for 0x3f or 0xff; 256 MB: 26-36 against 17-23), so a
// zero memset is not the store bandwidth a kernel writing real values can reach.
void parallel_memset(float* p, uint64_t n, int threads) {
    const auto chunk =
        static_cast<int64_t>((n + static_cast<uint64_t>(threads) - 1) / static_cast<uint64_t>(threads) + 15) / 16 * 16;
    cpu::parallel_chunks(static_cast<int64_t>(n), chunk, threads, [&](int, int64_t lo, int64_t hi) {
        std::memset(p + lo, 0x3f, static_cast<size_t>(hi - lo) * 4);
    });
}

void parallel_memcpy(float* dst, const float* src, uint64_t n, int threads) {
    const auto chunk =
        static_cast<int64_t>((n + static_cast<uint64_t>(threads) - 1) / static_cast<uint64_t>(threads) + 15) / 16 * 16;
    cpu::parallel_chunks(static_cast<int64_t>(n), chunk, threads, [&](int, int64_t lo, int64_t hi) {
        std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo) * 4);
    });
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
    std::vector<uint8_t> b(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(b.data() + i, &x, std::min<size_t>(8, n - i));
    }
    return b;
}

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
    const std::vector<uint8_t> b = random_bytes(n * 2, seed);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i)
        f[i] = scale * (static_cast<float>(b[2 * i] | (b[2 * i + 1] << 8)) / 32768.0f - 1.0f);
    return f;
}

// A LowRank record with 8-bit factors and f32 sigma (docs/codec.md layout): sigma, U scales, V scales, the codes.
EncodedTensor synthetic_lowrank(int64_t rows, int64_t cols, int64_t k) {
    EncodedTensor t;
    t.name = "bench";
    t.shape = {rows, cols};
    t.method = Method::LowRank;
    t.rank = static_cast<int32_t>(k);
    t.factor_bits = 8;
    std::vector<float> head(static_cast<size_t>(3 * k));
    for (int64_t r = 0; r < k; ++r) {
        head[static_cast<size_t>(r)] = 1.0f / static_cast<float>(1 + r);  // sigma, descending
        head[static_cast<size_t>(k + r)] = 0.05f;                         // U scales
        head[static_cast<size_t>(2 * k + r)] = 0.05f;                     // V scales
    }
    t.payload.resize(head.size() * 4);
    std::memcpy(t.payload.data(), head.data(), head.size() * 4);
    const std::vector<uint8_t> codes = random_bytes(static_cast<size_t>(k * (rows + cols)), static_cast<uint64_t>(k));
    t.payload.insert(t.payload.end(), codes.begin(), codes.end());
    return t;
}

bool keep_going(const BenchOptions& o, const std::string& what) {
    return !o.progress || o.progress(what);
}

Status cancelled() {
    return error(StatusCode::Cancelled, "benchmark cancelled");
}

std::string shape_text(int64_t rows, int64_t cols) {
    return std::to_string(rows) + " x " + std::to_string(cols);
}

Status bench_cpu(const BenchOptions& o, int threads, BenchReport& report) {
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        o.quick ? std::vector<std::pair<int64_t, int64_t>>{{512, 512}, {512, 1376}, {1024, 1024}}
                : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {4096, 11008}, {8192, 8192}};
    const KernelOptions ko{threads};
    const int saved_blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(threads);
    struct RestoreBlas {
        int n;
        ~RestoreBlas() { openblas_set_num_threads(n); }
    } restore{saved_blas_threads};

    for (auto [rows, cols] : shapes) {
        const auto n = static_cast<uint64_t>(rows * cols);
        AlignedFloats out = aligned_floats(rows * cols);
        for (int64_t k : {3, 16, 64, 256}) {
            if (!keep_going(o, "reconstruct " + shape_text(rows, cols) + " rank " + std::to_string(k)))
                return cancelled();
            ReconstructRow row{rows, cols, k};
            const std::vector<float> ut = random_floats(static_cast<size_t>(k * rows), 1, 0.05f);
            const std::vector<float> vt = random_floats(static_cast<size_t>(k * cols), 2, 0.05f);
            std::vector<float> sigma(static_cast<size_t>(k)), us(static_cast<size_t>(rows * k));
            for (int64_t r = 0; r < k; ++r) sigma[static_cast<size_t>(r)] = 1.0f / static_cast<float>(1 + r);
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t r = 0; r < k; ++r)
                    us[static_cast<size_t>(i * k + r)] =
                        sigma[static_cast<size_t>(r)] * ut[static_cast<size_t>(r * rows + i)];

            Result<double> t = time_median(o.n_runs, [&] {
                return reconstruct(Backend::CpuSimd, ut.data(), sigma.data(), vt.data(), rows, cols, k, {}, out.get(),
                                   ko);
            });
            if (!t) return t.status();
            row.seconds = *t;
            const EncodedTensor record = synthetic_lowrank(rows, cols, k);
            t = time_median(o.n_runs, [&] { return decode(Backend::CpuSimd, record, out.get(), n, ko); });
            if (!t) return t.status();
            row.decode_seconds = *t;
            t = time_median(o.n_runs, [&] {
                parallel_memset(out.get(), n, threads);
                return Status::ok();
            });
            row.memset_seconds = *t;
            t = time_median(o.n_runs, [&] {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(rows),
                            static_cast<blasint>(cols), static_cast<blasint>(k), 1.0f, us.data(),
                            static_cast<blasint>(k), vt.data(), static_cast<blasint>(cols), 0.0f, out.get(),
                            static_cast<blasint>(cols));
                return Status::ok();
            });
            row.sgemm_seconds = *t;
            report.reconstruct.push_back(row);
        }
    }

    // Dequantization: 16M outputs (64 MB) as 4096-long factor vectors or as blocks.
    const uint64_t n = o.quick ? (uint64_t{1} << 20) : (uint64_t{1} << 24);
    const int64_t len = 4096;
    const auto n_vectors = static_cast<int64_t>(n) / len;
    AlignedFloats out = aligned_floats(static_cast<int64_t>(n));
    AlignedFloats src = aligned_floats(static_cast<int64_t>(n));
    std::fill(src.get(), src.get() + n, 1.0f);
    if (!keep_going(o, "memcpy baseline")) return cancelled();
    Result<double> memcpy_t = time_median(o.n_runs, [&] {
        parallel_memcpy(out.get(), src.get(), n, threads);
        return Status::ok();
    });
    const std::vector<uint8_t> code_bytes = random_bytes(static_cast<size_t>(n), 7);
    const std::vector<float> scales(static_cast<size_t>(n_vectors), 0.05f);
    for (int bits : {2, 4, 8})
        for (bool delta : {false, true}) {
            DequantizeRow row;
            row.what = "factors " + std::to_string(bits) + "-bit" + (delta ? " delta" : "");
            row.n = n;
            row.memcpy_seconds = *memcpy_t;
            if (!keep_going(o, "dequantize " + row.what)) return cancelled();
            Result<double> t = time_median(o.n_runs, [&] {
                return dequantize_factors(Backend::CpuSimd, {code_bytes.data(), bits, true}, 0, n_vectors, len, delta,
                                          scales.data(), out.get(), ko);
            });
            if (!t) return t.status();
            row.seconds = *t;
            report.dequantize.push_back(row);
        }
    const std::vector<float> values = random_floats(static_cast<size_t>(n), 9, 1.0f);
    for (DType type : {DType::Q8_0, DType::Q4_0, DType::F16}) {
        DequantizeRow row;
        row.what = std::string(dtype_name(type)) + (type == DType::F16 ? " values" : " blocks");
        row.n = n;
        row.memcpy_seconds = *memcpy_t;
        if (!keep_going(o, "dequantize " + row.what)) return cancelled();
        std::vector<uint8_t> blocks(*dtype_storage_bytes(type, n));
        if (type == DType::Q8_0)
            quantize_q8_0(values.data(), n, blocks.data());
        else if (type == DType::Q4_0)
            quantize_q4_0(values.data(), n, blocks.data());
        else
            encode_f16(values.data(), n, reinterpret_cast<uint16_t*>(blocks.data()));
        Result<double> t = time_median(
            o.n_runs, [&] { return dequantize_blocks(Backend::CpuSimd, type, blocks.data(), n, out.get(), ko); });
        if (!t) return t.status();
        row.seconds = *t;
        report.dequantize.push_back(row);
    }
    return Status::ok();
}

Status bench_gpu(const BenchOptions& o, BenchReport& report) {
    report.gpu = backend_unavailable_reason(Backend::Cuda);
    if (!report.gpu.empty()) {
        report.gpu = "not run: " + report.gpu;
        return Status::ok();
    }
#if defined(GKQ_KERNELS_CUDA)
    report.gpu = backend_device(Backend::Cuda);
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        o.quick ? std::vector<std::pair<int64_t, int64_t>>{{512, 512}, {1024, 1024}}
                : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {4096, 11008}, {8192, 8192}};
    for (auto [rows, cols] : shapes)
        for (int64_t k : {3, 16, 64, 256}) {
            if (!keep_going(o, "gpu reconstruct " + shape_text(rows, cols) + " rank " + std::to_string(k)))
                return cancelled();
            Result<cuda::DeviceTimes> t = cuda::time_reconstruct(rows, cols, k, o.n_runs);
            if (!t) return t.status();
            report.gpu_rows.push_back(GpuRow{rows, cols, k, t->kernel_seconds, t->memset_seconds, t->copy_seconds});
        }
    report.gpu_ran = true;
#else
    (void)o;
#endif
    return Status::ok();
}

}  // namespace

Result<BenchReport> run_reconstruct_bench(const BenchOptions& options) {
    if (options.n_runs < 1)
        return error(StatusCode::InvalidArgument, "benchmark: runs is " + std::to_string(options.n_runs));
    BenchReport report;
    report.quick = options.quick;
    report.n_runs = options.n_runs;
    report.n_threads =
        options.n_threads > 0 ? options.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    try {
        if (options.cpu) {
            report.cpu = backend_device(Backend::CpuSimd, report.n_threads);
            if (report.cpu.empty()) {
                report.cpu = "not run: " + backend_unavailable_reason(Backend::CpuSimd);
            } else if (Status s = bench_cpu(options, report.n_threads, report); !s) {
                return s;
            }
        }
        if (options.gpu)
            if (Status s = bench_gpu(options, report); !s) return s;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "benchmark: the buffers do not fit in memory (try --quick)");
    }
    return report;
}

std::string format_bench_report(const BenchReport& r) {
    std::string s;
    char line[256];
    auto add = [&](const char* fmt, auto... args) {
        std::snprintf(line, sizeof line, fmt, args...);
        s += line;
    };
    add("# gkq bench reconstruct: median of %d runs%s; CPU: %s\n", r.n_runs,
        r.quick ? " (--quick: small, in-cache sizes)" : "", r.cpu.c_str());
    add("# baselines are measured in the same run on the same bytes and threads; other processes may share the "
        "machine, so compare ratios rather than absolute numbers\n");
    if (!r.reconstruct.empty()) {
        add("\n## reconstruct W = U diag(s) V^T (f32 factors in, W out); GB/s = output bytes / time\n");
        add("## targets: rank <= 16: >= 0.70x memset; rank >= 64: >= 0.80x sgemm\n");
        add("%-13s %5s %10s %8s %10s %10s %9s %10s %9s %11s\n", "shape", "rank", "time ms", "GB/s", "memset ms",
            "x memset", "sgemm ms", "x sgemm", "target", "decode ms");
        for (const ReconstructRow& x : r.reconstruct) {
            const bool low = x.rank <= 16;
            const double ratio = low ? x.vs_memset() : x.vs_sgemm();
            const bool met = ratio >= (low ? 0.7 : 0.8);
            add("%-13s %5lld %10.2f %8.2f %10.2f %9.2fx %9.2f %9.2fx %9s %11.2f\n", shape_text(x.rows, x.cols).c_str(),
                static_cast<long long>(x.rank), 1e3 * x.seconds, x.gb_per_s(), 1e3 * x.memset_seconds, x.vs_memset(),
                1e3 * x.sgemm_seconds, x.vs_sgemm(), met ? "met" : "MISSED", 1e3 * x.decode_seconds);
        }
        add("decode = the whole LowRank record (8-bit factors: checks, dequantize, reconstruct) into the same bytes\n");
    }
    if (!r.dequantize.empty()) {
        add("\n## dequantize (%llu outputs); GB/s = output bytes / time; target >= 0.70x memcpy of the output bytes\n",
            static_cast<unsigned long long>(r.dequantize.front().n));
        add("%-22s %10s %8s %11s %10s %8s\n", "what", "time ms", "GB/s", "memcpy ms", "x memcpy", "target");
        for (const DequantizeRow& x : r.dequantize)
            add("%-22s %10.2f %8.2f %11.2f %9.2fx %8s\n", x.what.c_str(), 1e3 * x.seconds, x.gb_per_s(),
                1e3 * x.memcpy_seconds, x.vs_memcpy(), x.vs_memcpy() >= 0.7 ? "met" : "MISSED");
    }
    if (!r.gpu.empty()) {
        add("\n## GPU: %s\n", r.gpu.c_str());
        if (r.gpu_ran) {
            add("## reconstruct kernel alone (device memory); target >= 0.70x device copy bandwidth\n");
            add("%-13s %5s %10s %8s %10s %9s %10s %8s\n", "shape", "rank", "time ms", "GB/s", "memset ms", "copy ms",
                "x copy", "target");
            for (const GpuRow& x : r.gpu_rows)
                add("%-13s %5lld %10.3f %8.1f %10.3f %9.3f %9.2fx %8s\n", shape_text(x.rows, x.cols).c_str(),
                    static_cast<long long>(x.rank), 1e3 * x.seconds, x.gb_per_s(), 1e3 * x.memset_seconds,
                    1e3 * x.copy_seconds, x.vs_copy(), x.vs_copy() >= 0.7 ? "met" : "MISSED");
        }
    }
    return s;
}

std::string bench_report_json(const BenchReport& r) {
    nlohmann::json j;
    j["cpu"] = r.cpu;
    j["threads"] = r.n_threads;
    j["runs"] = r.n_runs;
    j["quick"] = r.quick;
    j["reconstruct"] = nlohmann::json::array();
    for (const ReconstructRow& x : r.reconstruct)
        j["reconstruct"].push_back({{"rows", x.rows},
                                    {"cols", x.cols},
                                    {"rank", x.rank},
                                    {"seconds", x.seconds},
                                    {"gb_per_s", x.gb_per_s()},
                                    {"memset_seconds", x.memset_seconds},
                                    {"sgemm_seconds", x.sgemm_seconds},
                                    {"decode_seconds", x.decode_seconds},
                                    {"vs_memset", x.vs_memset()},
                                    {"vs_sgemm", x.vs_sgemm()}});
    j["dequantize"] = nlohmann::json::array();
    for (const DequantizeRow& x : r.dequantize)
        j["dequantize"].push_back({{"what", x.what},
                                   {"n", x.n},
                                   {"seconds", x.seconds},
                                   {"gb_per_s", x.gb_per_s()},
                                   {"memcpy_seconds", x.memcpy_seconds},
                                   {"vs_memcpy", x.vs_memcpy()}});
    j["gpu"] = r.gpu;
    j["gpu_ran"] = r.gpu_ran;
    j["gpu_rows"] = nlohmann::json::array();
    for (const GpuRow& x : r.gpu_rows)
        j["gpu_rows"].push_back({{"rows", x.rows},
                                 {"cols", x.cols},
                                 {"rank", x.rank},
                                 {"seconds", x.seconds},
                                 {"gb_per_s", x.gb_per_s()},
                                 {"memset_seconds", x.memset_seconds},
                                 {"copy_seconds", x.copy_seconds},
                                 {"vs_copy", x.vs_copy()}});
    return j.dump(2);
}

}  // namespace gkq::kernels
