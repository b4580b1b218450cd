// GGUF reader and writer: round trips through write_gguf for every export dtype, metadata of every type and the
// vocabulary; hand-built files (byte by byte, not by the writer) with K-quants, v2 and a non-llama architecture;
// one enum case per malformed file, each failing with the file and the exact spot in its message; and prefix
// and byte-flip sweeps that must never crash.
#include "formats/model_file_data.h"
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"
#include "gkq/tokenizer.h"
#include "gkq/type_traits.h"
#include "test_support.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

using namespace gkq;
using gkq::test::Bytes;
using gkq::test::TempDir;

namespace {

// ---------------------------------------------------------------------------------------------------------
// hand-built GGUF files

void put_str(Bytes& b, std::string_view s) {
    b.u64(s.size());
    b.raw(s);
}

struct RawKv {
    std::string key;
    uint32_t type = 0;
    Bytes value;
    std::optional<uint64_t> key_len;  // written instead of key.size() when set
};

struct RawTensor {
    std::string name;
    std::vector<uint64_t> ne;  // innermost first, as stored
    uint32_t type = 0;
    uint64_t offset = 0;
};

struct RawGguf {
    char magic[4] = {'G', 'G', 'U', 'F'};
    uint32_t version = 3;
    std::optional<uint64_t> n_tensors, n_kv;  // override the real counts
    std::vector<RawKv> kvs;
    std::vector<RawTensor> tensors;
    uint64_t pad = 32;  // padding before the data section (0: none)
    std::vector<uint8_t> data;

