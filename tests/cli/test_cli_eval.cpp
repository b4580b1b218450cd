// The real gkq binary's `eval`: the full report of a model against itself and against its Q8_0 knot, --json,
// saved and reused base logits, perplexity alone, thread-count independence, and option / file errors.
#include "cli_run.h"
#include "gkq/metadata.h"
#include "gkq/model_writer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// Letters and a few merges: any lowercase text encodes.
Vocabulary eval_vocabulary() {
    return gkq::test::tiny_vocabulary({"ab", "ba", "cd", "de", "ef", "fg", "gh", "hi", "th", "he"});
}

const char* const kText =
    "the quick brown fox jumps over the lazy dog and then the dog sleeps while the fox hides in the high grass "
    "beside the old hedge where the birds sing each morning of the long summer";
}  // namespace

class TestCliEval : public QObject {
    Q_OBJECT

    test::TempDir m_dir;
    std::string m_model, m_knot, m_text;

private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
        m_model = m_dir.file("tiny.gguf");
        test::write_tiny_gguf(m_model, true, 3, eval_vocabulary());
        m_text = m_dir.file("text.txt");
        test::write_file(m_text, std::string_view(kText));
        m_knot = m_dir.file("tiny-q8.knot");
        Run r = run_gkq({"quantize", q(m_model), "-o", q(m_knot), "--preset", "q8_0"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
    }

    void helpListsEval() {
        Run r = run_gkq({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("  eval "));
        Run h = run_gkq({"eval", "--help"});
        QCOMPARE(h.code, 0);
        QVERIFY2(h.out.startsWith("usage: gkq eval --base MODEL --candidate MODEL|KNOT --text FILE"),
                 qPrintable(h.out));
        for (const char* opt :
             {"--ctx", "--stride", "--save-base", "--base-logits", "--json", "--model", "--tokenizer"})
            QVERIFY2(h.out.contains(opt), opt);
    }

    void modelAgainstItself() {
        Run r = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_model), "--text", q(m_text), "--ctx", "16"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("Mean    KLD:     0.000000 ±   0.000000"), qPrintable(r.out));
        QVERIFY2(r.out.contains("Same top p :   100.000 ± 0.000 %"), qPrintable(r.out));
        QVERIFY2(r.out.contains("Mean PPL(Q)/PPL(base) :     1.000000 ±   0.000000"), qPrintable(r.out));
        QVERIFY(r.out.contains("context 16, stride 8"));
    }

