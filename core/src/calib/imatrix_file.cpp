// The imatrix files as llama.cpp writes and reads them: GGUF (IMatrixCollector::save_imatrix through ggml's
// gguf_write_to_file: version 3, the four keys in that order, tensor infos with ggml_n_dims dimensions, every
// tensor's data padded to the 32-byte alignment) and the legacy .dat (save_imatrix_legacy). Reading follows
// common_imatrix_load: GGUF first, the legacy layout when the file is not GGUF.
#include "gkq/imatrix.h"

#include "gkq/atomic_file.h"

#include "common/byte_reader.h"
#include "common/mapped_file.h"
#include "formats/gguf_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace gkq {

namespace {

constexpr const char* kKeyType = "general.type";
constexpr const char* kKeyDatasets = "imatrix.datasets";
constexpr const char* kKeyChunkCount = "imatrix.chunk_count";
constexpr const char* kKeyChunkSize = "imatrix.chunk_size";
constexpr const char* kSuffixSums = ".in_sum2";
constexpr const char* kSuffixCounts = ".counts";
constexpr uint32_t kGgmlF32 = 0;

// ---- writing ------------------------------------------------------------------------------------------------------

struct Out {
    std::string b;
    template <class T>
    void put(T v) {
        b.append(reinterpret_cast<const char*>(&v), sizeof(v));
    }
    void str(std::string_view s) {
        put<uint64_t>(s.size());
        b.append(s);
    }
    void pad(uint64_t alignment) {
        while (b.size() % alignment != 0) b.push_back('\0');
    }
};

// The head of both GGUF containers written here (llama.cpp's imatrix and our Gram file): magic, version 3, the
// counts, and four keys: general.type, then the datasets, chunk count and chunk size under the given key names.
void put_head(Out& o, int64_t n_tensors, std::string_view type, const char* key_datasets, const char* key_chunk_count,
              const char* key_chunk_size, const std::vector<std::string>& datasets, int64_t chunk_count,
              int64_t chunk_size) {
    o.b.append(gguf::kMagic, 4);
    o.put<uint32_t>(3);
    o.put<int64_t>(n_tensors);
    o.put<int64_t>(4);
    o.str(kKeyType);
    o.put<uint32_t>(static_cast<uint32_t>(MetaType::String));
    o.str(type);
    o.str(key_datasets);
    o.put<uint32_t>(static_cast<uint32_t>(MetaType::Array));
    o.put<uint32_t>(static_cast<uint32_t>(MetaType::String));
    o.put<uint64_t>(datasets.size());
    for (const std::string& d : datasets) o.str(d);
    o.str(key_chunk_count);
    o.put<uint32_t>(static_cast<uint32_t>(MetaType::U32));
    o.put<uint32_t>(static_cast<uint32_t>(chunk_count));
    o.str(key_chunk_size);
    o.put<uint32_t>(static_cast<uint32_t>(MetaType::U32));
    o.put<uint32_t>(static_cast<uint32_t>(chunk_size));
}

uint64_t padded(uint64_t n) {
    return (n + gguf::kDefaultAlignment - 1) / gguf::kDefaultAlignment * gguf::kDefaultAlignment;
}

// One tensor info; its dimensions as ggml_n_dims counts them (up to the last one above 1, at least one).
void put_info(Out& o, const std::string& name, int64_t ne0, int64_t ne1, uint32_t ggml_type, uint64_t offset) {
    o.str(name);
    const uint32_t n_dims = ne1 > 1 ? 2 : 1;
    o.put<uint32_t>(n_dims);
    o.put<int64_t>(ne0);
    if (n_dims == 2) o.put<int64_t>(ne1);
    o.put<uint32_t>(ggml_type);
    o.put<uint64_t>(offset);
}

std::string gguf_bytes(const Imatrix& m) {
    Out o;
    std::vector<const ImatrixEntry*> stored;
    for (const ImatrixEntry& e : m.entries)
        if (!e.sums.empty() && !e.counts.empty()) stored.push_back(&e);
    put_head(o, static_cast<int64_t>(2 * stored.size()), "imatrix", kKeyDatasets, kKeyChunkCount, kKeyChunkSize,
             m.datasets, m.chunk_count, m.chunk_size);
    auto info = [&](const std::string& name, int64_t ne0, int64_t ne1, uint64_t offset) {
        put_info(o, name, ne0, ne1, kGgmlF32, offset);
    };
    uint64_t offset = 0;
    for (const ImatrixEntry* e : stored) {
        const auto n_mat = static_cast<int64_t>(e->counts.size());
        info(e->name + kSuffixSums, static_cast<int64_t>(e->sums.size()) / n_mat, n_mat, offset);
        offset += padded(e->sums.size() * sizeof(float));
        info(e->name + kSuffixCounts, 1, n_mat, offset);
        offset += padded(e->counts.size() * sizeof(float));
    }
    o.pad(gguf::kDefaultAlignment);
    for (const ImatrixEntry* e : stored) {
        for (float v : e->sums) o.put<float>(v);
        o.pad(gguf::kDefaultAlignment);
        for (int64_t c : e->counts) o.put<float>(static_cast<float>(c));
        o.pad(gguf::kDefaultAlignment);
    }
    return o.b;
}

// save_imatrix_legacy: entries with some data, values (sum / count) * ncall (1 where a count is 0), ncall the
// ceiling of the largest count over chunk_size. A legacy imatrix is written back as it was read.
Result<std::string> legacy_bytes(const Imatrix& m) {
    if (m.format == ImatrixFormat::Gguf && m.chunk_size <= 0)
        return error(StatusCode::InvalidArgument, "imatrix: a legacy file needs the chunk size, which is 0");
    Out o;
    std::vector<const ImatrixEntry*> stored;
    for (const ImatrixEntry& e : m.entries) {
        const bool any = std::any_of(e.counts.begin(), e.counts.end(), [](int64_t c) { return c != 0; });
        if (any && !e.sums.empty()) stored.push_back(&e);
    }
    o.put<int32_t>(static_cast<int32_t>(stored.size()));
    for (const ImatrixEntry* e : stored) {
        o.put<int32_t>(static_cast<int32_t>(e->name.size()));
        o.b.append(e->name);
        const auto nval = static_cast<int32_t>(e->sums.size());
        if (m.format == ImatrixFormat::Legacy) {
            o.put<int32_t>(static_cast<int32_t>(e->counts[0]));
            o.put<int32_t>(nval);
            for (float v : e->sums) o.put<float>(v);
            continue;
        }
        const int64_t max_count = *std::max_element(e->counts.begin(), e->counts.end());
        const auto ncall = static_cast<int32_t>((max_count + (m.chunk_size - 1)) / m.chunk_size);
        o.put<int32_t>(ncall);
        o.put<int32_t>(nval);
        const auto nmat = static_cast<int32_t>(e->counts.size());
        for (int32_t i = 0; i < nval; ++i) {
            float count = static_cast<float>(e->counts[static_cast<size_t>(i / (nval / nmat))]);
            float value = e->sums[static_cast<size_t>(i)];
            if (count == 0.0f) {
                value = 1.0f;
                count = 1.0f;
            }
            o.put<float>((value / count) * static_cast<float>(ncall));
        }
    }
    o.put<int32_t>(m.chunk_count);
    const std::string dataset = m.datasets.empty() ? std::string() : m.datasets.back();
    o.put<int32_t>(static_cast<int32_t>(dataset.size()));
    o.b.append(dataset);
    return o.b;
}

// ---- reading ------------------------------------------------------------------------------------------------------

struct TensorInfo2 {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;
    uint64_t offset = 0;
};

bool skip_value(ByteReader& r, uint32_t type, int depth, const std::string& what) {
    if (!gguf::is_meta_type(type)) {
        r.fail(what, "unknown value type " + std::to_string(type));
        return false;
    }
    const auto t = static_cast<MetaType>(type);
    if (t == MetaType::String) {
        std::string s;
        return r.read_string_u64(s, what.c_str(), gguf::kMaxStringBytes);
    }
    if (t == MetaType::Array) {
        uint32_t et = 0;
        uint64_t n = 0;
        if (!r.read(et, what.c_str()) || !r.read(n, what.c_str())) return false;
        if (depth >= gguf::kMaxArrayDepth) {
            r.fail(what, "arrays nested too deep");
            return false;
        }
        if (!gguf::is_meta_type(et)) {
            r.fail(what, "unknown array element type " + std::to_string(et));
            return false;
        }
        if (n > r.remaining() / gguf::min_value_bytes(static_cast<MetaType>(et))) {
            r.fail(what, "array of " + std::to_string(n) + " elements is longer than the file");
            return false;
        }
        for (uint64_t i = 0; i < n; ++i)
            if (!skip_value(r, et, depth + 1, what)) return false;
        return true;
    }
    return r.skip(gguf::min_value_bytes(t), what.c_str());
}

Result<Imatrix> read_gguf_imatrix(const MappedFile& f) {
    const std::string& path = f.path();
    ByteReader r(f.data(), f.size(), path);
    r.skip(4, "magic");
    uint32_t version = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    r.read(version, "version");
    r.read(n_tensors, "tensor count");
    r.read(n_kv, "metadata count");
    if (!r.ok()) return r.status();
    if (version < 2 || version > 3)
        return error(StatusCode::Unsupported,
                     path + ": GGUF version " + std::to_string(version) + " (2 and 3 are read)");
    if (n_kv > r.remaining() / gguf::kMinKvBytes || n_tensors > r.remaining() / gguf::kMinTensorInfoBytes)
        return error(StatusCode::Corrupt, path + ": header counts (" + std::to_string(n_tensors) + " tensors, " +
                                              std::to_string(n_kv) + " keys) exceed the file size");
    Imatrix m;
    m.format = ImatrixFormat::Gguf;
    uint64_t alignment = gguf::kDefaultAlignment;
    bool has_datasets = false, has_count = false, has_size = false;
    for (uint64_t i = 0; i < n_kv; ++i) {
        std::string key;
        uint32_t type = 0;
        if (!r.read_string_u64(key, "metadata key", gguf::kMaxKeyBytes) || !r.read(type, "metadata value type"))
            return r.status();
        const std::string what = "value of " + key;
        auto read_u32 = [&](uint32_t& out) {
            if (type != static_cast<uint32_t>(MetaType::U32)) {
                r.fail(what, "type " + std::to_string(type) + ", not u32");
                return false;
            }
            return r.read(out, what.c_str());
        };
        if (key == kKeyDatasets && type == static_cast<uint32_t>(MetaType::Array)) {
            uint32_t et = 0;
            uint64_t n = 0;
            if (!r.read(et, what.c_str()) || !r.read(n, what.c_str())) return r.status();
            if (et != static_cast<uint32_t>(MetaType::String)) {
                r.fail(what, "an array of type " + std::to_string(et) + ", not of strings");
                return r.status();
            }
            if (n > r.remaining() / 8) {
                r.fail(what, std::to_string(n) + " strings do not fit in the file");
                return r.status();
            }
            for (uint64_t k = 0; k < n; ++k) {
                std::string s;
                if (!r.read_string_u64(s, what.c_str(), gguf::kMaxStringBytes)) return r.status();
                m.datasets.push_back(std::move(s));
            }
            has_datasets = true;
        } else if (key == kKeyChunkCount) {
            uint32_t v = 0;
            if (!read_u32(v)) return r.status();
            m.chunk_count = static_cast<int32_t>(v);
            has_count = true;
        } else if (key == kKeyChunkSize) {
            uint32_t v = 0;
            if (!read_u32(v)) return r.status();
            m.chunk_size = static_cast<int32_t>(v);
            has_size = true;
        } else if (key == "general.alignment") {
            uint32_t v = 0;
            if (!read_u32(v)) return r.status();
            if (v == 0 || (v & (v - 1)) != 0) {
                r.fail(what, std::to_string(v) + " is not a power of two");
                return r.status();
            }
            alignment = v;
        } else if (!skip_value(r, type, 0, what)) {
            return r.status();
        }
    }
    if (!has_datasets || !has_count || !has_size)
        return error(StatusCode::Corrupt, path + ": not an imatrix file: missing the key " +
                                              std::string(!has_datasets ? kKeyDatasets
                                                          : !has_count  ? kKeyChunkCount
                                                                        : kKeyChunkSize) +
                                              " (llama-quantize refuses it too)");
    std::vector<TensorInfo2> infos(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo2& t = infos[i];
        uint32_t n_dims = 0;
        if (!r.read_string_u64(t.name, "tensor name", gguf::kMaxNameBytes) || !r.read(n_dims, "tensor dimensions"))
            return r.status();
        if (n_dims < 1 || n_dims > gguf::kMaxDims) {
            r.fail("dimensions of tensor " + t.name, std::to_string(n_dims) + " (1..4 allowed)");
            return r.status();
        }
        t.ne.resize(n_dims);
        for (uint64_t& d : t.ne) r.read(d, "tensor shape");
        r.read(t.type, "tensor type");
        r.read(t.offset, "tensor offset");
        if (!r.ok()) return r.status();
    }
    const uint64_t data_start = (r.offset() + alignment - 1) / alignment * alignment;
    if (data_start > f.size() && n_tensors > 0)
        return error(StatusCode::Corrupt, path + ": the data section starts past the end of the file");

    // Pair each weight's .in_sum2 with its .counts, by name (common_imatrix_load).
    std::map<std::string, std::pair<const TensorInfo2*, const TensorInfo2*>> pairs;
    auto strip = [](const std::string& n, std::string_view suffix, std::string& base) {
        if (n.size() <= suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
        base = n.substr(0, n.size() - suffix.size());
        return true;
    };
    for (const TensorInfo2& t : infos) {
        std::string base;
        if (strip(t.name, kSuffixSums, base))
            pairs[base].first = &t;
        else if (strip(t.name, kSuffixCounts, base))
            pairs[base].second = &t;
    }
    if (pairs.empty()) return error(StatusCode::Corrupt, path + ": no imatrix entries (no .in_sum2 / .counts tensors)");
    auto load = [&](const TensorInfo2& t, std::vector<float>& out) -> Status {
        if (t.type != kGgmlF32)
            return error(StatusCode::Corrupt, path + ": tensor " + t.name + " has ggml type " + std::to_string(t.type) +
                                                  "; imatrix sums and counts are F32");
        uint64_t n = 1;
        for (uint64_t d : t.ne)
            if (!checked_mul(n, d, n))
                return error(StatusCode::Corrupt, path + ": tensor " + t.name + ": shape overflows");
        uint64_t bytes = 0, start = 0;
        if (!checked_mul(n, 4, bytes) || !checked_add(data_start, t.offset, start) ||
            !range_in_file(start, bytes, f.size()))
            return error(StatusCode::Corrupt, path + ": tensor " + t.name + ": data at offset " +
                                                  std::to_string(t.offset) + " (" + std::to_string(bytes) +
                                                  " bytes) lies outside the file");
        out.resize(n);
        std::memcpy(out.data(), f.data() + start, bytes);
        return Status::ok();
    };
    for (const auto& [name, p] : pairs) {
        if (p.first == nullptr || p.second == nullptr)
            return error(StatusCode::Corrupt, path + ": entry " + name + " has " +
                                                  (p.first ? "in_sum2 but no counts" : "counts but no in_sum2"));
        ImatrixEntry e;
        e.name = name;
        std::vector<float> counts;
        if (Status s = load(*p.first, e.sums); !s) return s;
        if (Status s = load(*p.second, counts); !s) return s;
        if (counts.empty() || e.sums.size() % counts.size() != 0)
            return error(StatusCode::Corrupt, path + ": entry " + name + ": " + std::to_string(e.sums.size()) +
                                                  " sums are not a whole number of rows for " +
                                                  std::to_string(counts.size()) + " counts");
        e.n_cols = static_cast<int64_t>(e.sums.size() / counts.size());
        for (float c : counts) {
            if (!std::isfinite(c) || c < 0.0f)
                return error(StatusCode::Corrupt,
                             path + ": entry " + name + ": count " + std::to_string(c) + " is not a token count");
            e.counts.push_back(std::lround(c));
        }
        m.entries.push_back(std::move(e));
    }
    return m;
}

Result<Imatrix> read_legacy_imatrix(const MappedFile& f) {
    const std::string& path = f.path();
    ByteReader r(f.data(), f.size(), path);
    int32_t n_entries = 0;
    if (!r.read(n_entries, "entry count")) return r.status();
    if (n_entries < 1)
        return error(StatusCode::Corrupt, path + ": not an imatrix file (neither GGUF nor a legacy .dat with entries)");
    if (static_cast<uint64_t>(n_entries) > r.remaining() / 12)
        return error(StatusCode::Corrupt, path + ": " + std::to_string(n_entries) +
                                              " legacy imatrix entries do not fit in the file (not an imatrix?)");
    Imatrix m;
    m.format = ImatrixFormat::Legacy;
    for (int32_t i = 0; i < n_entries; ++i) {
        const std::string what = "entry " + std::to_string(i + 1);
        int32_t len = 0, ncall = 0, nval = 0;
        const uint8_t* name = nullptr;
        if (!r.read(len, (what + " name length").c_str())) return r.status();
        if (len < 0) {
            r.fail(what, "name length " + std::to_string(len));
            return r.status();
        }
        if (!r.bytes(static_cast<uint64_t>(len), name, (what + " name").c_str())) return r.status();
        ImatrixEntry e;
        e.name.assign(reinterpret_cast<const char*>(name), static_cast<size_t>(len));
        r.read(ncall, (what + " ncall").c_str());
        r.read(nval, (what + " value count").c_str());
        if (!r.ok()) return r.status();
        if (nval < 1 || static_cast<uint64_t>(nval) > r.remaining() / 4) {
            r.fail(e.name + " value count", std::to_string(nval) + " values do not fit in the file");
            return r.status();
        }
        const uint8_t* values = nullptr;
        if (!r.bytes(static_cast<uint64_t>(nval) * 4, values, (e.name + " values").c_str())) return r.status();
        e.sums.resize(static_cast<size_t>(nval));
        std::memcpy(e.sums.data(), values, static_cast<size_t>(nval) * 4);
        e.n_cols = nval;
        e.counts = {ncall};
        m.entries.push_back(std::move(e));
    }
    // The trailing chunk count and dataset name are optional.
    if (r.remaining() >= 4) {
        int32_t n_calls = 0, len = 0;
        r.read(n_calls, "chunk count");
        m.chunk_count = n_calls;
        if (r.remaining() >= 4 && r.read(len, "dataset name length") && len > 0) {
            const uint8_t* name = nullptr;
            if (!r.bytes(static_cast<uint64_t>(len), name, "dataset name")) return r.status();
            m.datasets.emplace_back(reinterpret_cast<const char*>(name), static_cast<size_t>(len));
        }
    }
    std::sort(m.entries.begin(), m.entries.end(),
              [](const ImatrixEntry& a, const ImatrixEntry& b) { return a.name < b.name; });
    for (size_t i = 1; i < m.entries.size(); ++i)
        if (m.entries[i].name == m.entries[i - 1].name)
            return error(StatusCode::Corrupt, path + ": entry " + m.entries[i].name + " appears twice");
    return m;
}

}  // namespace

Result<Imatrix> read_imatrix(const std::string& path) {
    auto f = MappedFile::open(path);
    if (!f) return f.status();
    if (f->size() >= 4 && std::memcmp(f->data(), gguf::kMagic, 4) == 0) return read_gguf_imatrix(*f);
    return read_legacy_imatrix(*f);
}

Result<std::string> imatrix_bytes(const Imatrix& imatrix, ImatrixFormat format) {
    if (format == ImatrixFormat::Legacy) return legacy_bytes(imatrix);
    if (imatrix.format == ImatrixFormat::Legacy)
        return error(StatusCode::InvalidArgument,
                     "imatrix: a legacy imatrix holds averages, not sums and counts: it is written as legacy only");
    return gguf_bytes(imatrix);
}

Status write_imatrix(const Imatrix& imatrix, const std::string& path, ImatrixFormat format) {
    auto bytes = imatrix_bytes(imatrix, format);
    if (!bytes) return bytes.status();
    return write_file_atomic(path, *bytes);
}

// ---- Gram matrices (our format, gkq/imatrix.h) ---------------------------------------------------------------------

namespace {

constexpr const char* kGramType = "gkq.gram";
constexpr const char* kGramDatasets = "gram.datasets";
constexpr const char* kGramChunkCount = "gram.chunk_count";
constexpr const char* kGramChunkSize = "gram.chunk_size";
constexpr const char* kSuffixGram = ".gram";
constexpr const char* kSuffixGramCount = ".count";
constexpr uint32_t kGgmlF64 = 28;

std::string gram_file_bytes(const GramSet& m) {
    Out o;
    put_head(o, static_cast<int64_t>(2 * m.entries.size()), kGramType, kGramDatasets, kGramChunkCount, kGramChunkSize,
             m.datasets, m.chunk_count, m.chunk_size);
    auto info = [&](const std::string& name, int64_t ne0, int64_t ne1, uint64_t offset) {
        put_info(o, name, ne0, ne1, kGgmlF64, offset);
    };
    uint64_t offset = 0;
    for (const GramEntry& e : m.entries) {
        info(e.name + kSuffixGram, e.n_cols, e.n_cols, offset);
        offset += padded(e.gram.size() * sizeof(double));
        info(e.name + kSuffixGramCount, 1, 1, offset);
        offset += padded(sizeof(double));
    }
    o.pad(gguf::kDefaultAlignment);
    for (const GramEntry& e : m.entries) {
        for (double v : e.gram) o.put<double>(v);
        o.pad(gguf::kDefaultAlignment);
        o.put<double>(static_cast<double>(e.count));
        o.pad(gguf::kDefaultAlignment);
    }
    return o.b;
}

Result<GramSet> read_gram_file(const MappedFile& f) {
    const std::string& path = f.path();
    ByteReader r(f.data(), f.size(), path);
    if (f.size() < 4 || std::memcmp(f.data(), gguf::kMagic, 4) != 0)
        return error(StatusCode::Corrupt, path + ": not a Gram file (no GGUF magic)");
    r.skip(4, "magic");
    uint32_t version = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    r.read(version, "version");
    r.read(n_tensors, "tensor count");
    r.read(n_kv, "metadata count");
    if (!r.ok()) return r.status();
    if (version != 3)
        return error(StatusCode::Unsupported, path + ": GGUF version " + std::to_string(version) + " (3 is read)");
    if (n_kv > r.remaining() / gguf::kMinKvBytes || n_tensors > r.remaining() / gguf::kMinTensorInfoBytes)
        return error(StatusCode::Corrupt, path + ": header counts exceed the file size");
    GramSet m;
    bool typed = false;
    for (uint64_t i = 0; i < n_kv; ++i) {
        std::string key;
        uint32_t type = 0;
        if (!r.read_string_u64(key, "metadata key", gguf::kMaxKeyBytes) || !r.read(type, "metadata value type"))
            return r.status();
        const std::string what = "value of " + key;
        if (key == kKeyType && type == static_cast<uint32_t>(MetaType::String)) {
            std::string v;
            if (!r.read_string_u64(v, what.c_str(), gguf::kMaxStringBytes)) return r.status();
            typed = v == kGramType;
        } else if (key == kGramDatasets && type == static_cast<uint32_t>(MetaType::Array)) {
            uint32_t et = 0;
            uint64_t n = 0;
            if (!r.read(et, what.c_str()) || !r.read(n, what.c_str())) return r.status();
            if (et != static_cast<uint32_t>(MetaType::String) || n > r.remaining() / 8) {
                r.fail(what, "not an array of strings that fits in the file");
                return r.status();
            }
            for (uint64_t k = 0; k < n; ++k) {
                std::string s;
                if (!r.read_string_u64(s, what.c_str(), gguf::kMaxStringBytes)) return r.status();
                m.datasets.push_back(std::move(s));
            }
        } else if ((key == kGramChunkCount || key == kGramChunkSize) && type == static_cast<uint32_t>(MetaType::U32)) {
            uint32_t v = 0;
            if (!r.read(v, what.c_str())) return r.status();
            (key == kGramChunkCount ? m.chunk_count : m.chunk_size) = static_cast<int32_t>(v);
        } else if (!skip_value(r, type, 0, what)) {
            return r.status();
        }
    }
    if (!typed) return error(StatusCode::Corrupt, path + ": not a Gram file (general.type is not \"gkq.gram\")");
    std::vector<TensorInfo2> infos(n_tensors);
    for (TensorInfo2& t : infos) {
        uint32_t n_dims = 0;
        if (!r.read_string_u64(t.name, "tensor name", gguf::kMaxNameBytes) || !r.read(n_dims, "tensor dimensions"))
            return r.status();
        if (n_dims < 1 || n_dims > 2) {
            r.fail("dimensions of tensor " + t.name, std::to_string(n_dims) + " (1 or 2 allowed)");
            return r.status();
        }
        t.ne.resize(n_dims);
        for (uint64_t& d : t.ne) r.read(d, "tensor shape");
        r.read(t.type, "tensor type");
        r.read(t.offset, "tensor offset");
        if (!r.ok()) return r.status();
    }
    const uint64_t data_start =
        (r.offset() + gguf::kDefaultAlignment - 1) / gguf::kDefaultAlignment * gguf::kDefaultAlignment;
    auto load = [&](const TensorInfo2& t, std::vector<double>& out) -> Status {
        if (t.type != kGgmlF64)
            return error(StatusCode::Corrupt,
                         path + ": tensor " + t.name + " has ggml type " + std::to_string(t.type) + ", not F64");
        uint64_t n = 1, bytes = 0, start = 0;
        for (uint64_t d : t.ne)
            if (!checked_mul(n, d, n))
                return error(StatusCode::Corrupt, path + ": tensor " + t.name + ": shape overflows");
        if (!checked_mul(n, 8, bytes) || !checked_add(data_start, t.offset, start) ||
            !range_in_file(start, bytes, f.size()))
            return error(StatusCode::Corrupt, path + ": tensor " + t.name + ": data at offset " +
                                                  std::to_string(t.offset) + " (" + std::to_string(bytes) +
                                                  " bytes) lies outside the file");
        out.resize(n);
        std::memcpy(out.data(), f.data() + start, bytes);
        return Status::ok();
    };
    std::map<std::string, std::pair<const TensorInfo2*, const TensorInfo2*>> pairs;
    for (const TensorInfo2& t : infos) {
        auto ends = [&](std::string_view suffix) {
            return t.name.size() > suffix.size() &&
                   t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
        };
        if (ends(kSuffixGram))
            pairs[t.name.substr(0, t.name.size() - 5)].first = &t;
        else if (ends(kSuffixGramCount))
            pairs[t.name.substr(0, t.name.size() - 6)].second = &t;
        else
            return error(StatusCode::Corrupt, path + ": tensor " + t.name + " is neither a .gram nor a .count");
    }
    for (const auto& [name, p] : pairs) {
        if (p.first == nullptr || p.second == nullptr)
            return error(StatusCode::Corrupt, path + ": entry " + name + " has " +
                                                  (p.first ? "a .gram but no .count" : "a .count but no .gram"));
        GramEntry e;
        e.name = name;
        if (p.first->ne.size() != 2 || p.first->ne[0] != p.first->ne[1])
            return error(StatusCode::Corrupt, path + ": entry " + name + ": the Gram matrix is not square");
        e.n_cols = static_cast<int64_t>(p.first->ne[0]);
        std::vector<double> count;
        if (Status s = load(*p.first, e.gram); !s) return s;
        if (Status s = load(*p.second, count); !s) return s;
        if (count.size() != 1 || !std::isfinite(count[0]) || count[0] < 0.0)
            return error(StatusCode::Corrupt, path + ": entry " + name + ": the count is not one token count");
        e.count = static_cast<int64_t>(std::llround(count[0]));
        for (double v : e.gram)
            if (!std::isfinite(v))
                return error(StatusCode::Corrupt, path + ": entry " + name + ": non-finite Gram values");
        m.entries.push_back(std::move(e));
    }
    return m;
}

}  // namespace

Result<GramSet> read_gram(const std::string& path) {
    auto f = MappedFile::open(path);
    if (!f) return f.status();
    return read_gram_file(*f);
}

Status write_gram(const GramSet& set, const std::string& path) {
    return write_file_atomic(path, gram_file_bytes(set));
}

}  // namespace gkq
