// The CUDA backend on host memory (see cuda_api.h): upload, launch, download — every step's error a Status.
#include "cuda/cuda_api.h"
#include "cuda/launch.h"
#include "gkq/block_layout.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <vector>

namespace gkq::kernels::cuda {

namespace {

// Bytes of the code stream that vectors [first, first + n) touch, from its start.
uint64_t code_stream_bytes(const FactorCodes& c, uint64_t end_code) {
    return c.packed ? (end_code * static_cast<uint64_t>(c.bits) + 7) / 8 : end_code;
}

int block_type(DType t) {
    return t == DType::F16 ? 1 : (t == DType::Q8_0 ? 8 : 4);
}

// Bytes of n values of t (F16, or whole Q8_0 / Q4_0 blocks: checked by the dispatcher).
uint64_t block_bytes(DType t, uint64_t n) {
    return dtype_storage_bytes(t, n).value_or(0);
}

// Bytes of the n values of a residual stored with `bits` per code (0: none).
uint64_t residual_bytes(int bits, uint64_t n) {
    if (bits == 0) return 0;
    const BlockLayout& block = residual_block(bits);
    return n / static_cast<uint64_t>(block.elements) * static_cast<uint64_t>(block.bytes);
}

Status check_grid(int64_t rows) {
    if (rows <= int64_t{65535} * 64) return Status::ok();
    return gkq::error(StatusCode::Unsupported,
                      "the CUDA reconstruction handles at most 4,194,240 rows, the matrix has " + std::to_string(rows));
}

// Device factors (k, heads * len) of one side of a low-rank job.
Status decode_factor(const TensorJob& job, const DeviceBuffer& codes, bool is_u, DeviceBuffer& out) {
    const int64_t len = is_u ? job.u_len : job.v_len;
    const int64_t heads = is_u ? job.u_heads : job.v_heads;
    const std::vector<float>& scales = is_u ? job.u_scales : job.v_scales;
    const char* side = is_u ? "U" : "V";
    Result<DeviceBuffer> d_scales =
        DeviceBuffer::upload(scales.data(), scales.size() * 4, std::string(side) + " scales");
    if (!d_scales) return d_scales.status();
    Result<DeviceBuffer> d =
        DeviceBuffer::allocate(static_cast<size_t>(job.k * heads * len) * 4, std::string(side) + " factor");
    if (!d) return d.status();
    if (heads == 1) {
        launch_dequantize_factors(codes.as<uint8_t>(), job.bits, job.codes.packed, is_u ? 0 : job.v_first(), job.k, len,
                                  job.delta, d_scales->as<float>(), d->as<float>());
    } else {
        Result<DeviceBuffer> base = DeviceBuffer::allocate(static_cast<size_t>(job.k * len) * 4, "folded base block");
        if (!base) return base.status();
        Result<DeviceBuffer> hs =
            DeviceBuffer::upload(job.head_scales.data(), job.head_scales.size() * 4, "head scales");
        if (!hs) return hs.status();
        launch_dequantize_factors(codes.as<uint8_t>(), job.bits, job.codes.packed, is_u ? 0 : job.v_first(), job.k, len,
                                  job.delta, d_scales->as<float>(), base->as<float>());
        launch_expand_heads(base->as<float>(), job.k, len, hs->as<float>(), heads, d->as<float>());
        // base and hs are freed on return: cudaFree waits for the kernels that use them
    }
    if (Status s = last_launch_status(std::string("dequantize ") + side); !s) return s;
    out = std::move(*d);
    return Status::ok();
}

}  // namespace

Status dequantize_factors(const FactorCodes& codes, uint64_t first, int64_t n_vectors, int64_t len, bool delta,
                          const float* scales, float* out) {
    const uint64_t n = static_cast<uint64_t>(n_vectors) * static_cast<uint64_t>(len);
    Result<DeviceBuffer> d_codes = DeviceBuffer::upload(codes.data, code_stream_bytes(codes, first + n), "codes");
    if (!d_codes) return d_codes.status();
    Result<DeviceBuffer> d_scales = DeviceBuffer::upload(scales, static_cast<size_t>(n_vectors) * 4, "scales");
    if (!d_scales) return d_scales.status();
    Result<DeviceBuffer> d_out = DeviceBuffer::allocate(n * 4, "factors");
    if (!d_out) return d_out.status();
    launch_dequantize_factors(d_codes->as<uint8_t>(), codes.bits, codes.packed, first, n_vectors, len, delta,
                              d_scales->as<float>(), d_out->as<float>());
    if (Status s = last_launch_status("dequantize_factors"); !s) return s;
    return d_out->download(out, n * 4);
}

Status dequantize_blocks(DType type, const uint8_t* src, uint64_t n, float* out) {
    Result<DeviceBuffer> d_src = DeviceBuffer::upload(src, block_bytes(type, n), "blocks");
    if (!d_src) return d_src.status();
    Result<DeviceBuffer> d_out = DeviceBuffer::allocate(n * 4, "values");
    if (!d_out) return d_out.status();
    launch_dequantize_blocks(block_type(type), d_src->as<uint8_t>(), n, d_out->as<float>());
    if (Status s = last_launch_status("dequantize_blocks"); !s) return s;
    return d_out->download(out, n * 4);
}

Status reconstruct(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                   const ResidualBlocks& residual, float* out) {
    if (Status s = check_grid(rows); !s) return s;
    const auto n = static_cast<uint64_t>(rows * cols);
    Result<DeviceBuffer> d_ut = DeviceBuffer::upload(ut, static_cast<size_t>(k * rows) * 4, "U");
    if (!d_ut) return d_ut.status();
    Result<DeviceBuffer> d_vt = DeviceBuffer::upload(vt, static_cast<size_t>(k * cols) * 4, "V");
    if (!d_vt) return d_vt.status();
    Result<DeviceBuffer> d_sigma = DeviceBuffer::upload(sigma, static_cast<size_t>(k) * 4, "sigma");
    if (!d_sigma) return d_sigma.status();
    Result<DeviceBuffer> d_res = DeviceBuffer::upload(residual.data, residual_bytes(residual.bits, n), "residual");
    if (!d_res) return d_res.status();
    Result<DeviceBuffer> d_out = DeviceBuffer::allocate(n * 4, "W");
    if (!d_out) return d_out.status();
    launch_reconstruct(d_ut->as<float>(), d_sigma->as<float>(), d_vt->as<float>(), rows, cols, k, d_res->as<uint8_t>(),
                       residual.bits, d_out->as<float>());
    if (Status s = last_launch_status("reconstruct"); !s) return s;
    return d_out->download(out, n * 4);
}

Status decode(const TensorJob& job, float* out) {
    const auto n = static_cast<uint64_t>(job.n);
    switch (job.method) {
        case Method::F32: {
            // nothing to compute: a device round trip would only measure PCIe
            std::copy(reinterpret_cast<const float*>(job.values), reinterpret_cast<const float*>(job.values) + n, out);
            return Status::ok();
        }
        case Method::F16: return dequantize_blocks(DType::F16, job.values, n, out);
        case Method::Q8_0: return dequantize_blocks(DType::Q8_0, job.values, n, out);
        case Method::Q4_0: return dequantize_blocks(DType::Q4_0, job.values, n, out);
        case Method::LowRank:
        case Method::LowRankResidual: break;
        default:
            return error(StatusCode::Unsupported, "method " + std::string(method_name(job.method)) +
                                                      " has no CUDA kernel (the CPU backends decode it)");
    }
    if (!job.residual_is_fused())
        return error(StatusCode::Unsupported, "a residual of type " + std::string(dtype_name(job.residual_type)) +
                                                  " has no CUDA kernel (q4_0 and q8_0 do; the CPU backends decode it)");
    const ResidualBlocks residual = job.fused_residual();
    if (Status s = check_grid(job.rows); !s) return s;
    const uint64_t n_codes = static_cast<uint64_t>(job.k) * static_cast<uint64_t>(job.u_len + job.v_len);
    Result<DeviceBuffer> codes = DeviceBuffer::upload(job.codes.data, code_stream_bytes(job.codes, n_codes), "codes");
    if (!codes) return codes.status();
    DeviceBuffer ut, vt;
    if (Status s = decode_factor(job, *codes, true, ut); !s) return s;
    if (Status s = decode_factor(job, *codes, false, vt); !s) return s;
    Result<DeviceBuffer> sigma = DeviceBuffer::upload(job.sigma.data(), job.sigma.size() * 4, "sigma");
    if (!sigma) return sigma.status();
    Result<DeviceBuffer> res = DeviceBuffer::upload(residual.data, residual_bytes(residual.bits, n), "residual blocks");
    if (!res) return res.status();
    Result<DeviceBuffer> d_out = DeviceBuffer::allocate(n * 4, "W");
    if (!d_out) return d_out.status();
    launch_reconstruct(ut.as<float>(), sigma->as<float>(), vt.as<float>(), job.rows, job.cols, job.k,
                       res->as<uint8_t>(), residual.bits, d_out->as<float>());
    if (Status s = last_launch_status("reconstruct"); !s) return s;
    return d_out->download(out, n * 4);
}

Result<DeviceTimes> time_reconstruct(int64_t rows, int64_t cols, int64_t k, int n_runs) {
    if (Status s = check_grid(rows); !s) return s;
    const auto n = static_cast<uint64_t>(rows * cols);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
    std::vector<float> ut(static_cast<size_t>(k * rows)), vt(static_cast<size_t>(k * cols)),
        sigma(static_cast<size_t>(k));
    for (float& x : ut) x = dist(rng);
    for (float& x : vt) x = dist(rng);
    for (int64_t r = 0; r < k; ++r) sigma[static_cast<size_t>(r)] = 1.0f / static_cast<float>(1 + r);
    Result<DeviceBuffer> d_ut = DeviceBuffer::upload(ut.data(), ut.size() * 4, "U");
    if (!d_ut) return d_ut.status();
    Result<DeviceBuffer> d_vt = DeviceBuffer::upload(vt.data(), vt.size() * 4, "V");
    if (!d_vt) return d_vt.status();
    Result<DeviceBuffer> d_sigma = DeviceBuffer::upload(sigma.data(), sigma.size() * 4, "sigma");
    if (!d_sigma) return d_sigma.status();
    Result<DeviceBuffer> d_out = DeviceBuffer::allocate(n * 4, "W");
    if (!d_out) return d_out.status();
    Result<DeviceBuffer> d_src = DeviceBuffer::allocate(n * 4, "copy source");
    if (!d_src) return d_src.status();
    if (Status s = cuda_status(cudaMemset(d_src->as<void>(), 0, n * 4), "cudaMemset"); !s) return s;

    cudaEvent_t start = nullptr, stop = nullptr;
    if (Status s = cuda_status(cudaEventCreate(&start), "cudaEventCreate"); !s) return s;
    if (Status s = cuda_status(cudaEventCreate(&stop), "cudaEventCreate"); !s) {
        cudaEventDestroy(start);
        return s;
    }
    struct Events {
        cudaEvent_t a, b;
        ~Events() {
            cudaEventDestroy(a);
            cudaEventDestroy(b);
        }
    } events{start, stop};

    auto median_ms = [&](auto&& launch) -> Result<double> {
        launch();  // warm-up
        std::vector<double> ms;
        for (int i = 0; i < n_runs; ++i) {
            (void)cudaEventRecord(start);
            launch();
            (void)cudaEventRecord(stop);
            if (Status s = cuda_status(cudaEventSynchronize(stop), "timed run"); !s) return s;
            float t = 0.0f;
            if (Status s = cuda_status(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime"); !s) return s;
            ms.push_back(t);
        }
        if (Status s = last_launch_status("timed runs"); !s) return s;
        std::sort(ms.begin(), ms.end());
        const size_t m = ms.size();
        return m % 2 ? ms[m / 2] : 0.5 * (ms[m / 2 - 1] + ms[m / 2]);
    };
    DeviceTimes t;
    Result<double> ms = median_ms([&] {
        launch_reconstruct(d_ut->as<float>(), d_sigma->as<float>(), d_vt->as<float>(), rows, cols, k, nullptr, 0,
                           d_out->as<float>());
    });
    if (!ms) return ms.status();
    t.kernel_seconds = *ms / 1e3;
    Result<double> memset_ms = median_ms([&] { (void)cudaMemsetAsync(d_out->as<void>(), 0, n * 4); });
    if (!memset_ms) return memset_ms.status();
    t.memset_seconds = *memset_ms / 1e3;
    Result<double> copy_ms = median_ms(
        [&] { (void)cudaMemcpyAsync(d_out->as<void>(), d_src->as<void>(), n * 4, cudaMemcpyDeviceToDevice); });
    if (!copy_ms) return copy_ms.status();
    t.copy_seconds = *copy_ms / 1e3;
    return t;
}

}  // namespace gkq::kernels::cuda
