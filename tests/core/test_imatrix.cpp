// Importance matrices: the transformer's matrix input observer (logits unchanged, every product seen), the
// collection rules of llama-imatrix (chunks, BOS, counts) against sums computed here from the weights, the GGUF and
// legacy files (round trips, malformed files), the match with a model for quantize, the weighted Q4_0 path of the
// codec; and, on ../shared/models/llama2xs-279K, gkq's imatrix against the one llama.cpp's llama-imatrix wrote
// (tests/data/imatrix, README there), value for value, and that file read and written back byte for byte.
#include "gkq/codec.h"
#include "gkq/imatrix.h"
#include "gkq/model_file.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "gkq/type_traits.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace gkq;

namespace {

std::string data_dir() {
    return std::string(GKQ_TEST_DATA_DIR) + "/imatrix";
}

std::vector<int32_t> token_sequence(int32_t vocab, size_t n) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(vocab)));
    return t;
}

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A small GGUF-form imatrix with two entries (one of two matrices), for the file tests.
Imatrix small_imatrix() {
    Imatrix m;
    m.datasets = {"calib.txt"};
    m.chunk_count = 3;
    m.chunk_size = 8;
    ImatrixEntry a;
    a.name = "blk.0.attn_q.weight";
    a.n_cols = 4;
    a.sums = {1.5f, 0.25f, 8.0f, 0.0f};
    a.counts = {24};
    ImatrixEntry b;
    b.name = "blk.1.ffn_down.weight";
    b.n_cols = 3;
    b.sums = {3.0f, 6.0f, 9.0f, 1.0f, 2.0f, 4.0f};
    b.counts = {12, 0};
    m.entries = {a, b};
    return m;
}

}  // namespace

class TestImatrix : public QObject {
    Q_OBJECT

private slots:
    // ---- the observer ----------------------------------------------------------------------------------------------

    // Observing changes no logit, and every matrix product of every block (and the classifier) is seen once per
    // block of tokens with its input width.
    void observerSeesEveryProductAndKeepsLogits() {
        for (bool shared : {true, false}) {
            const test::TinyModel m = test::make_tiny_model(test::tiny_config(shared), 3);
            test::MemoryWeights w(m);
            auto plain = Transformer::load(w);
            auto seen = Transformer::load(w);
            QVERIFY2(plain && seen, qPrintable(QString::fromStdString(plain.message())));
            const std::vector<int32_t> tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 20);
            const auto vocab = static_cast<size_t>(m.config.vocab_size);
            std::vector<float> a(tokens.size() * vocab), b(a.size());
            std::map<std::pair<int, int>, int64_t> calls;  // (role, layer) -> tokens seen
            std::map<std::pair<int, int>, int64_t> widths;
            auto key = [](TensorRole role, int32_t layer) { return std::make_pair(static_cast<int>(role), layer); };
            seen->set_matrix_input_observer([&](TensorRole role, int32_t layer, const float*, int64_t n, int64_t cols) {
                calls[key(role, layer)] += n;
                widths[key(role, layer)] = cols;
            });
            QVERIFY(plain->forward_batch(tokens.data(), int64_t(tokens.size()), 0, a.data()));
            QVERIFY(seen->forward_batch(tokens.data(), int64_t(tokens.size()), 0, b.data()));
            QVERIFY(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
            const ModelConfig& c = m.config;
            for (int32_t l = 0; l < c.n_layers; ++l) {
                for (TensorRole r : {TensorRole::AttnQ, TensorRole::AttnK, TensorRole::AttnV, TensorRole::AttnO,
                                     TensorRole::FfnGate, TensorRole::FfnUp}) {
                    QCOMPARE(calls[key(r, l)], int64_t(tokens.size()));
                    QCOMPARE(widths[key(r, l)], c.dim);
                }
                QCOMPARE(calls[key(TensorRole::FfnDown, l)], int64_t(tokens.size()));
                QCOMPARE(widths[key(TensorRole::FfnDown, l)], c.hidden_dim);
            }
            const TensorRole cls = shared ? TensorRole::TokenEmbd : TensorRole::Output;
            QCOMPARE(calls[key(cls, -1)], int64_t(tokens.size()));
            QCOMPARE(calls.size(), size_t(7 * c.n_layers + 1));
            // removing it: no more calls
            seen->set_matrix_input_observer({});
            calls.clear();
            QVERIFY(seen->forward_batch(tokens.data(), 4, 0));
            QVERIFY(calls.empty());
        }
    }

