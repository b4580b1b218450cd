// Weights served (knot in RAM, knot on disk, knot over HTTP range requests, model file) and the weight cache:
// values, budget and age eviction, counters, thread safety.
#include "cache/http_client.h"
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/weight_cache.h"
#include "gkq/weights.h"
#include "http_test_support.h"
#include "test_support.h"

#include <QtTest>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

using namespace gkq;

namespace {

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + (needle) + "]")))

// Weights of `n` tensors of `floats` values each, tensor i filled with i; counts reads and can block them or fail
// them.
class FakeStore final : public Weights {
public:
    FakeStore(size_t n, size_t floats) {
        for (size_t i = 0; i < n; ++i) {
            TensorInfo w;
            w.name = "w" + std::to_string(i);
            w.role = TensorRole::AttnQ;
            w.layer = static_cast<int32_t>(i);
            w.shape = {static_cast<int64_t>(floats)};
            m_weights.push_back(w);
        }
    }
    std::string_view kind() const override { return "fake"; }
    const std::string& label() const override { return m_label; }
    const ModelConfig& config() const override { return m_config; }
    const Vocabulary& vocabulary() const override { return m_vocab; }
    size_t n_tensors() const override { return m_weights.size(); }
    const TensorInfo& tensor_info(size_t i) const override { return m_weights[i]; }
    uint64_t stored_bytes(size_t i) const override { return m_weights[i].n_elements() * sizeof(float); }
    Result<StoredTensor> read_stored(size_t) const override {
        return error(StatusCode::Unsupported, "fake: nothing is stored");
    }
    Result<std::vector<float>> read_f32(size_t i) const override {
        calls++;
        while (block.load()) std::this_thread::yield();
        if (fail.load()) return error(StatusCode::Corrupt, "fake: weight " + std::to_string(i) + " is broken");
        return std::vector<float>(m_weights[i].n_elements(), static_cast<float>(i));
    }

    mutable std::atomic<int> calls{0};
    std::atomic<bool> block{false};
    std::atomic<bool> fail{false};

private:
    std::string m_label = "fake";
    ModelConfig m_config;
    Vocabulary m_vocab;
    std::vector<TensorInfo> m_weights;
};

std::vector<uint8_t> file_bytes(const std::string& path) {
    return test::read_file(path);
}

void check_store_matches_knot(const Weights& store, const std::string& knot_path) {
    auto knot = KnotFile::open(knot_path);
    QVERIFY2(knot.is_ok(), knot.message().c_str());
    QCOMPARE(store.n_tensors(), knot->n_records());
    QCOMPARE(store.config().dim, knot->header().config.dim);
    QCOMPARE(store.config().n_layers, knot->header().config.n_layers);
    QVERIFY(store.vocabulary().tokens == knot->header().vocab.tokens);
    for (size_t i = 0; i < knot->n_records(); ++i) {
        const KnotEntry& e = knot->entries()[i];
        QCOMPARE(store.tensor_info(i).name, e.name);
        QCOMPARE(store.tensor_info(i).role, e.role);
        QCOMPARE(store.tensor_info(i).layer, e.layer);
        QCOMPARE(store.tensor_info(i).shape, e.shape);
        QCOMPARE(store.tensor_info(i).dtype, method_dtype(e.method));
        QCOMPARE(store.stored_bytes(i), e.record_bytes);
        auto enc = knot->read(i);
        QVERIFY(enc.is_ok());
        auto want = decode_tensor(*enc);
        QVERIFY(want.is_ok());
        auto got = store.read_f32(i);
        QVERIFY2(got.is_ok(), got.message().c_str());
        QVERIFY(*got == *want);
        // the stored encoding: the record's payload, not decoded
        auto stored = store.read_stored(i);
        QVERIFY2(stored.is_ok(), stored.message().c_str());
        QVERIFY(stored->record != nullptr);
        QVERIFY(stored->record->payload == enc->payload);
        QCOMPARE(stored->data.size(), enc->payload.size());
    }
}

}  // namespace

