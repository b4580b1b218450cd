// safetensors reader and writer: round trips through write_safetensors, handcrafted headers with every
// dtype, sharded models behind an index, a table of malformed files, and truncation / byte-flip sweeps.
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <bit>
#include <cstring>
#include <functional>

using namespace gkq;
using gkq::test::Bytes;
using gkq::test::TempDir;

namespace {

// ---------------------------------------------------------------------------------------------------------
// handcrafted files

// One tensor of a handcrafted file; `bytes` is its raw data.
struct StTensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

std::string shape_json(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string entry(const std::string& dtype, const std::string& shape, uint64_t begin, uint64_t end) {
    return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(begin) + "," +
           std::to_string(end) + "]}";
}

// u64 header length, the header exactly as given, then `data`.
std::vector<uint8_t> raw_file(const std::string& header, const std::vector<uint8_t>& data = {}) {
    Bytes b;
    b.u64(header.size()).raw(header).raw(data.data(), data.size());
    return b.vec();
}

std::vector<uint8_t> raw_file(const std::string& header, size_t n_data) {
    return raw_file(header, std::vector<uint8_t>(n_data, 0));
}

// A valid file holding `ts` with their data in the given order; the JSON is written by hand.
std::vector<uint8_t> build_file(const std::vector<StTensor>& ts, const std::string& metadata_json = "") {
    std::string header = "{";
    if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json;
    std::vector<uint8_t> data;
    for (const StTensor& t : ts) {
        if (header.size() > 1) header += ",";
        header +=
            "\"" + t.name + "\":" + entry(t.dtype, shape_json(t.shape), data.size(), data.size() + t.bytes.size());
        data.insert(data.end(), t.bytes.begin(), t.bytes.end());
    }
    return raw_file(header + "}", data);
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

std::vector<float> floats_of(const Tensor& t) {
    auto r = tensor_to_f32(t);
    return r ? std::move(r).value() : std::vector<float>{};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---------------------------------------------------------------------------------------------------------
// a small model for the writer

ModelConfig small_config() {
    ModelConfig c;
    c.dim = 16;
    c.hidden_dim = 40;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.vocab_size = 32;
    c.context_length = 64;
    c.rope_theta = 500000.0;
    c.norm_eps = 1e-6;
    c.shared_classifier = false;
    c.rope_style = RopeStyle::HalfSplit;  // already HF's q/k layout: written as given
    return c;
}

struct SmallModel {
    ModelConfig config = small_config();
    std::vector<std::vector<float>> values;  // one per tensor
    std::vector<WriteTensor> tensors;
};

SmallModel small_model() {
    SmallModel m;
    gkq::test::TinyModel tiny = gkq::test::make_tiny_model(m.config);
    m.values = std::move(tiny.storage);
    m.tensors = std::move(tiny.tensors);
    m.tensors.push_back({{"extra.rotary_scale", TensorRole::Other, -1, {3}, DType::F32}, nullptr, {}});
    // values that exercise f16 / bf16 rounding: ties, overflow to inf, subnormals, signed zero
    m.values.push_back({65520.0f, 3e-8f, -0.0f});
    for (size_t i = 0; i < m.tensors.size(); ++i) m.tensors[i].data = m.values[i].data();
    return m;
}

std::string name_of(const WriteTensor& t) {
    return t.role == TensorRole::Other ? t.name : hf_name(t.role, t.layer);
}

// ---------------------------------------------------------------------------------------------------------
// malformed files: each case writes its files into a folder and says which file to open and which file
// the error must name

struct Built {
    std::string open;
    std::string blamed;
};

struct MalformedCase {
    const char* name;
    std::function<Built(const TempDir&)> build;
    StatusCode code;
    std::vector<std::string> expect;  // substrings of the message besides the blamed file's path
};

Built single(const TempDir& dir, const std::vector<uint8_t>& bytes) {
    const std::string p = dir.file("model.safetensors");
    gkq::test::write_file(p, bytes);
    return {p, p};
}

Built single(const TempDir& dir, const std::string& header, size_t n_data) {
    return single(dir, raw_file(header, n_data));
}

const std::string kW = "{\"w\":" + entry("F32", "[2]", 0, 8) + "}";  // a valid one-tensor header

Built with_config(const TempDir& dir, const std::string& config) {
    Built b = single(dir, kW, 8);
    b.blamed = dir.file("config.json");
    gkq::test::write_file(b.blamed, config);
    return b;
}

StTensor f32_tensor(const std::string& name, std::vector<float> v) {
    const auto n = static_cast<int64_t>(v.size());
    return {name, "F32", {n}, f32_bytes(v)};
}

// An index over the given shard files (written first, in the same folder); weight_map is given as JSON.
Built index_case(const TempDir& dir, const std::vector<std::pair<std::string, std::vector<uint8_t>>>& shards,
                 const std::string& weight_map, const std::string& blamed_file) {
    for (const auto& [name, bytes] : shards) gkq::test::write_file(dir.file(name), bytes);
    const std::string index = dir.file("model.safetensors.index.json");
    gkq::test::write_file(index, "{\"metadata\":{\"total_size\":16},\"weight_map\":" + weight_map + "}");
    return {index, blamed_file.empty() ? index : dir.file(blamed_file)};
}

const std::vector<MalformedCase>& malformed_cases() {
    static const std::vector<MalformedCase> cases = {
        {"file shorter than the length field",
         [](const TempDir& d) {
             return single(d, std::vector<uint8_t>{1, 0, 0});
         },
         StatusCode::Corrupt,
         {"the file is 3 bytes, shorter than the 8-byte header length"}},
        {"header length past EOF",
         [](const TempDir& d) { return single(d, Bytes().u64(1000).raw("{}").vec()); },
         StatusCode::Corrupt,
         {"header length 1000 at offset 0 runs past the end of the file (10 bytes"}},
        {"header length absurd (2^63)",
         [](const TempDir& d) { return single(d, Bytes().u64(1ull << 63).raw("{}").vec()); },
         StatusCode::Corrupt,
         {"header length 9223372036854775808 at offset 0 exceeds the limit of 100000000 bytes"}},
        {"header length below 2",
         [](const TempDir& d) { return single(d, Bytes().u64(1).raw("{}").vec()); },
         StatusCode::Corrupt,
         {"header length 1 at offset 0 is too small"}},
        {"truncated inside JSON",
         [](const TempDir& d) { return single(d, Bytes().u64(20).raw(kW).zeros(8).vec()); },
         StatusCode::Corrupt,
         {"header JSON does not parse (parser byte position 21, file offset 28)", "unexpected end of input"}},
        {"invalid JSON",
         [](const TempDir& d) { return single(d, "{\"w\": nope}", 0); },
         StatusCode::Corrupt,
         {"header JSON does not parse (parser byte position 8, file offset 15)", "invalid literal"}},
        {"top level array",
         [](const TempDir& d) { return single(d, "[1,2]", 0); },
         StatusCode::Corrupt,
         {"the header JSON is an array, not an object"}},
        {"tensor entry not an object",
         [](const TempDir& d) { return single(d, "{\"w\":[0,8]}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': entry must be an object, not array"}},
        {"missing dtype",
         [](const TempDir& d) { return single(d, "{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': field 'dtype' is missing"}},
        {"dtype not a string",
         [](const TempDir& d) { return single(d, "{\"w\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': field 'dtype' must be a string, not number"}},
        {"unknown dtype",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F12", "[2]", 0, 8) + "}", 8); },
         StatusCode::Unsupported,
         {"tensor 'w': unknown dtype 'F12'"}},
        {"missing shape",
         [](const TempDir& d) { return single(d, "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': field 'shape' is missing"}},
        {"shape with negative value",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F32", "[2,-3]", 0, 24) + "}", 24); },
         StatusCode::Corrupt,
         {"tensor 'w': field 'shape' entry 1 is negative (-3)"}},
        {"shape not an array",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F32", "\"2x3\"", 0, 24) + "}", 24); },
         StatusCode::Corrupt,
         {"tensor 'w': field 'shape' must be an array, not string \"2x3\""}},
        {"shape with fraction",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F32", "[2.5]", 0, 8) + "}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': field 'shape' entry 0 must be an integer in [0, 2^63), not number 2.5"}},
        {"shape overflowing",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F32", "[4611686018427387904,4]", 0, 8) + "}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': shape 4611686018427387904 x 4 has too many elements"}},
        {"sub-byte dtype not filling whole bytes",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F4", "[3]", 0, 2) + "}", 2); },
         StatusCode::Corrupt,
         {"tensor 'w': shape 3 as F4 is not a whole number of bytes"}},
        {"missing data_offsets",
         [](const TempDir& d) { return single(d, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': field 'data_offsets' is missing"}},
        {"data_offsets with one entry",
         [](const TempDir& d) {
             return single(d, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8);
         },
         StatusCode::Corrupt,
         {"tensor 'w': field 'data_offsets' must be an array of two non-negative integers, not [8]"}},
        {"data_offsets reversed",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F32", "[1]", 8, 4) + "}", 8); },
         StatusCode::Corrupt,
         {"tensor 'w': data_offsets [8, 4] are reversed (begin > end)"}},
        {"offsets past end",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F32", "[100]", 0, 400) + "}", 16); },
         StatusCode::Corrupt,
         {"tensor 'w': data_offsets end 400 is past the end of the data section (16 bytes"}},
        {"size mismatch with shape",
         [](const TempDir& d) { return single(d, "{\"w\":" + entry("F32", "[2,3]", 0, 20) + "}", 20); },
         StatusCode::Corrupt,
         {"tensor 'w': data_offsets [0, 20] hold 20 bytes, but shape 2 x 3 as F32 needs 24"}},
        {"overlapping tensors",
         [](const TempDir& d) {
             return single(d, "{\"a\":" + entry("F32", "[4]", 0, 16) + ",\"b\":" + entry("F32", "[4]", 8, 24) + "}",
                           24);
         },
         StatusCode::Corrupt,
         {"the data of tensors 'a' and 'b' overlap (at file offset"}},
        {"non-UTF-8 tensor name",
         [](const TempDir& d) { return single(d, "{\"bad\xff\":" + entry("F32", "[2]", 0, 8) + "}", 8); },
         StatusCode::Corrupt,
         {"header JSON: invalid UTF-8 at file offset 13, in \"bad\\xff..."}},
        {"duplicate names",
         [](const TempDir& d) {
             return single(d, "{\"w\":" + entry("F32", "[2]", 0, 8) + ",\"w\":" + entry("F32", "[2]", 8, 16) + "}", 16);
         },
         StatusCode::Corrupt,
         {"header JSON: key 'w' appears more than once in the top-level object"}},
        {"duplicate field",
         [](const TempDir& d) {
             return single(d, "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
         },
         StatusCode::Corrupt,
         {"header JSON: key 'dtype' appears more than once inside 'w'"}},
        {"empty name",
         [](const TempDir& d) { return single(d, "{\"\":" + entry("F32", "[2]", 0, 8) + "}", 8); },
         StatusCode::Corrupt,
         {"a tensor has an empty name"}},
        {"metadata value not a string",
         [](const TempDir& d) { return single(d, "{\"__metadata__\":{\"step\":5}}", 0); },
         StatusCode::Corrupt,
         {"'__metadata__' entry 'step' must be a string, not number"}},
        {"nesting too deep",
         [](const TempDir& d) { return single(d, "{\"x\":" + std::string(100, '[') + std::string(100, ']') + "}", 0); },
         StatusCode::Corrupt,
         {"header JSON: nesting deeper than 64 levels"}},
        {"index naming a missing shard",
         [](const TempDir& d) { return index_case(d, {}, "{\"w\":\"model-00002-of-00002.safetensors\"}", ""); },
         StatusCode::NotFound,
         {"cannot open shard 'model-00002-of-00002.safetensors' (listed for tensor 'w')", "cannot open"}},
        {"index tensor missing from its shard",
         [](const TempDir& d) {
             return index_case(d, {{"a.safetensors", build_file({f32_tensor("w", {1, 2})})}},
                               "{\"w\":\"a.safetensors\",\"w2\":\"a.safetensors\"}", "");
         },
         StatusCode::Corrupt,
         {"tensor 'w2' is listed in shard 'a.safetensors', but ", "a.safetensors does not hold it"}},
        {"shard holding an unlisted tensor",
         [](const TempDir& d) {
             return index_case(d, {{"a.safetensors", build_file({f32_tensor("w", {1, 2}), f32_tensor("x", {3})})}},
                               "{\"w\":\"a.safetensors\"}", "a.safetensors");
         },
         StatusCode::Corrupt,
         {"holds tensor 'x', which the index", "model.safetensors.index.json does not list"}},
        {"tensor in two shards",
         [](const TempDir& d) {
             return index_case(d,
                               {{"a.safetensors", build_file({f32_tensor("w", {1, 2})})},
                                {"b.safetensors", build_file({f32_tensor("v", {1}), f32_tensor("w", {1, 2})})}},
                               "{\"w\":\"a.safetensors\",\"v\":\"b.safetensors\"}", "b.safetensors");
         },
         StatusCode::Corrupt,
         {"holds tensor 'w', but the index", "assigns it to shard 'a.safetensors'"}},
        {"shard path with ..",
         [](const TempDir& d) { return index_case(d, {}, "{\"w\":\"../escape.safetensors\"}", ""); },
         StatusCode::Corrupt,
         {"weight_map entry for tensor 'w': shard file name '../escape.safetensors' is not a relative path"}},
        {"shard path absolute",
         [](const TempDir& d) { return index_case(d, {}, "{\"w\":\"/etc/model.safetensors\"}", ""); },
         StatusCode::Corrupt,
         {"weight_map entry for tensor 'w': shard file name '/etc/model.safetensors' is not a relative path"}},
        {"index without weight_map",
         [](const TempDir& d) {
             const std::string p = d.file("model.safetensors.index.json");
             gkq::test::write_file(p, std::string_view("{\"metadata\":{}}"));
             return Built{p, p};
         },
         StatusCode::Corrupt,
         {"field 'weight_map' is missing"}},
        {"config.json malformed",
         [](const TempDir& d) { return with_config(d, "{\"hidden_size\": 64,"); },
         StatusCode::Corrupt,
         {"JSON does not parse (parser byte position 20, file offset 19)", "unexpected end of input"}},
        {"config.json field of wrong type",
         [](const TempDir& d) { return with_config(d, "{\"hidden_size\": \"64\"}"); },
         StatusCode::Corrupt,
         {"field 'hidden_size' must be a non-negative integer, not string \"64\""}},
        {"config.json negative count",
         [](const TempDir& d) { return with_config(d, "{\"num_hidden_layers\": -2}"); },
         StatusCode::Corrupt,
         {"field 'num_hidden_layers' must be a non-negative integer, not number -2"}},
        {"config.json bool of wrong type",
         [](const TempDir& d) { return with_config(d, "{\"tie_word_embeddings\": 1}"); },
         StatusCode::Corrupt,
         {"field 'tie_word_embeddings' must be true or false, not number 1"}},
        {"config.json rope_theta string",
         [](const TempDir& d) { return with_config(d, "{\"rope_theta\": \"1e4\"}"); },
         StatusCode::Corrupt,
         {"field 'rope_theta' must be a number, not string \"1e4\""}},
        {"config.json top level array",
         [](const TempDir& d) { return with_config(d, "[]"); },
         StatusCode::Corrupt,
         {"the top level is a JSON array, not an object"}},
    };
    return cases;
}

}  // namespace

class TestSafetensors : public QObject {
    Q_OBJECT

private slots:
    // ---- writer -> reader round trips ----

    void roundTripF32() {
        TempDir dir;
        SmallModel m = small_model();
        const std::string path = dir.file("model.safetensors");
        QVERIFY(write_safetensors(path, m.config, m.tensors).is_ok());

        auto r = ModelFile::open(dir.path());  // the folder resolves to model.safetensors
        QVERIFY2(r.is_ok(), r.message().c_str());
        const ModelFile& f = *r;
        QCOMPARE(f.format(), ModelFormat::Safetensors);
        QCOMPARE(f.format_detail(), std::string("safetensors"));
        QCOMPARE(f.tensors().size(), m.tensors.size());
        for (size_t i = 0; i < m.tensors.size(); ++i) {
            const Tensor& t = f.tensors()[i];  // file order = write order
            const WriteTensor& w = m.tensors[i];
            QCOMPARE(t.name, name_of(w));
            QCOMPARE(t.role, w.role);
            QCOMPARE(t.layer, w.layer);
            QCOMPARE(t.shape, w.shape);
            QCOMPARE(t.dtype, DType::F32);
            QCOMPARE(t.type_name, std::string("F32"));
            QVERIFY2(same_bits(floats_of(t), m.values[i]), t.name.c_str());
        }

        const ModelConfig& c = f.config();
        const ModelConfig want = small_config();
        QCOMPARE(c.architecture, std::string("llama"));
        QCOMPARE(c.dim, want.dim);
        QCOMPARE(c.hidden_dim, want.hidden_dim);
        QCOMPARE(c.n_layers, want.n_layers);
        QCOMPARE(c.n_heads, want.n_heads);
        QCOMPARE(c.n_kv_heads, want.n_kv_heads);
        QCOMPARE(c.vocab_size, want.vocab_size);
        QCOMPARE(c.context_length, want.context_length);
        QCOMPARE(c.rope_theta, want.rope_theta);
        QCOMPARE(c.norm_eps, want.norm_eps);
        QCOMPARE(c.shared_classifier, false);
        QCOMPARE(c.rope_style, RopeStyle::HalfSplit);

        const Metadata& meta = f.metadata();
        QVERIFY(meta.find("format") && meta.find("format")->as_string());
        QCOMPARE(*meta.find("format")->as_string(), std::string("pt"));
        QVERIFY(meta.find("config.hidden_size"));
        QCOMPARE(meta.find("config.hidden_size")->as_int(), std::optional<int64_t>(16));
        QCOMPARE(*meta.find("config.torch_dtype")->as_string(), std::string("float32"));
        QVERIFY(meta.find("config.architectures") == nullptr);  // arrays are not shown
    }

    void headerLayout() {
        TempDir dir;
        SmallModel m = small_model();
        WriteOptions opt;
        opt.extra_metadata.set("source", MetaValue::of_string("gkq \"test\""));
        const std::string path = dir.file("model.safetensors");
        QVERIFY(write_safetensors(path, m.config, m.tensors, opt).is_ok());
        const std::vector<uint8_t> bytes = gkq::test::read_file(path);

        uint64_t n_header = 0;
        std::memcpy(&n_header, bytes.data(), 8);
        QCOMPARE(n_header % 8, uint64_t(0));
        const std::string header(reinterpret_cast<const char*>(bytes.data() + 8), n_header);
        // (no raw string with \" here: moc misreads it and drops the class)
        const std::string prefix =
            "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"gkq \\\"test\\\"\"},"
            R"("model.embed_tokens.weight":{"dtype":"F32","shape":[32,16],"data_offsets":[0,2048]},)"
            R"("model.layers.0.input_layernorm.weight":{"dtype":"F32","shape":[16],)"
            R"("data_offsets":[2048,2112]},)";
        QCOMPARE(header.substr(0, prefix.size()), prefix);
        const size_t close = header.find_last_of('}');
        QVERIFY(header.find_first_not_of(' ', close + 1) == std::string::npos);  // padded with spaces only
        QVERIFY(n_header - close - 1 < 8);
        uint64_t n_data = 0;
        for (const auto& v : m.values) n_data += v.size() * 4;
        QCOMPARE(uint64_t(bytes.size()), 8 + n_header + n_data);

        // deterministic: the same input gives the same bytes
        const std::string again = dir.file("again.safetensors");
        QVERIFY(write_safetensors(again, m.config, m.tensors, opt).is_ok());
        QVERIFY(gkq::test::read_file(again) == bytes);

        auto r = ModelFile::open(path);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(*r->metadata().find("source")->as_string(), std::string("gkq \"test\""));
    }

    void roundTripHalf_data() {
        QTest::addColumn<int>("dtype");
        QTest::newRow("F16") << static_cast<int>(DType::F16);
        QTest::newRow("BF16") << static_cast<int>(DType::BF16);
    }

    void roundTripHalf() {
        QFETCH(int, dtype);
        const auto dt = static_cast<DType>(dtype);
        TempDir dir;
        SmallModel m = small_model();
        WriteOptions opt;
        opt.dtype = dt;
        const std::string path = dir.file("model.safetensors");
        QVERIFY(write_safetensors(path, m.config, m.tensors, opt).is_ok());
        auto r = ModelFile::open(path);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->tensors().size(), m.tensors.size());
        for (size_t i = 0; i < m.tensors.size(); ++i) {
            const Tensor& t = r->tensors()[i];
            QCOMPARE(t.dtype, dt);
            QCOMPARE(t.type_name, std::string(dt == DType::F16 ? "F16" : "BF16"));
            QCOMPARE(t.n_bytes, uint64_t(m.values[i].size() * 2));
            std::vector<float> want(m.values[i].size());
            for (size_t k = 0; k < want.size(); ++k)
                want[k] = dt == DType::F16 ? f16_to_f32(f32_to_f16(m.values[i][k]))
                                           : bf16_to_f32(f32_to_bf16(m.values[i][k]));
            QVERIFY2(same_bits(floats_of(t), want), t.name.c_str());
        }
        // the rounding cases of the last tensor, spelled out
        const std::vector<float> last = floats_of(r->tensors().back());
        if (dt == DType::F16) {
            QCOMPARE(last[0], std::numeric_limits<float>::infinity());  // 65520 ties to even: inf, not 65504
            QCOMPARE(last[1], std::bit_cast<float>(0x33800000u));       // 3e-8 -> subnormal 2^-24
        } else {
            QCOMPARE(last[0], 65536.0f);
        }
        QCOMPARE(std::bit_cast<uint32_t>(last[2]), 0x80000000u);  // -0 keeps its sign
        QCOMPARE(*r->metadata().find("config.torch_dtype")->as_string(),
                 std::string(dt == DType::F16 ? "float16" : "bfloat16"));
        QCOMPARE(r->config().dim, int64_t(16));
    }

    void writerRejects() {
        TempDir dir;
        SmallModel m = small_model();
        const std::string path = dir.file("model.safetensors");

        WriteOptions q8;
        q8.dtype = DType::Q8_0;
        Status s = write_safetensors(path, m.config, m.tensors, q8);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY(s.message().find("supports F32, F16 and BF16, not q8_0") != std::string::npos);

        WriteOptions meta;
        meta.extra_metadata.set("step", MetaValue::of_int(5));
        s = write_safetensors(path, m.config, m.tensors, meta);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY(s.message().find("metadata key 'step' is not a string") != std::string::npos);

        std::vector<WriteTensor> twice = {m.tensors[0], m.tensors[0]};
        s = write_safetensors(path, m.config, twice);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY(s.message().find("tensor 'model.embed_tokens.weight' is given twice") != std::string::npos);

        std::vector<WriteTensor> unnamed = {m.tensors.back()};
        unnamed[0].name.clear();
        s = write_safetensors(path, m.config, unnamed);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);

        std::vector<WriteTensor> typed = m.tensors;
        typed[0].dtype = DType::BF16;  // the data is float32: WriteOptions::dtype chooses what is stored
        s = write_safetensors(path, m.config, typed);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY2(
            s.message().find("tensor 'model.embed_tokens.weight': its data is float32, not bf16") != std::string::npos,
            s.message().c_str());

        QVERIFY(!QFile::exists(QString::fromStdString(path)));  // nothing written on failure
        QVERIFY(!QFile::exists(QString::fromStdString(dir.file("config.json"))));
    }

    void interleavedQkReordered() {
        // A model with interleaved rotary pairs (llama2.c, GGUF) gets its q/k rows reordered into HF's
        // half-split layout: row 2i + j of each head lands at j * head_size/2 + i; nothing else changes.
        TempDir dir;
        SmallModel m = small_model();
        m.config.rope_style = RopeStyle::Interleaved;
        const std::string path = dir.file("model.safetensors");
        QVERIFY(write_safetensors(path, m.config, m.tensors).is_ok());
        auto r = ModelFile::open(path);
        QVERIFY2(r.is_ok(), r.message().c_str());
        const int64_t hs = m.config.head_size(), half = hs / 2, cols = m.config.dim;
        int n_reordered = 0;
        for (size_t k = 0; k < m.tensors.size(); ++k) {
            const WriteTensor& w = m.tensors[k];
            const std::vector<float> got = floats_of(r->tensors()[k]);
            const std::vector<float>& src = m.values[k];
            if (w.role != TensorRole::AttnQ && w.role != TensorRole::AttnK) {
                QVERIFY2(same_bits(got, src), name_of(w).c_str());
                continue;
            }
            ++n_reordered;
            QVERIFY(!same_bits(got, src));
            for (int64_t h = 0; h < w.shape[0] / hs; ++h)
                for (int64_t i = 0; i < half; ++i)
                    for (int64_t j = 0; j < 2; ++j)
                        QVERIFY(std::memcmp(got.data() + (h * hs + j * half + i) * cols,
                                            src.data() + (h * hs + 2 * i + j) * cols, cols * sizeof(float)) == 0);
        }
        QCOMPARE(n_reordered, 4);  // q and k of two layers

        m.config.n_heads = 0;  // head size unknown: the rows cannot be reordered
        Status s = write_safetensors(path, m.config, m.tensors);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QVERIFY2(s.message().find("tensor 'model.layers.0.self_attn.q_proj.weight' (16 x 16) cannot be reordered") !=
                     std::string::npos,
                 s.message().c_str());
    }

    void noConfigJson() {
        // without config.json the config comes from the tensors
        TempDir dir;
        SmallModel m = small_model();
        QVERIFY(write_safetensors(dir.file("model.safetensors"), m.config, m.tensors).is_ok());
        QVERIFY(QFile::remove(QString::fromStdString(dir.file("config.json"))));
        auto r = ModelFile::open(dir.file("model.safetensors"));
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->config().vocab_size, int64_t(32));
        QCOMPARE(r->config().dim, int64_t(16));
        QCOMPARE(r->config().hidden_dim, int64_t(40));
        QCOMPARE(r->config().n_layers, int64_t(2));
        QCOMPARE(r->config().n_heads, int64_t(0));  // not derivable from tensors
        QCOMPARE(r->config().shared_classifier, false);
        QCOMPARE(r->config().rope_style, RopeStyle::HalfSplit);
        QVERIFY(r->metadata().find("config.hidden_size") == nullptr);
    }