    // ---- collection --------------------------------------------------------------------------------------------

    // blk.0.attn_q's input is rmsnorm(embedding) * attn_norm, computable from the weights alone: the sums over the
    // chunks (first token of each replaced by BOS, the partial last chunk dropped) equal the ones computed here, and
    // the counts, chunk count and size follow llama-imatrix's rules.
    void sumsFollowTheChunkRules() {
        const test::TinyModel m = test::make_tiny_model(test::tiny_config(false), 5);
        test::MemoryWeights w(m);
        auto t = Transformer::load(w);
        QVERIFY(t);
        const ModelConfig& c = m.config;
        const int64_t n_ctx = 8;
        const int32_t bos = 1;
        std::vector<int32_t> tokens = token_sequence(static_cast<int32_t>(c.vocab_size), 8 * 3 + 5);  // 3 chunks + 5
        ImatrixOptions o;
        o.n_ctx = n_ctx;
        o.dataset = "calib.txt";
        auto im = compute_imatrix(*t, tokens, bos, o);
        QVERIFY2(im, qPrintable(QString::fromStdString(im.message())));
        QCOMPARE(im->chunk_size, 8);
        QCOMPARE(im->chunk_count, 3);
        QCOMPARE(im->datasets, std::vector<std::string>{"calib.txt"});
        QCOMPARE(im->entries.size(), size_t(7 * c.n_layers));  // no output.weight without process_output
        for (const ImatrixEntry& e : im->entries) QCOMPARE(e.counts, std::vector<int64_t>{24});
        QVERIFY(std::is_sorted(im->entries.begin(), im->entries.end(),
                               [](const ImatrixEntry& a, const ImatrixEntry& b) { return a.name < b.name; }));

        const std::vector<float>& emb = w.values[w.at(TensorRole::TokenEmbd, -1)];
        const std::vector<float>& norm = w.values[w.at(TensorRole::AttnNorm, 0)];
        std::vector<float> want(static_cast<size_t>(c.dim), 0.0f);
        for (int64_t i = 0; i < 24; ++i) {
            const int32_t tok = i % n_ctx == 0 ? bos : tokens[static_cast<size_t>(i)];
            const float* x = emb.data() + tok * c.dim;
            float ss = 0;
            for (int64_t j = 0; j < c.dim; ++j) ss += x[j] * x[j];
            ss = 1.0f / std::sqrt(ss / static_cast<float>(c.dim) + static_cast<float>(c.norm_eps));
            for (int64_t j = 0; j < c.dim; ++j) {
                const float v = norm[static_cast<size_t>(j)] * (ss * x[j]);
                want[static_cast<size_t>(j)] += v * v;
            }
        }
        const ImatrixEntry* q = im->find("blk.0.attn_q.weight");
        QVERIFY(q != nullptr);
        QCOMPARE(q->n_cols, c.dim);
        for (int64_t j = 0; j < c.dim; ++j) QCOMPARE(q->sums[static_cast<size_t>(j)], want[static_cast<size_t>(j)]);
        // k and v see the same input
        QCOMPARE(im->find("blk.0.attn_k.weight")->sums, q->sums);
        QCOMPARE(im->find("blk.1.ffn_down.weight")->n_cols, c.hidden_dim);

        // --chunks caps; process_output adds output.weight (not for a tied classifier)
        o.n_chunks = 2;
        o.process_output = true;
        auto two = compute_imatrix(*t, tokens, bos, o);
        QVERIFY(two);
        QCOMPARE(two->chunk_count, 2);
        QVERIFY(two->find("output.weight") != nullptr);
        QCOMPARE(two->find("output.weight")->counts, std::vector<int64_t>{16});
        QCOMPARE(two->find("blk.0.attn_q.weight")->counts, std::vector<int64_t>{16});
    }

