// CUDA device memory and status, behind a plain C++ interface (no CUDA types): DeviceBuffer owns one cudaMalloc
// allocation and frees it on destruction; every CUDA error becomes a Status naming the operation and the error.
// Runtime API only. Device 0 is the device.
#pragma once

#include "gkq/status.h"

#include <cstddef>
#include <string>

namespace gkq::kernels::cuda {

// Usable devices: 0 when the driver, the runtime or a device is missing — any error counts as "no device" and its
// text goes to `why`. Asked once per process.
int device_count(std::string* why = nullptr);
// "NVIDIA H200 (sm_90, 132 SMs, 140 GiB)"; empty without a device.
std::string device_description();

// Ok, or "<what>: cudaErrorName (description)" as Internal (Unsupported for out-of-memory).
Status cuda_status(int error, const std::string& what);
// The last launch's error (cudaGetLastError), as cuda_status.
Status last_launch_status(const std::string& what);
Status synchronize(const std::string& what);

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    static Result<DeviceBuffer> allocate(size_t bytes, const std::string& what);
    // Allocates and uploads `bytes` bytes from host memory.
    static Result<DeviceBuffer> upload(const void* src, size_t bytes, const std::string& what);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& o) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    template <class T>
    T* as() const {
        return static_cast<T*>(m_ptr);
    }
    size_t bytes() const { return m_bytes; }
    Status download(void* dst, size_t bytes) const;  // the first `bytes` bytes to host memory

private:
    void* m_ptr = nullptr;
    size_t m_bytes = 0;
};

}  // namespace gkq::kernels::cuda