    Bytes build(uint64_t* data_start = nullptr) const {
        Bytes b;
        b.raw(magic, 4).u32(version).u64(n_tensors.value_or(tensors.size())).u64(n_kv.value_or(kvs.size()));
        for (const RawKv& kv : kvs) {
            b.u64(kv.key_len.value_or(kv.key.size())).raw(kv.key).u32(kv.type);
            b.raw(kv.value.vec().data(), kv.value.size());
        }
        for (const RawTensor& t : tensors) {
            put_str(b, t.name);
            b.u32(static_cast<uint32_t>(t.ne.size()));
            for (uint64_t n : t.ne) b.u64(n);
            b.u32(t.type).u64(t.offset);
        }
        if (pad > 0) b.pad_to(pad);
        if (data_start) *data_start = b.size();
        b.raw(data.data(), data.size());
        return b;
    }
};

RawKv kv_str(std::string key, std::string_view s) {
    RawKv kv{std::move(key), 8, {}, {}};
    put_str(kv.value, s);
    return kv;
}
RawKv kv_u32(std::string key, uint32_t v) {
    RawKv kv{std::move(key), 4, {}, {}};
    kv.value.u32(v);
    return kv;
}
RawKv kv_u64(std::string key, uint64_t v) {
    RawKv kv{std::move(key), 10, {}, {}};
    kv.value.u64(v);
    return kv;
}
RawKv kv_f32(std::string key, float v) {
    RawKv kv{std::move(key), 6, {}, {}};
    kv.value.f32(v);
    return kv;
}
RawKv kv_raw(std::string key, uint32_t type, Bytes value) {
    return RawKv{std::move(key), type, std::move(value), {}};
}

RawKv kv_str_array(std::string key, const std::vector<std::string>& items) {
    RawKv kv{std::move(key), 9, {}, {}};
    kv.value.u32(8).u64(items.size());
    for (const auto& s : items) put_str(kv.value, s);
    return kv;
}

std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

// A valid file: llama architecture, one f32 tensor "output_norm.weight" of 8 values 0..7 at offset 0.
RawGguf base_file() {
    RawGguf g;
    g.kvs.push_back(kv_str("general.architecture", "llama"));
    g.tensors.push_back({"output_norm.weight", {8}, 0, 0});
    g.data = float_bytes({0, 1, 2, 3, 4, 5, 6, 7});
    return g;
}

// Nested arrays: `levels` arrays around one u32 value.
Bytes nested_array(int levels) {
    Bytes b;
    for (int i = 1; i < levels; ++i) b.u32(9).u64(1);
    b.u32(4).u64(1).u32(7);
    return b;
}

// ---------------------------------------------------------------------------------------------------------
// a tiny model for the writer

struct TinyModel {
    ModelConfig config;
    std::vector<std::vector<float>> storage;  // one per tensor, filled before `tensors` points into it
    std::vector<WriteTensor> tensors;
};

TinyModel make_tiny_model(int64_t dim, int64_t hidden, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                          int64_t vocab) {
    TinyModel m;
    ModelConfig& c = m.config;
    c.dim = dim;
    c.hidden_dim = hidden;
    c.n_layers = n_layers;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.vocab_size = vocab;
    c.context_length = 128;
    c.rope_theta = 500000.0;
    c.norm_eps = 1e-6;
    c.shared_classifier = false;
    const int64_t kv_dim = dim * n_kv_heads / n_heads;
    struct Spec {
        TensorRole role;
        int32_t layer;
        std::vector<int64_t> shape;
    };
    std::vector<Spec> specs = {{TensorRole::TokenEmbd, -1, {vocab, dim}}};
    for (int32_t l = 0; l < n_layers; ++l) {
        specs.push_back({TensorRole::AttnNorm, l, {dim}});
        specs.push_back({TensorRole::AttnQ, l, {dim, dim}});
        specs.push_back({TensorRole::AttnK, l, {kv_dim, dim}});
        specs.push_back({TensorRole::AttnV, l, {kv_dim, dim}});
        specs.push_back({TensorRole::AttnO, l, {dim, dim}});
        specs.push_back({TensorRole::FfnNorm, l, {dim}});
        specs.push_back({TensorRole::FfnGate, l, {hidden, dim}});
        specs.push_back({TensorRole::FfnUp, l, {hidden, dim}});
        specs.push_back({TensorRole::FfnDown, l, {dim, hidden}});
    }
    specs.push_back({TensorRole::OutputNorm, -1, {dim}});
    specs.push_back({TensorRole::Output, -1, {vocab, dim}});
    uint64_t seed = 1;
    for (const Spec& s : specs) {
        size_t n = 1;
        for (int64_t d : s.shape) n *= static_cast<size_t>(d);
        m.storage.push_back(gkq::test::random_floats(n, seed++, 0.5f));
    }
    for (size_t i = 0; i < specs.size(); ++i) {
        WriteTensor w;
        w.role = specs[i].role;
        w.layer = specs[i].layer;
        w.shape = specs[i].shape;
        w.data = m.storage[i].data();
        m.tensors.push_back(std::move(w));
    }
    return m;
}

Vocabulary make_vocab(int64_t n) {
    Vocabulary v;
    v.model = "llama";
    const std::vector<std::string> special = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", "<0x0A>", "\xff\xfe raw", ""};
    for (int64_t i = 0; i < n; ++i) {
        v.tokens.push_back(i < static_cast<int64_t>(special.size()) ? special[i] : "tok" + std::to_string(i));
        v.scores.push_back(-0.25f * static_cast<float>(i));
        v.token_types.push_back(i < 3 ? 3 : (i == 4 ? 6 : 1));
    }
    v.bos_id = 1;
    v.eos_id = 2;
    return v;
}

// What the reader must return for `src` stored as `dtype` (the writer's encoder then the exact decoder).
std::vector<float> expected_values(DType dtype, const std::vector<float>& src) {
    std::vector<float> out(src.size());
    switch (dtype) {
        case DType::F32: return src;
        case DType::F16:
            for (size_t i = 0; i < src.size(); ++i) out[i] = f16_to_f32(f32_to_f16(src[i]));
            return out;
        case DType::BF16:
            for (size_t i = 0; i < src.size(); ++i) out[i] = bf16_to_f32(f32_to_bf16(src[i]));
            return out;
        default: {
            std::vector<uint8_t> blocks(*dtype_storage_bytes(dtype, src.size()));
            if (dtype == DType::Q8_0)
                quantize_q8_0(src.data(), src.size(), blocks.data());
            else
                quantize_q4_0(src.data(), src.size(), blocks.data());
            if (!convert_to_f32(dtype, blocks.data(), src.size(), out.data())) return {};
            return out;
        }
    }
}

MetaValue typed_int(int64_t v, MetaType t) {
    MetaValue m = MetaValue::of_int(v);
    m.type = t;
    return m;
}

MetaValue array_of(MetaType t, std::vector<MetaValue> items) {
    MetaValue m;
    m.type = MetaType::Array;
    m.array_type = t;
    m.array = std::move(items);
    return m;
}

bool meta_equal(const MetaValue& a, const MetaValue& b) {
    if (a.type != b.type) return false;
    if (a.type != MetaType::Array) return a.scalar == b.scalar;
    if (a.array_type != b.array_type || a.array.size() != b.array.size()) return false;
    for (size_t i = 0; i < a.array.size(); ++i)
        if (!meta_equal(a.array[i], b.array[i])) return false;
    return true;
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// ---------------------------------------------------------------------------------------------------------
// malformed files

enum class Bad {
    Magic,
    Version1,
    Version4,
    BigEndian,
    TruncatedHeader,
    TruncatedKvString,
    AbsurdKvCount,
    AbsurdTensorCount,
    AbsurdKeyLength,
    AbsurdStringLength,
    BadValueType,
    AbsurdArrayCount,
    BadArrayElementType,
    NestedTooDeep,
    BoolNotZeroOne,
    DuplicateKey,
    EmptyKey,
    NonUtf8Key,
    NDimsZero,
    NDimsFive,
    UnknownGgmlType,
    OffsetNotAligned,
    OffsetPastEnd,
    SizePastEnd,
    OverlappingTensors,
    DuplicateTensorNames,
    NonUtf8TensorName,
    EmptyTensorName,
    AlignmentZero,
    AlignmentThree,
    AlignmentWrongType,
    NotBlockMultiple,
    ZeroDimension,
    HugeDimension,
    MissingArchitecture,
    ConfigKeyWrongType,
    ScoresLengthMismatch,
    TokensNotStrings,
};

struct BadCase {
    Bytes bytes;
    StatusCode code;
    QStringList needles;
};

// Offsets below: the header is 24 bytes; "general.architecture" = "llama" takes 8 + 20 + 4 + 8 + 5 = 45.
BadCase make_bad(Bad kind) {
    RawGguf g = base_file();
    const StatusCode corrupt = StatusCode::Corrupt;
    switch (kind) {
        case Bad::Magic: std::memcpy(g.magic, "GGUX", 4); return {g.build(), corrupt, {"not a GGUF file", "\"GGUX\""}};
        case Bad::Version1: g.version = 1; return {g.build(), StatusCode::Unsupported, {"unsupported GGUF version 1"}};
        case Bad::Version4: g.version = 4; return {g.build(), StatusCode::Unsupported, {"unsupported GGUF version 4"}};
        case Bad::BigEndian:
            g.version = 0x03000000u;
            return {g.build(), StatusCode::Unsupported, {"big-endian GGUF v3"}};
        case Bad::TruncatedHeader: {
            Bytes b = g.build();
            b.vec().resize(12);
            return {b, corrupt, {"tensor_count at offset 8", "truncated"}};
        }
        case Bad::TruncatedKvString: {
            g.tensors.clear();
            g.data.clear();
            g.pad = 0;
            Bytes v;
            v.u64(10).raw("abc");  // 10 bytes promised, the file ends after 3
            g.kvs.push_back(kv_raw("general.name", 8, v));
            // second KV starts at 24 + 45; its string length field at + 8 + 12 + 4
            return {
                g.build(), corrupt, {"metadata 'general.name' at offset 93", "string length 10 exceeds the 3 bytes"}};
        }
        case Bad::AbsurdKvCount:
            g.n_kv = uint64_t{1} << 60;
            return {g.build(), corrupt, {"metadata_kv_count at offset 16", "1152921504606846976 key/value pairs"}};
        case Bad::AbsurdTensorCount:
            g.n_tensors = uint64_t{1} << 40;
            return {g.build(), corrupt, {"tensor_count at offset 8", "1099511627776 tensor infos"}};
        case Bad::AbsurdKeyLength:
            g.kvs[0].key_len = uint64_t{1} << 63;
            return {
                g.build(),
                corrupt,
                {"metadata entry 0 key at offset 24", "string length 9223372036854775808 exceeds the limit of 65535"}};
        case Bad::AbsurdStringLength: {
            Bytes v;
            v.u64(uint64_t{1} << 62).raw("llama");
            g.kvs[0] = kv_raw("general.architecture", 8, v);
            return {g.build(),
                    corrupt,
                    {"metadata 'general.architecture' at offset 56", "string length 4611686018427387904"}};
        }
        case Bad::BadValueType:
            g.kvs.insert(g.kvs.begin(), kv_raw("x.bad", 13, Bytes().u32(0)));
            return {g.build(), corrupt, {"metadata 'x.bad' at offset 37", "unknown value type 13"}};
        case Bad::AbsurdArrayCount:
            g.kvs.insert(g.kvs.begin(), kv_raw("x.arr", 9, Bytes().u32(4).u64(uint64_t{1} << 40)));
            return {
                g.build(),
                corrupt,
                {"metadata 'x.arr' at offset 41", "array of 1099511627776 u32 values needs at least 4398046511104"}};
        case Bad::BadArrayElementType:
            g.kvs.insert(g.kvs.begin(), kv_raw("x.arr", 9, Bytes().u32(99).u64(1).u32(0)));
            return {g.build(), corrupt, {"metadata 'x.arr' at offset 41", "unknown array element type 99"}};
        case Bad::NestedTooDeep:
            g.kvs.push_back(kv_raw("x.deep", 9, nested_array(9)));
            return {g.build(), corrupt, {"metadata 'x.deep'", "arrays nested deeper than 8 levels"}};
        case Bad::BoolNotZeroOne:
            g.kvs.push_back(kv_raw("x.flag", 7, Bytes().u8(2)));
            return {g.build(), corrupt, {"metadata 'x.flag' at offset 87", "bool value 2 is neither 0 nor 1"}};
        case Bad::DuplicateKey:
            g.kvs.push_back(kv_str("general.architecture", "llama"));
            return {g.build(), corrupt, {"metadata 'general.architecture' at offset 69", "appears more than once"}};
        case Bad::EmptyKey:
            g.kvs.push_back(kv_u32("", 1));
            return {g.build(), corrupt, {"metadata entry 1 key at offset 69", "the key is empty"}};
        case Bad::NonUtf8Key:
            g.kvs.push_back(kv_u32("bad\xff", 1));
            return {g.build(), corrupt, {"metadata entry 1 key at offset 69", "not valid UTF-8"}};
        case Bad::NDimsZero:
            g.tensors[0].ne = {};
            return {g.build(), corrupt, {"tensor 'output_norm.weight' at offset 95", "n_dims 0 is outside 1..4"}};
        case Bad::NDimsFive:
            g.tensors[0].ne = {8, 1, 1, 1, 1};
            return {g.build(), corrupt, {"tensor 'output_norm.weight' at offset 95", "n_dims 5 is outside 1..4"}};
        case Bad::UnknownGgmlType:
            g.tensors[0].type = 33;
            return {g.build(),
                    StatusCode::Unsupported,
                    {"tensor 'output_norm.weight' at offset 107", "unknown ggml type id 33"}};
        case Bad::OffsetNotAligned:
            g.tensors[0].offset = 4;
            g.data.resize(64);
            return {g.build(),
                    corrupt,
                    {"tensor 'output_norm.weight'", "data offset 4 is not a multiple of the alignment 32"}};
        case Bad::OffsetPastEnd:
            g.tensors[0].offset = 1 << 20;
            return {g.build(),
                    corrupt,
                    {"tensor 'output_norm.weight'", "data offset 1048576 (absolute 128 + 1048576) is past the end"}};
        case Bad::SizePastEnd:
            g.tensors[0].ne = {64};
            return {g.build(),
                    corrupt,
                    {"tensor 'output_norm.weight'",
                     "256 bytes of F32 data at offset 128 run past the end of the file (160 bytes)"}};
        case Bad::OverlappingTensors:
            g.tensors = {{"a.weight", {16}, 0, 0}, {"b.weight", {8}, 0, 32}};
            g.data.resize(96);
            return {g.build(), corrupt, {"the data of tensors 'a.weight' and 'b.weight' overlap"}};
        case Bad::DuplicateTensorNames:
            g.tensors.push_back({"output_norm.weight", {8}, 0, 32});
            g.data.resize(64);
            return {
                g.build(), corrupt, {"tensor 'output_norm.weight' at offset 119", "the name appears more than once"}};
        case Bad::NonUtf8TensorName:
            g.tensors[0].name = "w\xc3(";
            return {g.build(), corrupt, {"tensor info 0 name at offset 69", "the name is not valid UTF-8"}};
        case Bad::EmptyTensorName:
            g.tensors[0].name = "";
            return {g.build(), corrupt, {"tensor info 0 name at offset 69", "the name is empty"}};
        case Bad::AlignmentZero:
            g.kvs.push_back(kv_u32("general.alignment", 0));
            return {g.build(), corrupt, {"metadata 'general.alignment' = 0 is not a non-zero power of two"}};
        case Bad::AlignmentThree:
            g.kvs.push_back(kv_u32("general.alignment", 3));
            return {g.build(), corrupt, {"metadata 'general.alignment' = 3 is not a non-zero power of two"}};
        case Bad::AlignmentWrongType:
            g.kvs.push_back(kv_u64("general.alignment", 32));
            return {g.build(), corrupt, {"metadata 'general.alignment' has type u64; expected u32"}};
        case Bad::NotBlockMultiple:
            g.tensors[0] = {"blk.0.attn_q.weight", {16, 2}, 8, 0};  // Q8_0 rows of 16
            g.data.resize(68);
            return {g.build(),
                    corrupt,
                    {"tensor 'blk.0.attn_q.weight'",
                     "row length ne[0] = 16 (element count 32) is not a multiple of the Q8_0 block size 32"}};
        case Bad::ZeroDimension:
            g.tensors[0].ne = {8, 0};
            return {g.build(), corrupt, {"tensor 'output_norm.weight' ne[1] at offset 107", "zero dimension"}};
        case Bad::HugeDimension:
            g.tensors[0].ne = {uint64_t{1} << 40, uint64_t{1} << 40};
            return {g.build(), corrupt, {"tensor 'output_norm.weight' ne[1]", "element count overflow"}};
        case Bad::MissingArchitecture:
            g.kvs.clear();
            return {g.build(), corrupt, {"metadata 'general.architecture' is missing"}};
        case Bad::ConfigKeyWrongType:
            g.kvs.push_back(kv_str("llama.block_count", "two"));
            return {g.build(), corrupt, {"metadata 'llama.block_count' has type string; expected an integer"}};
        case Bad::ScoresLengthMismatch: {
            g.kvs.push_back(kv_str_array("tokenizer.ggml.tokens", {"a", "b", "c"}));
            g.kvs.push_back(kv_raw("tokenizer.ggml.scores", 9, Bytes().u32(6).u64(2).f32(0).f32(1)));
            return {
                g.build(), corrupt, {"metadata 'tokenizer.ggml.scores' has 2 entries but tokenizer.ggml.tokens has 3"}};
        }
        case Bad::TokensNotStrings:
            g.kvs.push_back(kv_raw("tokenizer.ggml.tokens", 9, Bytes().u32(4).u64(1).u32(5)));
            return {g.build(),
                    corrupt,
                    {"metadata 'tokenizer.ggml.tokens' has type array of u32; expected array of string"}};
    }
    return {};
}

// ModelFile::open, except for a bad magic: format detection would not hand that file to the GGUF reader.
Status open_status(Bad kind, const std::string& path) {
    if (kind == Bad::Magic) {
        auto r = read_gguf(path);
        return r ? Status::ok() : r.status();
    }
    auto r = ModelFile::open(path);
    return r ? Status::ok() : r.status();
}

bool is_rejection(StatusCode c) {
    return c == StatusCode::Corrupt || c == StatusCode::Unsupported;
}

}  // namespace

Q_DECLARE_METATYPE(DType)

class TestGguf : public QObject {
    Q_OBJECT

private slots:
    // ---- writer -> reader
    void roundTripDtypes_data();
    void roundTripDtypes();
    void metadataRoundTrip();
    void vocabularyRoundTrip();
    void llama2cVocabularyWrittenAsSpm();
    void writerRejectsBadInput();
    void halfSplitQkReordered();

