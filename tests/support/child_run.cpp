// Child runs with peak RSS, and the tokenizer writer of tests/support/child_run.h.
#include "child_run.h"

#include "gkq/type_traits.h"
#include "gkq/weights.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace gkq::test {

ChildRun run_child(const std::vector<std::string>& args, const std::string& log) {
    ChildRun r;
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) return r;
    if (pid == 0) {
        if (std::freopen(log.c_str(), "w", stdout) == nullptr || dup2(fileno(stdout), 2) < 0) _exit(126);
        execv(argv[0], argv.data());
        _exit(127);
    }
    int status = 0;
    struct rusage usage {};
    if (wait4(pid, &status, 0, &usage) != pid) return r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
    return r;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_llama2c_tokenizer(const std::string& path, int n) {
    std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        toks.emplace_back(buf);
    }
    const std::string sp = " ";  // llama2.c pieces spell SentencePiece's U+2581 as a space
    toks.push_back(sp);
    for (char a = 'a'; a <= 'z'; ++a) toks.emplace_back(1, a);
    for (char a = 'a'; a <= 'z'; ++a) toks.push_back(sp + a);
    for (char a = 'a'; a <= 'z'; ++a)
        for (char b = 'a'; b <= 'z'; ++b) toks.push_back(sp + a + b);
    for (char a = 'a'; a <= 'z'; ++a)
        for (char b = 'a'; b <= 'z'; ++b)
            for (char c = 'a'; c <= 'z'; ++c) toks.push_back(sp + a + b + c);
    if (static_cast<int>(toks.size()) > n) toks.resize(static_cast<size_t>(n));
    while (static_cast<int>(toks.size()) < n) toks.push_back("\xe2\x96\x81w" + std::to_string(toks.size()));
    std::ofstream f(path, std::ios::binary);
    int32_t max_len = 0;
    for (const std::string& t : toks) max_len = std::max(max_len, static_cast<int32_t>(t.size()));
    f.write(reinterpret_cast<const char*>(&max_len), 4);
    for (size_t i = 0; i < toks.size(); ++i) {
        const float score = -static_cast<float>(i);
        const auto len = static_cast<int32_t>(toks[i].size());
        f.write(reinterpret_cast<const char*>(&score), 4);
        f.write(reinterpret_cast<const char*>(&len), 4);
        f.write(toks[i].data(), len);
    }
}

bool model_sizes(const std::string& model, const std::string& knot, ModelSizes& out, std::string& error) {
    auto weights = open_weights(model);
    if (!weights) return error = weights.message(), false;
    auto knot_weights = open_weights(knot);
    if (!knot_weights) return error = knot_weights.message(), false;
    out = {};
    out.config = (*weights)->config();
    for (size_t i = 0; i < (*weights)->n_tensors(); ++i) {
        const uint64_t f32 = static_cast<uint64_t>((*weights)->tensor_info(i).n_elements()) * 4;
        out.stored_bytes += (*weights)->stored_bytes(i);
        out.largest_stored = std::max(out.largest_stored, (*weights)->stored_bytes(i));
        out.f32_bytes += f32;
        out.largest_f32 = std::max(out.largest_f32, f32);
    }
    for (size_t i = 0; i < (*knot_weights)->n_tensors(); ++i) {
        const TensorInfo& t = (*knot_weights)->tensor_info(i);
        const auto n = static_cast<uint64_t>(t.n_elements());
        const uint64_t blocks = dtype_storage_bytes(t.dtype, n).value_or(n * 4);
        out.knot_blocks += blocks;
        out.largest_knot_blocks = std::max(out.largest_knot_blocks, blocks);
    }
    std::error_code ec;
    out.knot_file = std::filesystem::file_size(knot, ec);
    if (ec) return error = knot + ": " + ec.message(), false;
    return true;
}

}  // namespace gkq::test
