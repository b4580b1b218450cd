// Tokenizer: run.c's encode()/decode() on the shared llama2.c vocabularies (tok512 with byte fallback, the
// character-level tok105 without), the same vocabulary as a GGUF sentencepiece one, a literal transcription
// of run.c's O(n^2) merge loop as the oracle for the heap-based merges, tie-breaking, and errors.
#include "gkq/model_file.h"
#include "gkq/tokenizer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace gkq;

namespace {

using Ids = std::vector<int32_t>;

QString ids_text(const Ids& ids) {
    QStringList s;
    for (int32_t i : ids) s << QString::number(i);
    return s.join(",");
}

// run.c's encode() as written (bos on, eos off), with its rescanning merge loop; a byte without a piece
// becomes byte + 3 as run.c does, which is what the byte tokens of tok512 are.
Ids run_c_encode(const Vocabulary& v, const std::string& text) {
    std::map<std::string, int32_t> lookup;
    for (size_t i = 0; i < v.tokens.size(); ++i) lookup.emplace(v.tokens[i], static_cast<int32_t>(i));
    auto find = [&](const std::string& s) {
        auto it = lookup.find(s);
        return it == lookup.end() ? -1 : it->second;
    };
    Ids tokens{1};
    if (!text.empty()) tokens.push_back(find(" "));
    std::string buf;
    for (size_t i = 0; i < text.size(); ++i) {
        if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) buf.clear();
        buf.push_back(text[i]);
        if (i + 1 < text.size() && (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80 && buf.size() < 4) continue;
        const int32_t id = find(buf);
        if (id != -1) {
            tokens.push_back(id);
        } else {
            for (char c : buf) tokens.push_back(static_cast<uint8_t>(c) + 3);
        }
        buf.clear();
    }
    for (;;) {
        float best_score = -1e10f;
        int32_t best_id = -1;
        int best_idx = -1;
        for (size_t i = 0; i + 1 < tokens.size(); ++i) {
            const int32_t id =
                find(v.tokens[static_cast<size_t>(tokens[i])] + v.tokens[static_cast<size_t>(tokens[i + 1])]);
            if (id != -1 && v.scores[static_cast<size_t>(id)] > best_score) {
                best_score = v.scores[static_cast<size_t>(id)];
                best_id = id;
                best_idx = static_cast<int>(i);
            }
        }
        if (best_idx == -1) break;
        tokens[static_cast<size_t>(best_idx)] = best_id;
        tokens.erase(tokens.begin() + best_idx + 1);
    }
    return tokens;
}

// tok512 as a GGUF file stores it: sentencepiece pieces with U+2581 for spaces and token types.
Vocabulary as_gguf_spm(const Vocabulary& l2c) {
    Vocabulary v;
    v.model = "llama";
    v.scores = l2c.scores;
    v.bos_id = 1;
    v.eos_id = 2;
    for (size_t i = 0; i < l2c.tokens.size(); ++i) {
        std::string p;
        for (char c : l2c.tokens[i]) p += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
        int32_t type = 1;  // normal
        if (i == 0) type = 2, p = "<unk>";
        if (i == 1) type = 3, p = "<s>";
        if (i == 2) type = 3, p = "</s>";
        if (i >= 3 && i < 259) type = 6;  // byte
        v.tokens.push_back(p);
        v.token_types.push_back(type);
    }
    return v;
}

const char* const kTexts[] = {
    "Once upon a time",
    "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    "  two leading spaces and trailing  ",
    "Tom said, \xE2\x80\x9CLet\xE2\x80\x99s go!\xE2\x80\x9D",  // curly quotes are pieces of tok512
    "caf\xC3\xA9 na\xC3\xAF"
    "ve \xC3\xBC"
    "ber",  // é is a piece; ï and ü fall back to bytes
    "tabs\tand\nnewlines\r\n",
    "emoji \xF0\x9F\x98\x80 and CJK \xE4\xB8\xAD",
    "\xC3",  // a lone lead byte
    "x",
};

}  // namespace

class TestTokenizer : public QObject {
    Q_OBJECT

