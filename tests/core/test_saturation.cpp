// Saturation profiles, masks and routing: SHA-256 against the FIPS 180-2 vectors, mask run-length coding and
// packing, FFN routing (all-hot bit-identical to normal inference, all-cold bit-identical to a model without
// FFN output, a partial mask against zeroed weights), the profile against an independent count through the
// observer hook, and the masks file round trip with its checks.
#include "common/sha256.h"
#include "gkq/model_config.h"
#include "gkq/naming.h"
#include "gkq/saturation.h"
#include "gkq/transformer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace gkq;

namespace {

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + (needle) + "]")))

// Tiny model weights, optionally with FFN rows/columns of `cold` neurons zeroed in w1, w3 (rows) and w2 (cols).
test::MemoryWeights source_of(const test::TinyModel& m, const std::vector<std::vector<uint8_t>>* cold_zero = nullptr,
                              bool zero_w2_only = false) {
    test::MemoryWeights w(m);
    for (size_t i = 0; i < w.n_tensors() && cold_zero; ++i) {
        const TensorRole role = w.infos[i].role;
        const int32_t layer = w.infos[i].layer;
        if (layer < 0) continue;
        std::vector<float>& dense = w.values[i];
        const auto& hot = (*cold_zero)[static_cast<size_t>(layer)];
        const int64_t hidden = m.config.hidden_dim, dim = m.config.dim;
        if (zero_w2_only) {
            if (role == TensorRole::FfnDown) std::fill(dense.begin(), dense.end(), 0.0f);
        } else if (role == TensorRole::FfnGate || role == TensorRole::FfnUp) {
            for (int64_t j = 0; j < hidden; ++j)
                if (!hot[static_cast<size_t>(j)])
                    std::fill(dense.begin() + j * dim, dense.begin() + (j + 1) * dim, 0.0f);
        }
    }
    return w;
}

std::vector<int32_t> token_sequence(int32_t vocab, size_t n) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(vocab)));
    return t;
}

