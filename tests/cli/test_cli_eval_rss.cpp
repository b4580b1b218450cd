// Peak memory of `gkq eval` on a model-shaped checkpoint: a TinyLlama-1.1B-shaped model cut to 2 layers (bf16, by
// `gkq synth`) against its q4_0 knot over 4 KB of text. The base runs first over every window, its logits kept
// compactly (the top 512 of 32000 a position), then it is released and the knot runs: one model in memory at a
// time, and the base's mapped pages leave the resident set block by block. The child's peak RSS (wait4's ru_maxrss)
// stays under a bound from the tensor sizes: the larger of one step of the base (twice its largest tensor, mapped
// bf16) and the knot (its file and its records inflated to blocks), the KV cache and run state
// of 64-position blocks, the compact base logits and a fixed margin for the binary, its libraries and the
// tokenizer. Both models at once (the exact path, or gkq before it) take both models' bytes, and float32 weights
// as gkq held them earlier twice the bf16 file; the bound is checked to exclude both.
#include "child_run.h"
#include "gkq/model_config.h"
#include "gkq/weights.h"
#include "test_support.h"

#include <QtTest>

#include <filesystem>
#include <random>
#include <string>

using namespace gkq;
using gkq::test::ChildRun;
using gkq::test::mib;
using gkq::test::run_child;
using gkq::test::slurp;

namespace {

constexpr int64_t kCtx = 256;

// What eval holds besides the weights of the model that runs: the KV cache (n_layers, ctx, kv_dim) twice, the run
// state of a 64-position block (activations, attention rows) and its logits, both models' logits of a window
// (ctx, vocab), all float32; and 64 MiB for the binary, its libraries, the tokenizer and the allocator's slack.
uint64_t run_bytes(const ModelConfig& c) {
    const uint64_t ctx = kCtx;
    const uint64_t kv = 2 * static_cast<uint64_t>(c.n_layers) * ctx * static_cast<uint64_t>(c.kv_dim()) * 4;
    const uint64_t batch = 64;
    const uint64_t state = batch * 4 *
                           (4 * static_cast<uint64_t>(c.dim) + 2 * static_cast<uint64_t>(c.hidden_dim) +
                            static_cast<uint64_t>(c.n_heads) * ctx + static_cast<uint64_t>(c.vocab_size));
    const uint64_t window = ctx * static_cast<uint64_t>(c.vocab_size) * 4;
    return kv + state + window + (uint64_t{64} << 20);
}

// 4 KB of random three-letter words: one token each with write_llama2c_tokenizer's vocabulary.
std::string words_text(size_t bytes) {
    std::mt19937 rng(7);
    std::string s;
    while (s.size() + 4 <= bytes) {
        if (!s.empty()) s += ' ';
        for (int i = 0; i < 3; ++i) s += static_cast<char>('a' + rng() % 26);
    }
    return s;
}

}  // namespace

class TestCliEvalRss : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void evalHoldsOneModelAtATime() {
        const std::string gkq = qgetenv("GKQ_CLI").toStdString();
        test::TempDir dir;
        const std::string model = dir.file("tinyllama-2l");
        const std::string tok = dir.file("tok32000.bin");
        const std::string knot = dir.file("tinyllama-2l-q4_0.knot");
        const std::string text = dir.file("text.txt");
        const std::string log = dir.file("log.txt");
        test::write_llama2c_tokenizer(tok, 32000);
        test::write_file(text, words_text(4096));

        ChildRun synth =
            run_child({gkq, "synth", "--like", "tinyllama-1.1b", "-o", model, "--layers", "2", "--dtype", "bf16"}, log);
        QVERIFY2(synth.code == 0, slurp(log).c_str());
        ChildRun quant = run_child({gkq, "quantize", model, "-o", knot, "--preset", "q4_0", "--tokenizer", tok}, log);
        QVERIFY2(quant.code == 0, slurp(log).c_str());

        test::ModelSizes sz;
        std::string error;
        QVERIFY2(test::model_sizes(model, knot, sz, error), error.c_str());
        const ModelConfig& config = sz.config;
        const uint64_t bf16_bytes = sz.stored_bytes, f32_bytes = sz.f32_bytes;
        const uint64_t knot_bytes = sz.knot_file + sz.knot_blocks;
        // 4096 bytes of four-byte words: 1024 tokens, each kept as 512 (id, logit) pairs, log Z, the rest's mass
        // and the target's logit.
        const uint64_t n_tokens = 1024;
        const uint64_t compact = n_tokens * (512 * 8 + 8 + 8 + 4 + 4);
        // The base drops each block's mapped pages after the block (TransformerOptions::release_mapped): at most a
        // step's matrices resident, counted as twice the largest tensor (the embedding's or the classifier's).
        const uint64_t base_step_bytes = 2 * sz.largest_stored;
        const uint64_t bound = std::max(base_step_bytes, knot_bytes) + run_bytes(config) + compact;

        ChildRun r =
            run_child({gkq, "eval", "--base", model, "--candidate", knot, "--text", text, "--tokenizer", tok, "--ctx",
                       std::to_string(kCtx), "--stride", std::to_string(kCtx), "--threads", "2", "--json"},
                      log);
        const std::string out = slurp(log);
        QVERIFY2(r.code == 0, out.c_str());
        QVERIFY2(out.find("\"tokens\": 1024") != std::string::npos, out.c_str());
        const QString line = QString("eval: peak RSS %1 MiB, bound %2 MiB; both models %3 MiB, float32 weights %4 MiB")
                                 .arg(mib(r.max_rss_bytes), 0, 'f', 1)
                                 .arg(mib(bound), 0, 'f', 1)
                                 .arg(mib(bf16_bytes + knot_bytes), 0, 'f', 1)
                                 .arg(mib(f32_bytes), 0, 'f', 1);
        qInfo("%s", qPrintable(line));
        QVERIFY2(r.max_rss_bytes < bound, qPrintable(line));
        QVERIFY2(bound < bf16_bytes + knot_bytes, qPrintable(line));  // the bound excludes both models at once
        QVERIFY2(base_step_bytes < bf16_bytes, qPrintable(line));     // and the whole base mapped at once
        QVERIFY2(bound < f32_bytes, qPrintable(line));
    }
};

QTEST_GUILESS_MAIN(TestCliEvalRss)
#include "test_cli_eval_rss.moc"
