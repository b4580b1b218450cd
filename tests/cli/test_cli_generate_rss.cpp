// Peak memory of `gkq quantize --preset q4_0` (row chunks: bounded by the largest tensor, not the model), `gkq
// reconstruct` (streamed into the writer), `gkq analyze --topk` (one tensor at a time, its mapped pages dropped once
// converted) and `gkq generate` on a model-shaped checkpoint: a TinyLlama-1.1B-shaped model cut to 2 layers, written in
// bf16 by `gkq synth`, and its q4_0 knot. The transformer runs the weights as stored (bf16 from the mapping, the knot's
// Q4_0 blocks), so a child's peak RSS (wait4's ru_maxrss) stays under a bound computed from the tensor sizes: the
// stored bytes it may touch, its KV cache and run state, and a fixed margin for the binary, its libraries and the
// tokenizer. Converting the weights to float32 at load, as gkq did before, takes twice the bf16 file (and 7x the q4_0
// blocks) and fails the bound.
#include "child_run.h"
#include "gkq/codec.h"
#include "gkq/model_config.h"
#include "gkq/weights.h"
#include "test_support.h"

#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <string>

using namespace gkq;
using gkq::test::ChildRun;
using gkq::test::mib;
using gkq::test::run_child;
using gkq::test::slurp;

namespace {

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
        test::write_llama2c_tokenizer(tok, 32000);

        ChildRun synth =
            run_child({gkq, "synth", "--like", "tinyllama-1.1b", "-o", model, "--layers", "2", "--dtype", "bf16"}, log);
        QVERIFY2(synth.code == 0, slurp(log).c_str());
        ChildRun quant = run_child(
            {gkq, "quantize", model, "-o", knot, "--preset", "q4_0", "--tokenizer", tok, "--threads", "1"}, log);
        QVERIFY2(quant.code == 0, slurp(log).c_str());

        test::ModelSizes sz;
        std::string error;
        QVERIFY2(test::model_sizes(model, knot, sz, error), error.c_str());
        const uint64_t bf16_bytes = sz.stored_bytes, f32_bytes = sz.f32_bytes;
        // The knot's records: each inflated into its blocks once.
        const uint64_t knot_blocks = sz.knot_blocks;
        const uint64_t extra = run_bytes(sz.config);

        // quantize streams row chunks: of the mapped input, the largest tensor's pages at most (each chunk's are
        // dropped once read); for the one worker a float32 chunk and its decoded copy (kEncodeChunkBytes each), and
        // the largest tensor's blocks three times (payload, record, zlib's output); 64 MiB for the binary, its
        // libraries and the written knot read back. Converting a whole tensor to float32, or keeping the mapping,
        // fails it.
        const uint64_t quant_bound =
            sz.largest_stored + 2 * kEncodeChunkBytes + 3 * sz.largest_knot_blocks + (uint64_t{64} << 20);
        const QString qline = QString(
                                  "quantize: peak RSS %1 MiB, bound %2 MiB, mapped input %3 MiB, largest tensor "
                                  "in float32 %4 MiB")
                                  .arg(mib(quant.max_rss_bytes), 0, 'f', 1)
                                  .arg(mib(quant_bound), 0, 'f', 1)
                                  .arg(mib(bf16_bytes), 0, 'f', 1)
                                  .arg(mib(sz.largest_f32), 0, 'f', 1);
        qInfo("%s", qPrintable(qline));
        QVERIFY2(quant.max_rss_bytes < quant_bound, qPrintable(qline));
        QVERIFY2(quant_bound < bf16_bytes, qPrintable(qline));  // the bound excludes the whole mapping

        // analyze converts one tensor at a time (one worker) and drops its mapped pages once converted: the largest
        // tensor in float32, the randomized sketch (a few (rows, k + 10) float32 and double blocks) and the same
        // 64 MiB. Keeping the mapping (as analyze did before) holds the whole bf16 file and fails it.
        ChildRun an = run_child(
            {gkq, "analyze", model, "--topk", "8", "--threads", "1", "--no-cache", "--json", "-o", dir.file("a.json")},
            log);
        QVERIFY2(an.code == 0, slurp(log).c_str());
        const uint64_t sketch =
            4 * 12 * 18 * static_cast<uint64_t>(std::max(sz.config.vocab_size, sz.config.hidden_dim));
        // The tensor is converted 16 MiB of float32 rows at a time, each chunk's mapped pages dropped once converted:
        // the float32 matrix and a chunk, not the stored tensor beside it.
        const uint64_t analyze_bound = sz.largest_f32 + 2 * (uint64_t{16} << 20) + sketch + (uint64_t{64} << 20);
        const QString aline = QString("analyze --topk 8: peak RSS %1 MiB, bound %2 MiB, mapped input %3 MiB")
                                  .arg(mib(an.max_rss_bytes), 0, 'f', 1)
                                  .arg(mib(analyze_bound), 0, 'f', 1)
                                  .arg(mib(bf16_bytes), 0, 'f', 1);
        qInfo("%s", qPrintable(aline));
        QVERIFY2(an.max_rss_bytes < analyze_bound, qPrintable(aline));
        QVERIFY2(analyze_bound < sz.largest_stored + sz.largest_f32 + sketch + (uint64_t{64} << 20),
                 qPrintable(aline));  // excludes the largest tensor's stored bytes beside its float32 copy

        // reconstruct streams: each record decoded into the writer's one-tensor float32 buffer when its turn comes,
        // its mapped pages dropped once read: the largest tensor in float32 and its record twice (payload, blocks),
        // and the same 64 MiB. Decoding every tensor before writing (as it did before) holds the model in float32.
        const std::string rebuilt = dir.file("rebuilt/model.safetensors");
        std::filesystem::create_directories(dir.file("rebuilt"));
        ChildRun rc = run_child({gkq, "reconstruct", knot, "-o", rebuilt, "--threads", "2"}, log);
        QVERIFY2(rc.code == 0, slurp(log).c_str());
        const uint64_t rec_bound = sz.largest_f32 + 2 * sz.largest_knot_blocks + (uint64_t{64} << 20);
        const QString rline = QString("reconstruct: peak RSS %1 MiB, bound %2 MiB, model in float32 %3 MiB")
                                  .arg(mib(rc.max_rss_bytes), 0, 'f', 1)
                                  .arg(mib(rec_bound), 0, 'f', 1)
                                  .arg(mib(f32_bytes), 0, 'f', 1);
        qInfo("%s", qPrintable(rline));
        QVERIFY2(rc.max_rss_bytes < rec_bound, qPrintable(rline));
        QVERIFY2(rec_bound < f32_bytes / 2, qPrintable(rline));     // the bound excludes the model in float32
        QVERIFY(std::filesystem::file_size(rebuilt) >= f32_bytes);  // every tensor written, in float32

        struct Case {
            const char* what;
            std::string path;
            uint64_t bound;
            uint64_t f32;
        };
        const Case cases[] = {
            {"bf16 model", model, bf16_bytes + extra, f32_bytes},
            // each record's mapped pages leave the resident set once it is read: the blocks, and one record's pages
            {"q4_0 knot", knot, knot_blocks + sz.largest_knot_blocks + extra, f32_bytes},
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