    // ---- hand-built files
    void handBuiltQ4K();
    void handBuiltV2OtherArchitecture();
    void ggmlTypeSizes_data();
    void ggmlTypeSizes();
    void unknownTypeIdsRejected();

    // ---- malformed files
    void malformed_data();
    void malformed();
    void truncationSweep();
    void byteFlipSweep();
};

void TestGguf::roundTripDtypes_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<QString>("typeName");
    QTest::newRow("f32") << DType::F32 << "F32";
    QTest::newRow("f16") << DType::F16 << "F16";
    QTest::newRow("bf16") << DType::BF16 << "BF16";
    QTest::newRow("q8_0") << DType::Q8_0 << "Q8_0";
    QTest::newRow("q4_0") << DType::Q4_0 << "Q4_0";
}

void TestGguf::roundTripDtypes() {
    QFETCH(DType, dtype);
    QFETCH(QString, typeName);
    TempDir dir;
    const std::string path = dir.file("tiny.gguf");
    TinyModel m = make_tiny_model(64, 96, 2, 4, 2, 40);
    WriteOptions opt;
    opt.dtype = dtype;
    Status ws = write_gguf(path, m.config, m.tensors, {}, opt);
    QVERIFY2(ws.is_ok(), ws.message().c_str());

    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    const ModelFile& f = *r;
    QCOMPARE(f.format(), ModelFormat::Gguf);
    QCOMPARE(f.format_detail(), std::string("gguf v3"));
    const ModelConfig& c = f.config();
    QCOMPARE(c.architecture, std::string("llama"));
    QCOMPARE(c.dim, int64_t{64});
    QCOMPARE(c.hidden_dim, int64_t{96});
    QCOMPARE(c.n_layers, int64_t{2});
    QCOMPARE(c.n_heads, int64_t{4});
    QCOMPARE(c.n_kv_heads, int64_t{2});
    QCOMPARE(c.vocab_size, int64_t{40});
    QCOMPARE(c.context_length, int64_t{128});
    QCOMPARE(c.rope_theta, 500000.0);
    QCOMPARE(c.norm_eps, static_cast<double>(1e-6f));
    QCOMPARE(c.shared_classifier, false);
    QVERIFY(f.vocabulary().empty());

    const std::vector<uint8_t> file = gkq::test::read_file(path);
    QCOMPARE(f.tensors().size(), m.tensors.size());
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const WriteTensor& w = m.tensors[i];
        const Tensor& t = f.tensors()[i];
        QCOMPARE(t.name, gguf_name(w.role, w.layer));
        QCOMPARE(t.role, w.role);
        QCOMPARE(t.layer, w.layer);
        QCOMPARE(t.shape, w.shape);
        const DType stored = w.shape.size() == 1 ? DType::F32 : dtype;
        QCOMPARE(t.dtype, stored);
        QCOMPARE(q(t.type_name), w.shape.size() == 1 ? QString("F32") : typeName);
        QCOMPARE(t.n_bytes, *dtype_storage_bytes(stored, m.storage[i].size()));
        QCOMPARE(t.file_offset % 32, uint64_t{0});
        QVERIFY(t.file_offset + t.n_bytes <= file.size());
        QVERIFY(std::memcmp(file.data() + t.file_offset, t.data, t.n_bytes) == 0);  // file_offset is absolute

        auto values = tensor_to_f32(t);
        QVERIFY2(values.is_ok(), values.message().c_str());
        const std::vector<float> want = expected_values(stored, m.storage[i]);
        QCOMPARE(values->size(), want.size());
        QVERIFY2(std::memcmp(values->data(), want.data(), want.size() * 4) == 0, t.name.c_str());  // bit identical
    }
}

