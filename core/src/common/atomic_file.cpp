#include "gkq/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

namespace gkq {

Result<AtomicFile> AtomicFile::create(const std::string& path) {
    // The pid in the name lets the next writer of this target tell a stale temporary (kill -9) from a live one.
    remove_stale_temporaries(path);
    std::string tmpl = path + ".tmp-" + std::to_string(static_cast<long>(::getpid())) + "-XXXXXX";
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

// ---- outputs that would replace an input ----------------------------------------------------------------------

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_regular(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

// The shard files a model.safetensors.index.json names in its weight_map (relative to its folder).
void add_index_shards(const fs::path& index, std::vector<std::string>& out) {
    std::ifstream in(index, std::ios::binary);
    if (!in) return;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) return;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
        if (!file.is_string()) continue;
        const fs::path p = index.parent_path() / file.get<std::string>();
        if (is_regular(p) && std::find(out.begin(), out.end(), p.string()) == out.end()) out.push_back(p.string());
    }
}

}  // namespace

std::vector<std::string> model_input_files(const std::string& model_path) {
    std::vector<std::string> out;
    std::error_code ec;
    fs::path dir;
    std::vector<fs::path> models;
    if (fs::is_directory(model_path, ec)) {
        dir = model_path;
        for (const char* name : {"model.safetensors.index.json", "model.safetensors"})
            if (is_regular(dir / name)) models.push_back(dir / name);
        if (models.empty())
            for (const auto& e : fs::directory_iterator(dir, ec)) {
                const std::string ext = e.path().extension().string();
                if (ext == ".gguf" || ext == ".safetensors" || ext == ".bin") models.push_back(e.path());
            }
    } else {
        models.push_back(model_path);
        dir = fs::path(model_path).parent_path();
        if (dir.empty()) dir = ".";
    }
    for (const fs::path& m : models) {
        out.push_back(m.string());
        if (ends_with(m.string(), ".json")) add_index_shards(m, out);
    }
    // What the readers take from beside the model: the HF config and tokenizers, llama2.c's tokenizer.bin / tok*.bin.
    for (const char* name :
         {"config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json", "tokenizer.bin"})
        if (is_regular(dir / name)) out.push_back((dir / name).string());
    for (const auto& e : fs::directory_iterator(dir, ec)) {  // llama2.c's tok512.bin and the like
        const std::string name = e.path().filename().string();
        if (name.size() > 7 && name.compare(0, 3, "tok") == 0 && ends_with(name, ".bin") && name != "tokenizer.bin" &&
            is_regular(e.path()))
            out.push_back(e.path().string());
    }
    return out;
}

Status check_output_not_input(const std::string& output, const std::vector<std::string>& inputs) {
    struct stat out_st {};
    if (::stat(output.c_str(), &out_st) != 0) return Status::ok();  // does not exist (yet): replaces nothing
    for (const std::string& in : inputs) {
        struct stat in_st {};
        if (in.empty() || ::stat(in.c_str(), &in_st) != 0) continue;
        if (in_st.st_dev != out_st.st_dev || in_st.st_ino != out_st.st_ino) continue;
        std::string how = "the same file";
        struct stat link_st {};
        if (output != in && ::lstat(output.c_str(), &link_st) == 0 && S_ISLNK(link_st.st_mode))
            how = "a symbolic link to it";
        else if (output != in)
            how = "another name for the same file: a hard link or another path to it";
        return error(StatusCode::InvalidArgument, output + ": this output is the input " + in + " (" + how +
                                                      "); writing it would destroy the input: choose another output");
    }
    return Status::ok();
}

// ---- stale temporaries ----------------------------------------------------------------------------------------

size_t remove_stale_temporaries(const std::string& path) {
    const fs::path target(path);
    fs::path dir = target.parent_path();
    if (dir.empty()) dir = ".";
    const std::string prefix = target.filename().string() + ".tmp-";
    const long self = static_cast<long>(::getpid());
    size_t removed = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        // "<pid>-XXXXXX": the pid of the process that made it, then mkstemp's six characters.
        const std::string rest = name.substr(prefix.size());
        const size_t dash = rest.find('-');
        if (dash == std::string::npos || dash == 0 || dash > 10 || rest.size() != dash + 7) continue;
        long pid = 0;
        bool digits = true;
        for (size_t i = 0; i < dash; ++i) {
            if (rest[i] < '0' || rest[i] > '9') digits = false;
            pid = pid * 10 + (rest[i] - '0');
        }
        if (!digits || pid <= 0 || pid == self) continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
        std::error_code rm;
        if (fs::remove(e.path(), rm)) ++removed;
    }
    return removed;
}

}  // namespace gkq
