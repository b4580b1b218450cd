// Measuring a backend on one tensor: the float64 reference (OpenBLAS dgemm over the decoded factors) and
// run_backend's timing (median of several decodes after a warm-up that pays the output's page faults).
#include "gkq/encoded_tensor.h"
#include "gkq/kernels.h"

#include "cpu/aligned.h"
#include "cpu/cpu_kernels.h"
#include "src/tensor_job.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

namespace gkq::kernels {

Result<std::vector<double>> reference_f64(const EncodedTensor& t) {
    TensorJob job;
    if (Status s = plan_tensor(t, job); !s) return s;
    try {
        const auto n = static_cast<size_t>(job.n);
        std::vector<double> ref(n, 0.0);
        if (job.method != Method::LowRank && job.method != Method::LowRankResidual) {
            // f16 / Q8_0 / Q4_0 values are exact in f32: the reference is the decoded values themselves
            std::vector<float> values(n);
            if (Status s = decode(Backend::CpuRef, t, values.data(), n); !s) return s;
            std::copy(values.begin(), values.end(), ref.begin());
            return ref;
        }
        // The factors exactly as the kernels decode them (dequantization is exact), sigma_r * u_ir in double (exact:
        // a product of two floats), then U diag(sigma) V^T summed in double.
        std::vector<float> ut(static_cast<size_t>(job.k * job.u_heads * job.u_len));
        std::vector<float> vt(static_cast<size_t>(job.k * job.v_heads * job.v_len));
        for (const bool is_u : {true, false}) {
            const int64_t len = is_u ? job.u_len : job.v_len;
            const int64_t heads = is_u ? job.u_heads : job.v_heads;
            std::vector<float> base(static_cast<size_t>(job.k * len));
            if (Status s = dequantize_factors(Backend::CpuRef, job.codes, is_u ? 0 : job.v_first(), job.k, len,
                                              job.delta, is_u ? job.u_scales.data() : job.v_scales.data(), base.data());
                !s)
                return s.with_context(job.label);
            std::vector<float>& dst = is_u ? ut : vt;
            if (heads == 1)
                dst = std::move(base);
            else
                cpu::expand_heads_ref(base.data(), job.k, len, job.head_scales.data(), heads, dst.data());
        }
        std::vector<double> us(ut.size()), vd(vt.begin(), vt.end());
        for (int64_t r = 0; r < job.k; ++r)
            for (int64_t i = 0; i < job.rows; ++i)
                us[static_cast<size_t>(r * job.rows + i)] =
                    static_cast<double>(job.sigma[static_cast<size_t>(r)]) *
                    static_cast<double>(ut[static_cast<size_t>(r * job.rows + i)]);
        if (job.k > 0)
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(job.rows),
                        static_cast<blasint>(job.cols), static_cast<blasint>(job.k), 1.0, us.data(),
                        static_cast<blasint>(job.rows), vd.data(), static_cast<blasint>(job.cols), 0.0, ref.data(),
                        static_cast<blasint>(job.cols));
        if (job.residual_type != DType::Other) {
            std::vector<float> res(n);
            if (Status s = dequantize_blocks(Backend::CpuRef, job.residual_type, job.residual, n, res.data()); !s)
                return s.with_context(job.label);
            for (size_t i = 0; i < n; ++i) ref[i] += static_cast<double>(res[i]);
        }
        return ref;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, job.label + ": the float64 reference does not fit in memory");
    }
}

Result<BackendRun> run_backend(Backend b, const EncodedTensor& t, const RunOptions& options,
                               const std::vector<double>* reference) {
    BackendRun run;
    run.backend = b;
    run.unavailable = backend_unavailable_reason(b);
    if (!run.unavailable.empty()) return run;
    if (options.n_runs < 1)
        return error(StatusCode::InvalidArgument, "run_backend: n_runs is " + std::to_string(options.n_runs));
    const int64_t n = t.n_elements();
    if (reference && reference->size() != static_cast<size_t>(std::max<int64_t>(n, 0)))
        return error(StatusCode::InvalidArgument, "run_backend: the reference holds " +
                                                      std::to_string(reference->size()) + " values, tensor '" + t.name +
                                                      "' has " + std::to_string(n));
    run.device = backend_device(b, options.kernel.n_threads);
    run.n_threads = b == Backend::CpuSimd ? (options.kernel.n_threads > 0
                                                 ? options.kernel.n_threads
                                                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())))
                                          : 1;
    try {
        AlignedFloats out = aligned_floats(n);
        const auto n_out = static_cast<uint64_t>(std::max<int64_t>(n, 0));
        if (Status s = decode(b, t, out.get(), n_out, options.kernel); !s) return s;  // warm-up, and the checks
        std::vector<double> seconds;
        for (int i = 0; i < options.n_runs; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            if (Status s = decode(b, t, out.get(), n_out, options.kernel); !s) return s;
            seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(seconds.begin(), seconds.end());
        const size_t m = seconds.size();
        run.seconds = m % 2 ? seconds[m / 2] : 0.5 * (seconds[m / 2 - 1] + seconds[m / 2]);
        run.gb_per_s = run.seconds > 0 ? 4.0 * static_cast<double>(n_out) / run.seconds / 1e9 : 0.0;

        std::vector<double> own;
        if (!reference) {
            Result<std::vector<double>> r = reference_f64(t);
            if (!r) return r.status();
            own = std::move(*r);
            reference = &own;
        }
        double diff2 = 0.0, ref2 = 0.0;
        for (uint64_t i = 0; i < n_out; ++i) {
            const double d = static_cast<double>(out[i]) - (*reference)[i];
            diff2 += d * d;
            ref2 += (*reference)[i] * (*reference)[i];
            run.max_abs_error = std::max(run.max_abs_error, std::fabs(d));
        }
        run.rel_error = diff2 == 0.0 ? 0.0 : (ref2 > 0.0 ? std::sqrt(diff2 / ref2) : INFINITY);
        return run;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported,
                     "tensor '" + t.name + "': does not fit in memory for " + std::string(backend_name(b)));
    }
}

}  // namespace gkq::kernels
