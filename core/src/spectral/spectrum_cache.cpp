// The spectra cache file (gkq/spectrum_cache.h): a bounded, verified little-endian binary format.
//   file    := magic "GKQSPEC\0", u32 version, u32 n_sections, section * n_sections, SHA-256 of all bytes before it
//   section := str data_key, str options_key, u32 n_tensors, tensor * n_tensors
//   tensor  := str name, u8 role, i32 layer, i64 rows, i64 cols, str skipped, f64 frobenius_sq, vec singular_values,
//              vec top_k_values, f64 top_k_max_rel_error, metrics, power_law, marchenko_pastur,
//              f64 lambda_max, f64 log_spectral_norm, f64 log_norm, f64 alpha_hat, f64 seconds
//   str     := u32 length, bytes;  vec := u64 count, f64 * count (count <= min(rows, cols))
#include "gkq/spectrum_cache.h"

#include "gkq/atomic_file.h"
#include "gkq/model_file.h"
#include "gkq/weights.h"

#include "common/byte_reader.h"
#include "common/sha256.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>

namespace gkq {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'G', 'K', 'Q', 'S', 'P', 'E', 'C', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxFileBytes = 4ull << 30;  // 4 GiB: far above any model's spectra (an 8 B model's: ~10 MB)
constexpr uint32_t kMaxSections = 16;           // option sets kept per model; the oldest go first
constexpr uint32_t kMaxString = 1u << 20;
constexpr uint64_t kMinTensorBytes = 200;  // a tensor record with empty strings and vectors is larger than this

std::string hex(const std::array<uint8_t, 32>& d) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (uint8_t b : d) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

// ---- writing ----

class Writer {
public:
    std::string bytes;
    template <class T>
    void put(T v) {
        bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    void str(const std::string& s) {
        put<uint32_t>(static_cast<uint32_t>(std::min<size_t>(s.size(), kMaxString)));
        bytes.append(s.data(), std::min<size_t>(s.size(), kMaxString));
    }
    void vec(const std::vector<double>& v) {
        put<uint64_t>(v.size());
        bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
    }
};

void put_tensor(Writer& w, const TensorSpectrum& t) {
    w.str(t.name);
    w.put<uint8_t>(static_cast<uint8_t>(t.role));
    w.put<int32_t>(t.layer);
    w.put<int64_t>(t.rows);
    w.put<int64_t>(t.cols);
    w.str(t.skipped);
    w.put<double>(t.frobenius_sq);
    w.vec(t.singular_values);
    w.vec(t.top_k_values);
    w.put<double>(t.top_k_max_rel_error);
    const SpectrumMetrics& m = t.metrics;
    w.put<int64_t>(m.n_values);
    w.put<uint8_t>(m.complete ? 1 : 0);
    for (double v : {m.frobenius_sq, m.s1, m.s2, m.stable_rank, m.effective_rank, m.s1_over_s2}) w.put<double>(v);
    for (int64_t v : {m.rank_90, m.rank_99, m.rank_999}) w.put<int64_t>(v);
    const PowerLawFit& p = t.heavy_tail.power_law;
    w.put<uint8_t>(p.reliable ? 1 : 0);
    w.put<uint8_t>(static_cast<uint8_t>(p.problem));
    w.str(p.reason);
    for (double v : {p.alpha, p.xmin, p.xmax, p.ks_distance, p.sigma}) w.put<double>(v);
    w.put<int64_t>(p.n_fit);
    w.put<int64_t>(p.n_tail);
    const MarchenkoPasturFit& mp = t.heavy_tail.marchenko_pastur;
    w.put<uint8_t>(mp.reliable ? 1 : 0);
    w.put<uint8_t>(static_cast<uint8_t>(mp.problem));
    w.str(mp.reason);
    for (double v : {mp.q, mp.sigma, mp.bulk_min, mp.bulk_max, mp.softrank}) w.put<double>(v);
    w.put<int64_t>(mp.n_spikes);
    const HeavyTailMetrics& h = t.heavy_tail;
    for (double v : {h.lambda_max, h.log_spectral_norm, h.log_norm, h.alpha_hat, t.seconds}) w.put<double>(v);
}

// ---- reading ----

struct Section {
    std::string data_key;
    std::string options_key;
    uint64_t begin = 0;  // of the tensors (after n_tensors)
    uint64_t end = 0;
    uint32_t n_tensors = 0;
};

bool get_str(ByteReader& r, std::string& out, const char* what) {
    uint32_t n = 0;
    if (!r.read(n, what)) return false;
    if (n > kMaxString) {
        r.fail(what, "length " + std::to_string(n) + " over the limit");
        return false;
    }
    const uint8_t* p = nullptr;
    if (!r.bytes(n, p, what)) return false;
    out.assign(reinterpret_cast<const char*>(p), n);
    return true;
}

bool get_vec(ByteReader& r, std::vector<double>& out, int64_t max_count, const char* what) {
    uint64_t n = 0;
    if (!r.read(n, what)) return false;
    if (n > static_cast<uint64_t>(std::max<int64_t>(0, max_count)) || n > r.remaining() / sizeof(double)) {
        r.fail(what, "count " + std::to_string(n) + " exceeds the matrix or the file");
        return false;
    }
    const uint8_t* p = nullptr;
    if (!r.bytes(n * sizeof(double), p, what)) return false;
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), p, n * sizeof(double));
    return true;
}

