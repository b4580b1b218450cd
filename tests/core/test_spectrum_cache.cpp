// The spectra cache (gkq/spectrum_cache.h): a round trip keeps every value; a changed file, tensor index or option
// is a miss; a corrupt or truncated file is ignored with a note naming it; an unwritable place beside the model
// falls back to $XDG_CACHE_HOME/gkq/spectra; sections of other options survive a write.
#include "common/sha256.h"
#include "gkq/model_file.h"
#include "gkq/spectrum.h"
#include "gkq/spectrum_cache.h"
#include "test_support.h"
#include "tiny_model.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QtTest>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace gkq;

namespace {

std::string read_all(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}
// NaN-aware equality of doubles (the metrics hold NaN where a value is unknown).
bool same(double a, double b) {
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

}  // namespace

class TestSpectrumCache : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    test::TempDir m_home;
    std::string m_model;
    std::vector<TensorSpectrum> m_spectra;

private slots:
    void initTestCase() {
        qputenv("XDG_CACHE_HOME", QByteArray::fromStdString(m_home.path()));
        m_model = m_dir.file("model.safetensors");
        const test::TinyModel tiny = test::make_tiny_model(test::tiny_config(false), 7);
        QVERIFY(write_safetensors(m_model, tiny.config, tiny.tensors).is_ok());
        auto model = ModelFile::open(m_model);
        QVERIFY2(model.is_ok(), model.message().c_str());
        AnalyzeOptions opt;
        opt.top_k = 4;  // both: the top-k error is recorded too
        auto r = analyze_model(*model, opt);
        QVERIFY2(r.is_ok(), r.message().c_str());
        m_spectra = std::move(r).value();
        QVERIFY(m_spectra.size() > 5);
    }

    void roundTrip() {
        auto model = ModelFile::open(m_model);
        AnalyzeOptions opt;
        opt.top_k = 4;
        auto key = spectrum_cache_key(*model, m_model, opt);
        QVERIFY2(key.is_ok(), key.message().c_str());
        auto written = write_spectrum_cache(m_model, *key, m_spectra);
        QVERIFY2(written.is_ok(), written.message().c_str());
        QCOMPARE(QString::fromStdString(*written), QString::fromStdString(m_model + ".gkq-spectra"));
        const SpectrumCacheLookup hit = read_spectrum_cache(m_model, *key);
        QVERIFY(hit.spectra.has_value());
        QCOMPARE(hit.path, *written);
        QCOMPARE(hit.spectra->size(), m_spectra.size());
        for (size_t i = 0; i < m_spectra.size(); ++i) {
            const TensorSpectrum &a = m_spectra[i], &b = (*hit.spectra)[i];
            QCOMPARE(b.name, a.name);
            QCOMPARE(b.role, a.role);
            QCOMPARE(b.layer, a.layer);
            QCOMPARE(b.rows, a.rows);
            QCOMPARE(b.cols, a.cols);
            QVERIFY(b.singular_values == a.singular_values);  // bit for bit
            QVERIFY(b.top_k_values == a.top_k_values);
            QVERIFY(same(b.top_k_max_rel_error, a.top_k_max_rel_error));
            QVERIFY(same(b.metrics.effective_rank, a.metrics.effective_rank));
            QCOMPARE(b.metrics.rank_99, a.metrics.rank_99);
            QCOMPARE(b.metrics.complete, a.metrics.complete);
            QCOMPARE(b.heavy_tail.power_law.reliable, a.heavy_tail.power_law.reliable);
            QCOMPARE(b.heavy_tail.power_law.problem, a.heavy_tail.power_law.problem);
            QCOMPARE(b.heavy_tail.power_law.reason, a.heavy_tail.power_law.reason);
            QVERIFY(same(b.heavy_tail.marchenko_pastur.bulk_max, a.heavy_tail.marchenko_pastur.bulk_max));
            QVERIFY(same(b.heavy_tail.alpha_hat, a.heavy_tail.alpha_hat));
            QVERIFY(same(b.seconds, a.seconds));
        }
    }

    void otherOptionsMissAndBothSectionsKept() {
        auto model = ModelFile::open(m_model);
        AnalyzeOptions both;
        both.top_k = 4;
        AnalyzeOptions full;  // exact only
        auto kb = spectrum_cache_key(*model, m_model, both);
        auto kf = spectrum_cache_key(*model, m_model, full);
        QCOMPARE(kb->data, kf->data);
        QVERIFY(kb->options != kf->options);
        const SpectrumCacheLookup miss = read_spectrum_cache(m_model, *kf);
        QVERIFY(!miss.spectra);
        QCOMPARE(miss.notes.size(), size_t(1));
        QVERIFY2(QString::fromStdString(miss.notes[0]).contains("no spectra for these options"), miss.notes[0].c_str());
        std::vector<TensorSpectrum> one(m_spectra.begin(), m_spectra.begin() + 1);
        QVERIFY(write_spectrum_cache(m_model, *kf, one).is_ok());
        // The first section is still there beside the new one.
        QCOMPARE(read_spectrum_cache(m_model, *kf).spectra->size(), size_t(1));
        QCOMPARE(read_spectrum_cache(m_model, *kb).spectra->size(), m_spectra.size());
        AnalyzeOptions seed = both;
        seed.randomized.seed += 1;
        QVERIFY(!read_spectrum_cache(m_model, *spectrum_cache_key(*model, m_model, seed)).spectra);
        AnalyzeOptions threads = both;
        threads.n_threads = 3;  // does not change a result: same key
        QCOMPARE(spectrum_cache_key(*model, m_model, threads)->options, kb->options);
    }

