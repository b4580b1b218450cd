// 64-byte aligned float buffers for the kernels' scratch and outputs (packed panels need 32-byte aligned loads;
// streaming stores need aligned destinations). Throws std::bad_alloc like new; the public API catches it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace gkq::kernels {

struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], FreeDeleter>;

// n floats (uninitialized), at least one.
inline AlignedFloats aligned_floats(int64_t n) {
    const auto bytes = (static_cast<uint64_t>(n > 0 ? n : 1) * 4 + 63) / 64 * 64;
    if (bytes > (uint64_t{1} << 40)) throw std::bad_alloc();
    auto* p = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
    if (!p) throw std::bad_alloc();
    return AlignedFloats(p);
}

}  // namespace gkq::kernels