    void q8KnotJsonAndThreads() {
        QJsonObject first;
        for (const char* threads : {"1", "3"}) {
            Run r = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "16",
                             "--threads", threads, "--json"});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
            const double kld = j["kld"].toObject()["mean"].toDouble();
            QVERIFY2(kld > 0.0 && kld < 1e-3, qPrintable(r.out));
            QVERIFY(j["same_top"].toObject()["fraction"].toDouble() > 0.9);
            j.remove("seconds");
            if (first.isEmpty())
                first = j;
            else
                QCOMPARE(j, first);
        }
    }

    void savedBaseLogitsReused() {
        const std::string logits = m_dir.file("base.logits");
        Run a = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "16",
                         "--save-base", q(logits), "--json"});
        QVERIFY2(a.code == 0, qPrintable(a.err));
        Run b = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "16",
                         "--base-logits", q(logits), "--json"});
        QVERIFY2(b.code == 0, qPrintable(b.err));
        QJsonObject ja = QJsonDocument::fromJson(a.out.toUtf8()).object();
        QJsonObject jb = QJsonDocument::fromJson(b.out.toUtf8()).object();
        ja.remove("seconds");
        jb.remove("seconds");
        QCOMPARE(ja, jb);

        // Another context: the file names itself and the mismatch.
        Run c = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "12",
                         "--base-logits", q(logits)});
        QCOMPARE(c.code, 2);
        QVERIFY2(c.err.contains(q(logits) + ": saved for a different run: context 16 / stride 8, this run uses 12 / 6"),
                 qPrintable(c.err));
        // A corrupt file.
        const std::string junk = m_dir.file("junk.logits");
        test::write_file(junk, std::string_view("GKQBASE"));
        Run d = run_gkq(
            {"eval", "--base", q(m_model), "--candidate", q(m_knot), "--text", q(m_text), "--base-logits", q(junk)});
        QCOMPARE(d.code, 2);
        QVERIFY2(d.err.contains(q(junk) + ": not a usable base logits file: 7 bytes, shorter than the 64-byte header"),
                 qPrintable(d.err));
    }

    // The file names its base model: without --base that model is the base (not the bundled demo model), and a
    // base that is gone, or a file from before the name was kept, is named in the message.
    void savedBaseLogitsNameTheirModel() {
        test::TempDir dir;
        const std::string copy = dir.file("base-copy.gguf"), logits = dir.file("b.logits");
        test::write_file(copy, test::read_file(m_model));
        Run a = run_gkq({"eval", "--base", q(copy), "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "16",
                         "--save-base", q(logits), "--json"});
        QVERIFY2(a.code == 0, qPrintable(a.err));
        Run b = run_gkq({"eval", "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "16", "--base-logits",
                         q(logits), "--json"});
        QVERIFY2(b.code == 0, qPrintable(b.err));
        QJsonObject ja = QJsonDocument::fromJson(a.out.toUtf8()).object();
        QJsonObject jb = QJsonDocument::fromJson(b.out.toUtf8()).object();
        ja.remove("seconds");
        jb.remove("seconds");
        QCOMPARE(jb["base"].toString(), q(copy));
        QCOMPARE(ja, jb);
        // another context with --base given: the mismatch says which base the file came from
        Run c = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "12",
                         "--base-logits", q(logits)});
        QCOMPARE(c.code, 2);
        QVERIFY2(c.err.contains("(saved with base model " + q(copy) + ": pass --base " + q(copy) + ")"),
                 qPrintable(c.err));
        std::filesystem::remove(copy);
        Run gone = run_gkq({"eval", "--candidate", q(m_knot), "--text", q(m_text), "--base-logits", q(logits)});
        QCOMPARE(gone.code, 2);
        QVERIFY2(gone.err.contains(q(logits) + " was saved with base model " + q(copy) +
                                   ", which is not there: pass --base MODEL with that model"),
                 qPrintable(gone.err));
        // A version-1 file (no model name, full float32 logits) still reads with --base, and without it says what
        // is missing. Made from the saved version-3 file: with 40 tokens all kept (top_k = n_vocab), the kept
        // logits of each position, in id order, are its full row, the file's last n_tokens x 40 floats.
        std::vector<uint8_t> saved = test::read_file(logits);
        uint32_t name_bytes = 0;
        uint64_t n_tokens = 0;
        uint32_t top_k = 0;
        std::memcpy(&name_bytes, saved.data() + 36, 4);
        std::memcpy(&n_tokens, saved.data() + 24, 8);
        std::memcpy(&top_k, saved.data() + 64 + name_bytes, 4);
        QCOMPARE(top_k, 40u);
        std::vector<uint8_t> bytes(saved.begin(), saved.begin() + 64);
        const auto tokens_at = saved.begin() + 64 + name_bytes + 8;
        bytes.insert(bytes.end(), tokens_at, tokens_at + static_cast<std::ptrdiff_t>(n_tokens * 4));
        bytes.insert(bytes.end(), saved.end() - static_cast<std::ptrdiff_t>(n_tokens * 40 * 4), saved.end());
        const uint32_t one = 1, zero = 0;
        std::memcpy(bytes.data() + 8, &one, 4);
        std::memcpy(bytes.data() + 36, &zero, 4);
        const std::string old = dir.file("v1.logits");
        test::write_file(old, bytes);
        Run v1 = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_knot), "--text", q(m_text), "--ctx", "16",
                          "--base-logits", q(old), "--json"});
        QVERIFY2(v1.code == 0, qPrintable(v1.err));
        QJsonObject j1 = QJsonDocument::fromJson(v1.out.toUtf8()).object();
        QCOMPARE(j1["kld"], ja["kld"]);
        Run unnamed = run_gkq({"eval", "--candidate", q(m_knot), "--text", q(m_text), "--base-logits", q(old)});
        QCOMPARE(unnamed.code, 2);
        QVERIFY2(unnamed.err.contains(q(old) + " does not name its base model (saved by an older gkq): pass --base"),
                 qPrintable(unnamed.err));
    }

    // Documents separated by <|endoftext|>: llama.cpp's protocol (the default) scores the separators as text and
    // says so; --per-document scores each document from BOS, exactly as each alone.
    void documentProtocols() {
        test::TempDir dir;
        const std::string a = "the quick brown fox jumps over the lazy dog",
                          b = "then the dog sleeps while the fox hides", c = "in the high grass";
        const std::string docs = dir.file("docs.txt");
        test::write_file(docs, a + "\n<|endoftext|>\n" + b + "</s>" + c + "\n");
        Run stream = run_gkq({"eval", "--model", q(m_model), "--text", q(docs), "--ctx", "16"});
        QVERIFY2(stream.code == 0, qPrintable(stream.err));
        QVERIFY2(stream.out.contains("protocol: llama.cpp --kl-divergence: the text as one token stream, BOS at each "
                                     "window's start; its 2 document separators ('<|endoftext|>', '</s>') are scored "
                                     "as text and documents get no BOS: --per-document"),
                 qPrintable(stream.out));
        Run per =
            run_gkq({"eval", "--model", q(m_model), "--text", q(docs), "--ctx", "16", "--per-document", "--json"});
        QVERIFY2(per.code == 0, qPrintable(per.err));
        const QJsonObject j = QJsonDocument::fromJson(per.out.toUtf8()).object();
        QCOMPARE(j["protocol"].toObject()["name"].toString(), QString("per-document"));
        QCOMPARE(j["protocol"].toObject()["n_documents"].toInt(), 3);
        QCOMPARE(j["bytes"].toInt(), int(a.size() + b.size() + c.size()));
        // each document scored alone, then combined: the same tokens and the same total NLL
        double nll = 0;
        int tokens = 0, windows = 0;
        for (const std::string& d : {a, b, c}) {
            const std::string f = dir.file("one.txt");
            test::write_file(f, d);
            Run one = run_gkq({"eval", "--model", q(m_model), "--text", q(f), "--ctx", "16", "--json"});
            QVERIFY2(one.code == 0, qPrintable(one.err));
            const QJsonObject o = QJsonDocument::fromJson(one.out.toUtf8()).object();
            QCOMPARE(o["protocol"].toObject()["n_separators"].toInt(), 0);
            const int n = o["tokens"].toInt();
            tokens += n;
            windows += o["windows"].toInt();
            nll += o["perplexity"].toObject()["mean_nll"].toDouble() * n;
        }
        QCOMPARE(j["tokens"].toInt(), tokens);
        QCOMPARE(j["windows"].toInt(), windows);
        const double mean = j["perplexity"].toObject()["mean_nll"].toDouble();
        QVERIFY2(std::abs(mean - nll / tokens) < 1e-9 * std::abs(mean),
                 qPrintable(QString::number(mean - nll / tokens)));
        // another separator
        test::write_file(docs, a + "|||" + b);
        Run custom = run_gkq(
            {"eval", "--model", q(m_model), "--text", q(docs), "--per-document", "--doc-separator", "|||", "--json"});
        QVERIFY2(custom.code == 0, qPrintable(custom.err));
        QCOMPARE(QJsonDocument::fromJson(custom.out.toUtf8()).object()["protocol"].toObject()["n_documents"].toInt(),
                 2);
    }

    void perplexityAlone() {
        Run r = run_gkq({"eval", "--model", q(m_knot), "--text", q(m_text), "--ctx", "16"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("PPL            :"));
        QVERIFY(r.out.contains("bits per byte  :"));
        QVERIFY(!r.out.contains("KLD"));
    }

    void generateFromKnotMatchesItsReconstruction() {
        const std::string rebuilt = m_dir.file("rebuilt.gguf");
        Run rec = run_gkq({"reconstruct", q(m_knot), "-o", q(rebuilt)});
        QVERIFY2(rec.code == 0, qPrintable(rec.err));
        // A prompt, so the text is not empty even if the random model samples BOS at once.
        Run a = run_gkq({"generate", q(m_knot), "-p", "the fox", "-n", "24", "--temp", "0"});
        Run b = run_gkq({"generate", q(rebuilt), "-p", "the fox", "-n", "24", "--temp", "0"});
        QVERIFY2(a.code == 0, qPrintable(a.err));
        QVERIFY2(b.code == 0, qPrintable(b.err));
        QVERIFY(!a.out.trimmed().isEmpty());
        QCOMPARE(a.out, b.out);
    }

    // The bundled demo model: opened when no MODEL is given; quantize's default preset; a knot of it runs.
    void demoModelIsTheDefault() {
        Run inspect = run_gkq({"inspect"});
        if (inspect.code == 2 && inspect.err.contains("no bundled demo model")) QSKIP("no bundled demo model");
        QVERIFY2(inspect.code == 0, qPrintable(inspect.err));
        QVERIFY2(inspect.out.contains("resources/demo") || inspect.out.contains("share/gkq/demo"),
                 qPrintable(inspect.out));
        for (const char* cmd : {"generate", "inspect", "quantize", "eval"}) {
            Run h = run_gkq({cmd, "--help"});
            QVERIFY2(h.out.contains("(default: the bundled demo model, "), cmd);
        }
        Run gen = run_gkq({"generate", "-n", "16", "--temp", "0"});
        QVERIFY2(gen.code == 0, qPrintable(gen.err));
        QVERIFY(!gen.out.trimmed().isEmpty());

        const std::string text = m_dir.file("demo-text.txt");
        test::write_file(text,
                         std::string_view("A fool and his money are soon parted.\nThe early bird catches the worm.\n"));
        Run ppl = run_gkq({"eval", "--text", q(text), "--ctx", "32"});
        QVERIFY2(ppl.code == 0, qPrintable(ppl.err));
        QVERIFY2(ppl.out.contains("PPL            :"), qPrintable(ppl.out));

        const std::string knot = m_dir.file("demo.knot");
        Run quant = run_gkq({"quantize", "-o", q(knot), "--threads", "1"});
        QVERIFY2(quant.code == 0, qPrintable(quant.err));
        QVERIFY2(quant.out.contains("quantize --preset lowrank-q4"), qPrintable(quant.out.left(400)));
        Run cmp = run_gkq({"eval", "--candidate", q(knot), "--text", q(text), "--ctx", "32", "--json"});
        QVERIFY2(cmp.code == 0, qPrintable(cmp.err));
        const QJsonObject j = QJsonDocument::fromJson(cmp.out.toUtf8()).object();
        QVERIFY(j["kld"].toObject()["mean"].toDouble() > 0.0);
        Run kgen = run_gkq({"generate", q(knot), "-n", "16", "--temp", "0"});
        QVERIFY2(kgen.code == 0, qPrintable(kgen.err));
        QVERIFY(!kgen.out.trimmed().isEmpty());
    }

    void errors() {
        Run a = run_gkq({"eval", "--base", q(m_model), "--candidate", q(m_knot)});
        QCOMPARE(a.code, 2);
        QVERIFY2(a.err.contains("gkq eval: missing --text FILE"), qPrintable(a.err));
        Run b = run_gkq({"eval", "--base", q(m_model), "--text", q(m_text)});
        QCOMPARE(b.code, 2);
        QVERIFY(b.err.contains("missing --candidate MODEL"));
        Run c = run_gkq({"eval", "--model", q(m_model), "--text", q(m_dir.file("none.txt"))});
        QCOMPARE(c.code, 2);
        QVERIFY2(c.err.contains(q(m_dir.file("none.txt")) + ": cannot open the text file"), qPrintable(c.err));
        Run d = run_gkq({"eval", "--model", q(m_model), "--text", q(m_text), "--ctx", "64"});
        QCOMPARE(d.code, 2);
        QVERIFY2(d.err.contains("eval: context 64 is outside 2..32 (the model's context length)"), qPrintable(d.err));
    }
};

QTEST_APPLESS_MAIN(TestCliEval)
#include "test_cli_eval.moc"