void TestGguf::metadataRoundTrip() {
    TempDir dir;
    const std::string path = dir.file("meta.gguf");
    TinyModel m = make_tiny_model(32, 32, 1, 2, 2, 8);
    WriteOptions opt;
    Metadata& x = opt.extra_metadata;
    x.set("test.u8", MetaValue::of_uint(200, MetaType::U8));
    x.set("test.i8", typed_int(-100, MetaType::I8));
    x.set("test.u16", MetaValue::of_uint(60000, MetaType::U16));
    x.set("test.i16", typed_int(-30000, MetaType::I16));
    x.set("test.u32", MetaValue::of_uint(4000000000u, MetaType::U32));
    x.set("test.i32", typed_int(-2000000000, MetaType::I32));
    x.set("test.f32", MetaValue::of_float(3.25, MetaType::F32));
    x.set("test.bool", MetaValue::of_bool(true));
    x.set("test.string", MetaValue::of_string("h\xc3\xa9llo"));
    x.set("test.u64", MetaValue::of_uint((uint64_t{1} << 63) + 5));
    x.set("test.i64", MetaValue::of_int(INT64_MIN));
    x.set("test.f64", MetaValue::of_float(0.1));
    x.set("test.strings",
          array_of(MetaType::String, {MetaValue::of_string("a"), MetaValue::of_string(""), MetaValue::of_string("c")}));
    x.set("test.nested",
          array_of(MetaType::Array,
                   {array_of(MetaType::I32, {typed_int(1, MetaType::I32), typed_int(-2, MetaType::I32)}),
                    array_of(MetaType::I32, {typed_int(3, MetaType::I32)}), array_of(MetaType::I32, {})}));
    x.set("test.empty", array_of(MetaType::F64, {}));
    x.set("test.bools", array_of(MetaType::Bool, {MetaValue::of_bool(false), MetaValue::of_bool(true)}));
    x.set("general.name", MetaValue::of_string("tiny"));
    Status ws = write_gguf(path, m.config, m.tensors, {}, opt);
    QVERIFY2(ws.is_ok(), ws.message().c_str());

    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    const Metadata& meta = r->metadata();
    for (const auto& [key, value] : x.entries) {
        const MetaValue* got = meta.find(key);
        QVERIFY2(got != nullptr, key.c_str());
        QVERIFY2(meta_equal(*got, value), (key + ": " + got->to_display() + " vs " + value.to_display()).c_str());
    }
    // the derived keys, with the types llama.cpp expects, ahead of the extra keys in file order
    QCOMPARE(meta.entries.front().first, std::string("general.architecture"));
    QCOMPARE(meta.find("general.alignment")->type, MetaType::U32);
    QCOMPARE(*meta.find("general.alignment")->as_int(), int64_t{32});
    QCOMPARE(meta.find("llama.block_count")->type, MetaType::U32);
    QCOMPARE(meta.find("llama.rope.freq_base")->type, MetaType::F32);
    QCOMPARE(meta.find("llama.attention.layer_norm_rms_epsilon")->type, MetaType::F32);
    QCOMPARE(meta.entries.back().first, std::string("general.name"));
    QCOMPARE(*meta.find("general.file_type")->as_int(), int64_t{0});  // LLAMA_FTYPE_ALL_F32
    QCOMPARE(meta.entries.size(), size_t{12} + x.entries.size());     // 3 general + 9 llama.* keys
}

