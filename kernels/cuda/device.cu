// Device discovery, CUDA errors as Status, and DeviceBuffer (see device_buffer.h).
#include "cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <mutex>
#include <utility>

namespace gkq::kernels::cuda {

namespace {

struct Discovery {
    int count = 0;  // stays 0 on any error: cudaGetDeviceCount does not write it without a driver
    std::string why;
    std::string description;
};

const Discovery& discovery() {
    static Discovery d;
    static std::once_flag once;
    std::call_once(once, [] {
        int n = 0;
        const cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            d.why =
                std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
            cudaGetLastError();  // clear the sticky-free error so later calls start clean
            return;
        }
        if (n <= 0) {
            d.why = "cudaGetDeviceCount reports no device";
            return;
        }
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
            d.why = "cudaGetDeviceProperties(0) failed";
            cudaGetLastError();
            return;
        }
        d.count = n;
        d.description = std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
                        std::to_string(p.multiProcessorCount) + " SMs, " + std::to_string(p.totalGlobalMem >> 30) +
                        " GiB)";
    });
    return d;
}

}  // namespace

int device_count(std::string* why) {
    const Discovery& d = discovery();
    if (why) *why = d.why;
    return d.count;
}

std::string device_description() {
    return discovery().description;
}

Status cuda_status(int error, const std::string& what) {
    const auto e = static_cast<cudaError_t>(error);
    if (e == cudaSuccess) return Status::ok();
    const std::string text = what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return gkq::error(e == cudaErrorMemoryAllocation ? StatusCode::Unsupported : StatusCode::Internal, text);
}

Status last_launch_status(const std::string& what) {
    return cuda_status(cudaGetLastError(), what);
}

Status synchronize(const std::string& what) {
    return cuda_status(cudaDeviceSynchronize(), what);
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, const std::string& what) {
    DeviceBuffer b;
    if (bytes == 0) return Result<DeviceBuffer>(std::move(b));
    void* p = nullptr;
    if (Status s = cuda_status(cudaMalloc(&p, bytes), "cudaMalloc " + std::to_string(bytes) + " bytes for " + what); !s)
        return s;
    b.m_ptr = p;
    b.m_bytes = bytes;
    return Result<DeviceBuffer>(std::move(b));
}

Result<DeviceBuffer> DeviceBuffer::upload(const void* src, size_t bytes, const std::string& what) {
    Result<DeviceBuffer> b = allocate(bytes, what);
    if (!b || bytes == 0) return b;
    if (Status s = cuda_status(cudaMemcpy(b->m_ptr, src, bytes, cudaMemcpyHostToDevice), "upload of " + what); !s)
        return s;
    return b;
}

DeviceBuffer::~DeviceBuffer() {
    if (m_ptr) cudaFree(m_ptr);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : m_ptr(o.m_ptr), m_bytes(o.m_bytes) {
    o.m_ptr = nullptr;
    o.m_bytes = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (m_ptr) cudaFree(m_ptr);
        m_ptr = o.m_ptr;
        m_bytes = o.m_bytes;
        o.m_ptr = nullptr;
        o.m_bytes = 0;
    }
    return *this;
}

Status DeviceBuffer::download(void* dst, size_t bytes) const {
    if (bytes == 0) return Status::ok();
    if (bytes > m_bytes)
        return gkq::error(StatusCode::Internal, "download of " + std::to_string(bytes) + " bytes from a " +
                                                    std::to_string(m_bytes) + "-byte device buffer");
    return cuda_status(cudaMemcpy(dst, m_ptr, bytes, cudaMemcpyDeviceToHost), "download");
}

}  // namespace gkq::kernels::cuda
