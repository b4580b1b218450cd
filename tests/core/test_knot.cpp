// The knot file on its own (no codec): round trips of arbitrary records, the documented byte layout, single-record
// and range-request access, and every way a file can be broken (corrupt, truncated, foreign, newer, absurd).
#include "gkq/knot.h"
#include "knot/knot_format.h"
#include "test_support.h"

#include <zlib.h>
#include <QtTest>

#include <algorithm>

#include <filesystem>

using namespace gkq;
namespace fs = std::filesystem;

namespace {

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// QVERIFY with the message shown on failure.
#define VERIFY_CONTAINS(haystack, needle) \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, qPrintable(q(std::string(haystack))))

KnotHeader sample_header(uint64_t n_source) {
    KnotHeader h;
    h.producer = "gkq test";
    h.command = "quantize --preset none";
    h.config.dim = 64;
    h.config.hidden_dim = 96;
    h.config.n_layers = 2;
    h.config.n_heads = 4;
    h.config.n_kv_heads = 2;
    h.config.vocab_size = 3;
    h.config.context_length = 32;
    h.config.rope_theta = 500000.0;
    h.config.norm_eps = 1e-6;
    h.config.shared_classifier = false;
    h.config.rope_style = RopeStyle::HalfSplit;
    h.vocab.model = "llama";
    h.vocab.tokens = {"<s>", std::string("\xff\x00z", 3), "\xe2\x96\x81the"};
    h.vocab.scores = {0.0f, -1.5f, -2.25f};
    h.vocab.token_types = {3, 6, 1};
    h.vocab.bos_id = 0;
    h.vocab.eos_id = 2;
    h.vocab.max_token_length = 7;
    h.metadata.set("general.name", MetaValue::of_string("tiny"));
    h.metadata.set("llama.block_count", MetaValue::of_uint(2, MetaType::U32));
    h.metadata.set("x.signed", MetaValue::of_int(-5));
    h.metadata.set("x.float", MetaValue::of_float(0.25, MetaType::F32));
    h.metadata.set("x.bool", MetaValue::of_bool(true));
    MetaValue arr;
    arr.type = MetaType::Array;
    arr.array_type = MetaType::String;
    arr.array = {MetaValue::of_string("a"), MetaValue::of_string("bc")};
    h.metadata.set("x.array", arr);
    h.n_source_tensors = n_source;
    return h;
}

std::vector<EncodedTensor> sample_tensors() {
    std::vector<EncodedTensor> v;
    EncodedTensor a;  // compressible payload
    a.name = "blk.0.attn_q.weight";
    a.role = TensorRole::AttnQ;
    a.layer = 0;
    a.shape = {64, 64};
    a.method = Method::LowRankResidual;
    a.rank = 3;
    a.factor_bits = 2;
    a.residual_code = 4;
    a.flags = kFlagDelta | kFlagFoldedHeads;
    a.payload.assign(5000, 0);
    for (size_t i = 0; i < a.payload.size(); i += 7) a.payload[i] = static_cast<uint8_t>(i / 7);
    v.push_back(a);
    EncodedTensor b;  // incompressible payload
    b.name = "blk.0.attn_norm.weight";
    b.role = TensorRole::AttnNorm;
    b.layer = 0;
    b.shape = {64};
    b.method = Method::F32;
    auto noise = test::random_floats(64, 7);
    b.payload.resize(256);
    std::memcpy(b.payload.data(), noise.data(), 256);
    v.push_back(b);
    EncodedTensor c;  // empty payload, four dimensions
    c.name = "odd.tensor";
    c.role = TensorRole::Other;
    c.layer = -1;
    c.shape = {2, 3, 1, 5};
    c.method = Method::Q8_0;
    v.push_back(c);
    EncodedTensor d;
    d.name = "output.weight";
    d.role = TensorRole::Output;
    d.shape = {3, 64};
    d.method = Method::Q4_0;
    d.payload.assign(6 * 18, 0x5a);
    v.push_back(d);
    return v;
}

bool same_tensor(const EncodedTensor& a, const EncodedTensor& b) {
    return a.name == b.name && a.role == b.role && a.layer == b.layer && a.shape == b.shape && a.method == b.method &&
           a.rank == b.rank && a.factor_bits == b.factor_bits && a.residual_code == b.residual_code &&
           a.flags == b.flags && a.payload == b.payload;
}

// Writes the sample knot: tensors at source indices 0..n-1, unsharded.
std::string write_knot(const test::TempDir& dir, const std::string& name = "m.knot") {
    const std::string path = dir.file(name);
    auto tensors = sample_tensors();
    auto w = KnotWriter::create(path, sample_header(tensors.size()));
    if (!w) qFatal("%s", w.message().c_str());
    for (size_t i = 0; i < tensors.size(); ++i)
        if (Status s = w->add(tensors[i], i); !s) qFatal("%s", s.message().c_str());
    if (Status s = w->finish(); !s) qFatal("%s", s.message().c_str());
    return path;
}

template <class T>
T get(const std::vector<uint8_t>& b, uint64_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof(T));
    return v;
}
template <class T>
void set(std::vector<uint8_t>& b, uint64_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
}