void TestGguf::vocabularyRoundTrip() {
    TempDir dir;
    const std::string path = dir.file("vocab.gguf");
    TinyModel m = make_tiny_model(32, 32, 1, 2, 1, 12);
    m.config.vocab_size = 0;  // not written: the reader takes it from the tokens (10), not token_embd (12)
    const Vocabulary vocab = make_vocab(10);
    Status ws = write_gguf(path, m.config, m.tensors, vocab);
    QVERIFY2(ws.is_ok(), ws.message().c_str());

    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    QVERIFY(r->metadata().find("llama.vocab_size") == nullptr);
    const Vocabulary& v = r->vocabulary();
    QCOMPARE(v.model, std::string("llama"));
    QCOMPARE(v.tokens, vocab.tokens);  // raw bytes, including the non-UTF-8 and the empty token
    QCOMPARE(v.scores, vocab.scores);
    QCOMPARE(v.token_types, vocab.token_types);
    QCOMPARE(v.bos_id, 1);
    QCOMPARE(v.eos_id, 2);
    QCOMPARE(r->config().vocab_size, int64_t{10});
    QCOMPARE(r->metadata().find("tokenizer.ggml.token_type")->array_type, MetaType::I32);
    QCOMPARE(r->metadata().find("tokenizer.ggml.bos_token_id")->type, MetaType::U32);
}

// A llama2.c tokenizer.bin's vocabulary is written as the llama (SPM) vocabulary llama.cpp loads: pieces with U+2581
// for spaces, BOS / EOS as <s> / </s> of type CONTROL, <unk> UNKNOWN, <0xXX> BYTE; gkq tokenizes the file's vocabulary
// as it does the tokenizer.bin. A vocabulary whose pieces collide once converted is refused.
void TestGguf::llama2cVocabularyWrittenAsSpm() {
    TempDir dir;
    const std::string path = dir.file("l2c.gguf");
    TinyModel m = make_tiny_model(32, 32, 1, 2, 1, 12);
    Vocabulary l2c;
    l2c.model = "llama2.c";
    l2c.bos_id = 1;
    l2c.eos_id = 2;
    const std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", "<0x61>", " ",      "a",
                                             "b",     " a",      "ab",       " ab",    "a b",    "<0x0a>", "c"};
    for (size_t i = 0; i < pieces.size(); ++i) {
        l2c.tokens.push_back(pieces[i]);
        l2c.scores.push_back(-static_cast<float>(i));
    }
    m.config.vocab_size = static_cast<int64_t>(pieces.size());
    Status ws = write_gguf(path, m.config, m.tensors, l2c);
    QVERIFY2(ws.is_ok(), ws.message().c_str());

    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    const Vocabulary& v = r->vocabulary();
    const std::string sp = "\xE2\x96\x81";
    QCOMPARE(v.model, std::string("llama"));
    const std::vector<std::string> want = {"<unk>", "<s>",    "</s>", "<0x0A>",  "<0x61>",       sp,       "a",
                                           "b",     sp + "a", "ab",   sp + "ab", "a" + sp + "b", "<0x0a>", "c"};
    QCOMPARE(v.tokens, want);
    QCOMPARE(v.scores, l2c.scores);
    // 1 normal, 2 unknown, 3 control, 6 byte; a lower-case <0x0a> is not one llama.cpp's byte_to_token finds
    const std::vector<int32_t> types = {2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    QCOMPARE(v.token_types, types);
    QCOMPARE(v.bos_id, 1);
    QCOMPARE(v.eos_id, 2);
    const Metadata& meta = r->metadata();
    QCOMPARE(*meta.find("tokenizer.ggml.unknown_token_id")->as_int(), int64_t{0});
    QCOMPARE(meta.find("tokenizer.ggml.unknown_token_id")->type, MetaType::U32);
    QCOMPARE(std::get<bool>(meta.find("tokenizer.ggml.add_bos_token")->scalar), true);
    QCOMPARE(std::get<bool>(meta.find("tokenizer.ggml.add_eos_token")->scalar), false);

    auto a = Tokenizer::from_vocabulary(l2c, "l2c");
    auto b = Tokenizer::from_vocabulary(v, path);
    QVERIFY2(a.is_ok() && b.is_ok(), (a.message() + b.message()).c_str());
    for (const char* text : {"a b", "ab ab a", "cab\nba", "", "\xc3\xa9 a"}) {
        const std::vector<int32_t> ia = a->encode(text, true, false);
        QCOMPARE(b->encode(text, true, false), ia);
        const std::vector<int32_t> text_ids(ia.begin() + 1, ia.end());  // a llama2.c BOS decodes to "\n<s>\n"
        QCOMPARE(QString::fromStdString(b->decode_all(text_ids)), QString::fromStdString(a->decode_all(text_ids)));
    }

    Vocabulary clash = l2c;
    clash.tokens[13] = sp + "ab";  // the same text as " ab" once spaces are U+2581
    const Status cs = write_gguf(dir.file("clash.gguf"), m.config, m.tensors, clash);
    QCOMPARE(cs.code(), StatusCode::InvalidArgument);
    QVERIFY2(cs.message().find("tokens 10 and 13") != std::string::npos, cs.message().c_str());
    QVERIFY(!std::filesystem::exists(dir.file("clash.gguf")));
}

void TestGguf::writerRejectsBadInput() {
    TempDir dir;
    const std::string path = dir.file("bad.gguf");
    auto expect_invalid = [&](const Status& s, const std::string& needle) {
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY2(s.message().find(path) != std::string::npos, s.message().c_str());
        QVERIFY2(s.message().find(needle) != std::string::npos, s.message().c_str());
        QVERIFY(std::filesystem::is_empty(dir.path()));  // nothing written, no temporary left behind
    };
    TinyModel m = make_tiny_model(32, 32, 1, 2, 2, 8);
    std::vector<float> odd(4 * 48, 0.5f);
    std::vector<WriteTensor> t = m.tensors;
    t.push_back({TensorRole::Other, -1, {4, 48}, odd.data(), "extra.weight", {}});
    WriteOptions q8;
    q8.dtype = DType::Q8_0;
    expect_invalid(write_gguf(path, m.config, t, {}, q8),
                   "tensor 'extra.weight' (4 x 48): rows of 48 elements; q8_0 needs a multiple of 32");
    WriteOptions q4;
    q4.dtype = DType::Q4_0;
    expect_invalid(write_gguf(path, m.config, t, {}, q4), "q4_0 needs a multiple of 32");

    WriteOptions i8;
    i8.dtype = DType::I8;
    expect_invalid(write_gguf(path, m.config, m.tensors, {}, i8), "not i8");

    t = m.tensors;
    t.push_back(t.front());
    expect_invalid(write_gguf(path, m.config, t, {}), "tensor 'token_embd.weight' is given more than once");

    t = m.tensors;
    t.push_back({TensorRole::Other, -1, {2, 2, 2, 2, 2}, odd.data(), "five.d", {}});
    expect_invalid(write_gguf(path, m.config, t, {}), "tensor 'five.d': GGUF tensors have 1 to 4 dimensions, not 5");

    WriteOptions bad_meta;
    bad_meta.extra_metadata.set("x.small", MetaValue::of_uint(300, MetaType::U8));
    expect_invalid(write_gguf(path, m.config, m.tensors, {}, bad_meta), "metadata 'x.small': value does not fit u8");

    WriteOptions align;
    align.extra_metadata.set("general.alignment", MetaValue::of_uint(64, MetaType::U32));
    expect_invalid(write_gguf(path, m.config, m.tensors, {}, align), "may not set 'general.alignment'");

    Vocabulary v = make_vocab(8);
    v.scores.pop_back();
    expect_invalid(write_gguf(path, m.config, m.tensors, v), "vocabulary has 8 tokens but 7 scores");
}

