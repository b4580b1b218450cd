// SHA-256 (FIPS 180-4), for the content hashes of saturation bitmasks. Small and dependency-free: the project
// links no crypto library. Tested against the FIPS 180-2 example vectors (tests/core/test_saturation.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gkq {

class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t n);
    std::array<uint8_t, 32> finish();  // the digest; the object is then spent

private:
    void block(const uint8_t* p);
    std::array<uint32_t, 8> m_h;
    std::array<uint8_t, 64> m_buf{};
    size_t m_buf_len = 0;
    uint64_t m_total = 0;  // bytes
};

// Lower-case hex digest of data[0..n).
std::string sha256_hex(const void* data, size_t n);

}  // namespace gkq
