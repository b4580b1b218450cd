// One tiny model written as llama2.c, GGUF and safetensors must read back as the same model: same tensors,
// roles, layers and shapes, and bit-identical float32 data. The one documented difference: safetensors
// stores q/k rows in HF's half-split rotary layout, so they are compared after undoing that permutation.
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>
#include <map>

using namespace gkq;

namespace {

// HF row h*hd + j*hd/2 + i holds interleaved row h*hd + 2i + j.
std::vector<float> hf_to_interleaved(const std::vector<float>& w, int64_t n_heads, int64_t head_size, int64_t cols) {
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < head_size / 2; ++i)
            for (int64_t j = 0; j < 2; ++j) {
                const int64_t src = h * head_size + j * (head_size / 2) + i;
                const int64_t dst = h * head_size + 2 * i + j;
                std::copy_n(&w[src * cols], cols, &out[dst * cols]);
            }
    return out;
}

struct Loaded {
    TensorRole role;
    int32_t layer;
    std::vector<int64_t> shape;
    std::vector<float> data;
};

std::map<std::pair<int, int>, Loaded> load_by_role(const ModelFile& f) {
    std::map<std::pair<int, int>, Loaded> out;
    for (const Tensor& t : f.tensors()) {
        auto v = tensor_to_f32(t);
        if (!v) qFatal("%s", v.message().c_str());
        std::vector<float> data = std::move(v).value();
        const ModelConfig& c = f.config();
        if (c.rope_style == RopeStyle::HalfSplit && (t.role == TensorRole::AttnQ || t.role == TensorRole::AttnK)) {
            const int64_t heads = t.role == TensorRole::AttnQ ? c.n_heads : c.n_kv_heads;
            data = hf_to_interleaved(data, heads, c.head_size(), t.cols());
        }
        out[{int(t.role), t.layer}] = {t.role, t.layer, t.shape, std::move(data)};
    }
    return out;
}

}  // namespace

class TestCrossFormat : public QObject {
    Q_OBJECT
private slots:
    void threeFormatsAgree_data() {
        QTest::addColumn<bool>("shared");
        QTest::newRow("shared classifier") << true;
        QTest::newRow("separate classifier") << false;
    }
    void threeFormatsAgree() {
        QFETCH(bool, shared);
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(shared), 42);
        const std::string bin = dir.file("m.bin"), gguf = dir.file("m.gguf"), st = dir.file("m.safetensors");
        QVERIFY(write_llama2c(bin, m.config, m.tensors).is_ok());
        QVERIFY(write_gguf(gguf, m.config, m.tensors).is_ok());
        QVERIFY(write_safetensors(st, m.config, m.tensors).is_ok());