// A HF-layout (half-split) model is written with q/k rows permuted as llama.cpp's converter does; the rest as is.
void TestGguf::halfSplitQkReordered() {
    TempDir dir;
    const std::string path = dir.file("hf.gguf");
    TinyModel m = make_tiny_model(32, 32, 1, 4, 2, 8);  // head_size 8: q has 4 heads, k 2
    m.config.rope_style = RopeStyle::HalfSplit;
    Status ws = write_gguf(path, m.config, m.tensors, {});
    QVERIFY2(ws.is_ok(), ws.message().c_str());
    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    QCOMPARE(r->config().rope_style, RopeStyle::Interleaved);
    const int64_t hs = 8, cols = 32;
    int n_reordered = 0;
    for (size_t k = 0; k < m.tensors.size(); ++k) {
        const WriteTensor& w = m.tensors[k];
        auto got = tensor_to_f32(*r->find(w.role, w.layer));
        QVERIFY(got.is_ok());
        if (w.shape.size() == 1) {
            QCOMPARE(*got, m.storage[k]);
            continue;
        }
        const bool rotary = w.role == TensorRole::AttnQ || w.role == TensorRole::AttnK;
        for (int64_t row = 0; row < w.shape[0]; ++row) {
            // interleaved row h*hs + 2i + j holds HF row h*hs + j*hs/2 + i
            const int64_t h = row / hs, i = row % hs / 2, j = row % 2;
            const int64_t src_row = rotary ? h * hs + j * hs / 2 + i : row;
            QVERIFY(std::memcmp(got->data() + row * cols, m.storage[k].data() + src_row * cols, cols * 4) == 0);
        }
        n_reordered += rotary;
    }
    QCOMPARE(n_reordered, 2);

    m.config.n_heads = 3;  // 32 is not a whole number of heads
    Status bad = write_gguf(dir.file("bad.gguf"), m.config, m.tensors, {});
    QCOMPARE(bad.code(), StatusCode::InvalidArgument);
    QVERIFY2(bad.message().find("tensor 'blk.0.attn_q.weight' (32 x 32) cannot be reordered") != std::string::npos,
             bad.message().c_str());
}

void TestGguf::handBuiltQ4K() {
    TempDir dir;
    const std::string path = dir.file("q4k.gguf");
    RawGguf g;
    g.kvs.push_back(kv_str("general.architecture", "llama"));
    g.kvs.push_back(kv_u32("llama.embedding_length", 256));
    g.tensors.push_back({"blk.0.attn_q.weight", {256, 2}, 12, 0});  // Q4_K: 2 rows x 1 block of 144 bytes
    g.tensors.push_back({"output_norm.weight", {8}, 0, 288});
    g.data.resize(288);
    for (size_t i = 0; i < g.data.size(); ++i) g.data[i] = static_cast<uint8_t>(i * 7);
    const std::vector<float> norm = {0.5f, -1, 2, -3, 4.25f, 5, 6, 7};
    const std::vector<uint8_t> nb = float_bytes(norm);
    g.data.insert(g.data.end(), nb.begin(), nb.end());
    uint64_t data_start = 0;
    gkq::test::write_file(path, g.build(&data_start).vec());

    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    const Tensor* t = r->find("blk.0.attn_q.weight");
    QVERIFY(t != nullptr);
    QCOMPARE(t->dtype, DType::Q4_K);
    QCOMPARE(t->type_name, std::string("Q4_K"));
    QCOMPARE(t->n_bytes, uint64_t{288});
    QCOMPARE(t->shape, (std::vector<int64_t>{2, 256}));
    QCOMPARE(t->role, TensorRole::AttnQ);
    QCOMPARE(t->layer, 0);
    QCOMPARE(t->file_offset, data_start);
    QCOMPARE(t->data[5], uint8_t{35});
    auto values = tensor_to_f32(*t);  // through the type table's Q4_K row (bit-exactness: test_kquants)
    QVERIFY2(values.is_ok(), values.message().c_str());
    std::vector<float> want(512);
    type_traits(DType::Q4_K).to_f32(t->data, want.data(), 512);
    QVERIFY(std::memcmp(values->data(), want.data(), 512 * 4) == 0);

    const Tensor* n = r->find(TensorRole::OutputNorm, -1);
    QVERIFY(n != nullptr);
    QCOMPARE(n->file_offset, data_start + 288);
    auto nv = tensor_to_f32(*n);
    QVERIFY(nv.is_ok());
    QCOMPARE(*nv, norm);
    QCOMPARE(r->config().dim, int64_t{256});
    QCOMPARE(r->n_params(), int64_t{512 + 8});
    QCOMPARE(r->n_tensor_bytes(), uint64_t{288 + 32});
}

