// The CUDA backend as the dispatcher (src/dispatch.cpp) and the benchmark (src/bench.cpp) call it: the public
// operations on host memory (copies to the device, kernels, copies back), a whole-tensor decode from a TensorJob, and
// kernel timings on device-resident data. Plain C++; built only when CMake found nvcc (GKQ_KERNELS_CUDA).
#pragma once

#include "cuda/device_buffer.h"
#include "gkq/kernels.h"
#include "src/tensor_job.h"

namespace gkq::kernels::cuda {

Status dequantize_factors(const FactorCodes& codes, uint64_t first, int64_t n_vectors, int64_t len, bool delta,
                          const float* scales, float* out);
Status dequantize_blocks(DType type, const uint8_t* src, uint64_t n, float* out);
Status reconstruct(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols, int64_t k,
                   const ResidualBlocks& residual, float* out);
Status decode(const TensorJob& job, float* out);

struct DeviceTimes {
    double kernel_seconds = 0.0;  // launch_reconstruct alone (CUDA events), median
    double memset_seconds = 0.0;  // cudaMemset of the output bytes, median
    double copy_seconds = 0.0;    // device-to-device cudaMemcpy of the output bytes, median
};
// Random factors of rank k on the device, then n_runs timed runs of each (after one warm-up).
Result<DeviceTimes> time_reconstruct(int64_t rows, int64_t cols, int64_t k, int n_runs);

}  // namespace gkq::kernels::cuda