    void refusesShortTextsAndLongContexts() {
        const test::TinyModel m = test::make_tiny_model(test::tiny_config(true), 5);
        test::MemoryWeights w(m);
        auto t = Transformer::load(w);
        QVERIFY(t);
        ImatrixOptions o;
        o.n_ctx = 8;
        auto short_text = compute_imatrix(*t, token_sequence(40, 15), 1, o);
        QCOMPARE(short_text.status().code(), StatusCode::InvalidArgument);
        QVERIFY(short_text.message().find("at least 16") != std::string::npos);
        o.n_ctx = t->n_context() + 1;
        auto long_ctx = compute_imatrix(*t, token_sequence(40, 200), 1, o);
        QCOMPARE(long_ctx.status().code(), StatusCode::InvalidArgument);
        o.n_ctx = 8;
        auto cancelled =
            compute_imatrix(*t, token_sequence(40, 40), 1, o, [](double, std::string_view) { return false; });
        QCOMPARE(cancelled.status().code(), StatusCode::Cancelled);
    }

    // ---- files ---------------------------------------------------------------------------------------------------

    void ggufRoundTrip() {
        test::TempDir dir;
        const Imatrix m = small_imatrix();
        const std::string path = dir.file("m.gguf");
        QVERIFY(write_imatrix(m, path, ImatrixFormat::Gguf));
        auto back = read_imatrix(path);
        QVERIFY2(back, qPrintable(QString::fromStdString(back.message())));
        QCOMPARE(back->format, ImatrixFormat::Gguf);
        QCOMPARE(back->datasets, m.datasets);
        QCOMPARE(back->chunk_count, 3);
        QCOMPARE(back->chunk_size, 8);
        QCOMPARE(back->entries.size(), size_t(2));
        for (size_t i = 0; i < 2; ++i) {
            QCOMPARE(back->entries[i].name, m.entries[i].name);
            QCOMPARE(back->entries[i].n_cols, m.entries[i].n_cols);
            QCOMPARE(back->entries[i].sums, m.entries[i].sums);
            QCOMPARE(back->entries[i].counts, m.entries[i].counts);
        }
        // written again: the same bytes
        auto again = imatrix_bytes(*back, ImatrixFormat::Gguf);
        QVERIFY(again);
        QCOMPARE(*again, bytes_of(path));
        // llama-quantize's importance: sums / count; a zero count gives 1
        auto imp = imatrix_importance(*back, "blk.0.attn_q.weight", 4);
        QVERIFY(imp);
        QCOMPARE(*imp, (std::vector<float>{1.5f / 24, 0.25f / 24, 8.0f / 24, 0.0f}));
        QCOMPARE(imatrix_importance(*back, "blk.0.attn_q.weight", 5).status().code(), StatusCode::InvalidArgument);
        QCOMPARE(imatrix_importance(*back, "blk.0.attn_k.weight", 4).status().code(), StatusCode::NotFound);
    }

    // save_imatrix_legacy's values: (sum / count) * ncall with ncall = ceil(max count / chunk size); an entry without
    // data is left out; read back, value / ncall is the importance again.
    void legacyRoundTrip() {
        test::TempDir dir;
        Imatrix m = small_imatrix();
        m.entries[1].counts = {0, 0};  // no data: not stored
        const std::string path = dir.file("m.dat");
        QVERIFY(write_imatrix(m, path, ImatrixFormat::Legacy));
        auto back = read_imatrix(path);
        QVERIFY2(back, qPrintable(QString::fromStdString(back.message())));
        QCOMPARE(back->format, ImatrixFormat::Legacy);
        QCOMPARE(back->entries.size(), size_t(1));
        QCOMPARE(back->entries[0].counts, std::vector<int64_t>{3});  // ceil(24 / 8)
        QCOMPARE(back->entries[0].sums[2], (8.0f / 24.0f) * 3.0f);
        QCOMPARE(back->chunk_count, 3);
        QCOMPARE(back->datasets, std::vector<std::string>{"calib.txt"});
        auto again = imatrix_bytes(*back, ImatrixFormat::Legacy);
        QVERIFY(again);
        QCOMPARE(*again, bytes_of(path));
        QCOMPARE(imatrix_bytes(*back, ImatrixFormat::Gguf).status().code(), StatusCode::InvalidArgument);
        auto imp = imatrix_importance(*back, "blk.0.attn_q.weight", 4);
        QVERIFY(imp);
        QCOMPARE((*imp)[2], ((8.0f / 24.0f) * 3.0f) / 3.0f);
    }

