// Peak memory of `gkq generate` on a model-shaped checkpoint: a TinyLlama-1.1B-shaped model cut to 2 layers, written
// in bf16 by `gkq synth`, and its q4_0 knot. The transformer runs the weights as stored (bf16 from the mapping, the
// knot's Q4_0 blocks), so a child's peak RSS (wait4's ru_maxrss) stays under a bound computed from the tensor sizes:
// the stored bytes it may touch, its KV cache and run state, and a fixed margin for the binary, its libraries and
// the tokenizer. Converting the weights to float32 at load, as gkq did before, takes twice the bf16 file (and
// 7x the q4_0 blocks) and fails the bound.
#include "gkq/model_config.h"
#include "gkq/weights.h"
#include "test_support.h"

#include <QtTest>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace gkq;

namespace {

struct ChildRun {
    int code = -1;
    uint64_t max_rss_bytes = 0;
};

// Runs argv with stdout and stderr into `log` and waits for it with wait4, which reports the child's peak RSS.
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
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A llama2.c tokenizer.bin of n tokens (<unk> <s> </s>, the 256 byte tokens, then words), for a vocabulary of
// TinyLlama's size.
void write_tokenizer(const std::string& path, int n) {
    std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        toks.emplace_back(buf);
    }
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

// What generate holds besides its weights: the KV cache (n_layers, context, kv_dim) twice, the run state of a
// 32-token batch (activations, attention rows, logits), all float32; and 64 MiB for the binary, its libraries, the
// tokenizer and the allocator's slack.
uint64_t run_bytes(const ModelConfig& c) {
    const uint64_t ctx = static_cast<uint64_t>(std::min<int64_t>(c.context_length, 4096));
    const uint64_t kv = 2 * static_cast<uint64_t>(c.n_layers) * ctx * static_cast<uint64_t>(c.kv_dim()) * 4;
    const uint64_t batch = 32;
    const uint64_t state = batch * 4 *
                           (4 * static_cast<uint64_t>(c.dim) + 2 * static_cast<uint64_t>(c.hidden_dim) +
                            static_cast<uint64_t>(c.n_heads) * ctx + static_cast<uint64_t>(c.vocab_size));
    return kv + state + (uint64_t{64} << 20);
}

double mib(uint64_t b) {
    return static_cast<double>(b) / (1 << 20);
}

}  // namespace

class TestCliGenerateRss : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void generatePeakRssIsBoundedByStoredBytes() {
        const std::string gkq = qgetenv("GKQ_CLI").toStdString();
        test::TempDir dir;
        const std::string model = dir.file("tinyllama-2l");
        const std::string tok = dir.file("tok32000.bin");
        const std::string knot = dir.file("tinyllama-2l-q4_0.knot");
        const std::string log = dir.file("log.txt");
        write_tokenizer(tok, 32000);

        ChildRun synth =
            run_child({gkq, "synth", "--like", "tinyllama-1.1b", "-o", model, "--layers", "2", "--dtype", "bf16"}, log);
        QVERIFY2(synth.code == 0, slurp(log).c_str());
        ChildRun quant = run_child({gkq, "quantize", model, "-o", knot, "--preset", "q4_0", "--tokenizer", tok}, log);
        QVERIFY2(quant.code == 0, slurp(log).c_str());

        auto weights = open_weights(model);
        QVERIFY2(weights, weights.message().c_str());
        const ModelConfig config = (*weights)->config();
        uint64_t bf16_bytes = 0, f32_bytes = 0;
        for (size_t i = 0; i < (*weights)->n_tensors(); ++i) {
            bf16_bytes += (*weights)->stored_bytes(i);
            f32_bytes += static_cast<uint64_t>((*weights)->tensor_info(i).n_elements()) * 4;
        }
        auto knot_weights = open_weights(knot);
        QVERIFY2(knot_weights, knot_weights.message().c_str());
        // The knot's records: mapped as stored (compressed or not), then each inflated into its blocks once.
        uint64_t knot_blocks = 0;
        for (size_t i = 0; i < (*knot_weights)->n_tensors(); ++i) {
            const TensorInfo& t = (*knot_weights)->tensor_info(i);
            knot_blocks += dtype_storage_bytes(t.dtype, static_cast<uint64_t>(t.n_elements()))
                               .value_or(static_cast<uint64_t>(t.n_elements()) * 4);
        }
        const uint64_t knot_file = std::filesystem::file_size(knot);
        const uint64_t extra = run_bytes(config);

        struct Case {
            const char* what;
            std::string path;
            uint64_t bound;
            uint64_t f32;
        };
        const Case cases[] = {
            {"bf16 model", model, bf16_bytes + extra, f32_bytes},
            {"q4_0 knot", knot, knot_file + knot_blocks + extra, f32_bytes},
        };
        for (const Case& c : cases) {
            ChildRun r = run_child(
                {gkq, "generate", c.path, "--tokenizer", tok, "-n", "6", "--temp", "0", "--threads", "2"}, log);
            QVERIFY2(r.code == 0, slurp(log).c_str());
            const QString line = QString("%1: peak RSS %2 MiB, bound %3 MiB, float32 weights alone %4 MiB")
                                     .arg(c.what)
                                     .arg(mib(r.max_rss_bytes), 0, 'f', 1)
                                     .arg(mib(c.bound), 0, 'f', 1)
                                     .arg(mib(c.f32), 0, 'f', 1);
            qInfo("%s", qPrintable(line));
            QVERIFY2(r.max_rss_bytes < c.bound, qPrintable(line));
            QVERIFY2(c.bound < c.f32, qPrintable(line));  // the bound itself excludes a float32 copy
        }
    }
};

QTEST_GUILESS_MAIN(TestCliGenerateRss)
#include "test_cli_generate_rss.moc"