void TestGguf::handBuiltV2OtherArchitecture() {
    TempDir dir;
    const std::string path = dir.file("qwen.gguf");
    RawGguf g;
    g.version = 2;
    g.pad = 64;
    g.kvs.push_back(kv_str("general.architecture", "qwen2"));
    g.kvs.push_back(kv_u32("general.alignment", 64));
    g.kvs.push_back(kv_u64("qwen2.embedding_length", 16));
    g.kvs.push_back(kv_u64("qwen2.block_count", 1));
    g.kvs.push_back(kv_u32("qwen2.attention.head_count", 4));
    g.kvs.push_back(kv_u64("qwen2.context_length", 4096));
    g.kvs.push_back(kv_f32("qwen2.rope.freq_base", 1e6f));
    g.kvs.push_back(kv_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f));
    g.kvs.push_back(kv_str_array("tokenizer.ggml.tokens", {"a", "b", "c"}));
    g.kvs.push_back(kv_raw("x.deep", 9, nested_array(8)));             // the deepest nesting accepted
    g.tensors.push_back({"token_embd.weight", {16, 3}, 1, 0});         // F16, 96 bytes
    g.tensors.push_back({"blk.0.ffn_gate.weight", {16, 5}, 30, 128});  // BF16, 160 bytes at the next 64 boundary
    const std::vector<float> src = gkq::test::random_floats(48 + 80, 9);
    std::vector<uint16_t> halves(src.size());
    encode_f16(src.data(), 48, halves.data());
    encode_bf16(src.data() + 48, 80, halves.data() + 48);
    g.data.resize(128 + 160);
    std::memcpy(g.data.data(), halves.data(), 96);
    std::memcpy(g.data.data() + 128, halves.data() + 48, 160);
    uint64_t data_start = 0;
    gkq::test::write_file(path, g.build(&data_start).vec());
    QCOMPARE(data_start % 64, uint64_t{0});

    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    QCOMPARE(r->format_detail(), std::string("gguf v2"));
    const ModelConfig& c = r->config();
    QCOMPARE(c.architecture, std::string("qwen2"));
    QCOMPARE(c.dim, int64_t{16});
    QCOMPARE(c.n_layers, int64_t{1});
    QCOMPARE(c.n_heads, int64_t{4});
    QCOMPARE(c.n_kv_heads, int64_t{4});  // head_count_kv absent: defaults to head_count
    QCOMPARE(c.context_length, int64_t{4096});
    QCOMPARE(c.rope_theta, 1e6);
    QCOMPARE(c.norm_eps, static_cast<double>(1e-6f));
    QCOMPARE(c.vocab_size, int64_t{3});  // from the tokens
    QCOMPARE(c.hidden_dim, int64_t{5});  // from ffn_gate's shape
    QCOMPARE(r->vocabulary().tokens, (std::vector<std::string>{"a", "b", "c"}));

    const Tensor* e = r->find("token_embd.weight");
    const Tensor* gate = r->find("blk.0.ffn_gate.weight");
    QVERIFY(e && gate);
    QCOMPARE(e->shape, (std::vector<int64_t>{3, 16}));
    QCOMPARE(gate->shape, (std::vector<int64_t>{5, 16}));
    QCOMPARE(gate->file_offset, data_start + 128);
    auto ev = tensor_to_f32(*e);
    auto gv = tensor_to_f32(*gate);
    QVERIFY(ev.is_ok() && gv.is_ok());
    for (size_t i = 0; i < 48; ++i) QCOMPARE((*ev)[i], f16_to_f32(halves[i]));
    for (size_t i = 0; i < 80; ++i) QCOMPARE((*gv)[i], bf16_to_f32(halves[48 + i]));
}

// Block sizes from llama.cpp's ggml-common.h, written out here independently of gguf_layout.h's table.
void TestGguf::ggmlTypeSizes_data() {
    QTest::addColumn<uint32_t>("id");
    QTest::addColumn<QString>("name");
    QTest::addColumn<quint64>("bytesPer256");
    QTest::addColumn<DType>("dtype");
    struct Row {
        uint32_t id;
        const char* name;
        quint64 bytes;
        DType dtype;
    };
    const Row rows[] = {
        {0, "F32", 1024, DType::F32},       {1, "F16", 512, DType::F16},       {2, "Q4_0", 144, DType::Q4_0},
        {3, "Q4_1", 160, DType::Q4_1},      {6, "Q5_0", 176, DType::Q5_0},     {7, "Q5_1", 192, DType::Q5_1},
        {8, "Q8_0", 272, DType::Q8_0},      {9, "Q8_1", 288, DType::Other},    {10, "Q2_K", 84, DType::Q2_K},
        {11, "Q3_K", 110, DType::Q3_K},     {12, "Q4_K", 144, DType::Q4_K},    {13, "Q5_K", 176, DType::Q5_K},
        {14, "Q6_K", 210, DType::Q6_K},     {15, "Q8_K", 292, DType::Q8_K},    {16, "IQ2_XXS", 66, DType::Other},
        {17, "IQ2_XS", 74, DType::Other},   {18, "IQ3_XXS", 98, DType::Other}, {19, "IQ1_S", 50, DType::Other},
        {20, "IQ4_NL", 144, DType::IQ4_NL}, {21, "IQ3_S", 110, DType::Other},  {22, "IQ2_S", 82, DType::Other},
        {23, "IQ4_XS", 136, DType::Other},  {24, "I8", 256, DType::I8},        {25, "I16", 512, DType::I16},
        {26, "I32", 1024, DType::I32},      {27, "I64", 2048, DType::I64},     {28, "F64", 2048, DType::F64},
        {29, "IQ1_M", 56, DType::Other},    {30, "BF16", 512, DType::BF16},    {34, "TQ1_0", 54, DType::Other},
        {35, "TQ2_0", 66, DType::Other},    {39, "MXFP4", 136, DType::Other},
    };
    for (const Row& row : rows) QTest::newRow(row.name) << row.id << row.name << row.bytes << row.dtype;
}

void TestGguf::ggmlTypeSizes() {
    QFETCH(uint32_t, id);
    QFETCH(QString, name);
    QFETCH(quint64, bytesPer256);
    QFETCH(DType, dtype);
    TempDir dir;
    const std::string path = dir.file("t.gguf");
    RawGguf g;
    g.kvs.push_back(kv_str("general.architecture", "llama"));
    g.tensors.push_back({"t.weight", {256}, id, 0});
    g.data.assign(bytesPer256, 0);
    gkq::test::write_file(path, g.build().vec());
    auto r = ModelFile::open(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    const Tensor& t = r->tensors().front();
    QCOMPARE(q(t.type_name), name);
    QCOMPARE(t.n_bytes, static_cast<uint64_t>(bytesPer256));
    QCOMPARE(t.dtype, dtype);
    QCOMPARE(tensor_to_f32(t).is_ok(), dtype_is_float_convertible(dtype));

    // one byte short of the data: rejected, naming the tensor
    g.data.pop_back();
    gkq::test::write_file(path, g.build().vec());
    auto short_r = ModelFile::open(path);
    QVERIFY(!short_r.is_ok());
    QVERIFY2(short_r.message().find("tensor 't.weight'") != std::string::npos, short_r.message().c_str());
}

void TestGguf::unknownTypeIdsRejected() {
    TempDir dir;
    const std::string path = dir.file("t.gguf");
    for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xFFFFFFFFu}) {
        RawGguf g = base_file();
        g.tensors[0].type = id;
        gkq::test::write_file(path, g.build().vec());
        auto r = ModelFile::open(path);
        QVERIFY(!r.is_ok());
        QCOMPARE(r.status().code(), StatusCode::Unsupported);
        const std::string needle = "unknown ggml type id " + std::to_string(id);
        QVERIFY2(r.message().find(needle) != std::string::npos, r.message().c_str());
    }
}

