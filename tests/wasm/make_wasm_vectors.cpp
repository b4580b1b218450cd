// make_wasm_vectors OUT_DIR [--bench]: the cross-language test vectors of the WebAssembly tests. Writes
// OUT_DIR/vectors.knot — records of every preset and codec layout (the same cases as the native kernel tests) — and,
// per record, OUT_DIR/expected/<i>.f32: what the native gkq::decode_tensor makes of it (little-endian f32), listed
// in OUT_DIR/manifest.json. node then decodes the same knot with the compiled wasm/ts reconstructor and compares
// (wasm/test).
// --bench adds large synthetic low-rank records (valid payloads, no SVD) with the native single-thread decode times
// (cpu-simd on 1 thread, cpu-ref; wall and process CPU medians), for wasm/bench/bench_wasm.mjs.
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/kernels.h"
#include "gkq/knot.h"
#include "kernel_checks.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

using namespace gkq;

namespace {

struct Record {
    std::string label;
    EncodedTensor tensor;
    bool bench = false;
    bool refused =
        false;  // the WebAssembly reconstructor refuses it, naming why (a residual type it has no kernel for)
};

// A LowRank(+Residual) record built directly in the docs/codec.md layout: f32 sigma, scales, packed codes,
// optionally Q4_0 residual blocks — big matrices without an SVD.
EncodedTensor synthetic(const std::string& name, int64_t rows, int64_t cols, int32_t k, int bits, bool delta,
                        bool residual) {
    EncodedTensor t;
    t.name = name;
    t.role = TensorRole::FfnUp;
    t.layer = 0;
    t.shape = {rows, cols};
    t.method = residual ? Method::LowRankResidual : Method::LowRank;
    t.rank = k;
    t.factor_bits = static_cast<uint8_t>(bits);
    t.residual_code = residual ? residual_code_of(DType::Q4_0) : 0;
    t.flags = delta ? uint32_t{kFlagDelta} : 0u;
    std::vector<float> head(static_cast<size_t>(3 * k));
    for (int32_t r = 0; r < k; ++r) {
        head[static_cast<size_t>(r)] = 1.0f / static_cast<float>(1 + r);
        head[static_cast<size_t>(k + r)] = 0.05f;
        head[static_cast<size_t>(2 * k + r)] = 0.04f;
    }
    t.payload.resize(head.size() * 4);
    std::memcpy(t.payload.data(), head.data(), head.size() * 4);
    const uint64_t n_codes = static_cast<uint64_t>(k) * static_cast<uint64_t>(rows + cols);
    std::vector<uint8_t> codes = test::random_bytes((n_codes * static_cast<uint64_t>(bits) + 7) / 8, n_codes);
    const uint64_t used = n_codes % static_cast<uint64_t>(8 / bits);
    if (used) codes.back() &= static_cast<uint8_t>((1u << (used * static_cast<uint64_t>(bits))) - 1u);
    t.payload.insert(t.payload.end(), codes.begin(), codes.end());
    if (residual) {
        const std::vector<float> r = test::random_floats(static_cast<size_t>(rows * cols), 5, 0.01f);
        std::vector<uint8_t> blocks(static_cast<size_t>(rows * cols / 32 * 18));
        quantize_q4_0(r.data(), r.size(), blocks.data());
        t.payload.insert(t.payload.end(), blocks.begin(), blocks.end());
    }
    return t;
}

double process_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Medians of `runs` timed calls after one warm-up: wall-clock ms and process CPU ms (the CPU time is what a shared,
// loaded machine distorts least: time spent waiting for a core is not in it).
struct Timing {
    double wall_ms;
    double cpu_ms;
};

Timing median_ms(int runs, const std::function<void()>& once) {
    once();
    std::vector<double> wall, cpu;
    for (int i = 0; i < runs; ++i) {
        const double c0 = process_cpu_ms();
        const auto t0 = std::chrono::steady_clock::now();
        once();
        wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        cpu.push_back(process_cpu_ms() - c0);
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

int fail(const std::string& why) {
    std::fprintf(stderr, "make_wasm_vectors: %s\n", why.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3 || (argc == 3 && std::strcmp(argv[2], "--bench") != 0)) {
        std::fprintf(stderr, "usage: make_wasm_vectors OUT_DIR [--bench]\n");
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    const bool bench = argc == 3;
    std::error_code ec;
    std::filesystem::create_directories(dir / "expected", ec);
    if (ec) return fail("cannot create " + (dir / "expected").string() + ": " + ec.message());

    std::vector<Record> records;
    std::string error;
    for (auto cases : {test::preset_cases(error), test::layout_cases(error)}) {
        if (!error.empty()) return fail(error);
        for (test::Case& c : cases) records.push_back({c.label, std::move(c.tensor), false});
    }
    {
        // a residual in Q4_K blocks: the WebAssembly kernels add Q4_0 and Q8_0 residuals only, and the reconstructor
        // refuses the other block types by name (not the last record: the edge tests take the last ones as runnable)
        CodecParams p;
        p.method = Method::LowRankResidual;
        p.rank = 3;
        p.residual = ResidualKind::Q4_K;
        const std::vector<float> w = test::random_floats(4 * 256, 6);
        Result<EncodedTensor> e = encode_tensor(test::input("kres", TensorRole::FfnUp, {4, 256}, w), p);
        if (!e) return fail(e.message());
        if (e->residual_code != residual_code_of(DType::Q4_K)) return fail("the q4_k residual fell back");
        records.push_back({"rank 3 + q4_k residual (refused)", std::move(*e), false, true});
    }
    {
        // odd shapes: Q8_0 falls back to f16 on rows of 100; an f32 vector
        CodecParams q8;
        q8.method = Method::Q8_0;
        const std::vector<float> w = test::random_floats(7 * 100, 3);
        Result<EncodedTensor> e = encode_tensor(test::input("odd", TensorRole::AttnK, {7, 100}, w), q8);
        if (!e) return fail(e.message());
        records.push_back({"q8_0 on rows of 100 (f16 fallback)", std::move(*e), false});
        CodecParams f32;
        const std::vector<float> v = test::random_floats(33, 4);
        e = encode_tensor(test::input("norm", TensorRole::AttnNorm, {33}, v), f32);
        if (!e) return fail(e.message());
        records.push_back({"f32 vector", std::move(*e), false});
    }
    if (bench) {
        records.push_back(
            {"bench 1024x1024 rank 16, 8-bit", synthetic("bench.a", 1024, 1024, 16, 8, false, false), true});
        records.push_back(
            {"bench 4096x4096 rank 3, 2-bit delta", synthetic("bench.b", 4096, 4096, 3, 2, true, false), true});
        records.push_back(
            {"bench 4096x4096 rank 16, 4-bit delta", synthetic("bench.c", 4096, 4096, 16, 4, true, false), true});
        records.push_back(
            {"bench 4096x4096 rank 64, 8-bit", synthetic("bench.d", 4096, 4096, 64, 8, false, false), true});
        records.push_back(
            {"bench 4096x4096 rank 16 + q4_0 residual", synthetic("bench.e", 4096, 4096, 16, 8, false, true), true});
    }
    for (size_t i = 0; i < records.size(); ++i)
        if (!records[i].bench) records[i].tensor.name = "t" + std::to_string(i);  // names are unique in a knot

    KnotHeader header;
    header.producer = "make_wasm_vectors";
    header.command = "test vectors";
    header.n_source_tensors = records.size();
    const std::string knot_path = (dir / "vectors.knot").string();
    Result<KnotWriter> writer = KnotWriter::create(knot_path, header);
    if (!writer) return fail(writer.message());
    nlohmann::json manifest;
    manifest["knot"] = "vectors.knot";
    manifest["tensors"] = nlohmann::json::array();
    for (size_t i = 0; i < records.size(); ++i) {
        const EncodedTensor& t = records[i].tensor;
        if (Status s = writer->add(t, i); !s) return fail(s.message());
        Result<std::vector<float>> decoded = decode_tensor(t);
        if (!decoded) return fail(decoded.message());
        const std::string file = "expected/" + std::to_string(i) + ".f32";
        std::ofstream out(dir / file, std::ios::binary);
        out.write(reinterpret_cast<const char*>(decoded->data()), static_cast<std::streamsize>(decoded->size() * 4));
        if (!out) return fail("cannot write " + (dir / file).string());
        nlohmann::json j = {{"label", records[i].label},
                            {"name", t.name},
                            {"expected", file},
                            {"n", decoded->size()},
                            {"method", std::string(method_name(t.method))},
                            {"bench", records[i].bench},
                            {"refused", records[i].refused}};
        if (records[i].bench) {
            std::vector<float> buf(decoded->size());
            for (kernels::Backend b : {kernels::Backend::CpuSimd, kernels::Backend::CpuRef}) {
                if (!kernels::backend_available(b)) continue;
                const Timing ms = median_ms(b == kernels::Backend::CpuRef ? 3 : 7,
                                            [&] { (void)kernels::decode(b, t, buf.data(), buf.size(), {1}); });
                j["native_ms"][std::string(kernels::backend_name(b)) + " 1 thread"] = ms.wall_ms;
                j["native_cpu_ms"][std::string(kernels::backend_name(b)) + " 1 thread"] = ms.cpu_ms;
            }
        }
        manifest["tensors"].push_back(j);
    }
    if (Status s = writer->finish(); !s) return fail(s.message());
    std::ofstream(dir / "manifest.json") << manifest.dump(2) << "\n";
    std::printf("make_wasm_vectors: %zu records in %s\n", records.size(), knot_path.c_str());
    return 0;
}