// Where things are in a knot's bytes, found by walking the documented layout.
struct Layout {
    uint64_t index_offset = 0;
    uint64_t index_bytes = 0;
    std::vector<uint64_t> entry_at;  // file offset of each index entry
    std::vector<uint64_t> record_at;
    std::vector<uint64_t> record_bytes;
};

Layout layout_of(const std::vector<uint8_t>& b) {
    Layout l;
    const uint64_t n = b.size();
    l.index_offset = get<uint64_t>(b, n - 32);
    l.index_bytes = get<uint64_t>(b, n - 24);
    const uint64_t count = get<uint64_t>(b, l.index_offset + 4);
    uint64_t at = l.index_offset + 12;
    for (uint64_t i = 0; i < count; ++i) {
        l.entry_at.push_back(at);
        l.record_at.push_back(get<uint64_t>(b, at));
        l.record_bytes.push_back(get<uint64_t>(b, at + 8));
        const uint8_t n_dims = b[at + 20 + 41];
        const uint16_t name_len = get<uint16_t>(b, at + 20 + 42);
        at += 20 + 44 + 8 * n_dims + name_len;
    }
    return l;
}

// Recomputes the index CRC in the trailer, as a forger would (uses only the trailer's fields).
void refresh_index_crc(std::vector<uint8_t>& b) {
    const uint64_t index_offset = get<uint64_t>(b, b.size() - 32), index_bytes = get<uint64_t>(b, b.size() - 24);
    set<uint32_t>(b, b.size() - 16, knot_crc32(b.data() + index_offset, index_bytes));
}

// Recomputes record i's CRC (its trailing field and its index entry), then the index CRC.
void refresh_crcs(std::vector<uint8_t>& b, int record) {
    Layout l = layout_of(b);
    const uint64_t at = l.record_at[record], len = l.record_bytes[record];
    const uint32_t crc = knot_crc32(b.data() + at, len - 4);
    set<uint32_t>(b, at + len - 4, crc);
    set<uint32_t>(b, l.entry_at[record] + 16, crc);
    refresh_index_crc(b);
}

// A complete knot from a raw (uncompressed) header block, an index body (entries, no magic/count) and records.
std::vector<uint8_t> assemble(const std::vector<uint8_t>& block, uint64_t n_records,
                              const std::vector<uint8_t>& entries, const std::vector<uint8_t>& records = {}) {
    test::Bytes f;
    f.raw("GKQKNOT", 8).u32(1).u32(0).u64(block.size()).u64(block.size()).u32(knot_crc32(block.data(), block.size()));
    f.u8(0).u8(0).u8(0).u8(0);
    f.raw(block.data(), block.size());
    const uint64_t records_offset = f.size();
    f.raw(records.data(), records.size());
    const uint64_t index_offset = f.size();
    test::Bytes idx;
    idx.raw("KIDX").u64(n_records).raw(entries.data(), entries.size());
    f.raw(idx.vec().data(), idx.size());
    f.u64(records_offset).u64(index_offset).u64(idx.size()).u32(knot_crc32(idx.vec().data(), idx.size())).u32(1);
    f.raw("KNOTIDX", 8);
    return f.vec();
}

// The header block of docs/knot-format.md, field by field, for a minimal header.
std::vector<uint8_t> doc_header_block(uint64_t n_tokens_field = 0, uint64_t n_meta_field = 0, uint32_t shard = 0,
                                      uint32_t shards = 1, uint64_t n_source = 0) {
    test::Bytes b;
    b.u32(3).raw("gkq").u32(0);                                    // producer, command
    b.u32(shard).u32(shards).u64(n_source);                        // shard i of N, source tensors
    b.u32(5).raw("llama");                                         // architecture
    for (int64_t v : {64, 96, 2, 4, 2, 0, 32}) b.put<int64_t>(v);  // dim .. context_length
    b.put<double>(10000.0).put<double>(1e-5).u8(1);                // rope_theta, norm_eps, shared_classifier
    b.u8(0);                                                       // rope style: interleaved
    b.u32(0);                                                      // tokenizer model ""
    b.u64(n_tokens_field).u64(0).u64(0);                           // tokens, scores, token types
    b.i32(-1).i32(-1).i32(0);                                      // bos, eos, max_token_length
    b.u64(n_meta_field);                                           // metadata entries
    return b.vec();
}

}  // namespace

