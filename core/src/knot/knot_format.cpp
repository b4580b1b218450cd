// The knot format's shared pieces: descriptor, header block, CRC and zlib (layout in docs/knot-format.md).
#include "knot/knot_format.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdio>

namespace gkq {

uint32_t knot_crc32(const uint8_t* data, size_t n, uint32_t crc) {
    uLong c = crc;
    while (n > 0) {  // crc32() takes a uInt length
        const uInt chunk = static_cast<uInt>(std::min<size_t>(n, UINT_MAX));
        c = ::crc32(c, data, chunk);
        data += chunk;
        n -= chunk;
    }
    return static_cast<uint32_t>(c);
}

namespace knot {

// ---------------------------------------------------------------------------------------------------------
// descriptor

uint64_t descriptor_bytes(const KnotEntry& e) {
    return kDescriptorFixedBytes + 8 * e.shape.size() + e.name.size();
}

void put_descriptor(Out& out, const KnotEntry& e) {
    out.put<uint64_t>(e.source_index);
    out.put<uint64_t>(e.stored_bytes);
    out.put<uint64_t>(e.raw_bytes);
    out.put<uint32_t>(e.flags);
    out.put<int32_t>(e.layer);
    out.put<int32_t>(e.rank);
    out.put<uint8_t>(static_cast<uint8_t>(e.role));
    out.put<uint8_t>(static_cast<uint8_t>(e.method));
    out.put<uint8_t>(e.factor_bits);
    out.put<uint8_t>(e.residual_code);
    out.put<uint8_t>(static_cast<uint8_t>(e.compression));
    out.put<uint8_t>(static_cast<uint8_t>(e.shape.size()));
    out.put<uint16_t>(static_cast<uint16_t>(e.name.size()));
    for (int64_t d : e.shape) out.put<int64_t>(d);
    out.put_raw(e.name.data(), e.name.size());
}

std::string check_descriptor(const KnotEntry& e) {
    if (e.name.empty()) return "empty tensor name";
    if (e.name.size() > kMaxNameBytes)
        return "tensor name of " + std::to_string(e.name.size()) + " bytes (at most " + std::to_string(kMaxNameBytes) +
               ")";
    if (static_cast<size_t>(e.role) >= kTensorRoleCount)
        return "unknown role " + std::to_string(static_cast<unsigned>(e.role));
    if (static_cast<unsigned>(e.method) >= kMethodCount)
        return "unknown method " + std::to_string(static_cast<unsigned>(e.method));
    // as an unknown method: a reader refuses a residual type it does not know before decoding anything
    if (e.method == Method::LowRankResidual && !residual_code_type(e.residual_code))
        return unknown_residual_code(e.residual_code);
    if (static_cast<uint8_t>(e.compression) > static_cast<uint8_t>(KnotCompression::Zlib))
        return "unknown compression " + std::to_string(static_cast<unsigned>(e.compression));
    if (e.shape.size() > static_cast<size_t>(kMaxDims))
        return std::to_string(e.shape.size()) + " dimensions (at most " + std::to_string(kMaxDims) + ")";
    if (e.layer < -1) return "layer " + std::to_string(e.layer);
    if (e.rank < 0) return "rank " + std::to_string(e.rank);
    uint64_t n = 1;
    for (int64_t d : e.shape) {
        if (d <= 0) return "non-positive dimension in shape " + shape_to_string(e.shape);
        if (!checked_mul(n, static_cast<uint64_t>(d), n) || n > static_cast<uint64_t>(INT64_MAX))
            return "element count of shape " + shape_to_string(e.shape) + " overflows";
    }
    if (e.compression == KnotCompression::None && e.raw_bytes != e.stored_bytes)
        return "uncompressed payload with stored size " + std::to_string(e.stored_bytes) + " != raw size " +
               std::to_string(e.raw_bytes);
    if (e.compression == KnotCompression::Zlib) {
        uint64_t most = 0;
        if (!checked_mul(e.stored_bytes, kMaxZlibRatio, most)) most = UINT64_MAX;
        if (e.raw_bytes > most || e.raw_bytes > kMaxRawPayloadBytes)
            return "raw payload size " + std::to_string(e.raw_bytes) + " is impossible for " +
                   std::to_string(e.stored_bytes) + " zlib-compressed bytes";
    }
    return {};
}

bool read_descriptor(ByteReader& r, KnotEntry& e) {
    const uint64_t start = r.offset();
    uint8_t role = 0, method = 0, compression = 0, n_dims = 0;
    uint16_t name_len = 0;
    r.read(e.source_index, "source index");
    r.read(e.stored_bytes, "stored payload size");
    r.read(e.raw_bytes, "raw payload size");
    r.read(e.flags, "flags");
    r.read(e.layer, "layer");
    r.read(e.rank, "rank");
    r.read(role, "role");
    r.read(method, "method");
    r.read(e.factor_bits, "factor bits");
    r.read(e.residual_code, "residual code");
    r.read(compression, "compression");
    r.read(n_dims, "dimension count");
    if (!r.read(name_len, "name length")) return false;
    if (n_dims > kMaxDims) {
        r.fail_at(start + 41, "dimension count",
                  std::to_string(n_dims) + " (at most " + std::to_string(kMaxDims) + ")");
        return false;
    }
    e.shape.assign(n_dims, 0);
    for (auto& d : e.shape) r.read(d, "shape");
    const uint8_t* name = nullptr;
    if (!r.bytes(name_len, name, "name")) return false;
    e.name.assign(reinterpret_cast<const char*>(name), name_len);
    e.role = static_cast<TensorRole>(role);
    e.method = static_cast<Method>(method);
    e.dtype = method_dtype(e.method);
    e.compression = static_cast<KnotCompression>(compression);
    if (std::string why = check_descriptor(e); !why.empty()) {
        r.fail_at(start, "descriptor of '" + e.name + "'", why);
        return false;
    }
    return true;
}

std::string record_label(const std::string& file, size_t i, const std::string& name) {
    return file + ": record " + std::to_string(i) + " '" + name + "'";
}

// ---------------------------------------------------------------------------------------------------------
// header block

namespace {

void put_meta_value(Out& o, const MetaValue& v) {
    o.put<uint8_t>(static_cast<uint8_t>(v.type));
    o.put<uint8_t>(static_cast<uint8_t>(v.array_type));
    if (v.type == MetaType::Array) {
        o.put<uint8_t>(5);
        o.put<uint64_t>(v.array.size());
        for (const MetaValue& a : v.array) put_meta_value(o, a);
        return;
    }
    o.put<uint8_t>(static_cast<uint8_t>(v.scalar.index()));  // 0 u64, 1 i64, 2 f64, 3 bool, 4 string
    switch (v.scalar.index()) {
        case 0: o.put<uint64_t>(std::get<uint64_t>(v.scalar)); break;
        case 1: o.put<int64_t>(std::get<int64_t>(v.scalar)); break;
        case 2: o.put<double>(std::get<double>(v.scalar)); break;
        case 3: o.put<uint8_t>(std::get<bool>(v.scalar) ? 1 : 0); break;
        default: o.put_string32(std::get<std::string>(v.scalar)); break;
    }
}

constexpr uint64_t kMinMetaValueBytes = 3 + 1;  // type, array type, kind, smallest payload (bool)

bool read_string32(ByteReader& r, std::string& out, const char* what) {
    const uint64_t start = r.offset();
    uint32_t len = 0;
    if (!r.read(len, what)) return false;
    if (len > r.remaining()) {
        r.fail_at(start, what,
                  "string length " + std::to_string(len) + " exceeds the " + std::to_string(r.remaining()) +
                      " bytes left in the header block");
        return false;
    }
    const uint8_t* p = nullptr;
    r.bytes(len, p, what);
    out.assign(reinterpret_cast<const char*>(p), len);
    return true;
}

bool read_meta_value(ByteReader& r, MetaValue& v, int depth) {
    const uint64_t start = r.offset();
    uint8_t type = 0, array_type = 0, kind = 0;
    r.read(type, "metadata value type");
    r.read(array_type, "metadata array type");
    if (!r.read(kind, "metadata value kind")) return false;
    if (type > static_cast<uint8_t>(MetaType::F64) || array_type > static_cast<uint8_t>(MetaType::F64) || kind > 5 ||
        (type == static_cast<uint8_t>(MetaType::Array)) != (kind == 5)) {
        r.fail_at(start, "metadata value", "unknown type " + std::to_string(type) + "/" + std::to_string(kind));
        return false;
    }
    v.type = static_cast<MetaType>(type);
    v.array_type = static_cast<MetaType>(array_type);
    switch (kind) {
        case 0: {
            uint64_t x = 0;
            r.read(x, "metadata u64");
            v.scalar = x;
            break;
        }
        case 1: {
            int64_t x = 0;
            r.read(x, "metadata i64");
            v.scalar = x;
            break;
        }
        case 2: {
            double x = 0;
            r.read(x, "metadata f64");
            v.scalar = x;
            break;
        }
        case 3: {
            uint8_t x = 0;
            r.read(x, "metadata bool");
            v.scalar = x != 0;
            break;
        }
        case 4: {
            std::string s;
            read_string32(r, s, "metadata string");
            v.scalar = std::move(s);
            break;
        }
        default: {
            uint64_t n = 0;
            if (!r.read(n, "metadata array length")) return false;
            if (depth >= kMaxMetaDepth || n > r.remaining() / kMinMetaValueBytes) {
                r.fail_at(start, "metadata array",
                          depth >= kMaxMetaDepth ? "nested too deeply"
                                                 : "length " + std::to_string(n) + " exceeds what the block holds");
                return false;
            }
            v.array.resize(n);
            for (auto& a : v.array)
                if (!read_meta_value(r, a, depth + 1)) return false;
        }
    }
    return r.ok();
}

}  // namespace

// The config fields added after the first knot version (head_dim, rope scaling, sliding window) follow the metadata,
// behind this tag, only when one of them differs from its default: knots of models without them keep their bytes.
constexpr uint32_t kConfigExtensionTag = 0x31584643;  // "CFX1"
// Gemma's fields (window pattern, local rope theta, soft-caps, attention scalar, norm storage) follow those, behind
// their own tag, only when one of them differs from its default.
constexpr uint32_t kConfigExtension2Tag = 0x32584643;  // "CFX2"

bool has_config_extension2(const ModelConfig& c) {
    const ModelConfig d;
    return c.sliding_window_pattern != d.sliding_window_pattern || c.rope_local_theta != d.rope_local_theta ||
           c.attn_softcap != d.attn_softcap || c.final_softcap != d.final_softcap ||
           c.query_pre_attn_scalar != d.query_pre_attn_scalar || c.norm_storage != d.norm_storage;
}

bool has_config_extension(const ModelConfig& c) {
    const ModelConfig d;
    return c.head_dim != d.head_dim || c.rope_scaling != d.rope_scaling || c.rope_factor != d.rope_factor ||
           c.rope_low_freq_factor != d.rope_low_freq_factor || c.rope_high_freq_factor != d.rope_high_freq_factor ||
           c.rope_original_context != d.rope_original_context || c.sliding_window != d.sliding_window ||
           has_config_extension2(c);
}

std::vector<uint8_t> encode_header_block(const KnotHeader& h) {
    Out o;
    o.put_string32(h.producer);
    o.put_string32(h.command);
    o.put<uint32_t>(h.shard_index);
    o.put<uint32_t>(h.shard_count);
    o.put<uint64_t>(h.n_source_tensors);
    const ModelConfig& c = h.config;
    o.put_string32(c.architecture);
    for (int64_t v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.context_length})
        o.put<int64_t>(v);
    o.put<double>(c.rope_theta);
    o.put<double>(c.norm_eps);
    o.put<uint8_t>(c.shared_classifier ? 1 : 0);
    o.put<uint8_t>(static_cast<uint8_t>(c.rope_style));
    const Vocabulary& v = h.vocab;
    o.put_string32(v.model);
    o.put<uint64_t>(v.tokens.size());
    for (const std::string& t : v.tokens) o.put_string32(t);
    o.put<uint64_t>(v.scores.size());
    for (float s : v.scores) o.put<float>(s);
    o.put<uint64_t>(v.token_types.size());
    for (int32_t t : v.token_types) o.put<int32_t>(t);
    o.put<int32_t>(v.bos_id);
    o.put<int32_t>(v.eos_id);
    o.put<int32_t>(v.max_token_length);
    o.put<uint64_t>(h.metadata.entries.size());
    for (const auto& [key, value] : h.metadata.entries) {
        o.put_string32(key);
        put_meta_value(o, value);
    }
    if (has_config_extension(c)) {
        o.put<uint32_t>(kConfigExtensionTag);
        o.put<int64_t>(c.head_dim);
        o.put<uint8_t>(static_cast<uint8_t>(c.rope_scaling));
        o.put<double>(c.rope_factor);
        o.put<double>(c.rope_low_freq_factor);
        o.put<double>(c.rope_high_freq_factor);
        o.put<int64_t>(c.rope_original_context);
        o.put<int64_t>(c.sliding_window);
        if (has_config_extension2(c)) {
            o.put<uint32_t>(kConfigExtension2Tag);
            o.put<int64_t>(c.sliding_window_pattern);
            o.put<double>(c.rope_local_theta);
            o.put<double>(c.attn_softcap);
            o.put<double>(c.final_softcap);
            o.put<int64_t>(c.query_pre_attn_scalar);
            o.put<uint8_t>(static_cast<uint8_t>(c.norm_storage));
        }
    }
    return std::move(o.bytes());
}

Status decode_header_block(const uint8_t* data, uint64_t n, KnotHeader& h, const std::string& label) {
    ByteReader r(data, n, label + ": header block");
    read_string32(r, h.producer, "producer");
    read_string32(r, h.command, "command");
    r.read(h.shard_index, "shard index");
    r.read(h.shard_count, "shard count");
    r.read(h.n_source_tensors, "source tensor count");
    ModelConfig& c = h.config;
    read_string32(r, c.architecture, "architecture");
    for (int64_t* f : {&c.dim, &c.hidden_dim, &c.n_layers, &c.n_heads, &c.n_kv_heads, &c.vocab_size, &c.context_length})
        r.read(*f, "config");
    r.read(c.rope_theta, "rope_theta");
    r.read(c.norm_eps, "norm_eps");
    uint8_t shared = 0;
    r.read(shared, "shared_classifier");
    c.shared_classifier = shared != 0;
    uint8_t rope_style = 0;
    if (r.read(rope_style, "rope style") && rope_style > static_cast<uint8_t>(RopeStyle::HalfSplit)) {
        r.fail_at(r.offset() - 1, "rope style", "unknown value " + std::to_string(rope_style));
        return r.status();
    }
    c.rope_style = static_cast<RopeStyle>(rope_style);
    Vocabulary& v = h.vocab;
    read_string32(r, v.model, "tokenizer model");
    uint64_t n_tokens = 0;
    if (!r.read(n_tokens, "token count")) return r.status();
    if (n_tokens > r.remaining() / 4) {
        r.fail("token count", std::to_string(n_tokens) + " exceeds what the block holds");
        return r.status();
    }
    v.tokens.resize(n_tokens);
    for (auto& t : v.tokens)
        if (!read_string32(r, t, "token")) return r.status();
    uint64_t n_scores = 0;
    if (!r.read(n_scores, "score count")) return r.status();
    if (n_scores > r.remaining() / 4) {
        r.fail("score count", std::to_string(n_scores) + " exceeds what the block holds");
        return r.status();
    }
    v.scores.resize(n_scores);
    for (auto& s : v.scores) r.read(s, "score");
    uint64_t n_types = 0;
    if (!r.read(n_types, "token type count")) return r.status();
    if (n_types > r.remaining() / 4) {
        r.fail("token type count", std::to_string(n_types) + " exceeds what the block holds");
        return r.status();
    }
    v.token_types.resize(n_types);
    for (auto& t : v.token_types) r.read(t, "token type");
    r.read(v.bos_id, "bos id");
    r.read(v.eos_id, "eos id");
    r.read(v.max_token_length, "max token length");
    uint64_t n_meta = 0;
    if (!r.read(n_meta, "metadata count")) return r.status();
    if (n_meta > r.remaining() / (4 + kMinMetaValueBytes)) {
        r.fail("metadata count", std::to_string(n_meta) + " exceeds what the block holds");
        return r.status();
    }
    h.metadata.entries.resize(n_meta);
    for (auto& [key, value] : h.metadata.entries) {
        read_string32(r, key, "metadata key");
        if (!read_meta_value(r, value, 0)) return r.status();
    }
    if (!r.ok()) return r.status();
    // An optional trailing block: its tag, or bytes that belong to nothing (`after` names what they follow).
    auto block_tag = [&r](uint32_t want, const char* after) {
        const uint64_t start = r.offset();
        const uint64_t extra = r.remaining();
        uint32_t tag = 0;
        if (extra < sizeof tag || !r.read(tag, "config extension tag") || tag != want) {
            r.fail_at(start, "end of header block", std::to_string(extra) + " unexpected bytes after the " + after);
            return false;
        }
        return true;
    };
    if (r.remaining() != 0) {
        if (!block_tag(kConfigExtensionTag, "metadata")) return r.status();
        r.read(c.head_dim, "head_dim");
        uint8_t scaling = 0;
        if (r.read(scaling, "rope scaling") && scaling > static_cast<uint8_t>(RopeScaling::Unsupported)) {
            r.fail_at(r.offset() - 1, "rope scaling", "unknown value " + std::to_string(scaling));
            return r.status();
        }
        c.rope_scaling = static_cast<RopeScaling>(scaling);
        r.read(c.rope_factor, "rope factor");
        r.read(c.rope_low_freq_factor, "rope low frequency factor");
        r.read(c.rope_high_freq_factor, "rope high frequency factor");
        r.read(c.rope_original_context, "rope original context");
        r.read(c.sliding_window, "sliding window");
        if (!r.ok()) return r.status();
        if (r.remaining() != 0) {
            if (!block_tag(kConfigExtension2Tag, "config")) return r.status();
            r.read(c.sliding_window_pattern, "sliding window pattern");
            r.read(c.rope_local_theta, "local rope theta");
            r.read(c.attn_softcap, "attention soft-cap");
            r.read(c.final_softcap, "final soft-cap");
            r.read(c.query_pre_attn_scalar, "query_pre_attn_scalar");
            uint8_t norm = 0;
            if (r.read(norm, "norm storage") && norm > static_cast<uint8_t>(NormStorage::OffsetByOne)) {
                r.fail_at(r.offset() - 1, "norm storage", "unknown value " + std::to_string(norm));
                return r.status();
            }
            c.norm_storage = static_cast<NormStorage>(norm);
            if (!r.ok()) return r.status();
        }
        if (r.remaining() != 0) {
            r.fail("end of header block", std::to_string(r.remaining()) + " unexpected bytes after the config");
            return r.status();
        }
    }
    if (h.shard_count == 0 || h.shard_index >= h.shard_count)
        return error(StatusCode::Corrupt, label + ": header block: shard " + std::to_string(h.shard_index) + " of " +
                                              std::to_string(h.shard_count));
    return Status::ok();
}

// ---------------------------------------------------------------------------------------------------------
// zlib

Status deflate_bytes(const uint8_t* src, uint64_t n, std::vector<uint8_t>& out, int level) {
    z_stream z{};
    if (deflateInit(&z, level) != Z_OK) return error(StatusCode::Internal, "zlib deflateInit failed");
    out.resize(static_cast<size_t>(deflateBound(&z, static_cast<uLong>(n))));
    z.next_in = const_cast<Bytef*>(src);
    z.next_out = out.data();
    uint64_t in_left = n, out_left = out.size();
    int rc = Z_OK;
    while (rc == Z_OK) {
        // avail_* are 32-bit: feed at most 1 GiB per call
        const uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
        const uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out_left, 1u << 30));
        z.avail_in = in_chunk;
        z.avail_out = out_chunk;
        rc = deflate(&z, in_left == in_chunk ? Z_FINISH : Z_NO_FLUSH);
        in_left -= in_chunk - z.avail_in;
        out_left -= out_chunk - z.avail_out;
        if (rc == Z_BUF_ERROR && out_left > 0) rc = Z_OK;
    }
    const uint64_t total = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) return error(StatusCode::Internal, "zlib deflate failed (" + std::to_string(rc) + ")");
    out.resize(total);
    return Status::ok();
}

