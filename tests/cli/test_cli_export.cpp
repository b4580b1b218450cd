// The real gkq binary's `export`: the demo model exported --type q4_k_m has, tensor for tensor, the types and the
// data bytes llama-quantize Q4_K_M writes from gkq's F32 GGUF of it (tests/data/export/demo-q4_k_m.tensors, made with
// llama.cpp's llama-quantize; see its README), fallbacks included (the demo's 192-wide rows are no whole Q4_K / Q6_K
// blocks); a Q8_0 knot's records are kept as they are (the exported GGUF generates what the knot generates); bad
// options and outputs are refused before anything is written.
#include "cli_run.h"
#include "gkq/model_file.h"
#include "test_support.h"

#include <QCryptographicHash>
#include <QFile>
#include <QtTest>

#include <filesystem>
#include <map>
#include <tuple>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 300000);
}
QString q(const std::string& s) {
    return QString::fromStdString(s);
}
const QString kDemo = QStringLiteral(GKQ_DEMO_MODEL_DIR);

// "name TYPE sha256" per line, in file order.
struct Expected {
    QString name, type, sha256;
};
std::vector<Expected> read_expected(const QString& path) {
    QFile f(path);
    std::vector<Expected> out;
    if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) return out;
    while (!f.atEnd()) {
        const QString line = QString::fromUtf8(f.readLine()).trimmed();
        if (line.isEmpty() || line.startsWith('#')) continue;
        const QStringList p = line.split(' ', Qt::SkipEmptyParts);
        if (p.size() == 3) out.push_back({p[0], p[1], p[2]});
    }
    return out;
}
}  // namespace

class TestCliExport : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void helpListsExport() {
        Run r = run_gkq({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("export"));
        Run h = run_gkq({"export", "--help"});
        QCOMPARE(h.code, 0);
        for (const char* opt : {"--type", "--keep", "--dense", "q4_k_m", "q2_k", "iq4_nl"})
            QVERIFY2(h.out.contains(opt), opt);
    }