    // ---- handcrafted headers ----

    void allDtypes() {
        struct Row {
            const char* dtype;
            DType want;
            uint64_t elem_bytes;
            bool convertible;
        };
        const Row rows[] = {
            {"F32", DType::F32, 4, true},     {"F16", DType::F16, 2, true},        {"BF16", DType::BF16, 2, true},
            {"F64", DType::F64, 8, true},     {"I8", DType::I8, 1, false},         {"U8", DType::U8, 1, false},
            {"I16", DType::I16, 2, false},    {"I32", DType::I32, 4, false},       {"I64", DType::I64, 8, false},
            {"BOOL", DType::Other, 1, false}, {"F8_E4M3", DType::Other, 1, false}, {"F8_E5M2", DType::Other, 1, false},
            {"U16", DType::Other, 2, false},  {"U32", DType::Other, 4, false},     {"U64", DType::Other, 8, false},
        };
        // Every tensor holds 1.5 twice (2 x 1 elements) in its own encoding where it has one; data is laid out in
        // reverse table order so file order differs from both the table and the JSON's key order.
        std::vector<StTensor> ts;
        for (auto it = std::rbegin(rows); it != std::rend(rows); ++it) {
            std::vector<uint8_t> b(2 * it->elem_bytes, 0x11);
            const std::string d = it->dtype;
            for (int k = 0; k < 2; ++k) {
                uint8_t* p = b.data() + k * it->elem_bytes;
                if (d == "F32") {
                    float v = 1.5f;
                    std::memcpy(p, &v, 4);
                }
                if (d == "F64") {
                    double v = 1.5;
                    std::memcpy(p, &v, 8);
                }
                if (d == "F16") {
                    uint16_t v = 0x3E00;
                    std::memcpy(p, &v, 2);
                }
                if (d == "BF16") {
                    uint16_t v = 0x3FC0;
                    std::memcpy(p, &v, 2);
                }
            }
            ts.push_back({"t_" + d, d, {2, 1}, b});
        }
        TempDir dir;
        const std::string path = dir.file("all.safetensors");
        gkq::test::write_file(path, build_file(ts, R"({"format":"pt","note":"dtypes"})"));
        auto r = ModelFile::open(path);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->tensors().size(), std::size(rows));
        for (size_t i = 0; i < std::size(rows); ++i) {
            const Row& row = rows[std::size(rows) - 1 - i];
            const Tensor& t = r->tensors()[i];
            QCOMPARE(t.name, "t_" + std::string(row.dtype));
            QCOMPARE(t.type_name, std::string(row.dtype));
            QCOMPARE(t.dtype, row.want);
            QCOMPARE(t.n_bytes, 2 * row.elem_bytes);
            QCOMPARE(t.shape, (std::vector<int64_t>{2, 1}));
            QCOMPARE(t.role, TensorRole::Other);
            auto f = tensor_to_f32(t);
            if (row.convertible) {
                QVERIFY2(f.is_ok(), f.message().c_str());
                QCOMPARE(*f, (std::vector<float>{1.5f, 1.5f}));
            } else {
                QVERIFY(!f.is_ok());
                QCOMPARE(f.status().code(), StatusCode::Unsupported);
                QVERIFY2(f.message().find("tensor '" + t.name + "'") != std::string::npos, f.message().c_str());
            }
        }
        QCOMPARE(*r->metadata().find("note")->as_string(), std::string("dtypes"));
        QCOMPARE(r->n_tensor_bytes(), uint64_t(2 * (4 + 2 + 2 + 8 + 1 + 1 + 2 + 4 + 8 + 1 + 1 + 1 + 2 + 4 + 8)));
    }

    void roleAndOffsets() {
        // offsets are relative to the data section; names map to roles and layers
        const std::string header = "{\"lm_head.weight\":" + entry("F32", "[2,2]", 16, 32) +
                                   ",\"model.layers.7.mlp.down_proj.weight\":" + entry("F32", "[2,2]", 0, 16) + "}  ";
        std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
        TempDir dir;
        const std::string path = dir.file("x.safetensors");
        gkq::test::write_file(path, raw_file(header, f32_bytes(v)));
        auto r = ModelFile::open(path);
        QVERIFY2(r.is_ok(), r.message().c_str());
        const Tensor& down = r->tensors()[0];
        const Tensor& head = r->tensors()[1];
        QCOMPARE(down.role, TensorRole::FfnDown);
        QCOMPARE(down.layer, 7);
        QCOMPARE(down.file_offset, 8 + header.size());
        QCOMPARE(head.role, TensorRole::Output);
        QCOMPARE(head.layer, -1);
        QCOMPARE(head.file_offset, 8 + header.size() + 16);
        QCOMPARE(floats_of(head), (std::vector<float>{5, 6, 7, 8}));
        QCOMPARE(r->file_bytes(), uint64_t(8 + header.size() + 32));
    }

    // ---- sharded ----

    void sharded() {
        TempDir dir;
        auto vals = [](size_t n, uint64_t seed) { return gkq::test::random_floats(n, seed); };
        const std::vector<float> embed = vals(8, 1), q0 = vals(4, 2), norm = vals(2, 3), q1 = vals(4, 4),
                                 head = vals(8, 5);
        const std::vector<uint8_t> s1 =
            build_file({{"model.embed_tokens.weight", "F32", {4, 2}, f32_bytes(embed)},
                        {"model.layers.0.self_attn.q_proj.weight", "F32", {2, 2}, f32_bytes(q0)}},
                       R"({"format":"pt"})");
        const std::vector<uint8_t> s2 =
            build_file({{"model.layers.1.self_attn.q_proj.weight", "F32", {2, 2}, f32_bytes(q1)},
                        {"model.norm.weight", "F32", {2}, f32_bytes(norm)},
                        {"lm_head.weight", "F32", {4, 2}, f32_bytes(head)}});
        gkq::test::write_file(dir.file("model-00001-of-00002.safetensors"), s1);
        gkq::test::write_file(dir.file("model-00002-of-00002.safetensors"), s2);
        const std::string index = dir.file("model.safetensors.index.json");
        gkq::test::write_file(index, std::string_view(R"({
  "metadata": {"total_size": 104},
  "weight_map": {
    "lm_head.weight": "model-00002-of-00002.safetensors",
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
    "model.layers.1.self_attn.q_proj.weight": "model-00002-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors"
  }
})"));
        gkq::test::write_file(dir.file("config.json"),
                              std::string_view(R"({"hidden_size": 2, "num_attention_heads": 1, "num_hidden_layers": 2,
                                                   "architectures": ["MistralForCausalLM"]})"));

        for (const std::string& open_path : {index, dir.path()}) {  // the folder prefers the index
            auto r = ModelFile::open(open_path);
            QVERIFY2(r.is_ok(), r.message().c_str());
            QCOMPARE(r->format_detail(), std::string("safetensors (2 shards)"));
            QCOMPARE(r->tensors().size(), size_t(5));
            struct Want {
                const char* name;
                TensorRole role;
                int32_t layer;
                std::vector<int64_t> shape;
                const std::vector<float>* values;
            };
            const Want want[] = {
                {"model.embed_tokens.weight", TensorRole::TokenEmbd, -1, {4, 2}, &embed},
                {"model.layers.0.self_attn.q_proj.weight", TensorRole::AttnQ, 0, {2, 2}, &q0},
                {"model.layers.1.self_attn.q_proj.weight", TensorRole::AttnQ, 1, {2, 2}, &q1},
                {"model.norm.weight", TensorRole::OutputNorm, -1, {2}, &norm},
                {"lm_head.weight", TensorRole::Output, -1, {4, 2}, &head},
            };
            for (size_t i = 0; i < std::size(want); ++i) {
                const Tensor& t = r->tensors()[i];
                QCOMPARE(t.name, std::string(want[i].name));
                QCOMPARE(t.role, want[i].role);
                QCOMPARE(t.layer, want[i].layer);
                QCOMPARE(t.shape, want[i].shape);
                QVERIFY2(same_bits(floats_of(t), *want[i].values), t.name.c_str());
            }
            // file offsets are within each shard's own file
            uint64_t n_header1 = 0, n_header2 = 0;
            std::memcpy(&n_header1, s1.data(), 8);
            std::memcpy(&n_header2, s2.data(), 8);
            QCOMPARE(r->tensors()[0].file_offset, 8 + n_header1);
            QCOMPARE(r->tensors()[2].file_offset, 8 + n_header2);
            QCOMPARE(r->file_bytes(), uint64_t(s1.size() + s2.size()));
            QCOMPARE(r->metadata().find("total_size")->as_int(), std::optional<int64_t>(104));
            QCOMPARE(*r->metadata().find("format")->as_string(), std::string("pt"));
            QCOMPARE(r->config().architecture, std::string("mistral"));
            QCOMPARE(r->config().n_kv_heads, int64_t(1));
            QCOMPARE(r->config().n_layers, int64_t(2));
            QCOMPARE(r->config().vocab_size, int64_t(4));
        }
    }

    // ---- malformed files ----

    void malformed_data() {
        QTest::addColumn<int>("index");
        const auto& cases = malformed_cases();
        for (size_t i = 0; i < cases.size(); ++i) QTest::newRow(cases[i].name) << static_cast<int>(i);
    }

    void malformed() {
        QFETCH(int, index);
        const MalformedCase& c = malformed_cases()[static_cast<size_t>(index)];
        TempDir dir;
        const Built b = c.build(dir);
        auto r = ModelFile::open(b.open);
        QVERIFY2(!r.is_ok(), "opened a malformed file");
        const std::string& msg = r.message();
        QVERIFY2(r.status().code() == c.code, (std::string(status_code_name(r.status().code())) + ": " + msg).c_str());
        QVERIFY2(msg.find(b.blamed) != std::string::npos, ("does not name " + b.blamed + ": " + msg).c_str());
        for (const std::string& e : c.expect)
            QVERIFY2(msg.find(e) != std::string::npos, ("expected '" + e + "' in: " + msg).c_str());
    }

    // ---- sweeps: never crash, never accept a damaged file silently ----

    void truncationSweep() {
        TempDir dir;
        SmallModel m = small_model();
        std::vector<WriteTensor> few = {m.tensors[1], m.tensors.back()};  // keep the file small
        WriteOptions opt;
        opt.dtype = DType::F16;
        QVERIFY(write_safetensors(dir.file("full.safetensors"), m.config, few, opt).is_ok());
        const std::vector<uint8_t> full = gkq::test::read_file(dir.file("full.safetensors"));
        uint64_t n_header = 0;
        std::memcpy(&n_header, full.data(), 8);
        QCOMPARE(uint64_t(full.size()), 8 + n_header + 16 * 2 + 3 * 2);

        TempDir cut_dir;  // no config.json here
        const std::string cut = cut_dir.file("cut.safetensors");
        for (size_t n = 0; n < full.size(); ++n) {
            gkq::test::write_file(cut, std::vector<uint8_t>(full.begin(), full.begin() + static_cast<ptrdiff_t>(n)));
            auto r = ModelFile::open(cut);
            QVERIFY2(!r.is_ok(), ("prefix of " + std::to_string(n) + " bytes opened").c_str());
            QCOMPARE(r.status().code(), StatusCode::Corrupt);
            QVERIFY2(r.message().find(cut) != std::string::npos, r.message().c_str());
        }
        gkq::test::write_file(cut, full);
        auto r = ModelFile::open(cut);
        QVERIFY2(r.is_ok(), r.message().c_str());
        QCOMPARE(r->tensors().size(), size_t(2));
    }

    void headerByteSweep() {
        // Every header byte replaced by bytes that matter to a JSON parser: the result opens or fails with a
        // message naming the file; the data of what opens stays inside the file.
        TempDir dir;
        const std::vector<float> v = {1, 2, 3, 4};
        const std::vector<uint8_t> good =
            build_file({f32_tensor("a", v), {"model.layers.0.mlp.up_proj.weight", "F16", {2}, {0, 0x3C, 0, 0x40}}},
                       R"({"k":"v"})");
        const std::string path = dir.file("flip.safetensors");
        int n_opened = 0, n_failed = 0;
        for (size_t i = 8; i < good.size() - 20; ++i) {
            for (uint8_t repl : {uint8_t(0xFF), uint8_t('"'), uint8_t('9'), uint8_t('{'), uint8_t(','), uint8_t(0)}) {
                std::vector<uint8_t> bytes = good;
                bytes[i] = repl;
                gkq::test::write_file(path, bytes);
                auto r = ModelFile::open(path);
                if (r.is_ok()) {
                    ++n_opened;
                    for (const Tensor& t : r->tensors()) QVERIFY(t.file_offset + t.n_bytes <= bytes.size());
                } else {
                    ++n_failed;
                    QVERIFY2(r.message().find(path) != std::string::npos, r.message().c_str());
                }
            }
        }
        QVERIFY(n_failed > 0);
        QVERIFY(n_opened > 0);  // e.g. a digit inside a name
    }
};

QTEST_APPLESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
