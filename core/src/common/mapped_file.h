// MappedFile: a read-only memory map of a whole file (RAII). Empty files map to a null pointer, size 0.
#pragma once

#include "gkq/status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace gkq {

class MappedFile {
public:
    static Result<MappedFile> open(const std::string& path);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const uint8_t* data() const { return m_data; }
    uint64_t size() const { return m_size; }
    const std::string& path() const { return m_path; }

    // Drops the whole pages inside [p, p + n) from this process's resident set (madvise MADV_DONTNEED: the map is
    // read-only and private, so a later read faults the same bytes in again from the file or its page cache).
    // Bytes outside this map are left alone; false when nothing was dropped.
    bool drop_resident(const void* p, uint64_t n) const;

private:
    std::string m_path;
    const uint8_t* m_data = nullptr;
    uint64_t m_size = 0;
};

}  // namespace gkq