class TestWeightCache : public QObject {
    Q_OBJECT
private slots:
    // ---- stores --------------------------------------------------------------------------------------------------

    void residentKnotStoreHoldsEveryRecord() {
        test::TempDir dir;
        auto tiny = test::make_tiny_knot(dir);
        WeightsOpenOptions resident;
        resident.memory_resident = true;
        auto store = open_weights(tiny.knot, resident);
        QVERIFY2(store.is_ok(), store.message().c_str());
        QCOMPARE((*store)->kind(), std::string_view("memory-resident"));
        uint64_t sum = 0;
        auto knot = KnotFile::open(tiny.knot);
        for (const KnotEntry& e : knot->entries()) sum += e.record_bytes;
        QCOMPARE((*store)->resident_bytes(), sum);
        // The file can go: the records are in RAM.
        std::filesystem::remove(tiny.knot);
        auto copy = test::make_tiny_knot(dir);  // same bytes again, for the reference side
        check_store_matches_knot(**store, copy.knot);
        QCOMPARE((*store)->index_of(TensorRole::AttnV, 1), (*store)->index_of(TensorRole::AttnV, 1));
        QCOMPARE((*store)->tensor_info(size_t((*store)->index_of(TensorRole::AttnV, 1))).name,
                 std::string("blk.1.attn_v.weight"));
        QCOMPARE((*store)->index_of(TensorRole::AttnV, 7), int64_t(-1));
    }

    void onDiskKnotStoreReadsRecordsWhenAsked() {
        test::TempDir dir;
        auto tiny = test::make_tiny_knot(dir);
        auto store = open_weights(tiny.knot);
        QVERIFY2(store.is_ok(), store.message().c_str());
        QCOMPARE((*store)->kind(), std::string_view("on-disk"));
        QCOMPARE((*store)->resident_bytes(), uint64_t(0));
        check_store_matches_knot(**store, tiny.knot);
        auto bad = (*store)->read_f32(1000);
        QCOMPARE(bad.status().code(), StatusCode::InvalidArgument);
    }

    void modelFileStoreConvertsTensors() {
        test::TempDir dir;
        auto tiny = test::make_tiny_knot(dir);
        auto store = open_weights(tiny.gguf);
        QVERIFY2(store.is_ok(), store.message().c_str());
        QCOMPARE((*store)->kind(), std::string_view("model-file"));
        QCOMPARE((*store)->config().shared_classifier, false);
        auto model = ModelFile::open(tiny.gguf);
        QCOMPARE((*store)->n_tensors(), model->tensors().size());
        for (size_t i = 0; i < model->tensors().size(); ++i) {
            const Tensor& t = model->tensors()[i];
            auto want = tensor_to_f32(t);
            auto got = (*store)->read_f32(i);
            QVERIFY(got.is_ok());
            QVERIFY(*got == *want);
            // the stored encoding: the mapped bytes themselves
            auto stored = (*store)->read_stored(i);
            QVERIFY(stored.is_ok());
            QCOMPARE(stored->info.dtype, t.dtype);
            QCOMPARE(stored->data.size(), size_t(t.n_bytes));
            QVERIFY(std::memcmp(stored->data.data(), t.data, t.n_bytes) == 0);
            QVERIFY(stored->record == nullptr);
        }
        QVERIFY(is_knot_path(tiny.knot));
        QVERIFY(!is_knot_path(tiny.gguf));
        QVERIFY(!is_knot_path(dir.file("missing")));
    }

    void remoteKnotStoreFetchesByRange() {
        test::TempDir dir;
        auto tiny = test::make_tiny_knot(dir);
        test::RangeFileServer cdn(file_bytes(tiny.knot));
        auto store = open_remote_knot(cdn.url());
        QVERIFY2(store.is_ok(), store.message().c_str());
        // trailer (suffix range), file header, header block, index
        QCOMPARE(cdn.n_requests(), 4);
        QCOMPARE((*store)->kind(), std::string_view("cdn"));
        QCOMPARE((*store)->label(), cdn.url());
        QCOMPARE((*store)->resident_bytes(), uint64_t(0));
        check_store_matches_knot(**store, tiny.knot);
        // one request per record
        QCOMPARE(cdn.n_requests(), 4 + 2 * int((*store)->n_tensors()));  // read_f32 and read_stored
    }