bool get_tensor(ByteReader& r, TensorSpectrum& t) {
    uint8_t role = 0, flag = 0, problem = 0;
    get_str(r, t.name, "tensor name");
    r.read(role, "role");
    r.read(t.layer, "layer");
    r.read(t.rows, "rows");
    r.read(t.cols, "cols");
    if (!r.ok()) return false;
    if (t.rows < 0 || t.cols < 0 || role >= kTensorRoleCount) {
        r.fail("tensor '" + t.name + "'", "invalid shape or role");
        return false;
    }
    t.role = static_cast<TensorRole>(role);
    const int64_t n = std::min(t.rows, t.cols);
    get_str(r, t.skipped, "skipped");
    r.read(t.frobenius_sq, "frobenius_sq");
    get_vec(r, t.singular_values, n, "singular values");
    get_vec(r, t.top_k_values, n, "top-k values");
    r.read(t.top_k_max_rel_error, "top-k error");
    SpectrumMetrics& m = t.metrics;
    r.read(m.n_values, "n_values");
    r.read(flag, "complete");
    m.complete = flag != 0;
    for (double* v : {&m.frobenius_sq, &m.s1, &m.s2, &m.stable_rank, &m.effective_rank, &m.s1_over_s2})
        r.read(*v, "metric");
    for (int64_t* v : {&m.rank_90, &m.rank_99, &m.rank_999}) r.read(*v, "rank");
    const auto fit_problem = [&r](uint8_t p) {
        if (p > static_cast<uint8_t>(FitProblem::PartialSpectrum)) r.fail("fit", "unknown problem code");
        return static_cast<FitProblem>(p);
    };
    PowerLawFit& p = t.heavy_tail.power_law;
    r.read(flag, "power law reliable");
    p.reliable = flag != 0;
    r.read(problem, "power law problem");
    p.problem = fit_problem(problem);
    get_str(r, p.reason, "power law reason");
    for (double* v : {&p.alpha, &p.xmin, &p.xmax, &p.ks_distance, &p.sigma}) r.read(*v, "power law");
    r.read(p.n_fit, "power law n_fit");
    r.read(p.n_tail, "power law n_tail");
    MarchenkoPasturFit& mp = t.heavy_tail.marchenko_pastur;
    r.read(flag, "MP reliable");
    mp.reliable = flag != 0;
    r.read(problem, "MP problem");
    mp.problem = fit_problem(problem);
    get_str(r, mp.reason, "MP reason");
    for (double* v : {&mp.q, &mp.sigma, &mp.bulk_min, &mp.bulk_max, &mp.softrank}) r.read(*v, "MP");
    r.read(mp.n_spikes, "MP spikes");
    HeavyTailMetrics& h = t.heavy_tail;
    for (double* v : {&h.lambda_max, &h.log_spectral_norm, &h.log_norm, &h.alpha_hat, &t.seconds})
        r.read(*v, "heavy-tail metric");
    return r.ok();
}

// The whole file, size-checked before it is allocated and its trailing SHA-256 verified. nullopt with an empty note
// when it does not exist.
std::optional<std::string> read_verified(const std::string& path, std::string& note) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    if (!S_ISREG(st.st_mode)) {
        note = path + ": not a regular file; ignored";
        return std::nullopt;
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size < sizeof kMagic + 8 + 32 || size > kMaxFileBytes) {
        note = path + ": " + std::to_string(size) + " bytes, not a spectra cache (truncated or not one); ignored";
        return std::nullopt;
    }
    std::string bytes;
    try {
        bytes.resize(size);
    } catch (const std::bad_alloc&) {
        note = path + ": out of memory reading it; ignored";
        return std::nullopt;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
        note = path + ": cannot be read (" + std::strerror(errno) + "); ignored";
        return std::nullopt;
    }
    if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
        note = path + ": not a spectra cache (wrong magic); ignored";
        return std::nullopt;
    }
    Sha256 h;
    h.update(bytes.data(), size - 32);
    const auto digest = h.finish();
    if (std::memcmp(digest.data(), bytes.data() + size - 32, 32) != 0) {
        note = path + ": checksum mismatch (truncated or corrupt); ignored";
        return std::nullopt;
    }
    bytes.resize(size - 32);
    return bytes;
}

