// llama2.c checkpoints and tokenizers: writer -> reader round trips, hand-built legacy / v1 / v2 files with
// known values (built here from export.py's order, independently of the library's layout table), malformed
// files, and the shared real checkpoints.
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "test_support.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

using namespace gkq;
using gkq::test::Bytes;
using gkq::test::TempDir;

namespace {

// "" when `s` is the expected error naming `path` and every needle; otherwise what is wrong.
std::string mismatch(const Status& s, StatusCode code, const std::string& path, const QStringList& needles) {
    if (s.is_ok()) return "expected an error, got Ok";
    const std::string& msg = s.message();
    if (s.code() != code)
        return std::string("code ") + status_code_name(s.code()) + " instead of " + status_code_name(code) + ": " + msg;
    if (msg.find(path) == std::string::npos) return "message does not name the file: " + msg;
    for (const QString& n : needles)
        if (msg.find(n.toStdString()) == std::string::npos) return "message lacks '" + n.toStdString() + "': " + msg;
    return {};
}

QByteArray to_qbytes(const Bytes& b) {
    return QByteArray(reinterpret_cast<const char*>(b.vec().data()), static_cast<qsizetype>(b.size()));
}

std::vector<uint8_t> to_vec(const QByteArray& a) {
    return {a.begin(), a.end()};
}

float float_at(const std::vector<uint8_t>& bytes, size_t offset) {
    float f;
    std::memcpy(&f, bytes.data() + offset, 4);
    return f;
}

// ---------------------------------------------------------------- hand-built files

// A tiny model: head_size 2, kv_dim 2.
struct Tiny {
    int32_t dim = 4, hidden = 8, n_layers = 2, n_heads = 2, n_kv_heads = 1, vocab = 6, seq_len = 3;
    int64_t kv_dim() const { return int64_t(dim) / n_heads * n_kv_heads; }
};

using Shape = std::vector<int64_t>;
struct Named {
    std::string name;
    Shape shape;
};

int64_t numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

std::string blk(int layer, const char* what) {
    return "blk." + std::to_string(layer) + "." + what + ".weight";
}

// One projection kind for every layer, as export.py loops over model.layers.
void add_each(std::vector<Named>& v, const Tiny& t, const char* what, Shape shape) {
    for (int l = 0; l < t.n_layers; ++l) v.push_back({blk(l, what), shape});
}

std::vector<Named> norms_v12(const Tiny& t) {
    std::vector<Named> v;
    add_each(v, t, "attn_norm", {t.dim});
    add_each(v, t, "ffn_norm", {t.dim});
    v.push_back({"output_norm.weight", {t.dim}});
    return v;
}

std::vector<Named> matrices_v12(const Tiny& t, bool shared) {
    std::vector<Named> v = {{"token_embd.weight", {t.vocab, t.dim}}};
    add_each(v, t, "attn_q", {t.dim, t.dim});
    add_each(v, t, "attn_k", {t.kv_dim(), t.dim});
    add_each(v, t, "attn_v", {t.kv_dim(), t.dim});
    add_each(v, t, "attn_output", {t.dim, t.dim});
    add_each(v, t, "ffn_gate", {t.hidden, t.dim});  // w1
    add_each(v, t, "ffn_down", {t.dim, t.hidden});  // w2
    add_each(v, t, "ffn_up", {t.hidden, t.dim});    // w3
    if (!shared) v.push_back({"output.weight", {t.vocab, t.dim}});
    return v;
}

struct Built {
    Bytes bytes;
    std::map<std::string, std::vector<float>> values;  // expected float32 of each tensor
    std::map<std::string, uint64_t> offsets;           // of each tensor's data
    std::map<std::string, Shape> shapes;
};

void put_f32_tensor(Built& b, const Named& n, float& counter) {
    b.offsets[n.name] = b.bytes.size();
    b.shapes[n.name] = n.shape;
    auto& v = b.values[n.name];
    for (int64_t i = 0; i < numel(n.shape); ++i) {
        v.push_back(counter);
        b.bytes.f32(counter);
        counter += 0.5f;
    }
}

void put_params(Bytes& b, const Tiny& t, int32_t vocab_field) {
    b.i32(t.dim).i32(t.hidden).i32(t.n_layers).i32(t.n_heads).i32(t.n_kv_heads).i32(vocab_field).i32(t.seq_len);
}

// Legacy v0 in run.c's order; freq_cis filled with a marker value.
Built build_legacy(const Tiny& t, bool shared) {
    Built b;
    put_params(b.bytes, t, shared ? t.vocab : -t.vocab);
    std::vector<Named> order = {{"token_embd.weight", {t.vocab, t.dim}}};
    add_each(order, t, "attn_norm", {t.dim});
    add_each(order, t, "attn_q", {t.dim, t.dim});
    add_each(order, t, "attn_k", {t.kv_dim(), t.dim});
    add_each(order, t, "attn_v", {t.kv_dim(), t.dim});
    add_each(order, t, "attn_output", {t.dim, t.dim});
    add_each(order, t, "ffn_norm", {t.dim});
    add_each(order, t, "ffn_gate", {t.hidden, t.dim});
    add_each(order, t, "ffn_down", {t.dim, t.hidden});
    add_each(order, t, "ffn_up", {t.hidden, t.dim});
    order.push_back({"output_norm.weight", {t.dim}});
    float counter = 1.0f;
    for (const Named& n : order) put_f32_tensor(b, n, counter);
    for (int i = 0; i < t.seq_len * (t.dim / t.n_heads); ++i) b.bytes.f32(-7.0f);  // freq_cis real + imag
    if (!shared) put_f32_tensor(b, {"output.weight", {t.vocab, t.dim}}, counter);
    return b;
}

void put_versioned_header(Bytes& b, const Tiny& t, int32_t version, bool shared, int32_t group_size) {
    b.u32(0x616b3432u).i32(version);
    put_params(b, t, t.vocab);
    b.u8(shared ? 1 : 0);
    if (version == 2) b.i32(group_size);
    b.zeros(256 - b.size());
}

Built build_v1(const Tiny& t, bool shared) {
    Built b;
    put_versioned_header(b.bytes, t, 1, shared, 0);
    float counter = 1.0f;
    for (const Named& n : norms_v12(t)) put_f32_tensor(b, n, counter);
    for (const Named& n : matrices_v12(t, shared)) put_f32_tensor(b, n, counter);
    return b;
}

// Version 2: codes of every matrix, then the scales of every matrix; expected values are code * scale.
Built build_v2(const Tiny& t, bool shared, int32_t group_size) {
    Built b;
    put_versioned_header(b.bytes, t, 2, shared, group_size);
    float counter = 1.0f;
    for (const Named& n : norms_v12(t)) put_f32_tensor(b, n, counter);
    const std::vector<Named> matrices = matrices_v12(t, shared);
    std::map<std::string, std::vector<int8_t>> codes;
    for (size_t m = 0; m < matrices.size(); ++m) {
        const Named& n = matrices[m];
        b.offsets[n.name] = b.bytes.size();
        b.shapes[n.name] = n.shape;
        for (int64_t i = 0; i < numel(n.shape); ++i) {
            const auto c = static_cast<int8_t>((i * 37 + int64_t(m) * 11) % 255 - 127);
            codes[n.name].push_back(c);
            b.bytes.put(c);
        }
    }
    for (size_t m = 0; m < matrices.size(); ++m) {
        const Named& n = matrices[m];
        auto& v = b.values[n.name];
        for (int64_t g = 0; g < numel(n.shape) / group_size; ++g) {
            const float scale = 0.001f * float(g + 1) + 0.25f * float(m);
            b.bytes.f32(scale);
            for (int64_t j = 0; j < group_size; ++j) v.push_back(float(codes[n.name][g * group_size + j]) * scale);
        }
    }
    return b;
}

// Every tensor of `f` present in `b` with exactly the expected values and offsets, and nothing else.
std::string compare_tensors(const ModelFile& f, const Built& b) {
    if (f.tensors().size() != b.values.size())
        return std::to_string(f.tensors().size()) + " tensors, expected " + std::to_string(b.values.size());
    for (const Tensor& t : f.tensors()) {
        auto it = b.values.find(t.name);
        if (it == b.values.end()) return "unexpected tensor " + t.name;
        if (t.shape != b.shapes.at(t.name)) return t.name + " has shape " + shape_to_string(t.shape);
        if (t.file_offset != b.offsets.at(t.name))
            return t.name + " at offset " + std::to_string(t.file_offset) + ", expected " +
                   std::to_string(b.offsets.at(t.name));
        auto got = tensor_to_f32(t);
        if (!got) return got.message();
        if (*got != it->second) return t.name + ": values differ";
    }
    return {};
}

// ---------------------------------------------------------------- a model for the writer

struct WriterModel {
    ModelConfig config;
    std::vector<std::vector<float>> storage;
    std::vector<WriteTensor> tensors;

