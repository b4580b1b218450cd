// AtomicFile: write a file under a temporary name beside the target, then rename it into place on commit().
// Destroyed without commit(), it removes the temporary: an interrupted write never leaves a partial file.
#pragma once

#include "gkq/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gkq {

class AtomicFile {
public:
    static Result<AtomicFile> create(const std::string& path);

    AtomicFile(AtomicFile&& other) noexcept;
    AtomicFile& operator=(AtomicFile&&) = delete;
    AtomicFile(const AtomicFile&) = delete;
    ~AtomicFile();

    Status write(const void* data, size_t n);
    Status write(std::string_view s) { return write(s.data(), s.size()); }
    Status write_zeros(size_t n);
    uint64_t bytes_written() const { return m_written; }
    // fsyncs, closes and renames over the target path.
    Status commit();
    const std::string& path() const { return m_path; }

private:
    AtomicFile(std::string path, std::string tmp_path, int fd)
        : m_path(std::move(path)), m_tmp(std::move(tmp_path)), m_fd(fd) {}
    std::string m_path;
    std::string m_tmp;
    int m_fd = -1;
    uint64_t m_written = 0;
};

// Whole-file convenience.
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace gkq