    // Every malformed file fails with Corrupt naming the file, never a crash.
    void malformedFiles() {
        test::TempDir dir;
        const Imatrix m = small_imatrix();
        const std::string good = *imatrix_bytes(m, ImatrixFormat::Gguf);
        const std::string dat = *imatrix_bytes(m, ImatrixFormat::Legacy);
        struct Case {
            const char* name;
            std::string bytes;
            const char* says;
        };
        std::string wrong_type = good;
        {
            const size_t at = wrong_type.find("blk.0.attn_q.weight.in_sum2");
            const size_t type_at = at + std::strlen("blk.0.attn_q.weight.in_sum2") + 4 + 8;  // n_dims, ne0
            wrong_type[type_at] = 1;                                                         // F16
        }
        std::string no_counts = good;
        {
            const size_t at = no_counts.find("blk.0.attn_q.weight.counts");
            no_counts.replace(at + std::strlen("blk.0.attn_q.weight."), 6, "countx");
        }
        std::string no_chunk_size = good;
        no_chunk_size.replace(no_chunk_size.find("imatrix.chunk_size"), 18, "imatrix.chunk_sizf");
        const Case cases[] = {
            {"truncated header", good.substr(0, 30), "m.bad"},
            {"truncated data", good.substr(0, good.size() - 40), "outside the file"},
            {"tensor not f32", wrong_type, "F32"},
            {"sums without counts", no_counts, "no counts"},
            {"missing key", no_chunk_size, "imatrix.chunk_size"},
            {"not an imatrix", std::string("hello, this is a text file and not an imatrix at all"), "m.bad"},
            {"empty", std::string(), "m.bad"},
            {"legacy truncated", dat.substr(0, dat.size() - 20), "m.bad"},
        };
        for (const Case& c : cases) {
            const std::string path = dir.file("m.bad");
            test::write_file(path, std::string_view(c.bytes));
            auto r = read_imatrix(path);
            QVERIFY2(!r, c.name);
            QVERIFY2(r.message().find(c.says) != std::string::npos,
                     qPrintable(QString("%1: %2").arg(c.name, QString::fromStdString(r.message()))));
        }
        QCOMPARE(read_imatrix(dir.file("missing.gguf")).status().code(), StatusCode::NotFound);
    }

    // ---- quantize ----------------------------------------------------------------------------------------------

    // The imatrix of a model matched with its matrices: importance per matched tensor; an entry naming no matrix of
    // the model, or of another column count, is refused naming the entry.
    void matchesAModel() {
        test::TempDir dir;
        const test::TinyModel tm = test::make_tiny_model(test::tiny_config(true), 5);
        test::MemoryWeights w(tm);
        auto t = Transformer::load(w);
        QVERIFY(t);
        ImatrixOptions o;
        o.n_ctx = 8;
        auto im = compute_imatrix(*t, token_sequence(40, 16), 1, o);
        QVERIFY(im);
        const std::string path = dir.file("tiny.imatrix");
        QVERIFY(write_imatrix(*im, path, ImatrixFormat::Gguf));
        auto mi = load_model_importance(path, w);
        QVERIFY2(mi, qPrintable(QString::fromStdString(mi.message())));
        QCOMPARE(mi->n_weighted, int64_t(7 * tm.config.n_layers));
        QVERIFY(mi->without.empty());
        const size_t q0 = w.at(TensorRole::AttnQ, 0);
        QCOMPARE(mi->by_tensor[q0], *imatrix_importance(*im, "blk.0.attn_q.weight", tm.config.dim));
        QVERIFY(mi->by_tensor[w.at(TensorRole::TokenEmbd, -1)].empty());
        QCOMPARE(mi->sha256.size(), size_t(64));
        QVERIFY(mi->command.find("--imatrix tiny.imatrix sha256:" + mi->sha256) == 0);
        QVERIFY(mi->metadata.find("quantize.imatrix.file") != nullptr);

        Imatrix extra = *im;
        extra.entries.back().name = "blk.9.attn_q.weight";
        std::sort(extra.entries.begin(), extra.entries.end(),
                  [](const ImatrixEntry& a, const ImatrixEntry& b) { return a.name < b.name; });
        QVERIFY(write_imatrix(extra, path, ImatrixFormat::Gguf));
        auto bad = load_model_importance(path, w);
        QCOMPARE(bad.status().code(), StatusCode::InvalidArgument);
        QVERIFY2(bad.message().find("blk.9.attn_q.weight") != std::string::npos, bad.message().c_str());

        Imatrix narrow = *im;
        for (ImatrixEntry& e : narrow.entries)
            if (e.name == "blk.1.ffn_up.weight") {
                e.sums.resize(32);
                e.n_cols = 32;
            }
        QVERIFY(write_imatrix(narrow, path, ImatrixFormat::Gguf));
        bad = load_model_importance(path, w);
        QCOMPARE(bad.status().code(), StatusCode::InvalidArgument);
        QVERIFY2(bad.message().find("blk.1.ffn_up.weight") != std::string::npos &&
                     bad.message().find("32") != std::string::npos,
                 bad.message().c_str());
    }