    void remoteKnotStoreErrors() {
        test::TempDir dir;
        auto tiny = test::make_tiny_knot(dir);
        test::RangeFileServer cdn(file_bytes(tiny.knot));

        cdn.set_mode(test::RangeFileServer::Mode::IgnoreRange);
        auto ignored = open_remote_knot(cdn.url());
        QCOMPARE(ignored.status().code(), StatusCode::Unsupported);
        VERIFY_CONTAINS(ignored.message(), cdn.url() + " (Range: bytes=-40): the server answered 200");

        cdn.set_mode(test::RangeFileServer::Mode::Truncate);
        auto cut = open_remote_knot(cdn.url());
        QCOMPARE(cut.status().code(), StatusCode::IoError);
        VERIFY_CONTAINS(cut.message(), "Content-Length 40 but 20 bytes arrived");

        cdn.set_mode(test::RangeFileServer::Mode::Normal);
        auto ok = open_remote_knot(cdn.url());
        QVERIFY2(ok.is_ok(), ok.message().c_str());
        // The file is replaced by a shorter one while served: the next record fetch notices.
        auto bytes = file_bytes(tiny.knot);
        bytes.resize(bytes.size() - 1);
        cdn.set_bytes(bytes);
        auto changed = (*ok)->read_f32(0);
        QCOMPARE(changed.status().code(), StatusCode::Corrupt);
        VERIFY_CONTAINS(changed.message(), "bytes, it was " + std::to_string(bytes.size() + 1) + " when opened");

        // Not a knot
        cdn.set_bytes(std::vector<uint8_t>(100, 'x'));
        auto foreign = open_remote_knot(cdn.url());
        QCOMPARE(foreign.status().code(), StatusCode::Corrupt);
        VERIFY_CONTAINS(foreign.message(), "no knot trailer");

        auto https = open_remote_knot("https://example.invalid/m.knot");
        QCOMPARE(https.status().code(), StatusCode::Unsupported);
        VERIFY_CONTAINS(https.message(), "https is not supported");

        // Nothing listens on a port we just closed.
        uint16_t dead_port = 0;
        {
            test::RangeFileServer gone({});
            dead_port = gone.port();
        }
        auto refused = open_remote_knot("http://127.0.0.1:" + std::to_string(dead_port) + "/m.knot");
        QCOMPARE(refused.status().code(), StatusCode::IoError);
        VERIFY_CONTAINS(refused.message(), "cannot connect to 127.0.0.1:" + std::to_string(dead_port));
    }

    void parsesHttpUrls() {
        auto u = net::parse_http_url("http://127.0.0.1:8081/w/m.knot?x=1");
        QVERIFY(u.is_ok());
        QCOMPARE(u->host, std::string("127.0.0.1"));
        QCOMPARE(u->port, uint16_t(8081));
        QCOMPARE(u->target, std::string("/w/m.knot?x=1"));
        auto v6 = net::parse_http_url("HTTP://[::1]/m");
        QVERIFY(v6.is_ok());
        QCOMPARE(v6->host, std::string("::1"));
        QCOMPARE(v6->port, uint16_t(80));
        QCOMPARE(v6->authority(), std::string("[::1]:80"));
        auto bare = net::parse_http_url("http://h");
        QCOMPARE(bare->target, std::string("/"));
        for (const char* bad : {"ftp://h/x", "http://", "http://h:0/", "http://h:65536/", "http://h:x/", "http://u@h/",
                                "http://h/a b", "http://h/\r\nX: y", "http://[::1/"}) {
            auto r = net::parse_http_url(bad);
            QVERIFY2(!r.is_ok(), bad);
            QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
        }
    }

