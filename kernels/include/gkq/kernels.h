// Reconstruction kernels behind one dispatch point: dequantize the low-rank factors (2/4/8-bit codes with per-vector
// max-abs scales, delta coding, head folding) and llama.cpp Q8_0/Q4_0 (and f16) blocks, and reconstruct
// W = U diag(sigma) V^T (+ residual blocks) with the residual added in the same pass over W.
// Backends: CpuRef (scalar *_ref oracles, one thread), CpuSimd (AVX2/FMA, picked at run time, threads over output
// row blocks), Cuda (built when nvcc was found; needs a device at run time). Payload layouts: docs/codec.md.
// Contract: raw host pointers, no Qt/CUDA/Eigen types; nothing throws; every function returns a Status naming the
// operation (InvalidArgument for bad sizes or bits, Unsupported for a backend that cannot run here). Stateless: any
// number of threads may call any of these at once. Results:
//   - dequantization is exact on every backend (the same f32 operations as the codec: bit for bit);
//   - reconstruction on CpuRef is bit for bit gkq::decode_tensor's; CpuSimd and Cuda use fused multiply-adds and
//     differ by at most kReconstructTolerancePerTerm * k * sum_r |sigma_r u_ir v_jr| per element.
#pragma once

#include "gkq/dtype.h"
#include "gkq/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {
struct EncodedTensor;
}

namespace gkq::kernels {

enum class Backend : uint8_t {
    CpuRef = 0,   // the scalar oracles, single thread: what every other backend is tested against
    CpuSimd = 1,  // AVX2 + FMA (+ F16C), multi-threaded
    Cuda = 2,     // CUDA device 0, runtime API
};
inline constexpr Backend kAllBackends[] = {Backend::CpuRef, Backend::CpuSimd, Backend::Cuda};

// Per-element bound of the fused (FMA) reconstruction against the reference, in units of the element's absolute
// term sum times the rank: each of the k roundings of either summation is at most one f32 ulp of a partial sum.
inline constexpr double kReconstructTolerancePerTerm = 2.0 * 1.1920928955078125e-07;  // 2 * FLT_EPSILON

std::string_view backend_name(Backend b);              // "cpu-ref", "cpu-simd", "cuda"
Result<Backend> parse_backend(std::string_view name);  // inverse of backend_name; NotFound lists the names

// Empty when `b` can run here; otherwise one sentence saying why not ("this CPU lacks AVX2/FMA/F16C",
// "built without CUDA: nvcc was not found when CMake configured", "no CUDA device: <driver error>").
std::string backend_unavailable_reason(Backend b);
inline bool backend_available(Backend b) {
    return backend_unavailable_reason(b).empty();
}
// What runs it, for people: "AMD EPYC (AVX2/FMA, 2 threads)", "NVIDIA H200 (sm_90, 132 SMs)"; empty if unavailable.
std::string backend_device(Backend b, int n_threads = 0);

struct KernelOptions {
    int n_threads = 0;  // CpuSimd: threads including the caller; 0 = std::thread::hardware_concurrency()
};

// ---- operations on host memory ----------------------------------------------------------------------------------
// Cuda runs them with copies to and from the device (for parity tests; decode() is the fast path).

// The factor codes of a low-rank payload: `bits` (2, 4, 8) per code, packed LSB-first 8/bits codes per byte
// (packed), or one code per byte (what a run-length stream expands to).
struct FactorCodes {
    const uint8_t* data = nullptr;
    int bits = 8;
    bool packed = true;
};

// out (n_vectors, len) row-major: vector v is the codes [first + v * len, first + (v + 1) * len) of `codes`, with
// delta coding undone along the vector when `delta` (c_i = (s_0 + ... + s_i) mod 2^bits), then
// out[v][i] = (2 c_i - (L - 1)) * (scales[v] / (L - 1)) with L = 2^bits, in f32 as written.
Status dequantize_factors(Backend b, const FactorCodes& codes, uint64_t first, int64_t n_vectors, int64_t len,
                          bool delta, const float* scales, float* out, const KernelOptions& options = {});

// n elements (a whole number of the type's blocks) of F16, Q8_0, Q4_0 (kernels on every backend) or another block type
// of the type table (Q4_1 ... Q6_K, IQ4_NL: its scalar to_f32 on the CPU backends; Unsupported on CUDA) into f32.
Status dequantize_blocks(Backend b, DType type, const uint8_t* src, uint64_t n, float* out,
                         const KernelOptions& options = {});

// The residual a reconstruction adds: rows * cols values in blocks of Q8_0 (bits 8) or Q4_0 (bits 4), row-major,
// each row whole blocks (gkq/block_layout.h). bits 0: none.
struct ResidualBlocks {
    const uint8_t* data = nullptr;
    int bits = 0;
};

// out (rows, cols) = U diag(sigma) V^T (+ residual) with ut (k, rows) and vt (k, cols) row-major — the stored vectors,
// one after the other — and sigma (k): out[i][j] = sum over r ascending of (sigma_r * ut[r][i]) * vt[r][j] from 0,
// then + the residual's element. k = 0 gives the residual alone (or zeros).
// CpuSimd writes with streaming (non-temporal) stores when W is 16 MiB or larger, out is 64-byte aligned and cols a
// multiple of 16 (each row of its 6 x 16 tiles is then one cache line); plain stores otherwise.
Status reconstruct(Backend b, const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols,
                   int64_t k, const ResidualBlocks& residual, float* out, const KernelOptions& options = {});

// ---- whole tensors ----------------------------------------------------------------------------------------------

// Decodes `t` (any Method) into out, n_out == t.n_elements() floats, row-major: the result of gkq::decode_tensor
// (bit for bit on CpuRef, within the reconstruction tolerance otherwise). The payload is checked as decode_tensor
// checks it: Corrupt naming the tensor.
Status decode(Backend b, const EncodedTensor& t, float* out, uint64_t n_out, const KernelOptions& options = {});

// The tensor in float64: its decoded factors (and residual blocks) multiplied out and added in double precision —
// what the f32 reconstructions are measured against. Non-low-rank methods: their decoded values.
Result<std::vector<double>> reference_f64(const EncodedTensor& t);

struct RunOptions {
    int n_runs = 3;  // timed runs after one untimed warm-up; `seconds` is their median
    KernelOptions kernel;
};

// One backend on one tensor: what the workbench's "Reconstruct" panel and `gkq bench` show.
struct BackendRun {
    Backend backend = Backend::CpuRef;
    std::string unavailable;  // non-empty: the backend did not run, and this says why
    std::string device;       // what ran it (backend_device)
    int n_threads = 1;
    double seconds = 0.0;        // median wall time of decode(): host memory in and out (Cuda: includes the copies)
    double gb_per_s = 0.0;       // output bytes (4 * n_elements) / seconds
    double max_abs_error = 0.0;  // max |out - reference|
    double rel_error = 0.0;      // ||out - reference||_F / ||reference||_F (0 when both are 0)
};

// Runs `b` on `t` (warm-up + n_runs) and measures its output against `reference` (from reference_f64; computed
// here when null). An unavailable backend is not an error: the result says why in `unavailable`.
Result<BackendRun> run_backend(Backend b, const EncodedTensor& t, const RunOptions& options = {},
                               const std::vector<double>* reference = nullptr);

}  // namespace gkq::kernels
