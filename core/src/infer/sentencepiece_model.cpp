// The tokenizer.model reader: protobuf wire format, bounds-checked, only the fields SentencePieceModel keeps.
#include "infer/sentencepiece_model.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

namespace gkq {

namespace {

enum WireType : uint32_t {
    kVarint = 0,
    kFixed64 = 1,
    kLengthDelimited = 2,
    kStartGroup = 3,
    kEndGroup = 4,
    kFixed32 = 5
};

// One message's bytes; offsets in errors count from the start of the file.
class Wire {
public:
    Wire(std::string_view bytes, size_t base, const std::string& label)
        : m_bytes(bytes), m_base(base), m_label(label) {}

    bool done() const { return m_pos >= m_bytes.size(); }
    size_t offset() const { return m_base + m_pos; }

    Status fail(const std::string& what) const {
        return error(StatusCode::Corrupt, m_label + ": offset " + std::to_string(offset()) + ": " + what);
    }

    Status varint(uint64_t& out) {
        out = 0;
        const size_t start = m_pos;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_pos >= m_bytes.size()) {
                m_pos = start;
                return fail("varint runs past the end of its message");
            }
            const auto b = static_cast<uint8_t>(m_bytes[m_pos++]);
            out |= static_cast<uint64_t>(b & 0x7F) << shift;
            if ((b & 0x80) == 0) return Status::ok();
        }
        m_pos = start;
        return fail("varint longer than 10 bytes");
    }

    // A length-delimited value: its bytes and the offset in the file where they start.
    Status bytes(std::string_view& out, size_t& at) {
        const size_t start = m_pos;
        uint64_t n = 0;
        if (Status s = varint(n); !s) return s;
        if (n > m_bytes.size() - m_pos) {
            const size_t left = m_bytes.size() - m_pos;
            m_pos = start;
            return fail("length " + std::to_string(n) + " runs past the end of its message (" + std::to_string(left) +
                        " bytes left)");
        }
        at = offset();
        out = m_bytes.substr(m_pos, static_cast<size_t>(n));
        m_pos += static_cast<size_t>(n);
        return Status::ok();
    }

    Status fixed32(uint32_t& out) {
        if (m_bytes.size() - m_pos < 4) return fail("fixed32 runs past the end of its message");
        const auto* p = reinterpret_cast<const uint8_t*>(m_bytes.data() + m_pos);
        out = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
              static_cast<uint32_t>(p[3]) << 24;
        m_pos += 4;
        return Status::ok();
    }

    // Skips a value of `type` (a field this reader does not keep).
    Status skip(uint32_t type) {
        uint64_t v = 0;
        std::string_view b;
        size_t at = 0;
        switch (type) {
            case kVarint: return varint(v);
            case kLengthDelimited: return bytes(b, at);
            case kFixed32:
                if (m_bytes.size() - m_pos < 4) return fail("fixed32 runs past the end of its message");
                m_pos += 4;
                return Status::ok();
            case kFixed64:
                if (m_bytes.size() - m_pos < 8) return fail("fixed64 runs past the end of its message");
                m_pos += 8;
                return Status::ok();
            default: return fail("wire type " + std::to_string(type) + " (groups are not used by this format)");
        }
    }

    // Each field of the message in turn: `on(field, type)` reads the value or returns false to have it skipped.
    Status fields(const std::function<Result<bool>(uint32_t field, uint32_t type, Wire& w)>& on) {
        while (!done()) {
            const size_t key_at = m_pos;
            m_field_at = m_base + key_at;
            uint64_t key = 0;
            if (Status s = varint(key); !s) return s;
            const auto field = static_cast<uint32_t>(key >> 3);
            const auto type = static_cast<uint32_t>(key & 7);
            if (field == 0 || key >> 3 > 0x1FFFFFFF) {
                m_pos = key_at;
                return fail("field number " + std::to_string(key >> 3) + " is not valid");
            }
            Result<bool> used = on(field, type, *this);
            if (!used) return used.status();
            if (!*used)
                if (Status s = skip(type); !s) return s;
        }
        return Status::ok();
    }

    // A value of the expected wire type, or Corrupt naming the field (at the offset of its key).
    Status expect(uint32_t field, uint32_t type, uint32_t want, const char* name) const {
        if (type == want) return Status::ok();
        return error(StatusCode::Corrupt, m_label + ": offset " + std::to_string(m_field_at) + ": field " +
                                              std::to_string(field) + " (" + name + ") has wire type " +
                                              std::to_string(type) + ", expected " + std::to_string(want));
    }
    // Where the key of the field being read starts, in the file.
    size_t field_offset() const { return m_field_at; }

    const std::string& label() const { return m_label; }

private:
    std::string_view m_bytes;
    size_t m_base;
    const std::string& m_label;
    size_t m_pos = 0;
    size_t m_field_at = 0;
};

Status read_bool(Wire& w, uint32_t field, uint32_t type, const char* name, bool& out) {
    if (Status s = w.expect(field, type, kVarint, name); !s) return s;
    uint64_t v = 0;
    if (Status s = w.varint(v); !s) return s;
    out = v != 0;
    return Status::ok();
}

Status read_int32(Wire& w, uint32_t field, uint32_t type, const char* name, int32_t& out) {
    if (Status s = w.expect(field, type, kVarint, name); !s) return s;
    uint64_t v = 0;
    if (Status s = w.varint(v); !s) return s;
    out = static_cast<int32_t>(static_cast<uint32_t>(v));  // int32: negatives are 10-byte sign extensions
    return Status::ok();
}