void TestGguf::malformed_data() {
    QTest::addColumn<int>("kind");
    const std::pair<Bad, const char*> rows[] = {
        {Bad::Magic, "bad magic"},
        {Bad::Version1, "version 1"},
        {Bad::Version4, "version 4"},
        {Bad::BigEndian, "big-endian"},
        {Bad::TruncatedHeader, "truncated header"},
        {Bad::TruncatedKvString, "truncated inside a KV string"},
        {Bad::AbsurdKvCount, "absurd KV count"},
        {Bad::AbsurdTensorCount, "absurd tensor count"},
        {Bad::AbsurdKeyLength, "absurd key length"},
        {Bad::AbsurdStringLength, "absurd string length"},
        {Bad::BadValueType, "bad value type"},
        {Bad::AbsurdArrayCount, "array with absurd count"},
        {Bad::BadArrayElementType, "bad array element type"},
        {Bad::NestedTooDeep, "nested too deep"},
        {Bad::BoolNotZeroOne, "bool not 0 or 1"},
        {Bad::DuplicateKey, "duplicate key"},
        {Bad::EmptyKey, "empty key"},
        {Bad::NonUtf8Key, "non-UTF-8 key"},
        {Bad::NDimsZero, "n_dims 0"},
        {Bad::NDimsFive, "n_dims 5"},
        {Bad::UnknownGgmlType, "unknown ggml type"},
        {Bad::OffsetNotAligned, "offset not aligned"},
        {Bad::OffsetPastEnd, "offset past end"},
        {Bad::SizePastEnd, "size past end"},
        {Bad::OverlappingTensors, "overlapping tensors"},
        {Bad::DuplicateTensorNames, "duplicate tensor names"},
        {Bad::NonUtf8TensorName, "non-UTF-8 tensor name"},
        {Bad::EmptyTensorName, "empty tensor name"},
        {Bad::AlignmentZero, "alignment 0"},
        {Bad::AlignmentThree, "alignment 3"},
        {Bad::AlignmentWrongType, "alignment not u32"},
        {Bad::NotBlockMultiple, "not a multiple of the block size"},
        {Bad::ZeroDimension, "zero dimension"},
        {Bad::HugeDimension, "element count overflow"},
        {Bad::MissingArchitecture, "missing architecture"},
        {Bad::ConfigKeyWrongType, "config key of the wrong type"},
        {Bad::ScoresLengthMismatch, "scores length mismatch"},
        {Bad::TokensNotStrings, "tokens not strings"},
    };
    for (const auto& [kind, name] : rows) QTest::newRow(name) << static_cast<int>(kind);
}

void TestGguf::malformed() {
    QFETCH(int, kind);
    const auto bad = static_cast<Bad>(kind);
    BadCase c = make_bad(bad);
    TempDir dir;
    const std::string path = dir.file("bad.gguf");
    gkq::test::write_file(path, c.bytes.vec());
    const Status s = open_status(bad, path);
    QVERIFY2(!s.is_ok(), "a malformed file opened");
    QCOMPARE(QString(status_code_name(s.code())), QString(status_code_name(c.code)));
    const QString message = q(s.message());
    QVERIFY2(message.contains(q(path)), qPrintable(message));
    for (const QString& needle : c.needles) QVERIFY2(message.contains(needle), qPrintable(message));
}

// Every prefix of a valid file (vocabulary, metadata, infos, data) fails cleanly until its last tensor is whole.
void TestGguf::truncationSweep() {
    TempDir dir;
    const std::string path = dir.file("sweep.gguf");
    TinyModel m = make_tiny_model(32, 32, 1, 2, 1, 8);
    WriteOptions opt;
    opt.dtype = DType::Q8_0;
    Status ws = write_gguf(path, m.config, m.tensors, make_vocab(8), opt);
    QVERIFY2(ws.is_ok(), ws.message().c_str());
    uint64_t data_end = 0;
    {
        auto full = ModelFile::open(path);
        QVERIFY2(full.is_ok(), full.message().c_str());
        for (const Tensor& t : full->tensors()) data_end = std::max(data_end, t.file_offset + t.n_bytes);
    }
    const auto size = static_cast<uint64_t>(std::filesystem::file_size(path));
    QVERIFY(data_end <= size && data_end > size / 2);
    int n_failed = 0;
    for (uint64_t len = size; len-- > 0;) {  // shrinking in place: one file, no copies
        std::filesystem::resize_file(path, len);
        auto r = ModelFile::open(path);
        if (len >= data_end) {
            QVERIFY2(r.is_ok(), (std::to_string(len) + ": " + r.message()).c_str());
            continue;
        }
        if (r.is_ok()) QFAIL(("prefix of " + std::to_string(len) + " bytes opened").c_str());
        if (!is_rejection(r.status().code()) || r.message().find(path) == std::string::npos)
            QFAIL(("prefix of " + std::to_string(len) + " bytes: " + r.message()).c_str());
        ++n_failed;
    }
    QCOMPARE(n_failed, static_cast<int>(data_end));
}

// Flipping any single header byte never crashes: the file opens or is rejected as corrupt/unsupported.
void TestGguf::byteFlipSweep() {
    TempDir dir;
    const std::string path = dir.file("flip.gguf");
    TinyModel m = make_tiny_model(32, 32, 1, 2, 1, 8);
    Status ws = write_gguf(path, m.config, m.tensors, make_vocab(8));
    QVERIFY2(ws.is_ok(), ws.message().c_str());
    const std::vector<uint8_t> original = gkq::test::read_file(path);
    uint64_t header_end = original.size();
    {
        auto full = ModelFile::open(path);
        QVERIFY(full.is_ok());
        for (const Tensor& t : full->tensors()) header_end = std::min(header_end, t.file_offset);
    }
    // The byte is patched in place: rewriting the file with O_TRUNC makes ext4 flush it on every close.
    std::fstream patch(path, std::ios::in | std::ios::out | std::ios::binary);
    auto poke = [&](uint64_t i, uint8_t value) {
        patch.seekp(static_cast<std::streamoff>(i));
        patch.put(static_cast<char>(value));
        patch.flush();
    };
    int n_rejected = 0;
    for (uint8_t mask : {uint8_t{0xFF}, uint8_t{0x01}, uint8_t{0x80}}) {
        for (uint64_t i = 4; i < header_end; ++i) {  // past the magic: another magic is another format's file
            poke(i, original[i] ^ mask);
            auto r = ModelFile::open(path);
            poke(i, original[i]);
            if (r.is_ok()) continue;
            if (!is_rejection(r.status().code()))
                QFAIL(("byte " + std::to_string(i) + " ^ " + std::to_string(mask) + ": " + r.message()).c_str());
            ++n_rejected;
        }
    }
    QVERIFY(patch.good());
    QVERIFY(gkq::test::read_file(path) == original);
    QVERIFY(n_rejected > 0);
}

QTEST_APPLESS_MAIN(TestGguf)
#include "test_gguf.moc"
