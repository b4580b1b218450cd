// AtomicFile: write a file under a temporary name beside the target, then rename it into place on commit().
// Destroyed without commit(), it removes the temporary: an interrupted write never leaves a partial file.
#pragma once

#include "gkq/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// ---- outputs that would replace an input ---------------------------------------------------------------------
// An output is refused (InvalidArgument, naming both paths) when it is one of the input files: the same path, a
// symlink to it or a hard link (same device and inode). Outputs and inputs that do not exist yet never conflict.
// Every command that writes a file calls this before any work, with model_input_files() for each model it reads.
Status check_output_not_input(const std::string& output, const std::vector<std::string>& inputs);

// The files a reader takes from the model `model_path` (a file or a folder): a folder's model file(s), a safetensors
// index's shards, and the config.json and tokenizer files beside the model; only those that exist.
std::vector<std::string> model_input_files(const std::string& model_path);

// Stale temporaries: AtomicFile names its temporary "TARGET.tmp-PID-XXXXXX"; create() first removes those of the
// same target whose process no longer runs (left by a kill -9 or a crash). Returns how many it removed.
size_t remove_stale_temporaries(const std::string& path);

}  // namespace gkq