    void touchedFileIsAMiss() {
        auto model = ModelFile::open(m_model);
        AnalyzeOptions opt;
        opt.top_k = 4;
        auto before = spectrum_cache_key(*model, m_model, opt);
        QVERIFY(read_spectrum_cache(m_model, *before).spectra.has_value());
        struct stat st {};
        QCOMPARE(::stat(m_model.c_str(), &st), 0);
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        times[1].tv_nsec = (times[1].tv_nsec + 1) % 1000000000;  // one nanosecond: the content is the same
        QCOMPARE(::utimensat(AT_FDCWD, m_model.c_str(), times, 0), 0);
        auto after = spectrum_cache_key(*model, m_model, opt);
        QVERIFY(after->data != before->data);
        const SpectrumCacheLookup miss = read_spectrum_cache(m_model, *after);
        QVERIFY(!miss.spectra);
        QVERIFY(!miss.notes.empty());
        QVERIFY2(QString::fromStdString(miss.notes[0]).contains("made for other data"), miss.notes[0].c_str());
        QVERIFY2(QString::fromStdString(miss.notes[0]).contains(QString::fromStdString(m_model + ".gkq-spectra")),
                 miss.notes[0].c_str());
        // Written again under the new key, it hits again.
        QVERIFY(write_spectrum_cache(m_model, *after, m_spectra).is_ok());
        QVERIFY(read_spectrum_cache(m_model, *after).spectra.has_value());
    }

    void otherModelSameTimesIsAMiss() {
        // A different tensor index (another model written at the same path) never matches.
        auto model = ModelFile::open(m_model);
        AnalyzeOptions opt;
        opt.top_k = 4;
        auto key = spectrum_cache_key(*model, m_model, opt);
        test::TempDir other;
        const std::string p = other.file("model.safetensors");
        const test::TinyModel tiny = test::make_tiny_model(test::tiny_config(true), 7);
        QVERIFY(write_safetensors(p, tiny.config, tiny.tensors).is_ok());
        auto m2 = ModelFile::open(p);
        auto k2 = spectrum_cache_key(*m2, p, opt);
        QVERIFY(k2->data != key->data);
    }

    void corruptFilesAreIgnoredWithANote() {
        auto model = ModelFile::open(m_model);
        AnalyzeOptions opt;
        opt.top_k = 4;
        auto key = spectrum_cache_key(*model, m_model, opt);
        const std::string cache = m_model + ".gkq-spectra";
        QVERIFY(write_spectrum_cache_file(cache, *key, m_spectra).is_ok());
        const std::string good = read_all(cache);
        std::string note;
        QVERIFY(read_spectrum_cache_file(cache, *key, note).has_value());
        QVERIFY(note.empty());

        const std::vector<std::pair<const char*, std::string>> cases = {
            {"truncated", good.substr(0, good.size() / 2)},
            {"one byte", good.substr(0, 1)},
            {"empty", std::string()},
            {"flipped bit",
             [&] {
                 std::string b = good;
                 b[b.size() / 3] ^= 0x10;
                 return b;
             }()},
            {"not a cache", std::string(4096, 'x')},
        };
        for (const auto& [what, bytes] : cases) {
            write_all(cache, bytes);
            auto r = read_spectrum_cache_file(cache, *key, note);
            QVERIFY2(!r, what);
            QVERIFY2(QString::fromStdString(note).startsWith(QString::fromStdString(cache)), note.c_str());
            QVERIFY2(note.find("ignored") != std::string::npos, note.c_str());
            const SpectrumCacheLookup l = read_spectrum_cache(m_model, *key);
            QVERIFY2(!l.spectra, what);
            QVERIFY2(!l.notes.empty() && l.notes[0] == note, what);
        }
        // Checksums right, counts that lie (the section's tensor count, then a vector count past the end): refused
        // before anything that size is allocated.
        const auto resigned = [](std::string b) {
            Sha256 h;
            h.update(b.data(), b.size());
            const auto d = h.finish();
            return b.append(reinterpret_cast<const char*>(d.data()), d.size());
        };
        const std::string body = good.substr(0, good.size() - 32);
        const size_t count_at = 8 + 4 + 4 + 4 + key->data.size() + 4 + key->options.size();
        for (const uint32_t lie : {0x7fffffffu, 100000u}) {
            std::string b = body;
            std::memcpy(b.data() + count_at, &lie, 4);
            write_all(cache, resigned(b));
            QVERIFY(!read_spectrum_cache_file(cache, *key, note));
            QVERIFY2(note.find("exceeds the file") != std::string::npos, note.c_str());
        }
        {
            // The first tensor's singular-value count: after its name, role, layer, rows, cols, skipped, frobenius_sq.
            const TensorSpectrum& t0 = m_spectra[0];
            const size_t at = count_at + 4 + 4 + t0.name.size() + 1 + 4 + 8 + 8 + 4 + t0.skipped.size() + 8;
            uint64_t n = 0;
            std::memcpy(&n, body.data() + at, 8);
            QCOMPARE(n, uint64_t(t0.singular_values.size()));  // the offset is right
            std::string b = body;
            const uint64_t lie = uint64_t(1) << 40;
            std::memcpy(b.data() + at, &lie, 8);
            write_all(cache, resigned(b));
            QVERIFY(!read_spectrum_cache_file(cache, *key, note));
            QVERIFY2(note.find("exceeds the matrix or the file") != std::string::npos, note.c_str());
        }
        // A good file again: a corrupt one is replaced by the next write.
        QVERIFY(write_spectrum_cache(m_model, *key, m_spectra).is_ok());
        QVERIFY(read_spectrum_cache(m_model, *key).spectra.has_value());
    }

