// ByteReader: bounds-checked little-endian reads from a byte range, for file parsers.
// Every read checks the remaining length first; a failed read sets the error (naming the offset and what
// was being read) and all later reads fail too, so a parser can read a group of fields and check once.
#pragma once

#include "gkq/status.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gkq {

class ByteReader {
public:
    ByteReader(const uint8_t* data, uint64_t size, std::string file_label)
        : m_data(data), m_size(size), m_label(std::move(file_label)) {}

    uint64_t offset() const { return m_pos; }
    uint64_t size() const { return m_size; }
    uint64_t remaining() const { return m_size - m_pos; }
    bool ok() const { return m_status.is_ok(); }
    const Status& status() const { return m_status; }
    const std::string& label() const { return m_label; }

    // Fails (Corrupt) with "<file>: <what> at offset N: <why>".
    void fail(const std::string& what, const std::string& why);
    void fail_at(uint64_t offset, const std::string& what, const std::string& why);

    bool skip(uint64_t n, const char* what);
    bool seek(uint64_t pos, const char* what);

    template <class T>
    bool read(T& out, const char* what) {
        if (!check(sizeof(T), what)) return false;
        std::memcpy(&out, m_data + m_pos, sizeof(T));  // little-endian host assumed (x86-64, aarch64)
        m_pos += sizeof(T);
        return true;
    }

    // A view of n bytes at the current position (advances).
    bool bytes(uint64_t n, const uint8_t*& out, const char* what);
    // GGUF-style string: uint64 length then bytes; rejects lengths over max_len.
    bool read_string_u64(std::string& out, const char* what, uint64_t max_len = (1ull << 30));

private:
    bool check(uint64_t n, const char* what);

    const uint8_t* m_data;
    uint64_t m_size;
    uint64_t m_pos = 0;
    std::string m_label;
    Status m_status;
};

// True when [offset, offset + size) lies within [0, file_size) without overflow.
inline bool range_in_file(uint64_t offset, uint64_t size, uint64_t file_size) {
    return offset <= file_size && size <= file_size - offset;
}

// Checked multiplication; false on overflow.
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) {
    return !__builtin_mul_overflow(a, b, &out);
}
inline bool checked_add(uint64_t a, uint64_t b, uint64_t& out) {
    return !__builtin_add_overflow(a, b, &out);
}

// True when s is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace gkq