    // ---- cache ---------------------------------------------------------------------------------------------------

    void hitsAndMissesAddUpToLookups() {
        test::TempDir dir;
        auto tiny = test::make_tiny_knot(dir);
        WeightsOpenOptions resident;
        resident.memory_resident = true;
        auto store = open_weights(tiny.knot, resident);
        QVERIFY(store.is_ok());
        std::shared_ptr<const Weights> shared = std::move(*store);
        WeightCache cache(shared);
        const size_t n = shared->n_tensors();
        uint64_t total_bytes = 0;
        for (size_t i = 0; i < n; ++i) total_bytes += load_tensor(*shared, i, true)->bytes();
        for (int round = 0; round < 3; ++round)
            for (size_t i = 0; i < n; ++i) {
                auto w = cache.get(i);
                QVERIFY2(w.is_ok(), w.message().c_str());
                QCOMPARE(w->hit, round > 0);
                auto want = load_tensor(*shared, i, true);
                QVERIFY(w->values->dense == want->dense && w->values->rank == want->rank && w->values->u == want->u &&
                        w->values->svt == want->svt);
            }
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.lookups, uint64_t(3 * n));
        QCOMPARE(s.hits, uint64_t(2 * n));
        QCOMPARE(s.misses, uint64_t(n));
        QCOMPARE(s.hits + s.misses, s.lookups);
        QCOMPARE(s.reconstructions, uint64_t(n));
        QCOMPARE(s.bytes_used, total_bytes);
        QCOMPARE(s.reconstructed_bytes, total_bytes);
        QCOMPARE(s.n_entries, uint64_t(n));
        QCOMPARE(s.evictions(), uint64_t(0));
        QVERIFY(s.reconstruct_seconds >= 0);