// The sections of a verified file (their tensors not parsed). Fails on a malformed structure.
Status parse_sections(const std::string& bytes, const std::string& path, std::vector<Section>& out) {
    ByteReader r(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
    r.skip(sizeof kMagic, "magic");
    uint32_t version = 0, n_sections = 0;
    r.read(version, "version");
    r.read(n_sections, "section count");
    if (!r.ok()) return r.status();
    if (version != kVersion)
        return error(StatusCode::Unsupported, path + ": cache format version " + std::to_string(version) +
                                                  " (this build reads " + std::to_string(kVersion) + ")");
    if (n_sections > kMaxSections) return error(StatusCode::Corrupt, path + ": too many sections");
    for (uint32_t s = 0; s < n_sections; ++s) {
        Section sec;
        get_str(r, sec.data_key, "data key");
        get_str(r, sec.options_key, "options key");
        r.read(sec.n_tensors, "tensor count");
        if (!r.ok()) return r.status();
        if (sec.n_tensors > r.remaining() / kMinTensorBytes)
            return error(StatusCode::Corrupt,
                         path + ": tensor count " + std::to_string(sec.n_tensors) + " exceeds the file");
        sec.begin = r.offset();
        TensorSpectrum scratch;
        for (uint32_t i = 0; i < sec.n_tensors; ++i)
            if (!get_tensor(r, scratch)) return r.status();
        sec.end = r.offset();
        out.push_back(std::move(sec));
    }
    if (r.remaining() != 0) return error(StatusCode::Corrupt, path + ": trailing bytes after the last section");
    return Status::ok();
}

std::string cache_home() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') return x;
    if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0') return std::string(h) + "/.cache";
    return {};
}

}  // namespace

Result<SpectrumCacheKey> spectrum_cache_key(const Weights& model, const std::string& model_path,
                                            const AnalyzeOptions& options) {
    SpectrumCacheKey key;
    std::error_code ec;
    const bool folder = fs::is_directory(model_path, ec);
    const fs::path base = folder ? fs::path(model_path) : fs::path(model_path).parent_path();
    key.data = "gkq spectra cache v1\n";
    for (const std::string& f : model_input_files(model_path)) {
        struct stat st {};
        if (::stat(f.c_str(), &st) != 0)
            return error(StatusCode::IoError, f + ": cannot stat (" + std::strerror(errno) + ")");
        const uint64_t mtime_ns =
            static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull + static_cast<uint64_t>(st.st_mtim.tv_nsec);
        std::string name = fs::path(f).lexically_relative(base.empty() ? fs::path(".") : base).string();
        if (name.empty()) name = fs::path(f).filename().string();
        key.data +=
            "file " + name + " size " + std::to_string(st.st_size) + " mtime_ns " + std::to_string(mtime_ns) + "\n";
    }
    Sha256 index;
    const auto* file = dynamic_cast<const ModelFile*>(&model);
    for (size_t i = 0; i < model.n_tensors(); ++i) {
        const TensorInfo& t = model.tensor_info(i);
        std::string line = t.name + '\t' + std::to_string(static_cast<int>(t.dtype)) + '\t' + shape_to_string(t.shape) +
                           '\t' + std::to_string(static_cast<int>(t.role)) + '\t' + std::to_string(t.layer) + '\t' +
                           std::to_string(model.stored_bytes(i)) + '\t' +
                           (file ? std::to_string(file->tensors()[i].file_offset) : std::string("-")) + '\n';
        index.update(line.data(), line.size());
    }
    key.data += "tensors " + std::to_string(model.n_tensors()) + " index_sha256 " + hex(index.finish()) + "\n";
    key.options = "full " + std::to_string(options.full ? 1 : 0) + " top_k " + std::to_string(options.top_k);
    if (options.top_k > 0)
        key.options += " oversampling " + std::to_string(options.randomized.oversampling) + " power_iterations " +
                       std::to_string(options.randomized.n_power_iterations) + " seed " +
                       std::to_string(options.randomized.seed);
    return key;
}