// A sub-message: its bytes as a Wire of their own.
Status sub_message(Wire& w, uint32_t field, uint32_t type, const char* name,
                   const std::function<Result<bool>(uint32_t, uint32_t, Wire&)>& on) {
    if (Status s = w.expect(field, type, kLengthDelimited, name); !s) return s;
    std::string_view b;
    size_t at = 0;
    if (Status s = w.bytes(b, at); !s) return s;
    Wire inner(b, at, w.label());
    return inner.fields(on);
}

}  // namespace

std::string sentencepiece_model_type_name(int32_t type) {
    switch (type) {
        case SentencePieceModel::Unigram: return "unigram";
        case SentencePieceModel::Bpe: return "bpe";
        case SentencePieceModel::Word: return "word";
        case SentencePieceModel::Char: return "char";
        default: return std::to_string(type);
    }
}

Result<SentencePieceModel> parse_sentencepiece_model(std::string_view bytes, const std::string& label) {
    SentencePieceModel m;
    Wire top(bytes, 0, label);
    Status st = top.fields([&](uint32_t field, uint32_t type, Wire& w) -> Result<bool> {
        if (field == 1) {  // SentencePiece
            SentencePieceModel::Piece p;
            bool has_piece = false;
            const size_t at = w.field_offset();
            Status s = sub_message(w, field, type, "pieces", [&](uint32_t f, uint32_t t, Wire& pw) -> Result<bool> {
                if (f == 1) {
                    if (Status e = pw.expect(f, t, kLengthDelimited, "piece"); !e) return e;
                    std::string_view b;
                    size_t a = 0;
                    if (Status e = pw.bytes(b, a); !e) return e;
                    p.piece = std::string(b);
                    has_piece = true;
                    return true;
                }
                if (f == 2) {
                    if (Status e = pw.expect(f, t, kFixed32, "score"); !e) return e;
                    uint32_t u = 0;
                    if (Status e = pw.fixed32(u); !e) return e;
                    std::memcpy(&p.score, &u, sizeof p.score);
                    return true;
                }
                if (f == 3) {
                    if (Status e = read_int32(pw, f, t, "type", p.type); !e) return e;
                    if (p.type < SentencePieceModel::Normal || p.type > SentencePieceModel::Byte)
                        return pw.fail("piece type " + std::to_string(p.type) + " is not one of 1..6");
                    return true;
                }
                return false;
            });
            if (!s) return s;
            if (!has_piece)
                return error(StatusCode::Corrupt, label + ": offset " + std::to_string(at) + ": piece " +
                                                      std::to_string(m.pieces.size()) + " has no text");
            m.pieces.push_back(std::move(p));
            return true;
        }
        if (field == 2) {  // TrainerSpec
            Status s =
                sub_message(w, field, type, "trainer_spec", [&](uint32_t f, uint32_t t, Wire& tw) -> Result<bool> {
                    Status e;
                    switch (f) {
                        case 3: e = read_int32(tw, f, t, "trainer_spec.model_type", m.model_type); break;
                        case 24:
                            e = read_bool(tw, f, t, "treat_whitespace_as_suffix", m.treat_whitespace_as_suffix);
                            break;
                        case 35: e = read_bool(tw, f, t, "byte_fallback", m.byte_fallback); break;
                        case 40: e = read_int32(tw, f, t, "unk_id", m.unk_id); break;
                        case 41: e = read_int32(tw, f, t, "bos_id", m.bos_id); break;
                        case 42: e = read_int32(tw, f, t, "eos_id", m.eos_id); break;
                        case 43: e = read_int32(tw, f, t, "pad_id", m.pad_id); break;
                        default: return false;
                    }
                    if (!e) return e;
                    return true;
                });
            if (!s) return s;
            return true;
        }
        if (field == 3) {  // NormalizerSpec
            Status s =
                sub_message(w, field, type, "normalizer_spec", [&](uint32_t f, uint32_t t, Wire& nw) -> Result<bool> {
                    Status e;
                    switch (f) {
                        case 1: {
                            if (Status x = nw.expect(f, t, kLengthDelimited, "name"); !x) return x;
                            std::string_view b;
                            size_t a = 0;
                            e = nw.bytes(b, a);
                            m.normalizer_name = std::string(b);
                            break;
                        }
                        case 3: e = read_bool(nw, f, t, "add_dummy_prefix", m.add_dummy_prefix); break;
                        case 4: e = read_bool(nw, f, t, "remove_extra_whitespaces", m.remove_extra_whitespaces); break;
                        case 5: e = read_bool(nw, f, t, "escape_whitespaces", m.escape_whitespaces); break;
                        default: return false;
                    }
                    if (!e) return e;
                    return true;
                });
            if (!s) return s;
            return true;
        }
        return false;
    });
    if (!st) return st;
    if (m.pieces.empty()) return error(StatusCode::Corrupt, label + ": no pieces (not a sentencepiece model?)");
    return m;
}

Result<SentencePieceModel> read_sentencepiece_model(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(StatusCode::NotFound, path + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return error(StatusCode::IoError, path + ": read failed");
    const std::string bytes = ss.str();
    return parse_sentencepiece_model(bytes, path);
}

}  // namespace gkq