    std::optional<Vocabulary> m_tok512;
    std::optional<Vocabulary> m_tok105;

private slots:
    void initTestCase() {
        if (auto p = test::shared_model("llama2xs-279K/tok512.bin")) {
            auto v = read_llama2c_tokenizer(*p, 512);
            QVERIFY2(v, v.message().c_str());
            m_tok512 = *v;
        }
        if (auto p = test::shared_model("babyllama-tok105/tok105.bin")) {
            auto v = read_llama2c_tokenizer(*p, 105);
            QVERIFY2(v, v.message().c_str());
            m_tok105 = *v;
        }
    }

    // ---- tok512: merges and byte fallback ----

    void tok512EncodesKnownIds() {
        if (!m_tok512) QSKIP(test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
        auto tok = Tokenizer::from_vocabulary(*m_tok512, "tok512.bin");
        QVERIFY2(tok, tok.message().c_str());
        QCOMPARE(tok->bos_id(), 1);
        QCOMPARE(tok->eos_id(), 2);
        QVERIFY(tok->has_byte_fallback());
        // With the dummy prefix every word is one piece of this vocabulary: " Once" 403, " upon" 407, " a" 261,
        // " time" 378 (the pieces along the way, like " t" 259, score 0, merge first and are absorbed).
        QCOMPARE(ids_text(tok->encode("Once upon a time", true, false)), QString("1,403,407,261,378"));
        QCOMPARE(ids_text(tok->encode("Once upon a time", false, true)), QString("403,407,261,378,2"));
        QCOMPARE(tok->piece(403), std::string(" Once"));
        QCOMPARE(ids_text(tok->encode("the", true, false)), QString("1,265"));
        // "ü" (C3 BC) is no piece: byte tokens <0xC3> = 195 + 3 and <0xBC> = 188 + 3; "é" is piece 485
        QCOMPARE(ids_text(tok->encode("\xC3\xBC", true, false)), QString("1,410,198,191"));
        QCOMPARE(ids_text(tok->encode("\xC3\xA9", true, false)), QString("1,410,485"));
        QCOMPARE(tok->piece(198), std::string("<0xC3>"));
        // "\n" has no piece either: <0x0A> is token 13
        QCOMPARE(ids_text(tok->encode("\n", false, false)), QString("410,13"));
        // empty text: no dummy prefix (run.c: "only if text != ''")
        QCOMPARE(ids_text(tok->encode("", true, false)), QString("1"));
        QVERIFY(tok->encode("", false, false).empty());
    }

    void tok512DecodesLikeRunC() {
        if (!m_tok512) QSKIP(test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
        auto tok = Tokenizer::from_vocabulary(*m_tok512, "tok512.bin");
        QVERIFY2(tok, tok.message().c_str());
        QCOMPARE(std::string(tok->decode(1, 403)), std::string("Once"));     // leading space dropped after BOS
        QCOMPARE(std::string(tok->decode(261, 403)), std::string(" Once"));  // kept elsewhere
        QCOMPARE(std::string(tok->decode(5, 13)), std::string("\n"));        // <0x0A> is the byte itself
        QCOMPARE(std::string(tok->decode(1, 35)), std::string(" "));         // <0x20> after BOS: a byte, kept
        QCOMPARE(std::string(tok->decode(5, 2)), std::string("\n</s>\n"));   // run.c prints EOS's piece
        QVERIFY(tok->decode(5, 512).empty());
        QVERIFY(tok->decode(5, -1).empty());
    }

    void tok512RoundTrips() {
        if (!m_tok512) QSKIP(test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
        auto tok = Tokenizer::from_vocabulary(*m_tok512, "tok512.bin");
        QVERIFY2(tok, tok.message().c_str());
        for (const char* text : kTexts) {
            Ids ids = tok->encode(text, true, false);
            ids.erase(ids.begin());
            QCOMPARE(tok->decode_all(ids), std::string(text));
        }
    }

    void heapMergesEqualRunCLoop() {
        if (!m_tok512) QSKIP(test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
        auto tok = Tokenizer::from_vocabulary(*m_tok512, "tok512.bin");
        QVERIFY2(tok, tok.message().c_str());
        for (const char* text : kTexts)
            QCOMPARE(ids_text(tok->encode(text, true, false)), ids_text(run_c_encode(*m_tok512, text)));
        // random texts from word fragments, punctuation and multi-byte characters
        const std::vector<std::string> parts = {
            "the",      " cat",     "Lily", " was", "  ",   "ing",   "ed", ",", ".",  "\n", "\xE2\x80\x9C",
            "\xC3\xA9", "\xC3\xBC", "a",    "b",    "Once", " upon", "!",  "q", "zz", "0",  "12"};
        uint64_t state = 7;
        for (int trial = 0; trial < 300; ++trial) {
            std::string text;
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            const int n = static_cast<int>((state >> 40) % 24);
            for (int i = 0; i < n; ++i) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                text += parts[(state >> 33) % parts.size()];
            }
            QCOMPARE(ids_text(tok->encode(text, true, false)), ids_text(run_c_encode(*m_tok512, text)));
        }
    }

    void longTextEncodesFast() {
        if (!m_tok512) QSKIP(test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
        auto tok = Tokenizer::from_vocabulary(*m_tok512, "tok512.bin");
        QVERIFY2(tok, tok.message().c_str());
        std::string text;
        while (text.size() < 400000) text += "Once upon a time, there was a little girl named Lily. ";
        QElapsedTimer timer;
        timer.start();
        const Ids ids = tok->encode(text, true, false);
        // run.c's rescanning loop would need ~10^10 pair lookups here
        QVERIFY2(timer.elapsed() < 20000, qPrintable(QString("%1 ms").arg(timer.elapsed())));
        QCOMPARE(tok->decode_all(Ids(ids.begin() + 1, ids.end())), text);
        QVERIFY(ids.size() < text.size() / 3);
    }

    // ---- tok105: character level, no byte tokens ----

    void tok105CharacterLevel() {
        if (!m_tok105) QSKIP(test::shared_models_skip_reason("babyllama-tok105/tok105.bin").c_str());
        auto tok = Tokenizer::from_vocabulary(*m_tok105, "tok105.bin");
        QVERIFY2(tok, tok.message().c_str());
        QVERIFY(!tok->has_byte_fallback());
        // no two characters form a piece: one token per character, " " is 3
        QCOMPARE(ids_text(tok->encode("Once upon", true, false)), QString("1,3,34,9,22,4,3,18,20,7,9"));
        // multi-byte characters that are pieces: “ 58, é 78, ” 59
        QCOMPARE(ids_text(tok->encode("\xE2\x80\x9C\xC3\xA9\xE2\x80\x9D", false, false)), QString("3,58,78,59"));
        QCOMPARE(ids_text(tok->encode("Once upon", true, false)), ids_text(run_c_encode(*m_tok105, "Once upon")));
    }

    void tok105UnknownCharacterIsUnk() {
        if (!m_tok105) QSKIP(test::shared_models_skip_reason("babyllama-tok105/tok105.bin").c_str());
        auto tok = Tokenizer::from_vocabulary(*m_tok105, "tok105.bin");
        QVERIFY2(tok, tok.message().c_str());
        // '#' is no piece. run.c would emit byte + 3 = 38, which is 'B' in this vocabulary ("a#b" -> "aBb"),
        // and for 'ü' ids 198 and 191, past the vocabulary's end; sentencepiece (and this tokenizer) say <unk>.
        QCOMPARE(ids_text(run_c_encode(*m_tok105, "a#b")), QString("1,3,5,38,23"));
        QCOMPARE(ids_text(tok->encode("a#b", true, false)), QString("1,3,5,0,23"));
        QCOMPARE(ids_text(tok->encode("\xC3\xBC", true, false)), QString("1,3,0"));  // one <unk> per character
        // decoding <unk> prints its piece, as run.c's decode() does
        QCOMPARE(tok->decode_all({3, 5, 0, 23}), std::string("a<unk>b"));
    }

    // ---- GGUF sentencepiece vocabulary ----

    void ggufSpmVocabularyEncodesLikeTokenizerBin() {
        if (!m_tok512) QSKIP(test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
        auto bin = Tokenizer::from_vocabulary(*m_tok512, "tok512.bin");
        auto spm = Tokenizer::from_vocabulary(as_gguf_spm(*m_tok512), "model.gguf");
        QVERIFY2(bin, bin.message().c_str());
        QVERIFY2(spm, spm.message().c_str());
        QCOMPARE(spm->piece(403), std::string(" Once"));  // U+2581 became a space
        for (const char* text : kTexts) {
            const Ids ids = bin->encode(text, true, false);
            QCOMPARE(ids_text(spm->encode(text, true, false)), ids_text(ids));
            QCOMPARE(spm->decode_all(Ids(ids.begin() + 1, ids.end())), std::string(text));
        }
        // control tokens decode to nothing; the literal text "<s>" is not BOS
        QVERIFY(spm->decode(5, 1).empty());
        QVERIFY(spm->decode(5, 2).empty());
        const Ids lit = spm->encode("<s>", false, false);
        QVERIFY(std::find(lit.begin(), lit.end(), 1) == lit.end());
    }

    // A GGUF SPM vocabulary without a "\u2581" piece: a space (and the dummy prefix) falls back to the bytes of
    // U+2581, as llama.cpp escapes spaces before its byte fallback (the llama.cpp peer test checks it live).
    void spmSpaceWithoutPieceIsU2581Bytes() {
        Vocabulary v;
        v.model = "llama";
        v.tokens = {"<unk>", "<s>", "</s>"};
        v.token_types = {2, 3, 3};
        for (int b = 0; b < 256; ++b) {
            char piece[8];
            std::snprintf(piece, sizeof piece, "<0x%02X>", b);
            v.tokens.push_back(piece);
            v.token_types.push_back(6);
        }
        v.tokens.push_back("a");
        v.token_types.push_back(1);
        v.scores.assign(v.tokens.size(), 0.0f);
        v.bos_id = 1;
        v.eos_id = 2;
        auto tok = Tokenizer::from_vocabulary(v, "bytes.gguf");
        QVERIFY2(tok, tok.message().c_str());
        QCOMPARE(ids_text(tok->encode("a a", false, false)), QString("229,153,132,259,229,153,132,259"));
    }

    // User-defined tokens as llama.cpp's tokenizer_st_partition and SPM session have them: the text as stored splits
    // the raw text (convert_hf_to_gguf.py stores Gemma's runs of spaces as spaces, so "  " splits; a GGUF that kept
    // U+2581 splits only at a literal "▁▁"), the session matches the other tokens against the text with its spaces
    // as U+2581 (a literal U+2581 is a space), forms any token a pair makes whatever its score (the -1e10 of a
    // token no tokenizer.json merge forms included), and a user-defined token llama.cpp types as control by its
    // text (an end-of-generation "</s>") splits nothing. Checked live against llama.cpp in
    // test_tokenizer_vectors byte_fallback_json_real (tests/data/tokenizer).
    void spmUserDefinedAsStored() {
        const std::string mark = "\xE2\x96\x81";
        auto vocab = [&](const std::string& run) {
            Vocabulary v;
            v.model = "llama";
            // "</s>": user-defined, and an end-of-generation text
            v.tokens = {"<unk>", "<bos>", "<eos>", mark, "a", "b", run, mark + "b", "</s>", "c", "cc"};
            v.token_types = {2, 3, 3, 1, 1, 1, 4, 1, 4, 1, 1};
            v.scores = {0, 0, 0, -1, -1, -1, -1000, -2, -1000, -1, -1e10f};
            v.bos_id = 1;
            v.eos_id = 2;
            Metadata meta;
            meta.set("tokenizer.ggml.add_space_prefix", MetaValue::of_bool(false));
            return Tokenizer::from_metadata(meta, v, "user-defined.gguf");
        };
        auto spaces = vocab("  ");  // as the converter writes it
        QVERIFY2(spaces, spaces.message().c_str());
        QCOMPARE(ids_text(spaces->encode("a  b", false, false)), QString("4,6,5"));
        // "▁▁" in the text is two spaces to the session, and "  " stored with spaces never comes out of a merge
        QCOMPARE(ids_text(spaces->encode("a" + mark + mark + "b", false, false)), QString("4,3,7"));
        QCOMPARE(spaces->decode(4, 6), std::string_view("  "));
        auto marks = vocab(mark + mark);  // as stored by a converter that kept U+2581
        QVERIFY2(marks, marks.message().c_str());
        QCOMPARE(ids_text(marks->encode("a  b", false, false)), QString("4,3,7"));
        QCOMPARE(ids_text(marks->encode("a" + mark + mark + "b", false, false)), QString("4,6,5"));
        QCOMPARE(marks->piece(6), mark + mark);  // its text as stored, as llama.cpp's token_to_piece gives it
        // a token no merge forms (score -1e10) still comes out of the session's merges
        QCOMPARE(ids_text(spaces->encode("cc", false, false)), QString("10"));
        // "</s>" is typed control by its text: it splits the text only with parse_special
        QVERIFY(spaces->is_control(8) && spaces->is_eog(8));
        QVERIFY(spaces->encode("a</s>", false, false) != (Ids{4, 8}));
        QCOMPARE(ids_text(spaces->encode("a</s>", false, false, true)), QString("4,8"));
    }

    // A byte-fallback tokenizer.json's user-defined added token (Gemma's "▁▁") becomes the GGUF vocabulary's text
    // convert_hf_to_gguf.py writes ("pre-normalize user-defined spaces": U+2581 as spaces), which export stores and
    // which splits the text's "  " as llama.cpp does on that GGUF.
    void hfUserDefinedAsTheConverterWritesIt() {
        test::TempDir dir;
        const std::string json = R"({"added_tokens": [
            {"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
            {"id": 2, "content": "</s>", "special": true}, {"id": 6, "content": "\u2581\u2581", "special": false}],
            "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
                      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5, "\u2581\u2581": 6,
                                "\u2581b": 7},
                      "merges": ["\u2581 b", "\u2581 \u2581"]}})";
        test::write_file(dir.file("tokenizer.json"), std::string_view(json));
        auto found = vocabulary_for_model(dir.file("model.safetensors"), {}, 8, dir.file("tokenizer.json"));
        QVERIFY2(found, found.message().c_str());
        QCOMPARE(found->vocab.tokens[6], std::string("  "));
        QCOMPARE(found->vocab.token_types[6], 4);  // USER_DEFINED
        auto tok = Tokenizer::load(dir.file("tokenizer.json"));
        QVERIFY2(tok, tok.message().c_str());
        QCOMPARE(ids_text(tok->encode("a  b", false, false)), QString("4,6,5"));
        QCOMPARE(ids_text(tok->encode("a b", false, false)), QString("4,7"));
    }

    // tokenizer.json's fuse_unk is read and not applied: llama.cpp has no key for it and never fuses (its SPM
    // session sends an unknown character's bytes to byte_to_token, which throws without a token for the byte; node-
    // llama-cpp aborts on this vocabulary), so the folder tokenizes as the GGUF vocabulary it becomes: one <unk>
    // per unknown character.
    void fuseUnkNotApplied() {
        test::TempDir dir;
        const std::string json = R"({"added_tokens": [
            {"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
            {"id": 2, "content": "</s>", "special": true}],
            "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
                      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5}, "merges": []}})";
        test::write_file(dir.file("tokenizer.json"), std::string_view(json));
        auto tok = Tokenizer::load(dir.file("tokenizer.json"));
        QVERIFY2(tok, tok.message().c_str());
        QCOMPARE(ids_text(tok->encode("aXYb Z", false, false)), QString("4,0,0,5,3,0"));
        auto found = vocabulary_for_model(dir.file("model.safetensors"), {}, 6, dir.file("tokenizer.json"));
        QVERIFY2(found, found.message().c_str());
        auto gguf = Tokenizer::from_metadata(found->keys, found->vocab, "exported.gguf");
        QVERIFY2(gguf, gguf.message().c_str());
        QCOMPARE(ids_text(gguf->encode("aXYb Z", false, false)), ids_text(tok->encode("aXYb Z", false, false)));
    }

    // EOM and the fill-in-the-middle tokens, as llama.cpp's llama_vocab::impl::load finds them: by text without
    // keys (the first text of its list, the token made control; FIM pad / repository / separator and EOM end
    // generation), else from tokenizer.ggml.*_token_id, where the older prefix/suffix/middle_token_id, read after,
    // wins; a key that names no token is refused naming it; what no key states is what a writer adds.
    void specialIdsFromKeysAndText() {
        Vocabulary v = test::tiny_vocabulary();  // 40 tokens, then:
        for (const char* t : {"<PRE>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>",
                              "<|repo_name|>", "<|file_sep|>", "<|eom_id|>"}) {
            v.tokens.push_back(t);
            v.scores.push_back(0);
            v.token_types.push_back(1);
        }
        auto by_text = Tokenizer::from_metadata(Metadata{}, v, "fim.gguf");
        QVERIFY2(by_text, by_text.message().c_str());
        const SpecialIds& s = by_text->special_ids();
        QCOMPARE(s.fim_pre, 41);  // "<|fim_prefix|>" comes before "<PRE>" in llama.cpp's list
        QCOMPARE(s.fim_suf, 42);
        QCOMPARE(s.fim_mid, 43);
        QCOMPARE(s.fim_pad, 44);
        QCOMPARE(s.fim_rep, 45);
        QCOMPARE(s.fim_sep, 46);
        QCOMPARE(by_text->eom_id(), 47);
        QCOMPARE(by_text->eot_id(), -1);
        QCOMPARE(ids_text(by_text->eog_ids()), QString("2,44,45,46,47"));
        QVERIFY(by_text->is_control(41) && by_text->is_control(47) && !by_text->is_control(40));
        QCOMPARE(ids_text(by_text->encode("a<|fim_prefix|>", false, false, true)),
                 QString("30,41"));  // "▁a", the token
        QCOMPARE(special_ids_by_text(v.tokens).fim_mid, 43);

        Metadata keys;
        keys.set("tokenizer.ggml.fim_pre_token_id", MetaValue::of_uint(5, MetaType::U32));
        keys.set("tokenizer.ggml.prefix_token_id", MetaValue::of_uint(40, MetaType::U32));
        keys.set("tokenizer.ggml.eom_token_id", MetaValue::of_uint(6, MetaType::U32));
        keys.set("tokenizer.ggml.fim_sep_token_id", MetaValue::of_uint(7, MetaType::U32));
        auto keyed = Tokenizer::from_metadata(keys, v, "fim.gguf");
        QVERIFY2(keyed, keyed.message().c_str());
        QCOMPARE(keyed->special_ids().fim_pre, 40);  // the older key
        QCOMPARE(keyed->eom_id(), 6);
        QCOMPARE(keyed->special_ids().fim_sep, 7);
        QCOMPARE(keyed->special_ids().fim_suf, 42);                       // no key: by text
        QCOMPARE(ids_text(keyed->eog_ids()), QString("2,6,7,44,45,47"));  // "<|eom_id|>" and "<|file_sep|>" no more
        QVERIFY(!keyed->is_control(41));                                  // found by no one
        auto unstated = special_ids_unstated(keys, v.tokens, "fim.gguf");
        QVERIFY2(unstated, unstated.message().c_str());
        QCOMPARE(unstated->fim_pre, -1);
        QCOMPARE(unstated->eom, -1);
        QCOMPARE(unstated->fim_mid, 43);
        QCOMPARE(special_id_keys(*unstated).front(),
                 (std::pair<std::string, int32_t>("tokenizer.ggml.fim_suf_token_id", 42)));

        keys.set("tokenizer.ggml.fim_pad_token_id", MetaValue::of_uint(48, MetaType::U32));
        auto bad = Tokenizer::from_metadata(keys, v, "fim.gguf");
        QVERIFY(!bad);
        QCOMPARE(bad.status().code(), StatusCode::Corrupt);
        QVERIFY2(bad.message().find("fim.gguf: metadata 'tokenizer.ggml.fim_pad_token_id' = 48") == 0,
                 bad.message().c_str());
    }

    // ---- merge order ----

    void equalScoresMergeLeftmostFirst() {
        Vocabulary v;
        v.model = "llama2.c";
        v.tokens = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", "ab", "ba", " x", "x"};
        v.scores = {0, 0, 0, -1, -1, -1, -5, -5, -2, -1};
        auto tok = Tokenizer::from_vocabulary(v, "synthetic");
        QVERIFY2(tok, tok.message().c_str());
        // " a b a": "ab" (index 1) and "ba" (index 2) score the same; run.c takes the leftmost
        QCOMPARE(ids_text(tok->encode("aba", false, false)), QString("3,6,4"));
        const Ids oracle = run_c_encode(v, "aba");
        QCOMPARE(ids_text(tok->encode("aba", true, false)), ids_text(oracle));
        QCOMPARE(ids_text(tok->encode("bab", false, false)), QString("3,7,5"));
        // the higher score wins over position: " x" (-2) merges, and "xab" stays " x","ab"
        QCOMPARE(ids_text(tok->encode("xab", false, false)), QString("8,6"));
        // no byte tokens and no piece for 'z': <unk>
        QCOMPARE(ids_text(tok->encode("z", false, false)), QString("3,0"));
    }

    // ---- errors ----

    void rejectsUnusableVocabularies() {
        Vocabulary gpt2;
        gpt2.model = "gpt2";
        gpt2.tokens = {"a"};
        gpt2.scores = {0};
        auto a = Tokenizer::from_vocabulary(gpt2, "llama3.gguf");
        QVERIFY(!a);
        QCOMPARE(a.status().code(), StatusCode::Unsupported);
        // A bare vocabulary has no merges: byte-level BPE comes from the GGUF metadata (from_metadata).
        QVERIFY2(a.message().rfind("llama3.gguf: a byte-level BPE (gpt2) vocabulary needs its merges", 0) == 0,
                 a.message().c_str());
        Metadata meta;
        auto no_merges = Tokenizer::from_metadata(meta, gpt2, "llama3.gguf");
        QVERIFY(!no_merges);
        QCOMPARE(no_merges.status().code(), StatusCode::Corrupt);
        QVERIFY2(no_merges.message().find("tokenizer.ggml.merges") != std::string::npos, no_merges.message().c_str());
        meta.set("tokenizer.ggml.pre", MetaValue::of_string("chameleon"));
        auto unknown_pre = Tokenizer::from_metadata(meta, gpt2, "llama3.gguf");
        QVERIFY(!unknown_pre);
        QCOMPARE(unknown_pre.status().code(), StatusCode::Unsupported);
        QVERIFY2(unknown_pre.message().find("tokenizer.ggml.pre 'chameleon' is a llama.cpp pre-tokenizer") !=
                     std::string::npos,
                 unknown_pre.message().c_str());

        Vocabulary no_scores;
        no_scores.model = "llama";
        no_scores.tokens = {"<unk>", "<s>", "</s>", "a"};
        auto b = Tokenizer::from_vocabulary(no_scores, "m.gguf");
        QVERIFY(!b);
        QCOMPARE(QString::fromStdString(b.message()),
                 QString("m.gguf: 0 scores for 4 tokens (BPE merges need one score per token)"));

        Vocabulary empty;
        empty.model = "llama2.c";
        auto c = Tokenizer::from_vocabulary(empty, "tok.bin");
        QVERIFY(!c);
        QCOMPARE(QString::fromStdString(c.message()), QString("tok.bin: the vocabulary is empty"));
    }

    // A model without a vocabulary of its own (the demo's safetensors folder) is tokenized by the tokenizer.bin beside
    // it, as the model's commands find it (gkq tokenize MODEL); one with nothing beside it names what is missing; the
    // tokenizer.bin opened as a model says what it is.
    void loadFindsTheTokenizerBesideAModel() {
        const std::string demo = GKQ_DEMO_MODEL_DIR;
        auto direct = Tokenizer::load(demo + "/tokenizer.bin");
        QVERIFY2(direct, direct.message().c_str());
        const std::string text = "Once upon a time, a small model";
        for (const std::string& model : {demo, demo + "/model.safetensors"}) {
            auto beside = Tokenizer::load(model);
            QVERIFY2(beside, (model + ": " + beside.message()).c_str());
            QCOMPARE(ids_text(beside->encode(text, true, false)), ids_text(direct->encode(text, true, false)));
        }
        test::TempDir dir;
        test::write_file(dir.file("config.json"), test::read_file(demo + "/config.json"));
        test::write_file(dir.file("model.safetensors"), test::read_file(demo + "/model.safetensors"));
        auto none = Tokenizer::load(dir.path());
        QVERIFY(!none);
        QCOMPARE(none.status().code(), StatusCode::NotFound);
        QVERIFY2(none.message().find("no tokenizer.bin") != std::string::npos, none.message().c_str());
        // the tokenizer opened as a model is named for what it is, not as a checkpoint with a bad header
        auto as_model = ModelFile::open(demo + "/tokenizer.bin");
        QVERIFY(!as_model);
        QCOMPARE(as_model.status().code(), StatusCode::InvalidArgument);
        QVERIFY2(
            as_model.message().find("a llama2.c tokenizer (1024 tokens), not a model checkpoint") != std::string::npos,
            as_model.message().c_str());
    }

    void loadLlama2cChecksVocabSize() {
        auto path = test::shared_model("llama2xs-279K/tok512.bin");
        if (!path) QSKIP(test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
        auto ok = Tokenizer::load_llama2c(*path, 512);
        QVERIFY2(ok, ok.message().c_str());
        QCOMPARE(ok->vocab_size(), 512);
        // another vocabulary size, larger or smaller: both sizes named, not "truncated"
        for (const int64_t expected : {int64_t{500}, int64_t{600}}) {
            auto wrong = Tokenizer::load_llama2c(*path, expected);
            QVERIFY(!wrong);
            QCOMPARE(wrong.status().code(), StatusCode::Corrupt);
            QCOMPARE(
                QString::fromStdString(wrong.message()),
                QString::fromStdString(*path +
                                       ": this llama2.c tokenizer holds 512 tokens, but the model's "
                                       "vocabulary has " +
                                       std::to_string(expected) + " (vocab_size): it is another model's tokenizer"));
        }
    }

    // End of turn and end of generation found by text, with llama.cpp's two work-arounds: <|end|> (EOT) ends nothing
    // beside <|return|> and <|call|> (o200k_harmony), </s> (EOS) nothing beside <|tool_response> (Gemma 4).
    void endTokensByText() {
        Vocabulary v;
        v.model = "llama";
        v.tokens = {"<unk>", "<s>", "</s>", "a", "<|end|>"};
        v.bos_id = 1;
        v.eos_id = 2;
        v.scores.assign(v.tokens.size(), 0.0f);
        auto plain = Tokenizer::from_vocabulary(v, "v");
        QVERIFY2(plain, plain.message().c_str());
        QCOMPARE(plain->eot_id(), 4);
        QCOMPARE(plain->eog_ids(), (std::vector<int32_t>{2, 4}));
        QVERIFY(plain->is_control(4) && plain->decode(3, 4).empty());
        v.tokens.insert(v.tokens.end(), {"<|return|>", "<|call|>", "<|tool_response>"});
        v.scores.assign(v.tokens.size(), 0.0f);
        auto harmony = Tokenizer::from_vocabulary(v, "v");
        QVERIFY2(harmony, harmony.message().c_str());
        QCOMPARE(harmony->eot_id(), 4);
        QCOMPARE(harmony->eog_ids(), (std::vector<int32_t>{5, 6, 7}));
        QVERIFY(!harmony->is_eog(4) && !harmony->is_eog(2));
    }

    // Bytes after the last token that are no whole token, and a token cut short, are still a corrupt file.
    void llama2cTokenizerCorruptTail() {
        test::TempDir dir;
        const std::string path = dir.file("tok.bin");
        test::Bytes b;
        b.i32(5);
        for (const char* t : {"<unk>", "<s>", "</s>"}) b.f32(0).i32(static_cast<int32_t>(std::strlen(t))).raw(t);
        std::string file(reinterpret_cast<const char*>(b.vec().data()), b.vec().size());
        test::write_file(path, file + "xyz");
        auto tail = read_llama2c_tokenizer(path, 3);
        QVERIFY(!tail);
        QCOMPARE(tail.status().code(), StatusCode::Corrupt);
        QVERIFY2(tail.message().find("3 bytes after token 2") != std::string::npos, tail.message().c_str());
        test::write_file(path, file.substr(0, file.size() - 2));
        auto cut = read_llama2c_tokenizer(path, 3);
        QVERIFY(!cut);
        QVERIFY2(cut.message().find("(truncated?)") != std::string::npos, cut.message().c_str());
        test::write_file(path, file);
        auto fewer = read_llama2c_tokenizer(path, 32000);
        QVERIFY(!fewer);
        QVERIFY2(fewer.message().find("holds 3 tokens, but the model's vocabulary has 32000") != std::string::npos,
                 fewer.message().c_str());
    }
};

QTEST_APPLESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
