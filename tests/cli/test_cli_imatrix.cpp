// The real gkq binary's `imatrix` and `quantize --imatrix`: the file written (GGUF and legacy), the summary and its
// JSON, the importance reaching the Q4_0 blocks and the knot's recorded command and metadata, and bad input (exit 2
// with a message naming the file, entry or option).
#include "cli_run.h"
#include "gkq/imatrix.h"
#include "gkq/knot.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <nlohmann/json.hpp>

#include <QtTest>

#include <cmath>
#include <filesystem>
#include <string>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

const char* const kText =
    "the quick brown fox jumps over the lazy dog and then the dog sleeps while the fox hides in the high grass "
    "beside the old hedge where the birds sing each morning of the long summer";
}  // namespace

class TestCliImatrix : public QObject {
    Q_OBJECT

    test::TempDir m_dir;
    std::string m_model, m_text;

private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
        m_model = m_dir.file("tiny.gguf");
        test::write_tiny_gguf(m_model, true, 3,
                              test::tiny_vocabulary({"ab", "ba", "cd", "de", "ef", "fg", "gh", "hi", "th", "he"}));
        m_text = m_dir.file("calib.txt");
        test::write_file(m_text, std::string_view(kText));
    }

    void writesTheImatrixAndQuantizesWithIt() {
        const std::string out = m_dir.file("tiny.imatrix.gguf");
        Run r = run_gkq({"imatrix", q(m_model), "--text", q(m_text), "--ctx", "16", "-o", q(out)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("blk.0.attn_q.weight") && r.out.contains("wrote"), qPrintable(r.out));
        auto m = read_imatrix(out);
        QVERIFY2(m, m.message().c_str());
        QCOMPARE(m->entries.size(), size_t(14));  // 7 matrices x 2 blocks
        QCOMPARE(m->chunk_size, 16);
        QCOMPARE(m->datasets, std::vector<std::string>{m_text});
        QCOMPARE(m->entries[0].counts[0], int64_t(16) * m->chunk_count);

        Run j = run_gkq({"imatrix", q(m_model), "--text", q(m_text), "--ctx", "16", "--chunks", "2", "-o",
                         q(m_dir.file("two.dat")), "--output-format", "dat", "--json"});
        QVERIFY2(j.code == 0, qPrintable(j.err));
        const QJsonObject doc = QJsonDocument::fromJson(j.out.toUtf8()).object();
        QCOMPARE(doc["n_chunks"].toInt(), 2);
        QCOMPARE(doc["format"].toString(), QString("dat"));
        QCOMPARE(doc["entries"].toArray().size(), 14);
        auto legacy = read_imatrix(m_dir.file("two.dat"));
        QVERIFY(legacy);
        QCOMPARE(legacy->format, ImatrixFormat::Legacy);
        QCOMPARE(legacy->entries[0].counts[0], int64_t(2));  // ncall: chunks

        const std::string knot = m_dir.file("tiny.knot");
        Run qz = run_gkq({"quantize", q(m_model), "-o", q(knot), "--preset", "q4_0", "--imatrix", q(out)});
        QVERIFY2(qz.code == 0, qPrintable(qz.err));
        QVERIFY2(qz.out.contains("imatrix: ") && qz.out.contains("importance for 14 matrices"), qPrintable(qz.out));
        auto k = KnotFile::open(knot);
        QVERIFY(k);
        QVERIFY2(k->header().command.find("--imatrix tiny.imatrix.gguf sha256:") != std::string::npos,
                 k->header().command.c_str());
        const MetaValue* file = k->header().metadata.find("quantize.imatrix.file");
        QVERIFY(file != nullptr && file->as_string() && *file->as_string() == "tiny.imatrix.gguf");
        QVERIFY(k->header().metadata.find("gkq.imatrix.sha256") != nullptr);
        // the blocks differ from those of a run without it
        const std::string plain = m_dir.file("plain.knot");
        QCOMPARE(run_gkq({"quantize", q(m_model), "-o", q(plain), "--preset", "q4_0"}).code, 0);
        QVERIFY(test::read_file(knot) != test::read_file(plain));
    }

    // The Gram matrices beside the imatrix, and the whitened presets on the bundled demo model with them.
    void gramFileAndWhitenedPresetsOnTheDemo() {
        const std::string text = m_dir.file("demo-calib.txt");
        std::string body;
        for (int i = 0; i < 6; ++i) body += std::string(kText) + "\n";
        test::write_file(text, std::string_view(body));
        const std::string im = m_dir.file("demo.imatrix.gguf"), gram = m_dir.file("demo.gram.gguf");
        Run r = run_gkq({"imatrix", "--text", q(text), "--ctx", "32", "--chunks", "2", "-o", q(im), "--gram", q(gram)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        // 4 layers x (attn_q, attn_output, ffn_gate, ffn_down inputs); 192 and 512 wide
        const uint64_t bytes = 4 * (3 * 192 * 192 + 512 * 512) * 8;
        QVERIFY2(r.out.contains("Gram matrices of 16 inputs, " + QString::number(bytes) + " bytes"), qPrintable(r.out));
        auto g = read_gram(gram);
        QVERIFY2(g, g.message().c_str());
        QCOMPARE(g->entries.size(), size_t(16));
        const GramEntry* q0 = g->find("blk.0.attn_q.weight");
        const GramEntry* d0 = g->find("blk.0.ffn_down.weight");
        QVERIFY(q0 != nullptr && d0 != nullptr && g->find("blk.0.attn_k.weight") == nullptr);
        QCOMPARE(q0->n_cols, int64_t(192));
        QCOMPARE(d0->n_cols, int64_t(512));
        QCOMPARE(q0->count, int64_t(64));
        QCOMPARE(g->chunk_size, 32);
        // symmetric, and its diagonal is the imatrix's sum of squares (the same pass, float vs double sums)
        auto m = read_imatrix(im);
        QVERIFY(m);
        const ImatrixEntry* e = m->find("blk.0.attn_q.weight");
        QVERIFY(e != nullptr);
        for (int64_t i = 0; i < 192; i += 17) {
            QCOMPARE(q0->gram[i * 192 + (i + 3) % 192], q0->gram[((i + 3) % 192) * 192 + i]);
            QVERIFY(std::fabs(q0->gram[i * 192 + i] - e->sums[i]) <= 1e-4 * (1.0 + q0->gram[i * 192 + i]));
        }

        for (const char* preset : {"svd-llm", "q4_0-lqer"}) {
            const std::string knot = m_dir.file(std::string(preset) + ".knot");
            Run no = run_gkq({"quantize", "-o", q(knot), "--preset", preset});
            QCOMPARE(no.code, 2);
            QVERIFY2(no.err.contains("needs their Gram matrices: pass --gram FILE"), qPrintable(no.err));
            QVERIFY(!std::filesystem::exists(knot));
            Run yes = run_gkq({"quantize", "-o", q(knot), "--preset", preset, "--gram", q(gram)});
            QVERIFY2(yes.code == 0, qPrintable(yes.err));
            QVERIFY2(yes.out.contains("Gram matrices for 28 matrices"), qPrintable(yes.out));
            auto k = KnotFile::open(knot);
            QVERIFY(k);
            QVERIFY(k->header().command.find("--gram demo.gram.gguf sha256:") != std::string::npos);
            Run ev = run_gkq({"eval", "--candidate", q(knot), "--text", q(text), "--ctx", "32"});
            QVERIFY2(ev.code == 0, qPrintable(ev.err));
        }
        // the spectrum as the data sees it: W L for each matrix with a Gram matrix, beside W's own
        Run an = run_gkq({"analyze", GKQ_DEMO_MODEL_DIR, "--gram", q(gram), "--json"});
        QVERIFY2(an.code == 0, qPrintable(an.err));
        const auto aj = nlohmann::json::parse(an.out.toStdString());
        int n_seen = 0;
        for (const auto& t : aj["tensors"]) {
            const bool has = t.contains("as_the_data_sees_it");
            const std::string role = t["role"];  // every projection has its input's Gram matrix; embeddings none
            QCOMPARE(has, role.rfind("attn_", 0) == 0 || role.rfind("ffn_", 0) == 0);
            if (!has) continue;
            ++n_seen;
            const auto& w = t["as_the_data_sees_it"];
            const auto& sv = w["singular_values"];
            QCOMPARE(sv.size(), t["singular_values"].size());
            // a different spectrum from W's, descending; its ranks are those of the output energy
            QVERIFY(sv[0].get<double>() != t["singular_values"][0].get<double>());
            for (size_t i = 1; i < sv.size(); ++i) QVERIFY(sv[i].get<double>() <= sv[i - 1].get<double>());
            QVERIFY(w["rank_90"].get<int64_t>() >= 1 && w["rank_90"] <= w["rank_99"]);
        }
        QCOMPARE(n_seen, 28);  // the 28 matrices quantize --gram found entries for
        Run at = run_gkq({"analyze", GKQ_DEMO_MODEL_DIR, "--gram", q(gram)});
        QVERIFY2(at.code == 0 && at.out.contains("as the data sees it") && at.out.contains("WL@99"),
                 qPrintable(at.err));
        Run ac = run_gkq({"analyze", GKQ_DEMO_MODEL_DIR, "--gram", q(gram), "--csv"});
        QCOMPARE(ac.code, 2);

        // an imatrix is not a Gram file
        r = run_gkq({"quantize", "-o", q(m_dir.file("z.knot")), "--preset", "svd-llm", "--gram", q(im)});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("not a Gram file"), qPrintable(r.err));
        QVERIFY(!std::filesystem::exists(m_dir.file("z.knot")));
    }

    void badInput() {
        const std::string out = m_dir.file("x.gguf");
        Run r = run_gkq({"imatrix", q(m_model), "-o", q(out)});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("--text"));
        const std::string short_text = m_dir.file("short.txt");
        test::write_file(short_text, std::string_view("the lazy dog"));
        r = run_gkq({"imatrix", q(m_model), "--text", q(short_text), "--ctx", "16", "-o", q(out)});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("at least 32"), qPrintable(r.err));
        QVERIFY(!std::filesystem::exists(out));
        r = run_gkq({"imatrix", q(m_model), "--text", q(m_text), "--output-format", "bin", "-o", q(out)});
        QCOMPARE(r.code, 2);
        r = run_gkq({"imatrix", q(m_model), "--text", q(m_text), "-o", q(m_text)});
        QCOMPARE(r.code, 2);

        // quantize: not an imatrix; an imatrix of another model
        r = run_gkq(
            {"quantize", q(m_model), "-o", q(m_dir.file("y.knot")), "--preset", "q4_0", "--imatrix", q(m_text)});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(q(m_text)), qPrintable(r.err));
        Imatrix other;
        other.chunk_size = 8;
        other.chunk_count = 1;
        ImatrixEntry e;
        e.name = "blk.0.attn_q.weight";
        e.n_cols = 48;
        e.sums.assign(48, 1.0f);
        e.counts = {8};
        other.entries = {e};
        QVERIFY(write_imatrix(other, m_dir.file("other.gguf"), ImatrixFormat::Gguf));
        r = run_gkq({"quantize", q(m_model), "-o", q(m_dir.file("y.knot")), "--preset", "q4_0", "--imatrix",
                     q(m_dir.file("other.gguf"))});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("blk.0.attn_q.weight") && r.err.contains("48"), qPrintable(r.err));
        QVERIFY(!std::filesystem::exists(m_dir.file("y.knot")));
    }
};

QTEST_GUILESS_MAIN(TestCliImatrix)
#include "test_cli_imatrix.moc"