class TestKnot : public QObject {
    Q_OBJECT
private slots:
    void roundTripHeaderAndRecords() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto k = KnotFile::open(path);
        QVERIFY2(k.is_ok(), k.message().c_str());
        const KnotHeader& h = k->header();
        const KnotHeader want = sample_header(4);
        QCOMPARE(h.producer, want.producer);
        QCOMPARE(h.command, want.command);
        QCOMPARE(h.config.dim, 64);
        QCOMPARE(h.config.hidden_dim, 96);
        QCOMPARE(h.config.n_kv_heads, 2);
        QCOMPARE(h.config.rope_theta, 500000.0);
        QCOMPARE(h.config.norm_eps, 1e-6);
        QCOMPARE(h.config.shared_classifier, false);
        QCOMPARE(h.config.rope_style, RopeStyle::HalfSplit);
        QCOMPARE(h.vocab.model, want.vocab.model);
        QVERIFY(h.vocab.tokens == want.vocab.tokens);
        QVERIFY(h.vocab.scores == want.vocab.scores);
        QVERIFY(h.vocab.token_types == want.vocab.token_types);
        QCOMPARE(h.vocab.eos_id, 2);
        QCOMPARE(h.vocab.max_token_length, 7);
        QCOMPARE(h.metadata.entries.size(), want.metadata.entries.size());
        for (size_t i = 0; i < want.metadata.entries.size(); ++i) {
            QCOMPARE(h.metadata.entries[i].first, want.metadata.entries[i].first);
            QCOMPARE(h.metadata.entries[i].second.to_display(), want.metadata.entries[i].second.to_display());
            QCOMPARE(h.metadata.entries[i].second.type, want.metadata.entries[i].second.type);
        }
        QCOMPARE(h.metadata.find("llama.block_count")->as_int(), std::optional<int64_t>(2));
        QCOMPARE(h.shard_index, 0u);
        QCOMPARE(h.shard_count, 1u);
        QCOMPARE(h.n_source_tensors, uint64_t(4));

