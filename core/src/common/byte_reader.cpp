#include "common/byte_reader.h"

namespace gkq {

void ByteReader::fail(const std::string& what, const std::string& why) {
    fail_at(m_pos, what, why);
}

void ByteReader::fail_at(uint64_t offset, const std::string& what, const std::string& why) {
    if (!m_status.is_ok()) return;  // keep the first error
    m_status = error(StatusCode::Corrupt, m_label + ": " + what + " at offset " + std::to_string(offset) + ": " + why);
}

bool ByteReader::check(uint64_t n, const char* what) {
    if (!ok()) return false;
    if (n > remaining()) {
        fail(what, "needs " + std::to_string(n) + " bytes but the file ends after " + std::to_string(remaining()) +
                       " (truncated?)");
        return false;
    }
    return true;
}

bool ByteReader::skip(uint64_t n, const char* what) {
    if (!check(n, what)) return false;
    m_pos += n;
    return true;
}

bool ByteReader::seek(uint64_t pos, const char* what) {
    if (!ok()) return false;
    if (pos > m_size) {
        fail(what,
             "position " + std::to_string(pos) + " is past the end of the file (" + std::to_string(m_size) + " bytes)");
        return false;
    }
    m_pos = pos;
    return true;
}

bool ByteReader::bytes(uint64_t n, const uint8_t*& out, const char* what) {
    if (!check(n, what)) return false;
    out = m_data + m_pos;
    m_pos += n;
    return true;
}

bool ByteReader::read_string_u64(std::string& out, const char* what, uint64_t max_len) {
    uint64_t start = m_pos;
    uint64_t len = 0;
    if (!read(len, what)) return false;
    if (len > max_len || len > remaining()) {
        fail_at(start, what,
                "string length " + std::to_string(len) + " exceeds " +
                    (len > max_len ? "the limit of " + std::to_string(max_len)
                                   : "the " + std::to_string(remaining()) + " bytes left in the file"));
        return false;
    }
    out.assign(reinterpret_cast<const char*>(m_data + m_pos), len);
    m_pos += len;
    return true;
}

bool is_valid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t n = s.size(), i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        int len = 0;
        uint32_t cp = 0;
        if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else
            return false;
        if (i + len > n) return false;
        for (int k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

}  // namespace gkq
