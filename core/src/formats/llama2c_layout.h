// llama2.c checkpoint layouts, shared by the reader and the writer. All integers and floats little-endian.
//
// Legacy, version 0 (run.c memory_map_weights, export.py legacy_export):
//   header   7 x int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len     (28 bytes)
//            vocab_size < 0 means an unshared classifier of -vocab_size rows
//   f32      token_embedding_table (vocab, dim)
//            rms_att_weight        (n_layers, dim)
//            wq                    (n_layers, n_heads * head_size, dim)     each layer [out, in]
//            wk                    (n_layers, kv_dim, dim)
//            wv                    (n_layers, kv_dim, dim)
//            wo                    (n_layers, dim, n_heads * head_size)
//            rms_ffn_weight        (n_layers, dim)
//            w1                    (n_layers, hidden_dim, dim)
//            w2                    (n_layers, dim, hidden_dim)
//            w3                    (n_layers, hidden_dim, dim)
//            rms_final_weight      (dim)
//            freq_cis_real         (seq_len, head_size / 2)                  unused by run.c, skipped
//            freq_cis_imag         (seq_len, head_size / 2)
//            wcls                  (vocab, dim)                              only when unshared
//   nothing after that.
//
// Versioned (export.py version1_export / version2_export), 256-byte header:
//   0   u32 magic 0x616b3432 ("ak42" read as a little-endian u32)
//   4   i32 version (1 or 2)
//   8   7 x int32 as above (vocab_size always positive)
//   36  u8  shared_classifier (0 or 1)
//   37  i32 group_size (version 2 only, unaligned)
//   ..  zero padding to 256
// Version 1, f32: rms_att (each layer), rms_ffn (each layer), rms_final, token_embd, wq (each layer), wk, wv, wo,
//   w1, w2, w3, then wcls when unshared.
// Version 2 (Q8_0 "in groups"): the norms in f32 as in version 1 (rms_att, rms_ffn, rms_final); then the int8
//   codes of token_embd, wq (each layer), wk, wv, wo, w1, w2, w3, wcls when unshared, each tensor whole; then the
//   f32 scales of those tensors in the same order, numel / group_size per tensor. value = code * scale.
#pragma once

#include "gkq/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq::llama2c {

constexpr uint32_t kMagic = 0x616b3432u;
constexpr uint64_t kLegacyHeaderBytes = 28;
constexpr uint64_t kVersionedHeaderBytes = 256;

// The header fields, vocab_size made positive (the sign of the legacy field goes to shared_classifier).
struct Header {
    int32_t version = 0;
    int64_t dim = 0;
    int64_t hidden_dim = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;
    int64_t vocab_size = 0;
    int64_t seq_len = 0;
    bool shared_classifier = true;
    int32_t group_size = 0;  // version 2 only

    int64_t head_size() const { return dim / n_heads; }
    int64_t kv_dim() const { return head_size() * n_kv_heads; }
};

// Empty when the hyperparameters describe a transformer run.c can run; otherwise why not, naming the field.
std::string check_header(const Header& h);

enum class SegmentKind : uint8_t {
    F32,      // float32 tensor data
    Codes,    // int8 codes of a Q8_G tensor
    Scales,   // f32 group scales of a Q8_G tensor (numel / group_size per tensor)
    FreqCis,  // the legacy RoPE tables: stored, never listed as tensors
};

// A run of same-shaped items in the file: one role for every layer (per_layer) or one tensor.
struct Segment {
    TensorRole role = TensorRole::Other;
    SegmentKind kind = SegmentKind::F32;
    bool per_layer = false;
    std::vector<int64_t> shape;   // of one item (tensor shape; for FreqCis the table's shape)
    const char* label = nullptr;  // FreqCis only: "freq_cis_real" / "freq_cis_imag"
};

// The segments of a checkpoint with a checked header, in file order.
std::vector<Segment> layout(const Header& h);

// The name of one item of a segment in messages: "blk.3.attn_q.weight", "scales of output.weight",
// "freq_cis_real".
std::string item_name(const Segment& s, int32_t layer);

}  // namespace gkq::llama2c