    // The codec's Q4_0 method (and a Q4_0 residual) takes the importance through the type table: the blocks are
    // the weighted quantizer's (ggml's, checked in test_kquants), which differ from the unweighted ones.
    void codecQ4_0UsesImportance() {
        const int64_t rows = 8, cols = 64;
        const std::vector<float> x = test::random_floats(size_t(rows * cols), 7, 0.05f);
        std::vector<float> imp(static_cast<size_t>(cols));
        for (int64_t j = 0; j < cols; ++j) imp[size_t(j)] = 0.05f + float((j * 37) % 11);
        TensorInput in;
        in.name = "blk.0.attn_q.weight";
        in.role = TensorRole::AttnQ;
        in.layer = 0;
        in.shape = {rows, cols};
        in.data = x.data();
        CodecParams p;
        p.method = Method::Q4_0;
        auto plain = encode_tensor(in, p);
        in.importance = imp.data();
        auto weighted = encode_tensor(in, p);
        QVERIFY(plain && weighted);
        std::vector<uint8_t> want(weighted->payload.size());
        type_traits(DType::Q4_0).quantize_weighted(x.data(), want.data(), rows, cols, imp.data());
        QVERIFY(weighted->payload == want);
        QVERIFY(weighted->payload != plain->payload);

        p.method = Method::LowRankResidual;
        p.rank = 2;
        p.residual = ResidualKind::Q4_0;
        auto lr_w = encode_tensor(in, p);
        in.importance = nullptr;
        auto lr_p = encode_tensor(in, p);
        QVERIFY(lr_w && lr_p);
        QVERIFY(lr_w->payload != lr_p->payload);
    }

    // ---- llama.cpp ------------------------------------------------------------------------------------------------

    // llama-imatrix's file for llama2xs-279K over tests/data/imatrix/calib.txt (README there): gkq's statistics on
    // the same checkpoint and text agree per tensor and column within the tolerance named below; counts, names,
    // chunk count and size exactly.
    void matchesLlamaImatrix() {
        const auto model_dir = test::shared_model("llama2xs-279K/model.bin");
        if (!model_dir) QSKIP(test::shared_models_skip_reason("llama2xs-279K/model.bin").c_str());
        auto theirs = read_imatrix(data_dir() + "/llama2xs-279K.imatrix.gguf");
        QVERIFY2(theirs, qPrintable(QString::fromStdString(theirs.message())));
        auto model = ModelFile::open(*model_dir);
        QVERIFY(model);
        const std::string tok_path = model_dir->substr(0, model_dir->rfind('/')) + "/tok512.bin";
        auto tok = Tokenizer::load_llama2c(tok_path, model->config().vocab_size);
        QVERIFY(tok);
        auto t = Transformer::load(*model);
        QVERIFY(t);
        const std::string text = bytes_of(data_dir() + "/calib.txt");
        ImatrixOptions o;
        o.n_ctx = theirs->chunk_size;
        o.n_chunks = theirs->chunk_count;
        auto ours = compute_imatrix(*t, tok->encode(text, true, false), tok->bos_id(), o);
        QVERIFY2(ours, qPrintable(QString::fromStdString(ours.message())));
        QCOMPARE(ours->chunk_count, theirs->chunk_count);
        QCOMPARE(ours->entries.size(), theirs->entries.size());
        // Tolerance: with the f32 KV cache the fixture was made with (README), llama.cpp's activations differ from
        // gkq's only by float32 rounding in another summation order (ggml's kernels, fused multiply-adds), growing
        // through the blocks; the sums add the squares in the same order. Measured worst case 1.49e-5
        // (blk.3.ffn_down column 115); 1e-4 leaves a margin of ~7x. With llama.cpp's default f16 cache the worst
        // column differs by 3.4e-2, which is why the fixture uses an f32 one.
        constexpr double kRelTol = 1e-4;
        double worst = 0;
        std::string worst_at;
        for (size_t i = 0; i < ours->entries.size(); ++i) {
            const ImatrixEntry& a = ours->entries[i];
            const ImatrixEntry& b = theirs->entries[i];
            QCOMPARE(a.name, b.name);
            QCOMPARE(a.n_cols, b.n_cols);
            QCOMPARE(a.counts, b.counts);
            double max_b = 0;
            for (float v : b.sums) max_b = std::max(max_b, double(v));
            for (size_t j = 0; j < a.sums.size(); ++j) {
                // relative to the column, with a floor at 1e-3 of the tensor's largest column (near-silent columns)
                const double ref = std::max(std::fabs(double(b.sums[j])), 1e-3 * max_b);
                const double rel = std::fabs(double(a.sums[j]) - double(b.sums[j])) / ref;
                if (rel > worst) {
                    worst = rel;
                    worst_at = a.name + " column " + std::to_string(j);
                }
            }
        }
        qInfo("worst relative difference %.3g at %s", worst, worst_at.c_str());
        QVERIFY2(worst <= kRelTol, worst_at.c_str());
    }

