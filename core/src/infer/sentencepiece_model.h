// A sentencepiece tokenizer.model: the ModelProto protobuf (sentencepiece_model.proto) read by a small wire-format
// decoder, only the fields a tokenizer needs. Private to core/src/infer; see gkq/tokenizer.h.
//
// Wire layout (protobuf): a message is a run of fields, each a varint key (field number << 3 | wire type) then
// its value: 0 varint, 1 fixed 8 bytes, 2 a varint length and that many bytes (strings, sub-messages), 5 fixed 4
// bytes (float). ModelProto: 1 repeated SentencePiece {1 piece (string), 2 score (float), 3 type (enum)},
// 2 TrainerSpec {3 model_type, 24 treat_whitespace_as_suffix, 35 byte_fallback, 40..43 unk/bos/eos/pad id},
// 3 NormalizerSpec {1 name, 3 add_dummy_prefix, 4 remove_extra_whitespaces, 5 escape_whitespaces}. Other fields
// are skipped. Every length is checked against what is left of its message; errors name the file and offset.
#pragma once

#include "gkq/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

struct SentencePieceModel {
    // sentencepiece's ModelProto.SentencePiece.Type, the same numbers as GGUF's token types.
    enum PieceType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
    // TrainerSpec.ModelType.
    enum ModelType : int32_t { Unigram = 1, Bpe = 2, Word = 3, Char = 4 };

    struct Piece {
        std::string piece;
        float score = 0.0f;
        int32_t type = Normal;
    };
    std::vector<Piece> pieces;
    // TrainerSpec, with the proto's defaults.
    int32_t model_type = Unigram;
    bool treat_whitespace_as_suffix = false;
    bool byte_fallback = false;
    int32_t unk_id = 0;
    int32_t bos_id = 1;
    int32_t eos_id = 2;
    int32_t pad_id = -1;
    // NormalizerSpec, with the proto's defaults.
    std::string normalizer_name;
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = true;
    bool escape_whitespaces = true;
};

// The name of a TrainerSpec model_type ("unigram", "bpe", "word", "char", or the number).
std::string sentencepiece_model_type_name(int32_t type);

// Decodes ModelProto bytes; `label` (the file) names them in errors: Corrupt "<label>: offset N: ...".
Result<SentencePieceModel> parse_sentencepiece_model(std::string_view bytes, const std::string& label);
// Reads and decodes the file at `path`.
Result<SentencePieceModel> read_sentencepiece_model(const std::string& path);

}  // namespace gkq