    void unwritableBesideFallsBack() {
        test::TempDir dir;
        const std::string p = dir.file("model.safetensors");
        const test::TinyModel tiny = test::make_tiny_model(test::tiny_config(false), 7);
        QVERIFY(write_safetensors(p, tiny.config, tiny.tensors).is_ok());
        auto model = ModelFile::open(p);
        AnalyzeOptions opt;
        auto key = spectrum_cache_key(*model, p, opt);
        // A folder where the cache file would go: nothing can be renamed over it, even by root.
        std::filesystem::create_directory(p + ".gkq-spectra");
        const SpectrumCachePaths paths = spectrum_cache_paths(p);
        QVERIFY(QString::fromStdString(paths.fallback).startsWith(QString::fromStdString(m_home.path() + "/gkq/")));
        auto written = write_spectrum_cache(p, *key, m_spectra);
        QVERIFY2(written.is_ok(), written.message().c_str());
        QCOMPARE(*written, paths.fallback);
        const SpectrumCacheLookup hit = read_spectrum_cache(p, *key);
        QVERIFY(hit.spectra.has_value());
        QCOMPARE(hit.path, paths.fallback);
        QCOMPARE(hit.notes.size(), size_t(1));  // the folder in the way is named
        QVERIFY2(hit.notes.empty() || hit.notes[0].find("not a regular file") != std::string::npos,
                 hit.notes[0].c_str());
        // A read-only folder, where permissions apply (not as root).
        if (::geteuid() != 0) {
            test::TempDir ro;
            const std::string q = ro.file("model.safetensors");
            QVERIFY(write_safetensors(q, tiny.config, tiny.tensors).is_ok());
            QCOMPARE(::chmod(ro.path().c_str(), 0555), 0);
            auto m2 = ModelFile::open(q);
            auto k2 = spectrum_cache_key(*m2, q, opt);
            auto w2 = write_spectrum_cache(q, *k2, m_spectra);
            ::chmod(ro.path().c_str(), 0755);
            QVERIFY2(w2.is_ok(), w2.message().c_str());
            QCOMPARE(*w2, spectrum_cache_paths(q).fallback);
        }
    }

    void folderModelCacheInside() {
        test::TempDir dir;
        const test::TinyModel tiny = test::make_tiny_model(test::tiny_config(false), 7);
        QVERIFY(write_safetensors(dir.file("model.safetensors"), tiny.config, tiny.tensors).is_ok());
        QCOMPARE(spectrum_cache_paths(dir.path()).beside, dir.path() + "/.gkq-spectra");
        QCOMPARE(spectrum_cache_paths(dir.path() + "/").beside, dir.path() + "/.gkq-spectra");
        auto model = ModelFile::open(dir.path());
        QVERIFY2(model.is_ok(), model.message().c_str());
        auto key = spectrum_cache_key(*model, dir.path(), {});
        QVERIFY(QString::fromStdString(key->data).contains("file model.safetensors size "));
        QVERIFY(write_spectrum_cache(dir.path(), *key, m_spectra).is_ok());
        // Writing the cache inside the folder does not change the folder model's key.
        auto again = spectrum_cache_key(*ModelFile::open(dir.path()), dir.path(), {});
        QCOMPARE(again->data, key->data);
        QVERIFY(read_spectrum_cache(dir.path(), *again).spectra.has_value());
    }
};

QTEST_GUILESS_MAIN(TestSpectrumCache)
#include "test_spectrum_cache.moc"