        const auto tensors = sample_tensors();
        QCOMPARE(k->n_records(), tensors.size());
        for (size_t i = 0; i < tensors.size(); ++i) {
            const KnotEntry& e = k->entries()[i];
            QCOMPARE(e.name, tensors[i].name);
            QCOMPARE(e.role, tensors[i].role);
            QCOMPARE(e.layer, tensors[i].layer);
            QVERIFY(e.shape == tensors[i].shape);
            QCOMPARE(e.method, tensors[i].method);
            QCOMPARE(e.rank, tensors[i].rank);
            QCOMPARE(e.flags, tensors[i].flags);
            QCOMPARE(e.source_index, uint64_t(i));
            QCOMPARE(e.raw_bytes, uint64_t(tensors[i].payload.size()));
            auto t = k->read(i);
            QVERIFY2(t.is_ok(), t.message().c_str());
            QVERIFY(same_tensor(*t, tensors[i]));
        }
        QCOMPARE(k->find("output.weight"), int64_t(3));
        QCOMPARE(k->find("nope"), int64_t(-1));
        QCOMPARE(k->file_bytes(), uint64_t(fs::file_size(path)));
        QVERIFY(!k->gzipped());
    }

    void compressionOnlyWhenSmaller() {
        test::TempDir dir;
        auto k = KnotFile::open(write_knot(dir));
        QVERIFY(k.is_ok());
        const auto& e = k->entries();
        QCOMPARE(e[0].compression, KnotCompression::Zlib);  // mostly zeros
        QVERIFY(e[0].stored_bytes < e[0].raw_bytes / 4);
        QCOMPARE(e[1].compression, KnotCompression::None);  // random floats
        QCOMPARE(e[1].stored_bytes, uint64_t(256));
        QCOMPARE(e[2].compression, KnotCompression::None);  // empty
        QCOMPARE(e[2].stored_bytes, uint64_t(0));
        // record = 8-byte prefix + 44-byte descriptor + 8 per dim + name + payload + 4-byte CRC
        QCOMPARE(e[1].record_bytes, uint64_t(8 + 44 + 8 * 1 + e[1].name.size() + 256 + 4));
        QCOMPARE(e[2].record_bytes, uint64_t(8 + 44 + 8 * 4 + e[2].name.size() + 0 + 4));
    }

    // Payloads beyond the 256 KiB trial sample: deflated only where the sample deflates by 5 % or more. The same
    // tail (all zeros, which deflates to nothing) behind a random start is stored raw: the start decides.
    void largePayloadsAreDeflatedWhereTheirStartCompresses() {
        auto record = [](const std::vector<uint8_t>& payload) {
            EncodedTensor t;
            t.name = "w";
            t.shape = {static_cast<int64_t>(payload.size() / 4)};
            t.method = Method::F32;
            t.dtype = DType::F32;
            t.payload = payload;
            return make_knot_record(t, 0);
        };
        const size_t n = size_t{1} << 20;
        std::vector<uint8_t> zeros(n, 0);
        auto z = record(zeros);
        QVERIFY2(z.is_ok(), z.message().c_str());
        QCOMPARE(z->entry.compression, KnotCompression::Zlib);
        QVERIFY(z->entry.stored_bytes < n / 100);
        QCOMPARE(z->entry.raw_bytes, uint64_t(n));

        std::vector<uint8_t> random_start(n, 0);
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < (size_t{256} << 10); ++i) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            random_start[i] = static_cast<uint8_t>(x);
        }
        auto r = record(random_start);
        QVERIFY(r.is_ok());
        QCOMPARE(r->entry.compression, KnotCompression::None);
        QCOMPARE(r->entry.stored_bytes, uint64_t(n));
        // Moved one sample's length later, the random bytes no longer decide: the zero start compresses.
        std::rotate(random_start.begin(), random_start.begin() + (n - (size_t{256} << 10)), random_start.end());
        auto later = record(random_start);
        QVERIFY(later.is_ok());
        QCOMPARE(later->entry.compression, KnotCompression::Zlib);
        QVERIFY(later->entry.stored_bytes < n / 3);
    }

    void layoutMatchesTheDocument() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto b = test::read_file(path);
        QCOMPARE(std::string(reinterpret_cast<const char*>(b.data()), 8), std::string("GKQKNOT\0", 8));
        QCOMPARE(get<uint32_t>(b, 8), 1u);   // version
        QCOMPARE(get<uint32_t>(b, 12), 0u);  // flags
        const uint64_t block = get<uint64_t>(b, 16);
        QCOMPARE(get<uint32_t>(b, 32), knot_crc32(b.data() + 40, block));
        QCOMPARE(std::string(reinterpret_cast<const char*>(b.data() + b.size() - 8), 8), std::string("KNOTIDX\0", 8));
        QCOMPARE(get<uint64_t>(b, b.size() - 40), 40 + block);  // records start right after the header block
        Layout l = layout_of(b);
        QCOMPARE(l.record_at[0], 40 + block);
        QCOMPARE(std::string(reinterpret_cast<const char*>(b.data() + l.record_at[0]), 4), std::string("KREC"));
        for (size_t i = 1; i < l.record_at.size(); ++i)
            QCOMPARE(l.record_at[i], l.record_at[i - 1] + l.record_bytes[i - 1]);
        QCOMPARE(l.record_at.back() + l.record_bytes.back(), l.index_offset);
        QCOMPARE(l.index_offset + l.index_bytes + 40, uint64_t(b.size()));

        // A file assembled by hand from the document's description opens.
        test::write_file(dir.file("doc.knot"), assemble(doc_header_block(), 0, {}));
        auto k = KnotFile::open(dir.file("doc.knot"));
        QVERIFY2(k.is_ok(), k.message().c_str());
        QCOMPARE(k->header().producer, std::string("gkq"));
        QCOMPARE(k->header().config.hidden_dim, 96);
        QCOMPARE(k->header().config.rope_theta, 10000.0);
        QCOMPARE(k->n_records(), size_t(0));
        // ... and the writer produces the same raw header block for the same header.
        KnotHeader h;
        h.producer = "gkq";
        h.config.dim = 64;
        h.config.hidden_dim = 96;
        h.config.n_layers = 2;
        h.config.n_heads = 4;
        h.config.n_kv_heads = 2;
        h.config.context_length = 32;
        QVERIFY(knot::encode_header_block(h) == doc_header_block());
    }

    void singleRecordReadsOnlyItsBytes() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto bytes = test::read_file(path);
        const Layout l = layout_of(bytes);
        // Trash every byte outside the header, record 1, the index and the trailer: record 1 still reads.
        for (size_t r = 0; r < l.record_at.size(); ++r)
            if (r != 1)
                for (uint64_t i = l.record_at[r]; i < l.record_at[r] + l.record_bytes[r]; ++i) bytes[i] ^= 0xa5;
        test::write_file(path, bytes);
        auto k = KnotFile::open(path);
        QVERIFY2(k.is_ok(), k.message().c_str());
        auto t = k->read(1);
        QVERIFY2(t.is_ok(), t.message().c_str());
        QVERIFY(same_tensor(*t, sample_tensors()[1]));
        QVERIFY(!k->read(0).is_ok());
        QVERIFY(!k->read(3).is_ok());
    }

    void rangeRequestPieces() {
        // What an HTTP client does: fetch the trailer, then the index, then one record; nothing else.
        test::TempDir dir;
        const auto file = test::read_file(write_knot(dir));
        const uint64_t size = file.size();
        std::span<const uint8_t> all(file);
        auto t = parse_knot_trailer(all.subspan(size - kKnotTrailerBytes), size, "http://x/m.knot");
        QVERIFY2(t.is_ok(), t.message().c_str());
        std::vector<uint8_t> index(file.begin() + t->index_offset, file.begin() + t->index_offset + t->index_bytes);
        auto entries = parse_knot_index(index, *t, "http://x/m.knot");
        QVERIFY2(entries.is_ok(), entries.message().c_str());
        QCOMPARE(entries->size(), size_t(4));
        const KnotEntry& e = (*entries)[3];
        std::vector<uint8_t> record(file.begin() + e.record_offset, file.begin() + e.record_offset + e.record_bytes);
        auto et = decode_knot_record(e, record, "http://x/m.knot", 3);
        QVERIFY2(et.is_ok(), et.message().c_str());
        QVERIFY(same_tensor(*et, sample_tensors()[3]));
        // the wrong range is refused
        record.pop_back();
        auto bad = decode_knot_record(e, record, "http://x/m.knot", 3);
        QVERIFY(!bad.is_ok());
        VERIFY_CONTAINS(bad.message(), "http://x/m.knot: record 3 'output.weight'");
    }

    void corruptPayloadByteNamesTheRecord() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto bytes = test::read_file(path);
        const Layout l = layout_of(bytes);
        bytes[l.record_at[1] + l.record_bytes[1] - 10] ^= 0x01;  // inside record 1's payload
        test::write_file(path, bytes);
        auto k = KnotFile::open(path);
        QVERIFY2(k.is_ok(), k.message().c_str());  // open checks the index, not every record
        auto t = k->read(1);
        QVERIFY(!t.is_ok());
        QCOMPARE(t.status().code(), StatusCode::Corrupt);
        VERIFY_CONTAINS(t.message(), path + ": record 1 'blk.0.attn_norm.weight' (file offset " +
                                         std::to_string(l.record_at[1]) + "): CRC32 mismatch");
        auto raw = k->read_raw(1);
        QVERIFY(!raw.is_ok());
        VERIFY_CONTAINS(raw.message(), "record 1 'blk.0.attn_norm.weight'");
        QVERIFY(k->read(0).is_ok());
        QVERIFY(k->read(2).is_ok());
    }

    void recordDisagreeingWithIndex() {
        // A record whose CRCs were recomputed after its layer changed: the descriptor check catches it.
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto bytes = test::read_file(path);
        const Layout l = layout_of(bytes);
        set<int32_t>(bytes, l.record_at[0] + 8 + 28, 1);  // descriptor.layer of record 0
        refresh_crcs(bytes, 0);
        test::write_file(path, bytes);
        auto k = KnotFile::open(path);
        QVERIFY2(k.is_ok(), k.message().c_str());
        auto t = k->read(0);
        QVERIFY(!t.is_ok());
        VERIFY_CONTAINS(t.message(), "record 0 'blk.0.attn_q.weight'");
        VERIFY_CONTAINS(t.message(), "differs from its index entry");
    }

    void brokenZlibPayload() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto bytes = test::read_file(path);
        const Layout l = layout_of(bytes);
        const uint64_t payload = l.record_at[0] + 8 + 44 + 16 + 19;  // after 2 dims and the 19-byte name
        bytes[payload + 20] ^= 0xff;
        refresh_crcs(bytes, 0);
        test::write_file(path, bytes);
        auto k = KnotFile::open(path);
        QVERIFY(k.is_ok());
        auto t = k->read(0);
        QVERIFY(!t.is_ok());
        QCOMPARE(t.status().code(), StatusCode::Corrupt);
        VERIFY_CONTAINS(t.message(), "record 0 'blk.0.attn_q.weight'");
        VERIFY_CONTAINS(t.message(), "payload");
    }

    void corruptHeaderIndexTrailer_data() {
        QTest::addColumn<int>("where");  // 0 header block, 1 index, 2 trailer magic, 3 trailer offsets
        QTest::addColumn<QString>("message");
        QTest::newRow("header block byte") << 0 << "header block at offset 40: CRC32 mismatch";
        QTest::newRow("index byte") << 1 << "CRC32 mismatch (the trailer says";
        QTest::newRow("trailer magic") << 2 << "no knot trailer in the last 40 bytes";
        QTest::newRow("trailer index offset") << 3 << "trailer at offset";
    }
    void corruptHeaderIndexTrailer() {
        QFETCH(int, where);
        QFETCH(QString, message);
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto b = test::read_file(path);
        const Layout l = layout_of(b);
        if (where == 0) b[45] ^= 0x10;
        if (where == 1) b[l.index_offset + 30] ^= 0x10;
        if (where == 2) b[b.size() - 3] = 'X';
        if (where == 3) set<uint64_t>(b, b.size() - 32, l.index_offset + 1);
        test::write_file(path, b);
        auto k = KnotFile::open(path);
        QVERIFY(!k.is_ok());
        QCOMPARE(k.status().code(), StatusCode::Corrupt);
        VERIFY_CONTAINS(k.message(), path + ": ");
        VERIFY_CONTAINS(k.message(), message.toStdString());
    }

    void truncatedAtEveryPrefix() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        const auto full = test::read_file(path);
        const std::string cut = dir.file("cut.knot");
        int n_tried = 0;
        for (size_t len = 0; len < full.size(); len += (len < 100 || len + 100 > full.size()) ? 1 : 13) {
            test::write_file(cut, std::vector<uint8_t>(full.begin(), full.begin() + len));
            auto k = KnotFile::open(cut);
            QVERIFY2(!k.is_ok(), qPrintable(QString("prefix of %1 bytes opened").arg(len)));
            const std::string& m = k.message();
            QVERIFY2(m.rfind(cut + ": ", 0) == 0, m.c_str());
            if (len < 8)
                VERIFY_CONTAINS(m, "not a knot file");
            else if (len < 80)
                VERIFY_CONTAINS(m, "too short for a knot");
            else
                VERIFY_CONTAINS(m, "no knot trailer");
            ++n_tried;
        }
        QVERIFY(n_tried > 200);
    }

    void foreignAndNewerFiles_data() {
        QTest::addColumn<QByteArray>("head");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("message");
        QTest::newRow("gguf") << QByteArray("GGUF\x03\0\0\0", 8) << int(StatusCode::Unsupported)
                              << "not a knot file (no \"GKQKNOT\" magic at offset 0)";
        QTest::newRow("version 2") << QByteArray("GKQKNOT\0\x02\0\0\0", 12) << int(StatusCode::Unsupported)
                                   << "knot format version 2; this gkq reads version 1 (written by a newer gkq?)";
        QTest::newRow("version 0") << QByteArray("GKQKNOT\0\0\0\0\0", 12) << int(StatusCode::Unsupported)
                                   << "knot format version 0; this gkq reads version 1";
        QTest::newRow("unknown flags") << QByteArray("GKQKNOT\0\x01\0\0\0\x04\0\0\0", 16)
                                       << int(StatusCode::Unsupported)
                                       << "header flags 0x00000004 at offset 12: features this gkq does not know";
    }
    void foreignAndNewerFiles() {
        QFETCH(QByteArray, head);
        QFETCH(int, code);
        QFETCH(QString, message);
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto b = test::read_file(path);
        std::memcpy(b.data(), head.constData(), static_cast<size_t>(head.size()));
        test::write_file(path, b);
        auto k = KnotFile::open(path);
        QVERIFY(!k.is_ok());
        QCOMPARE(int(k.status().code()), code);
        VERIFY_CONTAINS(k.message(), path + ": " + message.toStdString());
    }

    void reservedHeaderBytes() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto b = test::read_file(path);
        b[38] = 1;
        test::write_file(path, b);
        auto k = KnotFile::open(path);
        QCOMPARE(k.status().code(), StatusCode::Unsupported);
        VERIFY_CONTAINS(k.message(), path + ": reserved bytes at offset 37 are not zero");
    }

    void trailerVersionMismatch() {
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto b = test::read_file(path);
        set<uint32_t>(b, b.size() - 12, 9);
        test::write_file(path, b);
        auto k = KnotFile::open(path);
        QVERIFY(!k.is_ok());
        VERIFY_CONTAINS(k.message(), "trailer says knot format version 9; this gkq reads version 1");
    }

    // Files that are internally consistent (every CRC right) but say absurd things.
    void absurdIndexFields_data() {
        QTest::addColumn<int>("entry");         // index entry patched (-1: the record count field)
        QTest::addColumn<int>("field_offset");  // byte offset inside the entry
        QTest::addColumn<int>("size");
        QTest::addColumn<bool>("add");  // add `value` to the field instead of replacing it
        QTest::addColumn<quint64>("value");
        QTest::addColumn<QString>("message");
        QTest::newRow("record count") << -1 << 0 << 8 << false << (quint64(1) << 60) << "records cannot fit in";
        QTest::newRow("record offset") << 1 << 0 << 8 << true << quint64(1) << "so it must start at";
        QTest::newRow("record size") << 1 << 8 << 8 << true << quint64(1) << "does not match its";
        QTest::newRow("stored size") << 0 << 20 + 8 << 8 << true << quint64(1) << "does not match its";
        QTest::newRow("raw size") << 0 << 20 + 16 << 8 << false << (quint64(1) << 50) << "is impossible for";
        QTest::newRow("raw size uncompressed")
            << 1 << 20 + 16 << 8 << true << quint64(1) << "uncompressed payload with stored size 256 != raw size 257";
        QTest::newRow("source index") << 1 << 20 << 8 << false << quint64(0) << "source index 0 does not follow 0";
        QTest::newRow("role") << 1 << 20 + 36 << 1 << false << quint64(200) << "unknown role 200";
        QTest::newRow("method") << 1 << 20 + 37 << 1 << false << quint64(kMethodCount) << "unknown method 15";
        QTest::newRow("compression") << 1 << 20 + 40 << 1 << false << quint64(7) << "unknown compression 7";
        // a residual type this reader does not know is refused as an unknown method is, before any record is read
        QTest::newRow("residual code") << 0 << 20 + 39 << 1 << false << quint64(99)
                                       << "unknown residual code 99 (8 q8_0, 4 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 20 "
                                          "iq4_nl, 10 q2_k, 11 q3_k, 12 q4_k, 13 q5_k, 14 q6_k)";
        QTest::newRow("ggml's Q4_0 id") << 0 << 20 + 39 << 1 << false << quint64(2) << "unknown residual code 2 (";
        QTest::newRow("dimension count") << 1 << 20 + 41 << 1 << false << quint64(9) << "9 (at most 8)";
        QTest::newRow("layer") << 1 << 20 + 28 << 4 << false << quint64(0xfffffff9u) << "layer -7";
        QTest::newRow("name length") << 3 << 20 + 42 << 2 << false << quint64(0xffff) << "needs 65535 bytes";
    }
    void absurdIndexFields() {
        QFETCH(int, entry);
        QFETCH(int, field_offset);
        QFETCH(int, size);
        QFETCH(bool, add);
        QFETCH(quint64, value);
        QFETCH(QString, message);
        test::TempDir dir;
        const std::string path = write_knot(dir);
        auto b = test::read_file(path);
        const Layout l = layout_of(b);
        const uint64_t at = entry < 0 ? l.index_offset + 4 : l.entry_at[entry] + field_offset;
        uint64_t v = 0;
        std::memcpy(&v, b.data() + at, static_cast<size_t>(size));
        v = add ? v + value : value;
        std::memcpy(b.data() + at, &v, static_cast<size_t>(size));
        refresh_index_crc(b);
        test::write_file(path, b);
        auto k = KnotFile::open(path);
        QVERIFY(!k.is_ok());
        QCOMPARE(k.status().code(), StatusCode::Corrupt);
        VERIFY_CONTAINS(k.message(), path + ": index");
        VERIFY_CONTAINS(k.message(), message.toStdString());
    }

    void absurdHeaderBlock_data() {
        QTest::addColumn<QByteArray>("block");
        QTest::addColumn<QString>("message");
        auto qb = [](const std::vector<uint8_t>& v) {
            return QByteArray(reinterpret_cast<const char*>(v.data()), static_cast<qsizetype>(v.size()));
        };
        QTest::newRow("token count") << qb(doc_header_block(uint64_t(1) << 62)) << "token count";
        QTest::newRow("metadata count") << qb(doc_header_block(0, uint64_t(1) << 40)) << "metadata count";
        QTest::newRow("shard 3 of 2") << qb(doc_header_block(0, 0, 3, 2)) << "header block: shard 3 of 2";
        auto extra = doc_header_block();
        extra.push_back(0);
        QTest::newRow("trailing byte") << qb(extra) << "1 unexpected bytes after the metadata";
        auto cut = doc_header_block();
        cut.resize(cut.size() - 3);
        QTest::newRow("short") << qb(cut) << "needs 8 bytes";
        auto long_string = doc_header_block();
        long_string[0] = 0xff;
        long_string[3] = 0x7f;
        QTest::newRow("string length") << qb(long_string) << "string length 2130706687 exceeds";
    }
    void absurdHeaderBlock() {
        QFETCH(QByteArray, block);
        QFETCH(QString, message);
        test::TempDir dir;
        const std::string path = dir.file("h.knot");
        test::write_file(path, assemble(std::vector<uint8_t>(block.begin(), block.end()), 0, {}));
        auto k = KnotFile::open(path);
        QVERIFY(!k.is_ok());
        QCOMPARE(k.status().code(), StatusCode::Corrupt);
        VERIFY_CONTAINS(k.message(), path + ": header block");
        VERIFY_CONTAINS(k.message(), message.toStdString());
    }

    void indexAgainstHeader() {
        test::TempDir dir;
        // unsharded, but one record short of the model
        {
            auto w = KnotWriter::create(dir.file("short.knot"), sample_header(5));
            QVERIFY(w.is_ok());
            auto tensors = sample_tensors();
            for (size_t i = 0; i < tensors.size(); ++i) QVERIFY(w->add(tensors[i], i).is_ok());
            Status s = w->finish();
            QVERIFY(!s.is_ok());
            VERIFY_CONTAINS(s.message(), "4 records, but the header says the model has 5 tensors");
            QVERIFY(!fs::exists(dir.file("short.knot")));
        }
        // a shard may hold any subset, but source indices must stay below the model's count
        {
            KnotHeader h = sample_header(3);
            h.shard_index = 1;
            h.shard_count = 2;
            auto w = KnotWriter::create(dir.file("s.knot"), h);
            QVERIFY(w.is_ok());
            auto tensors = sample_tensors();
            QVERIFY(w->add(tensors[0], 1).is_ok());
            Status s = w->add(tensors[1], 3);
            VERIFY_CONTAINS(s.message(), "source index 3 but the header says 3 source tensors");
            QVERIFY(w->finish().is_ok());
            auto k = KnotFile::open(dir.file("s.knot"));
            QVERIFY2(k.is_ok(), k.message().c_str());
            QCOMPARE(k->n_records(), size_t(1));
            QCOMPARE(k->header().shard_index, 1u);
            QCOMPARE(k->entries()[0].source_index, uint64_t(1));
        }
    }

    void writerRejectsWhatAKnotCannotHold() {
        test::TempDir dir;
        auto w = KnotWriter::create(dir.file("w.knot"), sample_header(10));
        QVERIFY(w.is_ok());
        auto t = sample_tensors()[1];
        QVERIFY(w->add(t, 2).is_ok());
        Status dup = w->add(t, 3);
        VERIFY_CONTAINS(dup.message(), "tensor 'blk.0.attn_norm.weight' is added twice");
        t.name = "other";
        Status order = w->add(t, 2);
        VERIFY_CONTAINS(order.message(), "source index 2 after 2 (records go in source order)");
        t.name = "";
        VERIFY_CONTAINS(w->add(t, 5).message(), "empty tensor name");
        t.name = std::string(4097, 'n');
        VERIFY_CONTAINS(w->add(t, 5).message(), "tensor name of 4097 bytes (at most 4096)");
        t.name = "x";
        t.shape = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        VERIFY_CONTAINS(w->add(t, 5).message(), "9 dimensions (at most 8)");
        t.shape = {4, 0};
        VERIFY_CONTAINS(w->add(t, 5).message(), "non-positive dimension in shape 4 x 0");
        auto r = sample_tensors()[0];  // lowrank+residual
        r.name = "r";
        r.residual_code = 0;
        VERIFY_CONTAINS(w->add(r, 5).message(), "unknown residual code 0 (8 q8_0, 4 q4_0,");
        QVERIFY(!KnotWriter::create(dir.file("bad.knot"),
                                    [] {
                                        KnotHeader h;
                                        h.shard_index = 2;
                                        h.shard_count = 2;
                                        return h;
                                    }())
                     .is_ok());
    }

    void abandonedWriterLeavesNothing() {
        test::TempDir dir;
        const std::string path = dir.file("a.knot");
        {
            auto w = KnotWriter::create(path, sample_header(4));
            QVERIFY(w.is_ok());
            QVERIFY(w->add(sample_tensors()[0], 0).is_ok());
            QVERIFY(w->bytes_written() > 40);
        }  // destroyed mid-way
        QVERIFY(!fs::exists(path));
        QVERIFY(fs::is_empty(dir.path()));
        // an existing knot is left as it was when a rewrite is abandoned
        const std::string good = write_knot(dir, "a.knot");
        const auto before = test::read_file(good);
        {
            auto w = KnotWriter::create(good, sample_header(1));
            QVERIFY(w.is_ok());
        }
        QVERIFY(test::read_file(good) == before);
        QCOMPARE(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
    }

    void gzippedKnot() {
        test::TempDir dir;
        const auto plain = test::read_file(write_knot(dir));
        auto gzip = [](const uint8_t* p, size_t n) {
            std::vector<uint8_t> gz(compressBound(n) + 64);
            z_stream z{};
            deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
            z.next_in = const_cast<Bytef*>(p);
            z.avail_in = static_cast<uInt>(n);
            z.next_out = gz.data();
            z.avail_out = static_cast<uInt>(gz.size());
            if (deflate(&z, Z_FINISH) != Z_STREAM_END) qFatal("deflate failed");
            gz.resize(z.total_out);
            deflateEnd(&z);
            return gz;
        };
        std::vector<uint8_t> gz = gzip(plain.data(), plain.size());
        // two gzip members (cat a.gz b.gz) read as one file
        const size_t half = plain.size() / 2;
        std::vector<uint8_t> two = gzip(plain.data(), half);
        const auto second = gzip(plain.data() + half, plain.size() - half);
        two.insert(two.end(), second.begin(), second.end());
        test::write_file(dir.file("two.knot.gz"), two);
        auto k2 = KnotFile::open(dir.file("two.knot.gz"));
        QVERIFY2(k2.is_ok(), k2.message().c_str());
        QCOMPARE(k2->file_bytes(), uint64_t(plain.size()));
        const std::string path = dir.file("m.knot.gz");
        test::write_file(path, gz);
        auto k = KnotFile::open(path);
        QVERIFY2(k.is_ok(), k.message().c_str());
        QVERIFY(k->gzipped());
        QCOMPARE(k->file_bytes(), uint64_t(plain.size()));
        const auto tensors = sample_tensors();
        for (size_t i = 0; i < tensors.size(); ++i) {
            auto t = k->read(i);
            QVERIFY2(t.is_ok(), t.message().c_str());
            QVERIFY(same_tensor(*t, tensors[i]));
        }
        // inflating past the limit stops with a clear error
        KnotOpenOptions small;
        small.max_inflated_bytes = 100;
        auto limited = KnotFile::open(path, small);
        QVERIFY(!limited.is_ok());
        VERIFY_CONTAINS(limited.message(), path + ": inflates to more than 100 bytes, the limit for a gzipped knot");
        // a truncated gzip is reported as such
        gz.resize(gz.size() / 2);
        test::write_file(path, gz);
        auto cut = KnotFile::open(path);
        QVERIFY(!cut.is_ok());
        VERIFY_CONTAINS(cut.message(), path + ": broken gzip stream");
    }

    void crcIsZlibs() {
        const char* s = "123456789";
        QCOMPARE(knot_crc32(reinterpret_cast<const uint8_t*>(s), 9), 0xcbf43926u);  // the CRC-32 check value
    }
};

QTEST_APPLESS_MAIN(TestKnot)
#include "test_knot.moc"