        auto a = ModelFile::open(bin);
        auto b = ModelFile::open(gguf);
        auto c = ModelFile::open(st);
        QVERIFY2(a.is_ok(), a.message().c_str());
        QVERIFY2(b.is_ok(), b.message().c_str());
        QVERIFY2(c.is_ok(), c.message().c_str());
        QCOMPARE(int(a->config().rope_style), int(RopeStyle::Interleaved));
        QCOMPARE(int(b->config().rope_style), int(RopeStyle::Interleaved));
        QCOMPARE(int(c->config().rope_style), int(RopeStyle::HalfSplit));
        for (const ModelFile* f : {&*a, &*b, &*c}) {
            const ModelConfig& cfg = f->config();
            QCOMPARE(cfg.dim, m.config.dim);
            QCOMPARE(cfg.hidden_dim, m.config.hidden_dim);
            QCOMPARE(cfg.n_layers, m.config.n_layers);
            QCOMPARE(cfg.n_heads, m.config.n_heads);
            QCOMPARE(cfg.n_kv_heads, m.config.n_kv_heads);
            QCOMPARE(cfg.vocab_size, m.config.vocab_size);
            QCOMPARE(cfg.context_length, m.config.context_length);
            QCOMPARE(cfg.shared_classifier, shared);
            QCOMPARE(f->tensors().size(), m.tensors.size());
            QCOMPARE(f->n_params(), a->n_params());
        }
        auto ta = load_by_role(*a), tb = load_by_role(*b), tc = load_by_role(*c);
        QCOMPARE(ta.size(), m.tensors.size());
        for (size_t i = 0; i < m.tensors.size(); ++i) {
            const WriteTensor& w = m.tensors[i];
            const std::pair<int, int> key{int(w.role), w.layer};
            for (auto* loaded : {&ta, &tb, &tc}) {
                QVERIFY(loaded->count(key));
                const Loaded& l = loaded->at(key);
                QCOMPARE(l.shape, w.shape);
                QCOMPARE(l.data.size(), m.storage[i].size());
                QVERIFY2(std::memcmp(l.data.data(), m.storage[i].data(), l.data.size() * 4) == 0,
                         qPrintable(QString("%1 layer %2 differs").arg(role_name(w.role).data()).arg(w.layer)));
            }
        }
    }

    void halfSplitModelExportsBackToInterleaved() {
        // llama2.c -> safetensors (q/k reordered to HF's layout) -> llama2.c and GGUF (reordered back):
        // the final files hold exactly the original bytes.
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 9);
        QVERIFY(write_safetensors(dir.file("m.safetensors"), m.config, m.tensors).is_ok());
        auto st = ModelFile::open(dir.file("m.safetensors"));
        QVERIFY2(st.is_ok(), st.message().c_str());
        QCOMPARE(int(st->config().rope_style), int(RopeStyle::HalfSplit));
        std::vector<std::vector<float>> storage;
        std::vector<WriteTensor> tensors;
        for (const Tensor& t : st->tensors()) {
            storage.push_back(*tensor_to_f32(t));
            tensors.push_back({{t.name, t.role, t.layer, t.shape, DType::F32}, nullptr, {}});
        }
        for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = storage[i].data();
        QVERIFY(write_llama2c(dir.file("back.bin"), st->config(), tensors).is_ok());
        QVERIFY(write_gguf(dir.file("back.gguf"), st->config(), tensors).is_ok());
        QVERIFY(write_safetensors(dir.file("again.safetensors"), st->config(), tensors).is_ok());
        // llama2.c legacy files also hold the freq_cis tables: compare tensors, and GGUF / safetensors too
        for (const char* name : {"back.bin", "back.gguf", "again.safetensors"}) {
            auto f = ModelFile::open(dir.file(name));
            QVERIFY2(f.is_ok(), f.message().c_str());
            auto loaded = load_by_role(*f);
            for (size_t i = 0; i < m.tensors.size(); ++i) {
                const Loaded& l = loaded.at({int(m.tensors[i].role), m.tensors[i].layer});
                QVERIFY2(std::memcmp(l.data.data(), m.storage[i].data(), l.data.size() * 4) == 0,
                         qPrintable(QString("%1: %2 layer %3")
                                        .arg(name)
                                        .arg(role_name(m.tensors[i].role).data())
                                        .arg(m.tensors[i].layer)));
            }
        }
        // and the safetensors file written from the half-split model is byte-identical to the first one
        QCOMPARE(test::read_file(dir.file("again.safetensors")), test::read_file(dir.file("m.safetensors")));
    }

    void quantizedGgufMatchesReferenceQuantizer() {
        // Q8_0 in GGUF reads back as exactly what the reference quantizer produces
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 3);
        WriteOptions opt;
        opt.dtype = DType::Q8_0;
        QVERIFY(write_gguf(dir.file("q.gguf"), m.config, m.tensors, {}, opt).is_ok());
        auto f = ModelFile::open(dir.file("q.gguf"));
        QVERIFY2(f.is_ok(), f.message().c_str());
        const Tensor* q = f->find(TensorRole::AttnQ, 1);
        QVERIFY(q);
        QCOMPARE(int(q->dtype), int(DType::Q8_0));
        size_t idx = 0;
        while (!(m.tensors[idx].role == TensorRole::AttnQ && m.tensors[idx].layer == 1)) ++idx;
        const auto& src = m.storage[idx];
        std::vector<uint8_t> blocks(*dtype_storage_bytes(DType::Q8_0, src.size()));
        quantize_q8_0(src.data(), src.size(), blocks.data());
        QCOMPARE(q->n_bytes, uint64_t(blocks.size()));
        QVERIFY(std::memcmp(q->data, blocks.data(), blocks.size()) == 0);
        const Tensor* norm = f->find(TensorRole::AttnNorm, 0);
        QCOMPARE(int(norm->dtype), int(DType::F32));  // 1-D tensors stay f32
    }
};

QTEST_APPLESS_MAIN(TestCrossFormat)
#include "test_cross_format.moc"