        auto out = cache.get(n);
        QCOMPARE(out.status().code(), StatusCode::InvalidArgument);
        VERIFY_CONTAINS(out.message(),
                        "weight " + std::to_string(n) + " requested, the store holds " + std::to_string(n));
        cache.clear();
        s = cache.stats();
        QCOMPARE(s.evictions_cleared, uint64_t(n));
        QCOMPARE(s.bytes_used, uint64_t(0));
        QCOMPARE(s.n_entries, uint64_t(0));
    }

    void budgetEvictsLeastRecentlyUsed() {
        auto store = std::make_shared<FakeStore>(4, 256);  // 1 KiB each
        WeightCacheOptions o;
        o.budget_bytes = 2048;  // room for two
        o.policy = CachePolicy::Lru;
        WeightCache cache(store, o);
        QVERIFY(cache.get(0).is_ok());
        QVERIFY(cache.get(1).is_ok());
        QVERIFY(cache.get(0)->hit);   // 0 is now the most recent
        QVERIFY(!cache.get(2)->hit);  // evicts 1
        QCOMPARE(cache.stats().evictions_budget, uint64_t(1));
        QVERIFY(cache.get(0)->hit);
        QVERIFY(cache.get(2)->hit);
        QVERIFY(!cache.get(1)->hit);  // evicts 0 (2 was used after it)
        QVERIFY(!cache.get(0)->hit);  // evicts 2
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.evictions_budget, uint64_t(3));
        QCOMPARE(s.bytes_used, uint64_t(2048));
        QCOMPARE(s.n_entries, uint64_t(2));
        QCOMPARE(s.lookups, uint64_t(8));
        QCOMPARE(s.hits, uint64_t(3));
        QCOMPARE(s.misses, uint64_t(5));
        QCOMPARE(s.reconstructions, uint64_t(5));
        QCOMPARE(store->calls.load(), 5);
        QCOMPARE(s.budget_bytes, uint64_t(2048));
    }

    // A forward pass asks for every weight in the same order each token. With room for half of them, least recently
    // used out evicts exactly the weight asked for next and never hits; keeping what fits hits that half every pass.
    void keepHoldsTheHotHalfWhereLruHitsNothing() {
        for (const CachePolicy policy : {CachePolicy::Keep, CachePolicy::Lru}) {
            auto store = std::make_shared<FakeStore>(8, 256);  // 1 KiB each
            WeightCacheOptions o;
            o.budget_bytes = 4 * 1024;  // room for four
            o.policy = policy;
            WeightCache cache(store, o);
            const int passes = 10;
            for (int pass = 0; pass < passes; ++pass)
                for (size_t i = 0; i < 8; ++i) {
                    auto w = cache.get(i);
                    QVERIFY(w.is_ok());
                    QCOMPARE(w->values->dense[63], static_cast<float>(i));  // the weight asked for, kept or not
                    if (policy == CachePolicy::Keep) QCOMPARE(w->hit, pass > 0 && i < 4);
                }
            const WeightCacheStats s = cache.stats();
            QCOMPARE(s.lookups, uint64_t(8 * passes));
            QCOMPARE(s.bytes_used, uint64_t(4 * 1024));
            QCOMPARE(s.n_entries, uint64_t(4));
            if (policy == CachePolicy::Keep) {
                QCOMPARE(s.hits, uint64_t(4 * (passes - 1)));  // weights 0-3 from the second pass on
                QCOMPARE(s.not_kept, uint64_t(4 * passes));    // weights 4-7, loaded for each use
                QCOMPARE(s.evictions_budget, uint64_t(0));
            } else {
                QCOMPARE(s.hits, uint64_t(0));
                QCOMPARE(s.evictions_budget, uint64_t(8 * passes - 4));
                QCOMPARE(s.not_kept, uint64_t(0));
            }
            QCOMPARE(s.reconstructions, s.n_entries + s.evictions_budget + s.not_kept);
        }
        QCOMPARE(parse_cache_policy("keep").value(), CachePolicy::Keep);
        QCOMPARE(parse_cache_policy("lru").value(), CachePolicy::Lru);
        QCOMPARE(cache_policy_name(CachePolicy::Lru), std::string_view("lru"));
        auto bad = parse_cache_policy("mru");
        QCOMPARE(bad.status().code(), StatusCode::InvalidArgument);
        VERIFY_CONTAINS(bad.message(), "cache policy 'mru': keep or lru");
    }

    void weightLargerThanBudgetIsNotKept() {
        auto store = std::make_shared<FakeStore>(2, 256);
        WeightCacheOptions o;
        o.budget_bytes = 1000;
        WeightCache cache(store, o);
        auto a = cache.get(1);
        QVERIFY(a.is_ok());
        QCOMPARE(a->values->dense.size(), size_t(256));
        QCOMPARE(a->values->dense[0], 1.0f);
        QVERIFY(!cache.get(1)->hit);
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.not_kept, uint64_t(2));
        QCOMPARE(s.bytes_used, uint64_t(0));
        QCOMPARE(s.evictions(), uint64_t(0));
    }

    void ageEvictsOldReconstructions() {
        auto store = std::make_shared<FakeStore>(3, 16);
        double now = 100.0;
        WeightCacheOptions o;
        o.max_age_seconds = 10;
        o.clock = [&] { return now; };
        WeightCache cache(store, o);
        QVERIFY(!cache.get(0)->hit);  // born at 100
        now = 105;
        QVERIFY(!cache.get(1)->hit);  // born at 105
        QVERIFY(cache.get(0)->hit);
        now = 110;  // age exactly 10: still fresh
        QVERIFY(cache.get(0)->hit);
        now = 110.5;  // 0 is 10.5 s old: gone on this lookup
        auto again = cache.get(0);
        QVERIFY(!again->hit);
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.evictions_age, uint64_t(1));
        QCOMPARE(s.n_entries, uint64_t(2));
        now = 115.5;  // 1 (born 105) is 10.5 s old; 0 (born 110.5) is 5
        QCOMPARE(cache.evict_expired(), size_t(1));
        s = cache.stats();
        QCOMPARE(s.evictions_age, uint64_t(2));
        QCOMPARE(s.n_entries, uint64_t(1));
        QCOMPARE(s.bytes_used, uint64_t(64));
        QCOMPARE(s.hits + s.misses, s.lookups);
        QCOMPARE(s.reconstructions, uint64_t(3));
        // Serials tell reconstructions apart.
        QVERIFY(again->serial != cache.get(1)->serial);
    }

    void keepingOffReconstructsEveryTime() {
        auto store = std::make_shared<FakeStore>(2, 16);
        WeightCacheOptions o;
        o.keep_reconstructions = false;
        WeightCache cache(store, o);
        const uint64_t s1 = cache.get(0)->serial;
        const uint64_t s2 = cache.get(0)->serial;
        QVERIFY(s1 != s2);
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.misses, uint64_t(2));
        QCOMPARE(s.reconstructions, uint64_t(2));
        QCOMPARE(s.not_kept, uint64_t(2));
        QCOMPARE(s.n_entries, uint64_t(0));
    }

    void failedReconstructionIsReportedAndRetried() {
        auto store = std::make_shared<FakeStore>(2, 16);
        WeightCache cache(store);
        store->fail = true;
        auto bad = cache.get(1);
        QCOMPARE(bad.status().code(), StatusCode::Corrupt);
        QCOMPARE(bad.message(), std::string("fake: weight 1 is broken"));
        store->fail = false;
        QVERIFY(cache.get(1).is_ok());
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.reconstruction_failures, uint64_t(1));
        QCOMPARE(s.reconstructions, uint64_t(2));
        QCOMPARE(s.n_entries, uint64_t(1));
    }

    void concurrentMissesShareOneReconstruction() {
        auto store = std::make_shared<FakeStore>(1, 16);
        WeightCache cache(store);
        store->block = true;
        std::atomic<int> ok{0};
        std::thread a([&] { ok += cache.get(0).is_ok(); });
        while (store->calls.load() == 0) std::this_thread::yield();
        std::thread b([&] { ok += cache.get(0).is_ok(); });
        while (cache.stats().misses < 2) std::this_thread::yield();  // b is waiting on a's reconstruction
        store->block = false;
        a.join();
        b.join();
        QCOMPARE(ok.load(), 2);
        QCOMPARE(store->calls.load(), 1);
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.misses, uint64_t(2));
        QCOMPARE(s.reconstructions, uint64_t(1));
    }

    void threadsKeepCountersConsistent_data() {
        QTest::addColumn<int>("policy");
        QTest::newRow("keep") << int(CachePolicy::Keep);
        QTest::newRow("lru") << int(CachePolicy::Lru);
    }
    void threadsKeepCountersConsistent() {
        QFETCH(int, policy);
        auto store = std::make_shared<FakeStore>(16, 64);  // 256 bytes each
        WeightCacheOptions o;
        o.budget_bytes = 5 * 256;
        o.policy = static_cast<CachePolicy>(policy);
        WeightCache cache(store, o);
        std::atomic<int> wrong{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&, t] {
                std::mt19937 rng(static_cast<unsigned>(t));
                for (int k = 0; k < 500; ++k) {
                    const size_t i = rng() % 16;
                    auto w = cache.get(i);
                    if (!w || w->values->dense.size() != 64 || w->values->dense[63] != static_cast<float>(i)) wrong++;
                    if (cache.stats().bytes_used > o.budget_bytes) wrong++;
                }
            });
        for (auto& t : threads) t.join();
        QCOMPARE(wrong.load(), 0);
        WeightCacheStats s = cache.stats();
        QCOMPARE(s.lookups, uint64_t(4000));
        QCOMPARE(s.hits + s.misses, s.lookups);
        QVERIFY(s.reconstructions <= s.misses);
        QCOMPARE(s.reconstructions, uint64_t(store->calls.load()));
        QCOMPARE(s.reconstructions, s.n_entries + s.evictions_budget + s.not_kept);
        QCOMPARE(s.bytes_used, s.n_entries * 256);
    }
};

QTEST_APPLESS_MAIN(TestWeightCache)
#include "test_weight_cache.moc"
