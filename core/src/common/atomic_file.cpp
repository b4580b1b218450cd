#include "gkq/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace gkq {

Result<AtomicFile> AtomicFile::create(const std::string& path) {
    std::string tmpl = path + ".tmp-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    int fd = ::mkstemp(buf.data());
    if (fd < 0) {
        int e = errno;
        return error(StatusCode::IoError, path + ": cannot create a temporary file beside it: " + std::strerror(e));
    }
    ::fchmod(fd, 0644);
    return AtomicFile(path, std::string(buf.data()), fd);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : m_path(std::move(other.m_path)),
      m_tmp(std::move(other.m_tmp)),
      m_fd(std::exchange(other.m_fd, -1)),
      m_written(other.m_written) {}

AtomicFile::~AtomicFile() {
    if (m_fd >= 0) {
        ::close(m_fd);
        ::unlink(m_tmp.c_str());
    }
}

Status AtomicFile::write(const void* data, size_t n) {
    if (m_fd < 0) return error(StatusCode::Internal, m_path + ": write after commit");
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t w = ::write(m_fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            return error(StatusCode::IoError, m_path + ": write failed: " + std::strerror(e));
        }
        p += w;
        n -= static_cast<size_t>(w);
        m_written += static_cast<uint64_t>(w);
    }
    return Status::ok();
}

Status AtomicFile::write_zeros(size_t n) {
    static const char zeros[4096] = {};
    while (n > 0) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (Status s = write(zeros, k); !s) return s;
        n -= k;
    }
    return Status::ok();
}

Status AtomicFile::commit() {
    if (m_fd < 0) return error(StatusCode::Internal, m_path + ": committed twice");
    if (::fsync(m_fd) != 0 || ::close(m_fd) != 0) {
        int e = errno;
        m_fd = -1;
        ::unlink(m_tmp.c_str());
        return error(StatusCode::IoError, m_path + ": cannot flush: " + std::strerror(e));
    }
    m_fd = -1;
    if (::rename(m_tmp.c_str(), m_path.c_str()) != 0) {
        int e = errno;
        ::unlink(m_tmp.c_str());
        return error(StatusCode::IoError,
                     m_path + ": cannot rename the temporary file into place: " + std::strerror(e));
    }
    return Status::ok();
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
    auto f = AtomicFile::create(path);
    if (!f) return f.status();
    if (Status s = f->write(bytes); !s) return s;
    return f->commit();
}

}  // namespace gkq