Status inflate_bytes(const uint8_t* src, uint64_t n, uint64_t raw_bytes, std::vector<uint8_t>& out,
                     const std::string& what) {
    z_stream z{};
    if (inflateInit(&z) != Z_OK) return error(StatusCode::Internal, "zlib inflateInit failed");
    out.resize(raw_bytes);
    z.next_in = const_cast<Bytef*>(src);
    z.next_out = out.data();
    uint64_t in_left = n, out_left = raw_bytes;
    int rc = Z_OK;
    uint8_t spare = 0;  // a one-byte window past the end: output beyond raw_bytes means the size was wrong
    bool overflow = false;
    while (rc == Z_OK) {
        const uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
        z.avail_in = in_chunk;
        uInt out_chunk = 0;
        if (out_left == 0) {
            z.next_out = &spare;
            out_chunk = 1;
        } else {
            out_chunk = static_cast<uInt>(std::min<uint64_t>(out_left, 1u << 30));
        }
        z.avail_out = out_chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        in_left -= in_chunk - z.avail_in;
        if (out_left == 0) {
            if (z.avail_out == 0) overflow = true;
        } else {
            out_left -= out_chunk - z.avail_out;
        }
        if (overflow) break;
        if (rc == Z_BUF_ERROR && in_left == 0) break;  // input ended before the stream did
        if (rc == Z_BUF_ERROR) rc = Z_OK;
    }
    const std::string zmsg = z.msg ? z.msg : "";
    inflateEnd(&z);
    if (overflow)
        return error(StatusCode::Corrupt,
                     what + ": inflates to more than the " + std::to_string(raw_bytes) + " bytes its size field says");
    if (rc != Z_STREAM_END)
        return error(StatusCode::Corrupt, what + ": broken zlib stream (" +
                                              (!zmsg.empty() ? zmsg : "ends early, zlib code " + std::to_string(rc)) +
                                              ")");
    if (out_left != 0)
        return error(StatusCode::Corrupt, what + ": inflates to " + std::to_string(raw_bytes - out_left) +
                                              " bytes, its size field says " + std::to_string(raw_bytes));
    if (in_left != 0)
        return error(StatusCode::Corrupt, what + ": " + std::to_string(in_left) + " bytes after the zlib stream");
    return Status::ok();
}

}  // namespace knot
}  // namespace gkq