    // llama-quantize --pure --imatrix (that fixture) Q4_0 of the same checkpoint: gkq's codec, given the same
    // importance, writes the same blocks, tensor for tensor (token_embd, which has no entry, unweighted in both).
    void quantizeMatchesLlamaQuantize() {
        const auto model_path = test::shared_model("llama2xs-279K/model.bin");
        if (!model_path) QSKIP(test::shared_models_skip_reason("llama2xs-279K/model.bin").c_str());
        auto imatrix = read_imatrix(data_dir() + "/llama2xs-279K.imatrix.gguf");
        auto theirs = ModelFile::open(data_dir() + "/llama2xs-279K.q4_0-imatrix.gguf");
        auto source = ModelFile::open(*model_path);
        QVERIFY(imatrix && theirs && source);
        int n_weighted = 0, n_compared = 0;
        for (const Tensor& t : theirs->tensors()) {
            if (t.dtype != DType::Q4_0) continue;
            const Tensor* src = source->find(t.name);
            QVERIFY2(src != nullptr, t.name.c_str());
            auto x = source->read_f32(static_cast<size_t>(src - source->tensors().data()));
            QVERIFY(x);
            auto imp = imatrix_importance(*imatrix, t.name, src->cols());
            TensorInput in;
            static_cast<TensorInfo&>(in) = *src;
            in.dtype = DType::F32;
            in.data = x->data();
            if (imp) {
                in.importance = imp->data();
                ++n_weighted;
            }
            CodecParams p;
            p.method = Method::Q4_0;
            auto enc = encode_tensor(in, p);
            QVERIFY(enc);
            QCOMPARE(enc->payload.size(), size_t(t.n_bytes));
            QVERIFY2(std::memcmp(enc->payload.data(), t.data, t.n_bytes) == 0, t.name.c_str());
            ++n_compared;
        }
        QCOMPARE(n_weighted, 35);
        QCOMPARE(n_compared, 36);
    }

    // The same file read and written back: byte for byte what llama-imatrix wrote.
    void rewritesLlamaFileByteForByte() {
        const std::string path = data_dir() + "/llama2xs-279K.imatrix.gguf";
        auto theirs = read_imatrix(path);
        QVERIFY2(theirs, qPrintable(QString::fromStdString(theirs.message())));
        auto bytes = imatrix_bytes(*theirs, ImatrixFormat::Gguf);
        QVERIFY(bytes);
        QVERIFY(*bytes == bytes_of(path));
        // and its legacy form as llama-imatrix --output-format dat wrote it for the same run
        const std::string dat = data_dir() + "/llama2xs-279K.imatrix.dat";
        auto legacy = imatrix_bytes(*theirs, ImatrixFormat::Legacy);
        QVERIFY(legacy);
        QVERIFY(*legacy == bytes_of(dat));
        auto their_dat = read_imatrix(dat);
        QVERIFY(their_dat);
        QVERIFY(*imatrix_bytes(*their_dat, ImatrixFormat::Legacy) == bytes_of(dat));
    }
};

QTEST_GUILESS_MAIN(TestImatrix)
#include "test_imatrix.moc"