    void add(TensorRole role, int32_t layer, Shape shape) {
        storage.push_back(gkq::test::random_floats(size_t(numel(shape)), storage.size() + 1));
        tensors.push_back({{{}, role, layer, shape, DType::F32}, storage.back().data(), {}});
    }
};

// dim 8, hidden 16, 2 layers, 2 heads (head_size 4), 1 kv head (kv_dim 4), vocab 10, seq_len 4.
WriterModel writer_model(bool shared) {
    WriterModel m;
    ModelConfig& c = m.config;
    c.dim = 8, c.hidden_dim = 16, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.vocab_size = 10;
    c.context_length = 4, c.shared_classifier = shared;
    m.storage.reserve(32);  // data pointers must stay put
    m.add(TensorRole::TokenEmbd, -1, {10, 8});
    for (int32_t l = 0; l < 2; ++l) {
        m.add(TensorRole::AttnNorm, l, {8});
        m.add(TensorRole::AttnQ, l, {8, 8});
        m.add(TensorRole::AttnK, l, {4, 8});
        m.add(TensorRole::AttnV, l, {4, 8});
        m.add(TensorRole::AttnO, l, {8, 8});
        m.add(TensorRole::FfnNorm, l, {8});
        m.add(TensorRole::FfnGate, l, {16, 8});
        m.add(TensorRole::FfnDown, l, {8, 16});
        m.add(TensorRole::FfnUp, l, {16, 8});
    }
    m.add(TensorRole::OutputNorm, -1, {8});
    if (!shared) m.add(TensorRole::Output, -1, {10, 8});
    return m;
}

Bytes legacy_header(int32_t dim, int32_t hidden, int32_t n_layers, int32_t n_heads, int32_t n_kv_heads, int32_t vocab,
                    int32_t seq_len) {
    Bytes b;
    b.i32(dim).i32(hidden).i32(n_layers).i32(n_heads).i32(n_kv_heads).i32(vocab).i32(seq_len);
    return b;
}

Bytes versioned_prefix(int32_t version) {
    Bytes b;
    b.u32(0x616b3432u).i32(version);
    return b;
}

Bytes tokenizer_bytes(int32_t max_len, const std::vector<std::pair<float, std::string>>& tokens) {
    Bytes b;
    b.i32(max_len);
    for (const auto& [score, s] : tokens) b.f32(score).i32(int32_t(s.size())).raw(s);
    return b;
}

}  // namespace