SpectrumCachePaths spectrum_cache_paths(const std::string& model_path) {
    SpectrumCachePaths p;
    std::error_code ec;
    std::string trimmed = model_path;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
    p.beside = fs::is_directory(trimmed, ec) ? trimmed + "/.gkq-spectra" : trimmed + ".gkq-spectra";
    const std::string home = cache_home();
    if (!home.empty()) {
        fs::path abs = fs::absolute(trimmed, ec);
        if (ec) abs = trimmed;
        const std::string s = abs.lexically_normal().string();
        p.fallback = home + "/gkq/spectra/" + sha256_hex(s.data(), s.size()) + ".gkq-spectra";
    }
    return p;
}

Status write_spectrum_cache_file(const std::string& path, const SpectrumCacheKey& key,
                                 const std::vector<TensorSpectrum>& spectra) {
    // Keep what the file holds for the same data under other options (at most kMaxSections - 1 of them).
    std::vector<std::string> kept;
    std::string note;
    if (auto old = read_verified(path, note)) {
        std::vector<Section> sections;
        if (parse_sections(*old, path, sections))
            for (const Section& s : sections)
                if (s.data_key == key.data && s.options_key != key.options && kept.size() + 1 < kMaxSections) {
                    Writer w;
                    w.str(s.data_key);
                    w.str(s.options_key);
                    w.put<uint32_t>(s.n_tensors);
                    w.bytes.append(*old, s.begin, s.end - s.begin);
                    kept.push_back(std::move(w.bytes));
                }
    }
    Writer w;
    w.bytes.append(kMagic, sizeof kMagic);
    w.put<uint32_t>(kVersion);
    w.put<uint32_t>(static_cast<uint32_t>(kept.size() + 1));
    for (const std::string& s : kept) w.bytes += s;
    w.str(key.data);
    w.str(key.options);
    w.put<uint32_t>(static_cast<uint32_t>(spectra.size()));
    for (const TensorSpectrum& t : spectra) put_tensor(w, t);
    Sha256 h;
    h.update(w.bytes.data(), w.bytes.size());
    const auto digest = h.finish();
    w.bytes.append(reinterpret_cast<const char*>(digest.data()), digest.size());
    return write_file_atomic(path, w.bytes);
}

std::optional<std::vector<TensorSpectrum>> read_spectrum_cache_file(const std::string& path,
                                                                    const SpectrumCacheKey& key, std::string& note) {
    note.clear();
    auto bytes = read_verified(path, note);
    if (!bytes) return std::nullopt;
    std::vector<Section> sections;
    if (Status s = parse_sections(*bytes, path, sections); !s) {
        note = s.message() + "; ignored";
        return std::nullopt;
    }
    bool same_data = false;
    for (const Section& sec : sections) {
        if (sec.data_key != key.data) continue;
        same_data = true;
        if (sec.options_key != key.options) continue;
        ByteReader r(reinterpret_cast<const uint8_t*>(bytes->data()), sec.end, path);
        r.seek(sec.begin, "section");
        std::vector<TensorSpectrum> out(sec.n_tensors);
        for (TensorSpectrum& t : out)
            if (!get_tensor(r, t)) {
                note = r.status().message() + "; ignored";
                return std::nullopt;
            }
        return out;
    }
    note = same_data ? path + ": no spectra for these options (" + key.options + ")"
                     : path + ": made for other data (the model's files or tensors changed since); not used";
    return std::nullopt;
}

SpectrumCacheLookup read_spectrum_cache(const std::string& model_path, const SpectrumCacheKey& key) {
    SpectrumCacheLookup out;
    const SpectrumCachePaths paths = spectrum_cache_paths(model_path);
    for (const std::string& p : {paths.beside, paths.fallback}) {
        if (p.empty()) continue;
        std::string note;
        if (auto hit = read_spectrum_cache_file(p, key, note)) {
            out.spectra = std::move(hit);
            out.path = p;
            return out;
        }
        if (!note.empty()) out.notes.push_back(note);
    }
    return out;
}

Result<std::string> write_spectrum_cache(const std::string& model_path, const SpectrumCacheKey& key,
                                         const std::vector<TensorSpectrum>& spectra) {
    const SpectrumCachePaths paths = spectrum_cache_paths(model_path);
    const Status beside = write_spectrum_cache_file(paths.beside, key, spectra);
    if (beside) return paths.beside;
    if (paths.fallback.empty())
        return error(StatusCode::IoError, beside.message() + "; and no per-user cache folder (HOME is not set)");
    std::error_code ec;
    fs::create_directories(fs::path(paths.fallback).parent_path(), ec);
    const Status fallback = write_spectrum_cache_file(paths.fallback, key, spectra);
    if (fallback) return paths.fallback;
    return error(StatusCode::IoError, beside.message() + "; " + fallback.message());
}

}  // namespace gkq
