// The one dispatch point: argument checks, backend availability and selection (the only place that knows whether
// CUDA was built), and the whole-tensor decode on the CPU backends.
#include "gkq/kernels.h"

#include "gkq/block_layout.h"
#include "gkq/type_traits.h"

#include "cpu/aligned.h"
#include "cpu/cpu_kernels.h"
#include "src/tensor_job.h"

#if defined(GKQ_KERNELS_CUDA)
#include "cuda/cuda_api.h"
#endif

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

namespace gkq::kernels {

namespace cpu {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

}  // namespace cpu

namespace {

int resolve_threads(Backend b, const KernelOptions& o) {
    if (b == Backend::CpuRef) return 1;
    if (o.n_threads > 0) return o.n_threads;
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Status invalid(const char* op, const std::string& why) {
    return error(StatusCode::InvalidArgument, std::string(op) + ": " + why);
}

Status check_backend(Backend b, const char* op) {
    std::string why = backend_unavailable_reason(b);
    if (why.empty()) return Status::ok();
    return error(StatusCode::Unsupported, std::string(op) + " on " + std::string(backend_name(b)) + ": " + why);
}

// The SIMD kernels allocate per-thread scratch before they start their threads.
template <class Fn>
Status guarded(const char* op, const Fn& fn) {
    try {
        fn();
        return Status::ok();
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, std::string(op) + ": out of memory for the kernel's scratch buffers");
    }
}

bool valid_bits(int bits) {
    return bits == 2 || bits == 4 || bits == 8;
}

}  // namespace

// ---- backends ---------------------------------------------------------------------------------------------------

std::string_view backend_name(Backend b) {
    switch (b) {
        case Backend::CpuRef: return "cpu-ref";
        case Backend::CpuSimd: return "cpu-simd";
        case Backend::Cuda: return "cuda";
    }
    return "unknown";
}

Result<Backend> parse_backend(std::string_view name) {
    for (Backend b : kAllBackends)
        if (backend_name(b) == name) return b;
    return error(StatusCode::NotFound,
                 "unknown kernel backend '" + std::string(name) + "' (backends: cpu-ref, cpu-simd, cuda)");
}

std::string backend_unavailable_reason(Backend b) {
    switch (b) {
        case Backend::CpuRef: return "";
        case Backend::CpuSimd:
            return cpu::cpu_has_avx2_fma() ? "" : "this CPU lacks AVX2, FMA or F16C (the SIMD kernels need all three)";
        case Backend::Cuda: {
#if defined(GKQ_KERNELS_CUDA)
            std::string why;
            if (cuda::device_count(&why) > 0) return "";
            return "no CUDA device: " + why;
#else
            return "this build has no CUDA kernels (CMake found no nvcc, or GKQ_WITH_CUDA=OFF)";
#endif
        }
    }
    return "unknown backend";
}

std::string backend_device(Backend b, int n_threads) {
    if (!backend_available(b)) return "";
    const int threads = resolve_threads(b, KernelOptions{n_threads});
    switch (b) {
        case Backend::CpuRef: return "CPU, scalar reference (1 thread)";
        case Backend::CpuSimd: return "CPU, AVX2/FMA (" + std::to_string(threads) + " threads)";
        case Backend::Cuda:
#if defined(GKQ_KERNELS_CUDA)
            return cuda::device_description();
#else
            return "";
#endif
    }
    return "";
}

// ---- operations ---------------------------------------------------------------------------------------------------

Status dequantize_factors(Backend b, const FactorCodes& codes, uint64_t first, int64_t n_vectors, int64_t len,
                          bool delta, const float* scales, float* out, const KernelOptions& options) {
    const char* op = "dequantize_factors";
    if (!valid_bits(codes.bits)) return invalid(op, "bits is " + std::to_string(codes.bits) + ", expected 2, 4 or 8");
    if (n_vectors < 0 || len < 0) return invalid(op, "negative vector count or length");
    if (n_vectors == 0 || len == 0) return Status::ok();
    if (!codes.data || !scales || !out) return invalid(op, "null pointer");
    if (Status s = check_backend(b, op); !s) return s;
    switch (b) {
        case Backend::CpuRef:
            cpu::dequantize_factors_ref(codes.data, codes.bits, codes.packed, first, n_vectors, len, delta, scales,
                                        out);
            return Status::ok();
        case Backend::CpuSimd:
            return guarded(op, [&] {
                cpu::dequantize_factors_avx2(codes.data, codes.bits, codes.packed, first, n_vectors, len, delta, scales,
                                             out, resolve_threads(b, options));
            });
        case Backend::Cuda:
#if defined(GKQ_KERNELS_CUDA)
            return cuda::dequantize_factors(codes, first, n_vectors, len, delta, scales, out);
#else
            break;
#endif
    }
    return error(StatusCode::Internal, std::string(op) + ": unreachable backend");
}

Status dequantize_blocks(Backend b, DType type, const uint8_t* src, uint64_t n, float* out,
                         const KernelOptions& options) {
    const char* op = "dequantize_blocks";
    // f16, q8_0 and q4_0 have kernels on every backend; the type table's other block types decode on the CPU
    // backends through the table's scalar to_f32 (no SIMD or CUDA kernel yet).
    const bool kernel_type = type == DType::F16 || type == DType::Q8_0 || type == DType::Q4_0;
    const TypeTraits& traits = type_traits(type);
    if (!kernel_type && (traits.to_f32 == nullptr || traits.block_elements < 2))
        return invalid(op, "type " + std::string(dtype_name(type)) + " is not f16 or a block type");
    if (!kernel_type && b == Backend::Cuda)
        return error(StatusCode::Unsupported, std::string(op) + ": type " + std::string(dtype_name(type)) +
                                                  " has no CUDA kernel (the CPU backends decode it)");
    if (const auto block = static_cast<uint64_t>(dtype_block_elements(type)); n % block != 0)
        return invalid(
            op, std::to_string(n) + " elements are not a whole number of " + std::to_string(block) + "-element blocks");
    if (n == 0) return Status::ok();
    if (!src || !out) return invalid(op, "null pointer");
    if (Status s = check_backend(b, op); !s) return s;
    const int threads = resolve_threads(b, options);
    if (!kernel_type) {
        traits.to_f32(src, out, static_cast<int64_t>(n));
        return Status::ok();
    }
    switch (b) {
        case Backend::CpuRef:
            if (type == DType::F16)
                cpu::dequantize_f16_ref(src, n, out);
            else if (type == DType::Q8_0)
                cpu::dequantize_q8_0_ref(src, n, out);
            else
                cpu::dequantize_q4_0_ref(src, n, out);
            return Status::ok();
        case Backend::CpuSimd:
            if (type == DType::F16)
                cpu::dequantize_f16_avx2(src, n, out, threads);
            else if (type == DType::Q8_0)
                cpu::dequantize_q8_0_avx2(src, n, out, threads);
            else
                cpu::dequantize_q4_0_avx2(src, n, out, threads);
            return Status::ok();
        case Backend::Cuda:
#if defined(GKQ_KERNELS_CUDA)
            return cuda::dequantize_blocks(type, src, n, out);
#else
            break;
#endif
    }
    return error(StatusCode::Internal, std::string(op) + ": unreachable backend");
}

Status reconstruct(Backend b, const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols,
                   int64_t k, const ResidualBlocks& residual, float* out, const KernelOptions& options) {
    const char* op = "reconstruct";
    if (rows < 0 || cols < 0 || k < 0) return invalid(op, "negative rows, cols or rank");
    if (residual.bits != 0 && residual.bits != 4 && residual.bits != 8)
        return invalid(op, "residual bits is " + std::to_string(residual.bits) + ", expected 0, 4 or 8");
    if (residual.bits != 0 && (cols % residual_block(residual.bits).elements != 0 || !residual.data))
        return invalid(op, "a residual needs blocks and a row length that is a multiple of " +
                               std::to_string(residual_block(residual.bits).elements) + ", got " +
                               std::to_string(cols));
    if (rows == 0 || cols == 0) return Status::ok();
    if (!out || (k > 0 && (!ut || !sigma || !vt))) return invalid(op, "null pointer");
    if (Status s = check_backend(b, op); !s) return s;
    switch (b) {
        case Backend::CpuRef:
            cpu::reconstruct_ref(ut, sigma, vt, rows, cols, k, residual.data, residual.bits, out);
            return Status::ok();
        case Backend::CpuSimd:
            return guarded(op, [&] {
                cpu::reconstruct_avx2(ut, sigma, vt, rows, cols, k, residual.data, residual.bits, out,
                                      resolve_threads(b, options));
            });
        case Backend::Cuda:
#if defined(GKQ_KERNELS_CUDA)
            return cuda::reconstruct(ut, sigma, vt, rows, cols, k, residual, out);
#else
            break;
#endif
    }
    return error(StatusCode::Internal, std::string(op) + ": unreachable backend");
}

// ---- whole tensors ----------------------------------------------------------------------------------------------

namespace {

// One factor, (k, heads * len) row-major: the stored vectors dequantized, a folded factor's heads expanded.
Status decode_factor(Backend b, const TensorJob& job, bool is_u, float* out, const KernelOptions& options) {
    const int64_t len = is_u ? job.u_len : job.v_len;
    const int64_t heads = is_u ? job.u_heads : job.v_heads;
    const uint64_t first = is_u ? 0 : job.v_first();
    const float* scales = is_u ? job.u_scales.data() : job.v_scales.data();
    if (heads == 1) return dequantize_factors(b, job.codes, first, job.k, len, job.delta, scales, out, options);
    AlignedFloats base = aligned_floats(job.k * len);
    if (Status s = dequantize_factors(b, job.codes, first, job.k, len, job.delta, scales, base.get(), options); !s)
        return s;
    cpu::expand_heads_ref(base.get(), job.k, len, job.head_scales.data(), heads, out);
    return Status::ok();
}

// out += the residual's dequantized blocks, a few rows at a time: the block types without a fused reconstruct kernel
// (each element is then the product's value plus the residual's, as when the kernel adds it).
Status add_residual(Backend b, const TensorJob& job, float* out, const KernelOptions& options) {
    constexpr int64_t kChunkElements = int64_t{1} << 20;
    const int64_t chunk_rows = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(job.cols, 1));
    const uint64_t row_bytes = *dtype_storage_bytes(job.residual_type, static_cast<uint64_t>(job.cols));
    std::vector<float> r(static_cast<size_t>(std::min(chunk_rows, job.rows) * job.cols));
    for (int64_t row0 = 0; row0 < job.rows; row0 += chunk_rows) {
        const int64_t nr = std::min(chunk_rows, job.rows - row0);
        const auto count = static_cast<uint64_t>(nr * job.cols);
        if (Status s = dequantize_blocks(b, job.residual_type, job.residual + static_cast<uint64_t>(row0) * row_bytes,
                                         count, r.data(), options);
            !s)
            return s;
        float* dst = out + row0 * job.cols;
        for (uint64_t i = 0; i < count; ++i) dst[i] += r[i];
    }
    return Status::ok();
}

Status decode_cpu(Backend b, const TensorJob& job, float* out, const KernelOptions& options) {
    const auto n = static_cast<uint64_t>(job.n);
    switch (job.method) {
        case Method::F32:
            if (n > 0) std::memcpy(out, job.values, n * 4);
            return Status::ok();
        case Method::LowRank:
        case Method::LowRankResidual: {
            AlignedFloats ut = aligned_floats(job.k * job.rows);  // (k, rows)
            AlignedFloats vt = aligned_floats(job.k * job.cols);  // (k, cols)
            if (Status s = decode_factor(b, job, true, ut.get(), options); !s) return s;
            if (Status s = decode_factor(b, job, false, vt.get(), options); !s) return s;
            if (Status s = reconstruct(b, ut.get(), job.sigma.data(), vt.get(), job.rows, job.cols, job.k,
                                       job.fused_residual(), out, options);
                !s)
                return s;
            return job.residual_is_fused() ? Status::ok() : add_residual(b, job, out, options);
        }
        default: return dequantize_blocks(b, method_dtype(job.method), job.values, n, out, options);  // f16, blocks
    }
}

}  // namespace

Status decode(Backend b, const EncodedTensor& t, float* out, uint64_t n_out, const KernelOptions& options) {
    TensorJob job;
    if (Status s = plan_tensor(t, job); !s) return s;
    if (n_out != static_cast<uint64_t>(job.n))
        return error(StatusCode::InvalidArgument, job.label + ": destination holds " + std::to_string(n_out) +
                                                      " floats, the tensor has " + std::to_string(job.n));
    if (job.n == 0) return Status::ok();
    if (!out) return error(StatusCode::InvalidArgument, job.label + ": null destination");
    if (Status s = check_backend(b, "decode"); !s) return s.with_context(job.label);
    try {
#if defined(GKQ_KERNELS_CUDA)
        if (b == Backend::Cuda) return cuda::decode(job, out).with_context(job.label);
#endif
        return decode_cpu(b, job, out, options).with_context(job.label);
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, job.label + ": does not fit in memory while decoding");
    }
}

}  // namespace gkq::kernels
