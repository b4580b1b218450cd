#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace gkq {

Result<MappedFile> MappedFile::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return error(e == ENOENT ? StatusCode::NotFound : StatusCode::IoError,
                     path + ": cannot open: " + std::strerror(e));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        return error(StatusCode::IoError, path + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return error(StatusCode::InvalidArgument, path + ": not a regular file");
    }
    MappedFile m;
    m.m_path = path;
    m.m_size = static_cast<uint64_t>(st.st_size);
    if (m.m_size > 0) {
        void* p = ::mmap(nullptr, m.m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            return error(StatusCode::IoError, path + ": cannot mmap: " + std::strerror(e));
        }
        m.m_data = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return m;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : m_path(std::move(other.m_path)),
      m_data(std::exchange(other.m_data, nullptr)),
      m_size(std::exchange(other.m_size, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (m_data) ::munmap(const_cast<uint8_t*>(m_data), m_size);
        m_path = std::move(other.m_path);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

bool MappedFile::drop_resident(const void* p, uint64_t n) const {
    const auto* b = static_cast<const uint8_t*>(p);
    if (m_data == nullptr || b < m_data || n > m_size || static_cast<uint64_t>(b - m_data) > m_size - n) return false;
    const long page_size = ::sysconf(_SC_PAGESIZE);
    const auto page = static_cast<uintptr_t>(page_size > 0 ? page_size : 4096);
    const uintptr_t first = (reinterpret_cast<uintptr_t>(b) + page - 1) / page * page;
    const uintptr_t last = (reinterpret_cast<uintptr_t>(b) + n) / page * page;
    if (last <= first) return false;
    return ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0;
}

MappedFile::~MappedFile() {
    if (m_data) ::munmap(const_cast<uint8_t*>(m_data), m_size);
}

}  // namespace gkq
