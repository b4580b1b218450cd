// Reader for llama2.c checkpoints: legacy (version 0) and export.py's versioned "ak42" files (1: f32, 2: int8
// codes with f32 group scales). Byte layouts: llama2c_layout.h.
// Everything the header implies is checked before a tensor is listed: hyperparameters, every size computed in
// 64 bits with overflow checks, the whole expected size against the file (no trailing bytes either).
#include "formats/llama2c_layout.h"
#include "formats/model_file_data.h"

#include "common/byte_reader.h"
#include "gkq/naming.h"

#include <array>
#include <cstring>

namespace gkq {

// ---------------------------------------------------------------- layout (shared with the writer)

namespace llama2c {

std::string check_header(const Header& h) {
    const std::array<std::pair<const char*, int64_t>, 7> fields = {{
        {"dim", h.dim},
        {"hidden_dim", h.hidden_dim},
        {"n_layers", h.n_layers},
        {"n_heads", h.n_heads},
        {"n_kv_heads", h.n_kv_heads},
        {"vocab_size", h.vocab_size},
        {"seq_len", h.seq_len},
    }};
    for (const auto& [name, v] : fields)
        if (v <= 0) return std::string(name) + " is " + std::to_string(v) + "; it must be positive";
    const std::string heads = "n_heads " + std::to_string(h.n_heads);
    if (h.n_kv_heads > h.n_heads) return "n_kv_heads " + std::to_string(h.n_kv_heads) + " exceeds " + heads;
    if (h.n_heads % h.n_kv_heads != 0)
        return "n_kv_heads " + std::to_string(h.n_kv_heads) + " does not divide " + heads;
    if (h.dim % h.n_heads != 0) return heads + " does not divide dim " + std::to_string(h.dim);
    if (h.head_size() % 2 != 0)
        return "head size " + std::to_string(h.head_size()) + " (dim / n_heads) is odd; RoPE rotates pairs";
    if (h.version == 2 && h.group_size <= 0) return "group_size " + std::to_string(h.group_size) + " must be positive";
    return {};
}

std::vector<Segment> layout(const Header& h) {
    const int64_t dim = h.dim, hidden = h.hidden_dim, kv_dim = h.kv_dim(), vocab = h.vocab_size;
    auto one = [](TensorRole r, std::vector<int64_t> shape) { return Segment{r, SegmentKind::F32, false, shape}; };
    auto each = [](TensorRole r, std::vector<int64_t> shape) { return Segment{r, SegmentKind::F32, true, shape}; };

    // The projections of one layer, (out, in), in the order every version stores them.
    const std::vector<Segment> projections = {
        each(TensorRole::AttnQ, {dim, dim}),      each(TensorRole::AttnK, {kv_dim, dim}),
        each(TensorRole::AttnV, {kv_dim, dim}),   each(TensorRole::AttnO, {dim, dim}),
        each(TensorRole::FfnGate, {hidden, dim}),  // w1
        each(TensorRole::FfnDown, {dim, hidden}),  // w2
        each(TensorRole::FfnUp, {hidden, dim}),    // w3
    };
    const Segment embd = one(TensorRole::TokenEmbd, {vocab, dim});
    const Segment output = one(TensorRole::Output, {vocab, dim});

    std::vector<Segment> s;
    if (h.version == 0) {
        s.push_back(embd);
        s.push_back(each(TensorRole::AttnNorm, {dim}));
        s.insert(s.end(), projections.begin(), projections.begin() + 4);
        s.push_back(each(TensorRole::FfnNorm, {dim}));
        s.insert(s.end(), projections.begin() + 4, projections.end());
        s.push_back(one(TensorRole::OutputNorm, {dim}));
        for (const char* label : {"freq_cis_real", "freq_cis_imag"})
            s.push_back(Segment{TensorRole::Other, SegmentKind::FreqCis, false, {h.seq_len, h.head_size() / 2}, label});
        if (!h.shared_classifier) s.push_back(output);
        return s;
    }
    s.push_back(each(TensorRole::AttnNorm, {dim}));
    s.push_back(each(TensorRole::FfnNorm, {dim}));
    s.push_back(one(TensorRole::OutputNorm, {dim}));
    std::vector<Segment> matrices = {embd};
    matrices.insert(matrices.end(), projections.begin(), projections.end());
    if (!h.shared_classifier) matrices.push_back(output);
    if (h.version == 1) {
        s.insert(s.end(), matrices.begin(), matrices.end());
        return s;
    }
    for (SegmentKind kind : {SegmentKind::Codes, SegmentKind::Scales}) {
        for (Segment m : matrices) {
            m.kind = kind;
            s.push_back(m);
        }
    }
    return s;
}

std::string item_name(const Segment& s, int32_t layer) {
    if (s.kind == SegmentKind::FreqCis) return s.label;
    std::string name = gguf_name(s.role, s.per_layer ? layer : -1);
    return s.kind == SegmentKind::Scales ? "scales of " + name : name;
}

}  // namespace llama2c

// ---------------------------------------------------------------- header

namespace {

using llama2c::Header;
using llama2c::Segment;
using llama2c::SegmentKind;

constexpr std::array<const char*, 7> kFieldWhat = {
    "llama2.c header field dim",     "llama2.c header field hidden_dim", "llama2.c header field n_layers",
    "llama2.c header field n_heads", "llama2.c header field n_kv_heads", "llama2.c header field vocab_size",
    "llama2.c header field seq_len",
};

// Reads the 7 int32 hyperparameters at the reader's position.
bool read_params(ByteReader& r, std::array<int32_t, 7>& p) {
    for (size_t i = 0; i < p.size(); ++i)
        if (!r.read(p[i], kFieldWhat[i])) return false;
    return true;
}

void set_params(Header& h, const std::array<int32_t, 7>& p) {
    h.dim = p[0];
    h.hidden_dim = p[1];
    h.n_layers = p[2];
    h.n_heads = p[3];
    h.n_kv_heads = p[4];
    h.vocab_size = p[5];
    h.seq_len = p[6];
}

// Fills h from the file's first bytes; the header's byte count goes to header_bytes.
Status read_header(const MappedFile& map, Header& h, uint64_t& header_bytes) {
    ByteReader r(map.data(), map.size(), map.path());
    uint32_t magic = 0;
    if (map.size() >= 4) std::memcpy(&magic, map.data(), 4);
    if (magic == __builtin_bswap32(llama2c::kMagic))
        return error(StatusCode::Corrupt, map.path() +
                                              ": the magic 'ak42' at offset 0 is byte-swapped (a big-endian "
                                              "writer?); llama2.c checkpoints are little-endian");
    std::array<int32_t, 7> p{};
    if (magic != llama2c::kMagic) {
        // Legacy: no magic, the sign of vocab_size says whether the classifier is shared.
        if (!read_params(r, p)) return r.status();
        set_params(h, p);
        h.version = 0;
        h.shared_classifier = p[5] > 0;
        h.vocab_size = p[5] < 0 ? -static_cast<int64_t>(p[5]) : p[5];
        header_bytes = llama2c::kLegacyHeaderBytes;
        return Status::ok();
    }
    int32_t version = 0;
    r.skip(4, "llama2.c magic");
    if (!r.read(version, "llama2.c version")) return r.status();
    if (version != 1 && version != 2)
        return error(StatusCode::Unsupported, map.path() + ": llama2.c checkpoint version " + std::to_string(version) +
                                                  " (offset 4) is not supported; known: legacy (no magic), 1, 2");
    h.version = version;
    uint8_t shared = 0;
    if (!read_params(r, p) || !r.read(shared, "llama2.c header field shared_classifier")) return r.status();
    set_params(h, p);
    if (shared > 1) {
        r.fail_at(36, "llama2.c header field shared_classifier", "value " + std::to_string(shared) + " is not 0 or 1");
        return r.status();
    }
    h.shared_classifier = shared == 1;
    if (version == 2 && !r.read(h.group_size, "llama2.c header field group_size")) return r.status();
    // The rest of the 256 bytes is zero padding in export.py; its content is not checked.
    if (!r.skip(llama2c::kVersionedHeaderBytes - r.offset(), "llama2.c header padding")) return r.status();
    header_bytes = llama2c::kVersionedHeaderBytes;
    return Status::ok();
}

std::string describe(const Header& h) {
    return "dim " + std::to_string(h.dim) + ", hidden_dim " + std::to_string(h.hidden_dim) + ", n_layers " +
           std::to_string(h.n_layers) + ", vocab_size " + std::to_string(h.vocab_size) + ", seq_len " +
           std::to_string(h.seq_len);
}

// ---------------------------------------------------------------- sizes

struct Placed {
    const Segment* segment = nullptr;
    uint64_t offset = 0;      // of the first item
    uint64_t n_items = 0;     // n_layers or 1
    uint64_t numel = 0;       // elements of one item
    uint64_t item_bytes = 0;  // bytes of one item
};

// Offsets and sizes of every segment, all checked for overflow; `end` receives the expected file size.
Status place_segments(const std::string& path, const Header& h, const std::vector<Segment>& segments,
                      uint64_t header_bytes, std::vector<Placed>& placed, uint64_t& end) {
    uint64_t offset = header_bytes;
    for (const Segment& s : segments) {
        Placed p{&s, offset, s.per_layer ? static_cast<uint64_t>(h.n_layers) : 1, 1, 0};
        bool fits = true;
        for (int64_t d : s.shape) fits = fits && checked_mul(p.numel, static_cast<uint64_t>(d), p.numel);
        if (fits && s.kind != SegmentKind::F32 && s.kind != SegmentKind::FreqCis && p.numel % h.group_size != 0)
            return error(StatusCode::Corrupt, path + ": group_size " + std::to_string(h.group_size) +
                                                  " does not divide the " + std::to_string(p.numel) + " elements of '" +
                                                  llama2c::item_name(s, 0) + "'");
        switch (s.kind) {
            case SegmentKind::F32:
            case SegmentKind::FreqCis: fits = fits && checked_mul(p.numel, 4, p.item_bytes); break;
            case SegmentKind::Codes: p.item_bytes = p.numel; break;
            case SegmentKind::Scales: fits = fits && checked_mul(p.numel / h.group_size, 4, p.item_bytes); break;
        }
        uint64_t segment_bytes = 0;
        fits =
            fits && checked_mul(p.item_bytes, p.n_items, segment_bytes) && checked_add(offset, segment_bytes, offset);
        if (!fits)
            return error(StatusCode::Corrupt, path + ": the sizes in the llama2.c header (" + describe(h) +
                                                  ") overflow 64 bits at '" + llama2c::item_name(s, 0) + "'");
        placed.push_back(p);
    }
    end = offset;
    return Status::ok();
}

// The error for a file shorter than its header says: names the item where the data runs out.
Status truncated_error(const std::string& path, const std::vector<Placed>& placed, uint64_t file_size, uint64_t end) {
    for (const Placed& p : placed) {
        if (p.offset + p.item_bytes * p.n_items <= file_size) continue;  // no overflow: checked in place_segments
        const uint64_t index = file_size >= p.offset ? (file_size - p.offset) / p.item_bytes : 0;
        const uint64_t item_offset = p.offset + index * p.item_bytes;
        const int32_t layer = p.segment->per_layer ? static_cast<int32_t>(index) : -1;
        return error(StatusCode::Corrupt, path + ": truncated: '" + llama2c::item_name(*p.segment, layer) +
                                              "' at offset " + std::to_string(item_offset) + " needs " +
                                              std::to_string(p.item_bytes) + " bytes but the file ends at " +
                                              std::to_string(file_size) + "; the header describes " +
                                              std::to_string(end) + " bytes in total");
    }
    return error(StatusCode::Internal, path + ": truncated_error called on a complete file");
}

std::string detail_of(const Header& h) {
    switch (h.version) {
        case 0: return "llama2c v0 (legacy)";
        case 1: return "llama2c v1";
        default: return "llama2c v2 (q8, group " + std::to_string(h.group_size) + ")";
    }
}

}  // namespace

// ---------------------------------------------------------------- reader

Result<ModelFileDataPtr> read_llama2c(const std::string& path) {
    auto mapped = MappedFile::open(path);
    if (!mapped) return mapped.status();
    MappedFile map = std::move(mapped).value();
    const uint64_t file_size = map.size();

    Header h;
    uint64_t header_bytes = 0;
    if (Status s = read_header(map, h, header_bytes); !s) return s;
    if (std::string why = llama2c::check_header(h); !why.empty())
        return error(StatusCode::Corrupt, path + ": llama2.c v" + std::to_string(h.version) + " header: " + why);

    const std::vector<Segment> segments = llama2c::layout(h);
    std::vector<Placed> placed;
    uint64_t end = 0;
    if (Status s = place_segments(path, h, segments, header_bytes, placed, end); !s) return s;
    if (end > file_size) return truncated_error(path, placed, file_size, end);
    if (end < file_size)
        return error(StatusCode::Corrupt, path + ": " + std::to_string(file_size - end) +
                                              " trailing bytes after the expected end of the llama2.c v" +
                                              std::to_string(h.version) + " checkpoint at offset " +
                                              std::to_string(end) + " (" + describe(h) + ")");

    // Every item now lies inside the file: list them.
    auto d = std::make_unique<ModelFileData>();
    const uint8_t* base = map.data();
    uint64_t freq_cis_bytes = 0;
    std::vector<size_t> coded;  // indices of Q8_G tensors, in file order
    size_t n_scaled = 0;
    for (const Placed& p : placed) {
        const Segment& s = *p.segment;
        for (uint64_t i = 0; i < p.n_items; ++i) {
            const int32_t layer = s.per_layer ? static_cast<int32_t>(i) : -1;
            const uint64_t offset = p.offset + i * p.item_bytes;
            if (s.kind == SegmentKind::FreqCis) {
                freq_cis_bytes += p.item_bytes;
                continue;
            }
            if (s.kind == SegmentKind::Scales) {
                // Scales come in the order of the codes they belong to (layout() emits both from one list).
                Tensor& t = d->tensors[coded[n_scaled++]];
                t.scales = base + offset;
                t.n_scale_bytes = p.item_bytes;
                continue;
            }
            if (s.kind == SegmentKind::Codes) coded.push_back(d->tensors.size());
            Tensor t;
            t.name = gguf_name(s.role, layer);
            t.role = s.role;
            t.layer = layer;
            t.shape = s.shape;
            t.file_offset = offset;
            t.n_bytes = p.item_bytes;
            t.data = base + offset;
            if (s.kind == SegmentKind::Codes) {
                t.dtype = DType::Q8_G;
                t.type_name = "q8_g" + std::to_string(h.group_size);
                t.group_size = h.group_size;
            } else {
                t.dtype = DType::F32;
                t.type_name = "F32";
            }
            d->tensors.push_back(std::move(t));
        }
    }

    ModelConfig& c = d->config;
    c.architecture = "llama";
    c.dim = h.dim;
    c.hidden_dim = h.hidden_dim;
    c.n_layers = h.n_layers;
    c.n_heads = h.n_heads;
    c.n_kv_heads = h.n_kv_heads;
    c.vocab_size = h.vocab_size;
    c.context_length = h.seq_len;
    c.rope_theta = 10000.0;  // run.c's constants; the file does not carry them
    c.norm_eps = 1e-5;
    c.shared_classifier = h.shared_classifier;

    Metadata& m = d->metadata;
    m.set("llama2c.version", MetaValue::of_int(h.version));
    m.set("llama2c.header_bytes", MetaValue::of_uint(header_bytes));
    m.set("llama2c.shared_classifier", MetaValue::of_bool(h.shared_classifier));
    if (h.version == 0) m.set("llama2c.freq_cis_bytes", MetaValue::of_uint(freq_cis_bytes));
    if (h.version == 2) m.set("llama2c.group_size", MetaValue::of_int(h.group_size));

    d->format = ModelFormat::Llama2c;
    d->format_detail = detail_of(h);
    d->path = path;
    d->maps.push_back(std::move(map));
    return d;
}

}  // namespace gkq