class TestLlama2c : public QObject {
    Q_OBJECT

private slots:
    void writerRoundTrip_data();
    void writerRoundTrip();
    void writerRejects();
    void handBuiltLegacy();
    void handBuiltV1();
    void handBuiltV2();
    void malformed_data();
    void malformed();
    void truncationSweep();
    void realLlama2xs();
    void realBabyLlama();
    void realTokenizers();
    void tokenizerEdges();
    void tokenizerMalformed_data();
    void tokenizerMalformed();
};

// ---------------------------------------------------------------- writer

void TestLlama2c::writerRoundTrip_data() {
    QTest::addColumn<bool>("shared");
    QTest::newRow("shared classifier") << true;
    QTest::newRow("unshared classifier") << false;
}

void TestLlama2c::writerRoundTrip() {
    QFETCH(bool, shared);
    TempDir dir;
    const std::string path = dir.file("model.bin");
    WriterModel m = writer_model(shared);
    Status w = write_llama2c(path, m.config, m.tensors);
    QVERIFY2(w.is_ok(), w.message().c_str());

    // header + weights + freq_cis (seq_len * head_size floats) [+ classifier]
    const int64_t n_params = shared ? 1272 : 1352;
    const std::vector<uint8_t> raw = gkq::test::read_file(path);
    QCOMPARE(raw.size(), size_t(28 + 4 * n_params + 4 * 4 * 4));
    int32_t vocab_field = 0;
    std::memcpy(&vocab_field, raw.data() + 20, 4);
    QCOMPARE(vocab_field, shared ? 10 : -10);

    auto f = ModelFile::open(path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    QCOMPARE(f->format(), ModelFormat::Llama2c);
    QCOMPARE(f->format_detail(), std::string("llama2c v0 (legacy)"));
    const ModelConfig& c = f->config();
    QCOMPARE(c.dim, int64_t(8));
    QCOMPARE(c.hidden_dim, int64_t(16));
    QCOMPARE(c.n_layers, int64_t(2));
    QCOMPARE(c.n_heads, int64_t(2));
    QCOMPARE(c.n_kv_heads, int64_t(1));
    QCOMPARE(c.vocab_size, int64_t(10));
    QCOMPARE(c.context_length, int64_t(4));
    QCOMPARE(c.shared_classifier, shared);
    QCOMPARE(c.rope_theta, 10000.0);
    QCOMPARE(c.norm_eps, 1e-5);
    QCOMPARE(f->n_params(), n_params);
    QCOMPARE(f->tensors().size(), size_t(shared ? 20 : 21));
    QCOMPARE(f->metadata().find("llama2c.version")->as_int(), std::optional<int64_t>(0));
    QCOMPARE(f->metadata().find("llama2c.header_bytes")->as_int(), std::optional<int64_t>(28));
    QCOMPARE(f->metadata().find("llama2c.freq_cis_bytes")->as_int(), std::optional<int64_t>(64));
    QVERIFY(f->metadata().find("llama2c.group_size") == nullptr);

    for (const WriteTensor& wt : m.tensors) {
        const Tensor* t = f->find(wt.role, wt.layer);
        QVERIFY2(t != nullptr, role_name(wt.role).data());
        QCOMPARE(t->shape, wt.shape);
        QCOMPARE(t->dtype, DType::F32);
        QCOMPARE(t->type_name, std::string("F32"));
        auto v = tensor_to_f32(*t);
        QVERIFY2(v.is_ok(), v.message().c_str());
        QVERIFY2(std::memcmp(v->data(), wt.data, v->size() * 4) == 0, t->name.c_str());
    }
    QCOMPARE(f->find("output.weight") != nullptr, !shared);

    // The RoPE tables sit right after output_norm: real[t][i] = cos(t * theta^(-2i/4)), imag the sine.
    const size_t freq = f->find("output_norm.weight")->file_offset + 8 * 4;
    QCOMPARE(float_at(raw, freq), 1.0f);                                      // real[0][0]
    QCOMPARE(float_at(raw, freq + 32), 0.0f);                                 // imag[0][0]
    QVERIFY(std::fabs(float_at(raw, freq + 8) - 0.5403023f) < 1e-7f);         // real[1][0] = cos 1
    QVERIFY(std::fabs(float_at(raw, freq + 12) - 0.99995000f) < 1e-7f);       // real[1][1] = cos 0.01
    QVERIFY(std::fabs(float_at(raw, freq + 32 + 8) - 0.84147098f) < 1e-7f);   // imag[1][0] = sin 1
    QVERIFY(std::fabs(float_at(raw, freq + 32 + 12) - 0.00999983f) < 1e-7f);  // imag[1][1] = sin 0.01
    if (!shared) QCOMPARE(f->find("output.weight")->file_offset, uint64_t(freq + 64));
}

void TestLlama2c::writerRejects() {
    TempDir dir;
    const std::string path = dir.file("out.bin");
    auto expect = [&](const WriterModel& m, const QStringList& needles) {
        const std::string why =
            mismatch(write_llama2c(path, m.config, m.tensors), StatusCode::InvalidArgument, path, needles);
        QVERIFY2(why.empty(), why.c_str());
        QVERIFY(!std::filesystem::exists(path));
        QVERIFY(std::filesystem::is_empty(dir.path()));  // no temporary left behind either
    };
    {
        WriterModel m = writer_model(true);
        m.tensors.erase(m.tensors.begin() + 18);  // blk.1.ffn_up
        expect(m, {"missing tensor 'blk.1.ffn_up.weight'", "layer 1"});
    }
    {
        WriterModel m = writer_model(true);
        m.tensors[3].shape = {8, 4};  // blk.0.attn_k transposed
        expect(m, {"blk.0.attn_k.weight", "shape 8 x 4", "needs 4 x 8"});
    }
    {
        WriterModel m = writer_model(false);
        m.tensors.pop_back();
        expect(m, {"missing tensor 'output.weight'"});
    }
    {
        WriterModel m = writer_model(false);
        m.config.shared_classifier = true;
        expect(m, {"'output.weight' given", "shared_classifier"});
    }
    {
        WriterModel m = writer_model(true);
        m.tensors.push_back(m.tensors[1]);
        expect(m, {"'blk.0.attn_norm.weight' is given twice"});
    }
    {
        WriterModel m = writer_model(true);
        m.tensors[1].layer = 2;
        expect(m, {"'blk.2.attn_norm.weight'", "layer 2 is outside 0..1"});
    }
    {
        WriterModel m = writer_model(true);
        m.tensors.push_back({{"rope.freqs", TensorRole::Other, -1, {8}, DType::F32}, m.storage[0].data(), {}});
        expect(m, {"'rope.freqs' has no role"});
    }
    {
        WriterModel m = writer_model(true);
        m.tensors[1].dtype = DType::F16;  // the data is float32 whatever the source stored
        expect(m, {"'blk.0.attn_norm.weight': its data is float32, not f16"});
    }
    {
        WriterModel m = writer_model(true);
        m.config.n_heads = 4;  // 12 / 4 = 3
        m.config.dim = 12;
        expect(m, {"head size 3"});
    }
    {
        WriterModel m = writer_model(true);
        m.config.context_length = int64_t(1) << 31;
        expect(m, {"config.context_length 2147483648"});
    }
}

// ---------------------------------------------------------------- hand-built files

void TestLlama2c::handBuiltLegacy() {
    TempDir dir;
    for (bool shared : {true, false}) {
        const std::string path = dir.file(shared ? "shared.bin" : "unshared.bin");
        Built b = build_legacy(Tiny{}, shared);
        gkq::test::write_file(path, b.bytes.vec());
        auto f = ModelFile::open(path);
        QVERIFY2(f.is_ok(), f.message().c_str());
        QCOMPARE(f->config().shared_classifier, shared);
        QCOMPARE(f->config().vocab_size, int64_t(6));
        const std::string why = compare_tensors(*f, b);
        QVERIFY2(why.empty(), why.c_str());
        QCOMPARE(f->find("output_norm.weight")->file_offset, uint64_t(1340));  // 28 + 328 floats
        QCOMPARE(f->metadata().find("llama2c.freq_cis_bytes")->as_int(), std::optional<int64_t>(24));
    }
}

void TestLlama2c::handBuiltV1() {
    TempDir dir;
    const std::string path = dir.file("v1.bin");
    Built b = build_v1(Tiny{}, true);
    gkq::test::write_file(path, b.bytes.vec());
    auto f = ModelFile::open(path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    QCOMPARE(f->format_detail(), std::string("llama2c v1"));
    QCOMPARE(f->config().dim, int64_t(4));
    QCOMPARE(f->config().n_kv_heads, int64_t(1));
    QCOMPARE(f->config().context_length, int64_t(3));
    QVERIFY(f->config().shared_classifier);
    QCOMPARE(f->metadata().find("llama2c.version")->as_int(), std::optional<int64_t>(1));
    QCOMPARE(f->metadata().find("llama2c.header_bytes")->as_int(), std::optional<int64_t>(256));
    QCOMPARE(f->find("blk.0.attn_norm.weight")->file_offset, uint64_t(256));
    QCOMPARE(f->find("token_embd.weight")->file_offset, uint64_t(256 + 5 * 16));
    const std::string why = compare_tensors(*f, b);
    QVERIFY2(why.empty(), why.c_str());
    QCOMPARE(uint64_t(b.bytes.size()), f->file_bytes());
}

void TestLlama2c::handBuiltV2() {
    TempDir dir;
    const std::string path = dir.file("v2.bin");
    Built b = build_v2(Tiny{}, false, 8);
    gkq::test::write_file(path, b.bytes.vec());
    auto f = ModelFile::open(path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    QCOMPARE(f->format_detail(), std::string("llama2c v2 (q8, group 8)"));
    QVERIFY(!f->config().shared_classifier);
    QCOMPARE(f->metadata().find("llama2c.group_size")->as_int(), std::optional<int64_t>(8));
    const Tensor* q = f->find("blk.1.attn_q.weight");
    QVERIFY(q != nullptr);
    QCOMPARE(q->dtype, DType::Q8_G);
    QCOMPARE(q->type_name, std::string("q8_g8"));
    QCOMPARE(q->group_size, 8);
    QCOMPARE(q->n_bytes, uint64_t(16));
    QCOMPARE(q->n_scale_bytes, uint64_t(8));
    QCOMPARE(f->find("output_norm.weight")->dtype, DType::F32);
    // code * scale, exactly
    const std::string why = compare_tensors(*f, b);
    QVERIFY2(why.empty(), why.c_str());
    // the first scale of token_embd directly follows the last code (output.weight's)
    const Tensor* out = f->find("output.weight");
    QCOMPARE(uint64_t(f->find("token_embd.weight")->scales - out->data), out->n_bytes);
    QCOMPARE(f->n_tensor_bytes(), uint64_t(b.bytes.size() - 256));
}

// ---------------------------------------------------------------- malformed files

void TestLlama2c::malformed_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<int>("code");
    QTest::addColumn<QStringList>("needles");
    const int corrupt = int(StatusCode::Corrupt), unsupported = int(StatusCode::Unsupported);
    const Tiny t;
    const Bytes legacy = build_legacy(t, true).bytes;  // 1380 bytes
    auto with = [](Bytes b, auto&& f) {
        f(b);
        return to_qbytes(b);
    };

    QTest::newRow("empty file") << QByteArray() << corrupt << QStringList{"header field dim", "offset 0"};
    QTest::newRow("header truncated") << to_qbytes(legacy).left(20) << corrupt
                                      << QStringList{"header field vocab_size", "offset 20"};
    QTest::newRow("zero dim") << to_qbytes(legacy_header(0, 8, 2, 2, 1, 6, 3)) << corrupt
                              << QStringList{"dim is 0; it must be positive"};
    QTest::newRow("negative n_layers") << to_qbytes(legacy_header(4, 8, -2, 2, 1, 6, 3)) << corrupt
                                       << QStringList{"n_layers is -2"};
    QTest::newRow("zero vocab") << to_qbytes(legacy_header(4, 8, 2, 2, 1, 0, 3)) << corrupt
                                << QStringList{"vocab_size is 0"};
    QTest::newRow("zero seq_len") << to_qbytes(legacy_header(4, 8, 2, 2, 1, 6, 0)) << corrupt
                                  << QStringList{"seq_len is 0"};
    QTest::newRow("n_kv_heads > n_heads")
        << to_qbytes(legacy_header(4, 8, 2, 2, 4, 6, 3)) << corrupt << QStringList{"n_kv_heads 4 exceeds n_heads 2"};
    QTest::newRow("n_kv_heads not dividing") << to_qbytes(legacy_header(24, 8, 2, 4, 3, 6, 3)) << corrupt
                                             << QStringList{"n_kv_heads 3 does not divide n_heads 4"};
    QTest::newRow("heads not dividing dim")
        << to_qbytes(legacy_header(10, 8, 2, 4, 2, 6, 3)) << corrupt << QStringList{"n_heads 4 does not divide dim 10"};
    QTest::newRow("odd head size") << to_qbytes(legacy_header(6, 8, 2, 2, 1, 6, 3)) << corrupt
                                   << QStringList{"head size 3", "odd"};
    QTest::newRow("sizes overflow") << to_qbytes(legacy_header(1 << 30, 1 << 30, 1 << 30, 1 << 28, 1 << 28, 1 << 30, 1))
                                    << corrupt << QStringList{"overflow 64 bits", "'blk.0.attn_q.weight'"};
    QTest::newRow("absurd sizes") << to_qbytes(legacy_header(1 << 20, 1 << 20, 1000, 1 << 10, 1 << 10, -(1 << 20), 1))
                                  << corrupt
                                  << QStringList{"truncated: 'token_embd.weight' at offset 28", "ends at 28"};
    QTest::newRow("truncated inside a tensor")
        << to_qbytes(legacy).left(326) << corrupt
        << QStringList{"'blk.1.attn_k.weight' at offset 316", "needs 32 bytes", "ends at 326", "1380 bytes in total"};
    QTest::newRow("truncated inside freq_cis")
        << to_qbytes(legacy).left(1370) << corrupt << QStringList{"'freq_cis_imag' at offset 1368"};
    QTest::newRow("unshared without classifier") << with(Bytes(legacy), [](Bytes& b) {
        int32_t v = -6;
        std::memcpy(b.vec().data() + 20, &v, 4);
    }) << corrupt << QStringList{"'output.weight' at offset 1380", "ends at 1380", "1476 bytes in total"};
    QTest::newRow("trailing garbage") << with(Bytes(legacy), [](Bytes& b) { b.zeros(5); }) << corrupt
                                      << QStringList{"5 trailing bytes", "offset 1380"};
    QTest::newRow("byte-swapped magic") << with(Bytes(), [](Bytes& b) { b.u32(0x32346b61u).zeros(300); }) << corrupt
                                        << QStringList{"byte-swapped", "offset 0"};
    QTest::newRow("v1 truncated header") << with(versioned_prefix(1), [&](Bytes& b) {
        put_params(b, t, 6);
        b.u8(1).zeros(20);
    }) << corrupt << QStringList{"header padding", "offset 37", "needs 219 bytes"};
    QTest::newRow("v1 version truncated")
        << to_qbytes(versioned_prefix(1)).left(6) << corrupt << QStringList{"version", "offset 4"};
    QTest::newRow("unknown version 3") << with(versioned_prefix(3), [](Bytes& b) { b.zeros(252); }) << unsupported
                                       << QStringList{"version 3", "not supported"};
    QTest::newRow("ak42 magic, version 0") << with(versioned_prefix(0), [](Bytes& b) { b.zeros(252); }) << unsupported
                                           << QStringList{"version 0", "not supported"};
    QTest::newRow("magic as version") << with(versioned_prefix(0x616b3432), [](Bytes& b) { b.zeros(252); })
                                      << unsupported << QStringList{"version 1634415666"};
    QTest::newRow("v1 shared flag 7") << with(versioned_prefix(1), [&](Bytes& b) {
        put_params(b, t, 6);
        b.u8(7).zeros(219);
    }) << corrupt << QStringList{"shared_classifier at offset 36", "value 7"};
    QTest::newRow("v1 negative vocab") << with(versioned_prefix(1), [&](Bytes& b) {
        put_params(b, t, -6);
        b.u8(1).zeros(219);
    }) << corrupt << QStringList{"v1 header: vocab_size is -6"};
    QTest::newRow("v1 truncated weights") << to_qbytes(build_v1(t, true).bytes).left(600) << corrupt
                                          << QStringList{"'blk.1.attn_k.weight' at offset 592"};
    QTest::newRow("v2 group size 0") << to_qbytes(build_v2(t, true, 8).bytes).replace(37, 4, QByteArray(4, '\0'))
                                     << corrupt << QStringList{"group_size 0 must be positive"};
    QTest::newRow("v2 negative group size")
        << with(Bytes(), [&](Bytes& b) { put_versioned_header(b, t, 2, true, -64); }) << corrupt
        << QStringList{"group_size -64"};
    QTest::newRow("v2 group size not dividing")
        << with(Bytes(), [&](Bytes& b) { put_versioned_header(b, t, 2, true, 12); }) << corrupt
        << QStringList{"group_size 12 does not divide the 16 elements of 'blk.0.attn_q.weight'"};
    QTest::newRow("v2 truncated scales") << to_qbytes(build_v2(t, false, 8).bytes).chopped(4) << corrupt
                                         << QStringList{"'scales of output.weight' at offset", "needs 12 bytes"};
    QTest::newRow("v2 truncated header group size") << with(versioned_prefix(2), [&](Bytes& b) {
        put_params(b, t, 6);
        b.u8(1).u8(8);
    }) << corrupt << QStringList{"group_size at offset 37"};
}

void TestLlama2c::malformed() {
    QFETCH(QByteArray, bytes);
    QFETCH(int, code);
    QFETCH(QStringList, needles);
    TempDir dir;
    const std::string path = dir.file("case.bin");
    gkq::test::write_file(path, to_vec(bytes));
    auto f = ModelFile::open(path);
    const std::string why = mismatch(f.status(), StatusCode(code), path, needles);
    QVERIFY2(why.empty(), why.c_str());
}

// Every proper prefix of a valid file is rejected as Corrupt, naming the file; none crashes.
void TestLlama2c::truncationSweep() {
    TempDir dir;
    WriterModel m = writer_model(false);
    const std::string full = dir.file("full.bin");
    QVERIFY(write_llama2c(full, m.config, m.tensors).is_ok());
    const std::vector<std::vector<uint8_t>> files = {gkq::test::read_file(full), build_v1(Tiny{}, false).bytes.vec(),
                                                     build_v2(Tiny{}, false, 4).bytes.vec()};
    const std::string path = dir.file("cut.bin");
    for (const auto& bytes : files) {
        gkq::test::write_file(path, bytes);
        QVERIFY(ModelFile::open(path).is_ok());
        // Shrinking in place, longest prefix first: rewriting a truncated file costs a flush on ext4.
        for (size_t n = bytes.size(); n-- > 0;) {
            std::filesystem::resize_file(path, n);
            const std::string why = mismatch(ModelFile::open(path).status(), StatusCode::Corrupt, path, {});
            QVERIFY2(why.empty(), (std::to_string(n) + " bytes: " + why).c_str());
        }
    }
}

// ---------------------------------------------------------------- real checkpoints

void TestLlama2c::realLlama2xs() {
    const auto path = gkq::test::shared_model("llama2xs-279K/model.bin");
    if (!path) QSKIP(gkq::test::shared_models_skip_reason("llama2xs-279K/model.bin").c_str());
    auto f = ModelFile::open(*path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    QCOMPARE(f->format_detail(), std::string("llama2c v0 (legacy)"));
    const ModelConfig& c = f->config();
    QCOMPARE((std::vector<int64_t>{c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
                                   c.context_length}),
             (std::vector<int64_t>{64, 192, 5, 8, 4, 512, 256}));
    QVERIFY(c.shared_classifier);
    QCOMPARE(f->n_params(), int64_t(279232));
    QCOMPARE(f->tensors().size(), size_t(1 + 5 * 9 + 1));
    QCOMPARE(f->file_bytes(), uint64_t(1125148));
    QCOMPARE(f->metadata().find("llama2c.freq_cis_bytes")->as_int(), std::optional<int64_t>(256 * 8 * 4));
    QVERIFY(f->find(TensorRole::Output, -1) == nullptr);

    const std::vector<std::pair<const char*, Shape>> shapes = {
        {"token_embd.weight", {512, 64}},     {"blk.0.attn_norm.weight", {64}},
        {"blk.0.attn_q.weight", {64, 64}},    {"blk.0.attn_k.weight", {32, 64}},
        {"blk.0.attn_v.weight", {32, 64}},    {"blk.0.attn_output.weight", {64, 64}},
        {"blk.0.ffn_norm.weight", {64}},      {"blk.0.ffn_gate.weight", {192, 64}},
        {"blk.0.ffn_down.weight", {64, 192}}, {"blk.0.ffn_up.weight", {192, 64}},
        {"output_norm.weight", {64}},
    };
    for (const auto& [name, shape] : shapes) {
        const Tensor* t = f->find(name);
        QVERIFY2(t != nullptr, name);
        QCOMPARE(t->shape, shape);
    }
    const Tensor* embd = f->find(TensorRole::TokenEmbd, -1);
    QCOMPARE(embd->file_offset, uint64_t(28));
    const std::vector<uint8_t> raw = gkq::test::read_file(*path);
    auto v = tensor_to_f32(*embd);
    QVERIFY(v.is_ok());
    QCOMPARE((*v)[0], float_at(raw, 28));
    QCOMPARE((*v)[0], -0.22313952445983887f);
    // output_norm ends where the 8192 bytes of freq_cis begin
    const Tensor* norm = f->find("output_norm.weight");
    QCOMPARE(norm->file_offset + norm->n_bytes, uint64_t(1125148 - 8192));
}

void TestLlama2c::realBabyLlama() {
    const auto path = gkq::test::shared_model("babyllama-tok105/model5000.bin");
    if (!path) QSKIP(gkq::test::shared_models_skip_reason("babyllama-tok105/model5000.bin").c_str());
    auto f = ModelFile::open(*path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    const ModelConfig& c = f->config();
    QCOMPARE((std::vector<int64_t>{c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
                                   c.context_length}),
             (std::vector<int64_t>{128, 352, 5, 8, 4, 105, 256}));
    QVERIFY(c.shared_classifier);
    QCOMPARE(f->n_params(), int64_t(936448));
    QCOMPARE(f->tensors().size(), size_t(47));
    QCOMPARE(f->find("blk.4.attn_k.weight")->shape, (Shape{64, 128}));
    QCOMPARE(f->find("blk.4.ffn_down.weight")->shape, (Shape{128, 352}));
    const std::vector<uint8_t> raw = gkq::test::read_file(*path);
    auto v = tensor_to_f32(*f->find("token_embd.weight"));
    QVERIFY(v.is_ok());
    QCOMPARE((*v)[0], float_at(raw, 28));
}

void TestLlama2c::realTokenizers() {
    const auto tok512 = gkq::test::shared_model("llama2xs-279K/tok512.bin");
    if (!tok512) QSKIP(gkq::test::shared_models_skip_reason("llama2xs-279K/tok512.bin").c_str());
    auto v = read_llama2c_tokenizer(*tok512, 512);
    QVERIFY2(v.is_ok(), v.message().c_str());
    QCOMPARE(v->model, std::string("llama2.c"));
    QCOMPARE(v->tokens.size(), size_t(512));
    QCOMPARE(v->scores.size(), size_t(512));
    QCOMPARE(v->max_token_length, 7);
    QCOMPARE(v->bos_id, 1);
    QCOMPARE(v->eos_id, 2);
    QCOMPARE(v->tokens[0], std::string("<unk>"));
    QCOMPARE(v->tokens[1], std::string("\n<s>\n"));
    QCOMPARE(v->tokens[2], std::string("\n</s>\n"));
    QCOMPARE(v->tokens[3], std::string("<0x00>"));
    QCOMPARE(v->tokens[258], std::string("<0xFF>"));
    QCOMPARE(v->tokens[376], std::string(" little"));  // 7 bytes: length == max_token_length is valid
    QCOMPARE(v->tokens[511], std::string("\xe2\x80\x8a"));
    QCOMPARE(v->scores[511], -252.0f);
    // read to the end of the file: the same 512 tokens, nothing left over
    auto all = read_llama2c_tokenizer(*tok512, 0);
    QVERIFY2(all.is_ok(), all.message().c_str());
    QCOMPARE(all->tokens, v->tokens);
    // a model with a smaller or larger vocabulary than the tokenizer is caught, both sizes named
    const std::string why = mismatch(read_llama2c_tokenizer(*tok512, 500).status(), StatusCode::Corrupt, *tok512,
                                     {"holds 512 tokens, but the model's vocabulary has 500 (vocab_size)"});
    QVERIFY2(why.empty(), why.c_str());
    const std::string why2 = mismatch(read_llama2c_tokenizer(*tok512, 513).status(), StatusCode::Corrupt, *tok512,
                                      {"holds 512 tokens, but the model's vocabulary has 513 (vocab_size)"});
    QVERIFY2(why2.empty(), why2.c_str());

    const auto tok105 = gkq::test::shared_model("babyllama-tok105/tok105.bin");
    if (!tok105) QSKIP(gkq::test::shared_models_skip_reason("babyllama-tok105/tok105.bin").c_str());
    auto b = read_llama2c_tokenizer(*tok105, 105);
    QVERIFY2(b.is_ok(), b.message().c_str());
    QCOMPARE(b->tokens.size(), size_t(105));
    QCOMPARE(b->max_token_length, 6);
    QCOMPARE(b->tokens[2], std::string("\n</s>\n"));  // 6 bytes == max_token_length
    QCOMPARE(b->tokens[3], std::string(" "));
    QCOMPARE(b->tokens[4], std::string("e"));
    QCOMPARE(b->scores[4], -1.0f);
    QCOMPARE(b->tokens[104], std::string("\xe2\x80\x8a"));
    QCOMPARE(b->scores[104], -101.0f);
    auto b_all = read_llama2c_tokenizer(*tok105, 0);
    QVERIFY2(b_all.is_ok(), b_all.message().c_str());
    QCOMPARE(b_all->tokens.size(), size_t(105));
}

// ---------------------------------------------------------------- tokenizer edges

void TestLlama2c::tokenizerEdges() {
    TempDir dir;
    const std::string path = dir.file("tok.bin");
    // an empty token and one exactly max_token_length long are valid
    gkq::test::write_file(path, tokenizer_bytes(3, {{0.5f, ""}, {-1.25f, "abc"}, {2.0f, "\xff"}}).vec());
    auto v = read_llama2c_tokenizer(path, 3);
    QVERIFY2(v.is_ok(), v.message().c_str());
    QCOMPARE(v->tokens, (std::vector<std::string>{"", "abc", "\xff"}));
    QCOMPARE(v->scores, (std::vector<float>{0.5f, -1.25f, 2.0f}));
    QVERIFY(v->token_types.empty());
    auto all = read_llama2c_tokenizer(path, 0);
    QVERIFY2(all.is_ok(), all.message().c_str());
    QCOMPARE(all->tokens.size(), size_t(3));

    std::string why = mismatch(read_llama2c_tokenizer(path, -1).status(), StatusCode::InvalidArgument, path,
                               {"expected vocabulary size -1"});
    QVERIFY2(why.empty(), why.c_str());
    const std::string missing = dir.file("missing.bin");
    auto r = read_llama2c_tokenizer(missing, 0);
    QVERIFY(!r.is_ok());
    QVERIFY2(r.message().find(missing) != std::string::npos, r.message().c_str());
}

void TestLlama2c::tokenizerMalformed_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<qint64>("expected_vocab");
    QTest::addColumn<QStringList>("needles");
    const Bytes two = tokenizer_bytes(3, {{0.f, "ab"}, {0.f, "c"}});  // 4 + 10 + 9 = 23 bytes

    QTest::newRow("empty") << QByteArray() << qint64(0) << QStringList{"max_token_length at offset 0"};
    QTest::newRow("max_token_length 0") << to_qbytes(tokenizer_bytes(0, {})) << qint64(0)
                                        << QStringList{"max_token_length at offset 0", "0 is not positive"};
    QTest::newRow("negative max_token_length")
        << to_qbytes(tokenizer_bytes(-5, {})) << qint64(0) << QStringList{"-5 is not positive"};
    QTest::newRow("length over max") << to_qbytes(tokenizer_bytes(3, {{0.f, "abcd"}})) << qint64(1)
                                     << QStringList{"token 0 at offset 8", "length 4 is outside 0..3"};
    QTest::newRow("negative length") << to_qbytes(Bytes(two).f32(0.f).i32(-1)) << qint64(0)
                                     << QStringList{"token 2 at offset 27", "length -1"};
    QTest::newRow("bytes past the end") << to_qbytes(Bytes(two).f32(0.f).i32(3).raw("x")) << qint64(0)
                                        << QStringList{"token 2 at offset 31", "needs 3 bytes"};
    QTest::newRow("fewer tokens than expected")
        << to_qbytes(two) << qint64(3) << QStringList{"holds 2 tokens, but the model's vocabulary has 3"};
    QTest::newRow("more tokens than expected")
        << to_qbytes(two) << qint64(1) << QStringList{"holds 2 tokens, but the model's vocabulary has 1"};
    QTest::newRow("bytes after the tokens expected")
        << to_qbytes(Bytes(two).u8(0).u8(0)) << qint64(1)
        << QStringList{"11 bytes after token 0 at offset 14", "more than the 1 tokens"};
    QTest::newRow("partial token at the end")
        << to_qbytes(Bytes(two).u8(0).u8(0)) << qint64(0) << QStringList{"token 2 at offset 23"};
}

void TestLlama2c::tokenizerMalformed() {
    QFETCH(QByteArray, bytes);
    QFETCH(qint64, expected_vocab);
    QFETCH(QStringList, needles);
    TempDir dir;
    const std::string path = dir.file("tok.bin");
    gkq::test::write_file(path, to_vec(bytes));
    const std::string why =
        mismatch(read_llama2c_tokenizer(path, expected_vocab).status(), StatusCode::Corrupt, path, needles);
    QVERIFY2(why.empty(), why.c_str());
}

QTEST_APPLESS_MAIN(TestLlama2c)
#include "test_llama2c.moc"