std::vector<float> run_all(Transformer& t, const std::vector<int32_t>& tokens) {
    const auto vocab = static_cast<size_t>(t.config().vocab_size);
    std::vector<float> all(tokens.size() * vocab);
    auto r = t.forward_batch(tokens.data(), static_cast<int64_t>(tokens.size()), 0, all.data());
    if (!r) qFatal("%s", r.message().c_str());
    return all;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Transformer load(const test::TinyModel& m, const Weights& src, int threads = 2) {
    TransformerOptions o;
    o.n_threads = threads;
    auto t = Transformer::load(m.config, src, o);
    if (!t) qFatal("%s", t.message().c_str());
    return std::move(t).value();
}

std::vector<std::vector<uint8_t>> mask_of(const ModelConfig& c, int pattern) {
    std::vector<std::vector<uint8_t>> m(static_cast<size_t>(c.n_layers));
    for (int64_t l = 0; l < c.n_layers; ++l)
        for (int64_t j = 0; j < c.hidden_dim; ++j)
            m[static_cast<size_t>(l)].push_back(pattern == 1 ? 1 : pattern == 0 ? 0 : ((j * 5 + l) % 3 != 0));
    return m;
}

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

class TestSaturation : public QObject {
    Q_OBJECT
private slots:
    void sha256FipsVectors() {
        QCOMPARE(sha256_hex("abc", 3), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
        QCOMPARE(sha256_hex("", 0), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
        const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        QCOMPARE(sha256_hex(two.data(), two.size()),
                 std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
        const std::string million(1000000, 'a');
        QCOMPARE(sha256_hex(million.data(), million.size()),
                 std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
        // fed in uneven pieces: same digest
        Sha256 h;
        for (size_t at = 0, step = 1; at < million.size(); at += step, step = step * 3 % 1000 + 1)
            h.update(million.data() + at, std::min(step, million.size() - at));
        const auto d = h.finish();
        QCOMPARE(d[0], uint8_t{0xcd});
        QCOMPARE(d[31], uint8_t{0xd0});
    }

    void maskRunLengthRoundTrip() {
        QCOMPARE(rle_encode_mask({1, 1, 0, 0, 1}), (std::vector<uint32_t>{0, 2, 2, 1}));
        QCOMPARE(rle_encode_mask({0, 0, 0, 0, 0}), (std::vector<uint32_t>{5}));
        QCOMPARE(rle_encode_mask({1, 1, 1}), (std::vector<uint32_t>{0, 3}));
        QCOMPARE(rle_encode_mask({}), (std::vector<uint32_t>{0}));
        for (const std::vector<uint8_t>& m : std::vector<std::vector<uint8_t>>{
                 {}, {0}, {1}, {1, 0, 1, 0, 1, 0}, {0, 0, 1, 1, 1, 0}, std::vector<uint8_t>(1000, 1)}) {
            auto back = rle_decode_mask(rle_encode_mask(m), static_cast<int64_t>(m.size()), "m");
            QVERIFY(back.is_ok());
            QCOMPARE(*back, m);
        }
        auto short_runs = rle_decode_mask({2, 2}, 5, "layers[1].runs");
        QVERIFY(!short_runs.is_ok());
        QCOMPARE(short_runs.message(), std::string("layers[1].runs: the runs cover 4 neurons, not 5"));
        auto long_runs = rle_decode_mask({2, 4}, 5, "r");
        QCOMPARE(long_runs.message(), std::string("r: the runs cover more than 5 neurons"));
        auto empty_run = rle_decode_mask({2, 0, 3}, 5, "r");
        QCOMPARE(empty_run.message(), std::string("r[1]: empty run after the first"));
        QCOMPARE(rle_encoded_bytes({0, 2, 2, 1}), uint64_t{4});
        QCOMPARE(rle_encoded_bytes({127, 128, 16383, 16384}), uint64_t{1 + 2 + 2 + 3});
    }

    void histogramBins() {
        const std::pair<uint64_t, int> cases[] = {{0, 0},   {1, 1},   {2, 2},   {10, 2},  {11, 3},
                                                  {50, 3},  {51, 4},  {100, 4}, {101, 5}, {200, 5},
                                                  {201, 6}, {500, 6}, {501, 7}, {1000, 7}};
        for (const auto& [count, bin] : cases) QCOMPARE(saturation_histogram_bin(count, 1000), bin);
    }

    void bitmaskPackingAndHash() {
        QCOMPARE(pack_bitmask({1, 0, 0, 0, 0, 0, 0, 0, 1}), (std::vector<uint8_t>{0x01, 0x01}));
        QCOMPARE(pack_bitmask({0, 1, 0, 0, 0, 0, 0, 1}), (std::vector<uint8_t>{0x82}));
        // "abc" is 0x61 0x62 0x63: a mask whose packed bytes are exactly "abc" hashes to the FIPS digest
        std::vector<uint8_t> mask;
        for (uint8_t byte : {0x61, 0x62, 0x63})
            for (int b = 0; b < 8; ++b) mask.push_back((byte >> b) & 1);
        QCOMPARE(bitmask_hash(mask),
                 std::string("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    }

    void allHotRoutingIsBitIdentical() {
        for (bool shared : {true, false}) {
            auto m = test::make_tiny_model(test::tiny_config(shared), 3);
            const auto tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 20);
            Transformer plain = load(m, source_of(m));
            Transformer routed = load(m, source_of(m));
            QVERIFY(routed.set_ffn_routing(mask_of(m.config, 1)).is_ok());
            QVERIFY(routed.ffn_routing());
            QCOMPARE(routed.n_active_ffn_neurons(), m.config.n_layers * m.config.hidden_dim);
            QVERIFY(bit_equal(run_all(plain, tokens), run_all(routed, tokens)));
            // one token at a time as well
            for (int64_t pos = 0; pos < 5; ++pos) {
                auto a = plain.forward(tokens[static_cast<size_t>(pos)], pos);
                auto b = routed.forward(tokens[static_cast<size_t>(pos)], pos);
                QVERIFY(a.is_ok() && b.is_ok());
                QVERIFY(std::memcmp(*a, *b, static_cast<size_t>(m.config.vocab_size) * sizeof(float)) == 0);
            }
            // routing off again: back to the plain model
            QVERIFY(routed.set_ffn_routing({}).is_ok());
            QVERIFY(!routed.ffn_routing());
            QVERIFY(bit_equal(run_all(plain, tokens), run_all(routed, tokens)));
        }
    }

    void allHotRoutingOfFactoredMatrices() {
        // w1 (gate) and w2 (down) handed over as rank-8 factors: routing selects rows of U / columns of S V^T
        auto m = test::make_tiny_model(test::tiny_config(), 8);
        const int64_t k = 8;
        test::MemoryWeights factored(m);
        for (size_t t = 0; t < factored.n_tensors(); ++t) {
            const TensorRole role = factored.infos[t].role;
            const int32_t layer = factored.infos[t].layer;
            if (role != TensorRole::FfnGate && role != TensorRole::FfnDown) continue;
            const int64_t rows = role == TensorRole::FfnGate ? m.config.hidden_dim : m.config.dim;
            const int64_t cols = role == TensorRole::FfnGate ? m.config.dim : m.config.hidden_dim;
            StoredFactors w;
            w.rank = k;
            w.u = test::random_floats(static_cast<size_t>(rows * k), 100 + layer, 0.3f);
            w.v = test::random_floats(static_cast<size_t>(cols * k), 200 + layer, 0.3f);
            for (int64_t i = 0; i < k; ++i) w.s.push_back(2.0f / static_cast<float>(i + 1));
            factored.factors[t] = std::move(w);
        }
        const auto tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 12);
        Transformer plain = load(m, factored);
        QVERIFY(plain.n_factored_matrices() == 2 * m.config.n_layers);
        Transformer routed = load(m, factored);
        QVERIFY(routed.set_ffn_routing(mask_of(m.config, 1)).is_ok());
        QVERIFY(bit_equal(run_all(plain, tokens), run_all(routed, tokens)));
        // a partial mask runs (factored shapes stay consistent) and changes the output
        QVERIFY(routed.set_ffn_routing(mask_of(m.config, 2)).is_ok());
        const auto partial = run_all(routed, tokens);
        QVERIFY(!bit_equal(run_all(plain, tokens), partial));
        for (float x : partial) QVERIFY(std::isfinite(x));
    }

    void allColdRoutingSkipsTheFfn() {
        auto m = test::make_tiny_model(test::tiny_config(), 4);
        const auto tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 16);
        const auto cold = mask_of(m.config, 0);
        Transformer no_ffn = load(m, source_of(m, &cold, true));  // w2 = 0: the FFN adds exact zeros
        Transformer routed = load(m, source_of(m));
        QVERIFY(routed.set_ffn_routing(cold).is_ok());
        QCOMPARE(routed.n_active_ffn_neurons(), int64_t{0});
        QVERIFY(bit_equal(run_all(no_ffn, tokens), run_all(routed, tokens)));
    }

    void partialRoutingMatchesZeroedNeurons() {
        auto m = test::make_tiny_model(test::tiny_config(), 5);
        const auto tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 16);
        const auto mask = mask_of(m.config, 2);
        int64_t n_hot = 0;
        for (const auto& l : mask)
            for (uint8_t h : l) n_hot += h;
        Transformer zeroed = load(m, source_of(m, &mask));  // cold rows of w1, w3 zero: activation exactly 0
        Transformer routed = load(m, source_of(m));
        QVERIFY(routed.set_ffn_routing(mask).is_ok());
        QCOMPARE(routed.n_active_ffn_neurons(), n_hot);
        const auto a = run_all(zeroed, tokens);
        const auto b = run_all(routed, tokens);
        QCOMPARE(a.size(), b.size());
        // the same sum without the zero terms, in another lane order: equal to rounding
        double max_diff = 0.0, max_abs = 0.0;
        for (size_t i = 0; i < a.size(); ++i) {
            max_diff = std::max(max_diff, std::fabs(double(a[i]) - b[i]));
            max_abs = std::max(max_abs, std::fabs(double(a[i])));
        }
        QVERIFY2(max_diff <= 1e-5 * max_abs, qPrintable(QString::number(max_diff)));
        const auto full = run_all(*std::make_unique<Transformer>(load(m, source_of(m))), tokens);
        QVERIFY(!bit_equal(full, b));  // the mask did change something
    }

    void routingRejectsWrongShapes() {
        auto m = test::make_tiny_model(test::tiny_config(), 1);
        Transformer t = load(m, source_of(m));
        auto one = mask_of(m.config, 1);
        one.pop_back();
        Status s = t.set_ffn_routing(one);
        QCOMPARE(s.message(), std::string("ffn routing: the mask has 1 blocks, the model 2"));
        auto wrong = mask_of(m.config, 1);
        wrong[1].push_back(1);
        s = t.set_ffn_routing(wrong);
        QCOMPARE(s.message(), std::string("ffn routing: block 1 of the mask has 97 neurons, the model 96"));
        QVERIFY(!t.ffn_routing());
    }

    void profileCountsMatchAnIndependentCount() {
        auto m = test::make_tiny_model(test::tiny_config(), 6);
        const auto tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 50);  // 2 windows of 32
        const int64_t hidden = m.config.hidden_dim, n_layers = m.config.n_layers;
        // independent: keep every activation, then count
        Transformer t = load(m, source_of(m), 1);
        std::vector<std::vector<float>> acts(static_cast<size_t>(n_layers));
        t.set_ffn_observer([&](int64_t layer, const float* a, int64_t n) {
            acts[static_cast<size_t>(layer)].insert(acts[static_cast<size_t>(layer)].end(), a, a + n * hidden);
        });
        QVERIFY(t.forward_batch(tokens.data(), 32, 0).is_ok());
        QVERIFY(t.forward_batch(tokens.data() + 32, 18, 0).is_ok());
        t.set_ffn_observer({});

        Transformer p = load(m, source_of(m), 2);
        SaturationOptions o;
        o.thresholds = {0.0, 1.0, 2.5};
        o.min_frequency = 0.1;
        auto profiles = profile_saturation(p, tokens, o);
        QVERIFY2(profiles.is_ok(), profiles.message().c_str());
        QCOMPARE(profiles->size(), size_t{3});
        for (size_t k = 0; k < 3; ++k) {
            const SaturationProfile& prof = (*profiles)[k];
            QCOMPARE(prof.n_tokens, int64_t{50});
            QCOMPARE(prof.threshold, o.thresholds[k]);
            for (int64_t l = 0; l < n_layers; ++l) {
                const auto& a = acts[static_cast<size_t>(l)];
                QCOMPARE(static_cast<int64_t>(a.size()), 50 * hidden);
                double ss = 0.0;
                for (float v : a) ss += double(v) * v;
                const double rms = std::sqrt(ss / double(a.size()));
                const LayerSaturation& ls = prof.layers[static_cast<size_t>(l)];
                QVERIFY(std::fabs(ls.scale - rms) <= 1e-12 * rms);
                uint64_t hist_total = 0;
                for (uint64_t h : ls.histogram) hist_total += h;
                QCOMPARE(hist_total, static_cast<uint64_t>(hidden));
                for (int64_t j = 0; j < hidden; ++j) {
                    uint64_t c = 0;
                    for (int64_t tk = 0; tk < 50; ++tk)
                        if (std::fabs(double(a[static_cast<size_t>(tk * hidden + j)])) > o.thresholds[k] * ls.scale)
                            c++;
                    QCOMPARE(ls.counts[static_cast<size_t>(j)], c);
                    QCOMPARE(ls.hot[static_cast<size_t>(j)], uint8_t(double(c) / 50.0 > 0.1 ? 1 : 0));
                }
            }
        }
        // threshold 0 counts every nonzero activation; a higher threshold never counts more
        for (int64_t l = 0; l < n_layers; ++l)
            for (int64_t j = 0; j < hidden; ++j)
                QVERIFY((*profiles)[2].layers[l].counts[j] <= (*profiles)[1].layers[l].counts[j]);
        QVERIFY(!p.ffn_routing());
    }

    void rederivedMasksEqualAFreshProfile() {
        auto m = test::make_tiny_model(test::tiny_config(), 8);
        const auto tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 40);
        Transformer p = load(m, source_of(m));
        SaturationOptions o;
        o.thresholds = {0.5};
        auto at0 = profile_saturation(p, tokens, o);
        o.min_frequency = 0.3;
        auto at30 = profile_saturation(p, tokens, o);
        QVERIFY(at0.is_ok() && at30.is_ok());
        auto derived = rederive_masks(at0->front(), 0.3);
        QVERIFY2(derived.is_ok(), derived.message().c_str());
        QCOMPARE(derived->min_frequency, 0.3);
        int64_t fewer = 0;
        for (size_t l = 0; l < derived->layers.size(); ++l) {
            QCOMPARE(derived->layers[l].hot, at30->front().layers[l].hot);
            QCOMPARE(derived->layers[l].min_frequency, 0.3);
            QCOMPARE(derived->layers[l].counts, at0->front().layers[l].counts);
            QCOMPARE(derived->layers[l].histogram, at0->front().layers[l].histogram);
            fewer += at0->front().layers[l].hot_count() - derived->layers[l].hot_count();
        }
        QVERIFY(fewer > 0);  // the frequency rule changed some masks, so the comparison above can fail
        QVERIFY(!rederive_masks(at0->front(), 1.0).is_ok());
        QVERIFY(!rederive_masks(at0->front(), -0.1).is_ok());
        SaturationProfile broken = at0->front();
        broken.layers[1].counts.pop_back();
        auto bad = rederive_masks(broken, 0.1);
        QVERIFY(!bad.is_ok());
        QVERIFY2(bad.message().find("layers[1]") != std::string::npos, bad.message().c_str());
    }

    void masksFileRoundTripAndChecks() {
        auto m = test::make_tiny_model(test::tiny_config(), 7);
        Transformer p = load(m, source_of(m));
        const auto tokens = token_sequence(static_cast<int32_t>(m.config.vocab_size), 30);
        SaturationOptions o;
        o.thresholds = {1.5};
        auto profiles = profile_saturation(p, tokens, o);
        QVERIFY(profiles.is_ok());
        SaturationProfile prof = profiles->front();
        prof.model = "tiny";
        prof.text = "seq";
        prof.command = "test";
        test::TempDir dir;
        const std::string path = dir.file("masks.json");
        QVERIFY(write_saturation_profile(path, prof).is_ok());
        auto back = read_saturation_profile(path);
        QVERIFY2(back.is_ok(), back.message().c_str());
        QCOMPARE(back->layers.size(), prof.layers.size());
        for (size_t l = 0; l < prof.layers.size(); ++l) {
            QCOMPARE(back->layers[l].hot, prof.layers[l].hot);
            QCOMPARE(back->layers[l].counts, prof.layers[l].counts);
            QCOMPARE(back->layers[l].histogram, prof.layers[l].histogram);
        }
        QCOMPARE(routing_masks(*back), routing_masks(prof));

        // a tampered hash is named by its path
        std::string text = file_text(path);
        const size_t at = text.find("sha256:") + 7;
        text[at] = text[at] == '0' ? '1' : '0';
        test::write_file(path, text);
        auto bad = read_saturation_profile(path);
        QVERIFY(!bad.is_ok());
        VERIFY_CONTAINS(bad.message(), path + ": layers[0].bitmask_hash: does not match the mask the runs give");
    }
};

QTEST_APPLESS_MAIN(TestSaturation)
#include "test_saturation.moc"