    void q4KMAsLlamaQuantize() {
        const std::vector<Expected> want =
            read_expected(QStringLiteral(GKQ_TEST_DATA_DIR "/export/demo-q4_k_m.tensors"));
        QVERIFY(!want.empty());
        test::TempDir dir;
        const std::string out = dir.file("demo-q4_k_m.gguf");
        Run r = run_gkq({"export", kDemo, "-o", q(out), "--type", "q4_k_m"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto m = ModelFile::open(out);
        QVERIFY2(m.is_ok(), m.message().c_str());
        QCOMPARE(m->tensors().size(), want.size());
        int fell_back = 0;
        for (const Expected& e : want) {  // llama-quantize sorts the tensors within a block: compared by name
            const Tensor* t = m->find(e.name.toStdString());
            QVERIFY2(t != nullptr, qPrintable(e.name));
            QVERIFY2(q(t->type_name) == e.type, qPrintable(e.name + ": " + q(t->type_name) + " vs " + e.type));
            const QByteArray hash = QCryptographicHash::hash(
                QByteArrayView(reinterpret_cast<const char*>(t->data), static_cast<qsizetype>(t->n_bytes)),
                QCryptographicHash::Sha256);
            QVERIFY2(QString::fromLatin1(hash.toHex()) == e.sha256, qPrintable(e.name));
        }
        for (const QString& line : r.out.split('\n'))
            if (line.contains("fell back to")) ++fell_back;
        QVERIFY(fell_back > 0);  // rows of 192: Q4_K -> Q5_0, Q6_K -> Q8_0
        QVERIFY2(r.out.contains(QString("; %1 fell back").arg(fell_back)), qPrintable(r.out));
        QVERIFY2(r.out.contains("rows of 192 are not whole q4_k blocks: fell back to q5_0"), qPrintable(r.out));
        const MetaValue* ft = m->metadata().find("general.file_type");
        QVERIFY(ft != nullptr);
        QCOMPARE(*ft->as_int(), int64_t{15});  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    }

    // Every matrix of the demo model takes iq4_nl (and q5_0) whole: the file's one type is not among the writer's
    // default matrix types (f32 f16 bf16 q8_0 q4_0), which must not refuse it since no matrix falls to the default.
    void oneTypeBeyondTheDefaults() {
        test::TempDir dir;
        for (const auto& [type, dtype, ftype] :
             {std::tuple{"iq4_nl", DType::IQ4_NL, int64_t{25}}, std::tuple{"q5_0", DType::Q5_0, int64_t{8}}}) {
            const std::string out = dir.file(std::string("demo-") + type + ".gguf");
            Run r = run_gkq({"export", kDemo, "-o", q(out), "--type", type});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            QVERIFY2(r.out.contains("; 0 fell back"), qPrintable(r.out));
            auto m = ModelFile::open(out);
            QVERIFY2(m.is_ok(), m.message().c_str());
            for (const Tensor& t : m->tensors()) QCOMPARE(t.dtype, t.shape.size() == 1 ? DType::F32 : dtype);
            QCOMPARE(*m->metadata().find("general.file_type")->as_int(), ftype);  // LLAMA_FTYPE_MOSTLY_IQ4_NL, _Q5_0
        }
    }

    void knotRecordsKept() {
        test::TempDir dir;
        const std::string knot = dir.file("demo.knot"), out = dir.file("demo-knot.gguf");
        Run qz = run_gkq({"quantize", kDemo, "--preset", "q8_0", "--threads", "2", "-o", q(knot)});
        QVERIFY2(qz.code == 0, qPrintable(qz.err));
        Run r = run_gkq({"export", q(knot), "-o", q(out)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("stored bytes copied"), qPrintable(r.out));
        auto m = ModelFile::open(out);
        QVERIFY2(m.is_ok(), m.message().c_str());
        for (const Tensor& t : m->tensors()) QCOMPARE(t.dtype, t.shape.size() == 1 ? DType::F32 : DType::Q8_0);
        QCOMPARE(*m->metadata().find("general.file_type")->as_int(), int64_t{7});  // LLAMA_FTYPE_MOSTLY_Q8_0
        QCOMPARE(*m->metadata().find("tokenizer.ggml.model")->as_string(), std::string("llama"));
        // the same weights (q/k rows moved to GGUF's rotary layout): the same greedy text as the knot
        const QStringList gen = {"-p", "The best way to", "--temp", "0", "-n", "40", "--threads", "1"};
        Run a = run_gkq(QStringList{"generate", q(knot)} + gen);
        Run b = run_gkq(QStringList{"generate", q(out)} + gen);
        QVERIFY2(a.code == 0 && b.code == 0, qPrintable(a.err + b.err));
        QCOMPARE(b.out, a.out);
    }

    void badInputRefused() {
        test::TempDir dir;
        const std::string out = dir.file("x.gguf");
        Run t = run_gkq({"export", kDemo, "-o", q(out), "--type", "q9_k"});
        QCOMPARE(t.code, 2);
        QVERIFY2(t.err.contains("unknown export type 'q9_k'") && t.err.contains("q4_k_m"), qPrintable(t.err));
        Run k = run_gkq({"export", kDemo, "-o", q(out), "--type", "q8_0", "--keep"});
        QCOMPARE(k.code, 2);
        Run s = run_gkq({"export", kDemo, "-o", q(dir.file("x.safetensors"))});
        QCOMPARE(s.code, 2);
        QVERIFY2(s.err.contains("must end in .gguf"), qPrintable(s.err));
        Run d = run_gkq({"export", kDemo, "-o", q(out), "--dense", "q8_0"});
        QCOMPARE(d.code, 2);
        QVERIFY(std::filesystem::is_empty(dir.path()));
    }
};

QTEST_APPLESS_MAIN(TestCliExport)
#include "test_cli_export.moc"
