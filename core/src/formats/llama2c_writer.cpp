// Writer for llama2.c legacy (version 0) fp32 checkpoints, the layout run.c and every llama2.c fork read.
// Layout: llama2c_layout.h. Everything is checked before the file is created: the hyperparameters, that every
// tensor llama2.c stores is given exactly once with its exact shape, and that nothing else is given.
#include "formats/llama2c_layout.h"
#include "gkq/arch.h"

#include "common/byte_reader.h"
#include "formats/rope_layout.h"
#include "gkq/atomic_file.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"

#include <climits>
#include <cmath>
#include <map>
#include <utility>

namespace gkq {

namespace {

using llama2c::Header;
using llama2c::Segment;
using llama2c::SegmentKind;

// Roles stored once for the whole model; every other role is stored once per layer.
bool is_global(TensorRole r) {
    return r == TensorRole::TokenEmbd || r == TensorRole::OutputNorm || r == TensorRole::Output;
}

Status header_from_config(const std::string& path, const ModelConfig& c, Header& h) {
    const std::pair<const char*, int64_t> fields[] = {
        {"dim", c.dim},
        {"hidden_dim", c.hidden_dim},
        {"n_layers", c.n_layers},
        {"n_heads", c.n_heads},
        {"n_kv_heads", c.n_kv_heads},
        {"vocab_size", c.vocab_size},
        {"context_length", c.context_length},
    };
    for (const auto& [name, v] : fields)
        if (v > INT32_MAX)
            return error(StatusCode::InvalidArgument, path + ": config." + name + " " + std::to_string(v) +
                                                          " does not fit the llama2.c header's int32");
    // run.c computes llama's blocks with dim / n_heads wide heads and unscaled rope, nothing else
    std::string beyond;
    if (const ArchSpec* a = find_arch(c.architecture);
        a != nullptr && (a->block.q_bias || a->block.k_bias || a->block.v_bias || a->block.qk_norm))
        beyond = "architecture " + c.architecture + " (q/k/v biases or q/k norms)";
    else if (a != nullptr && a->block.post_norms)
        beyond = "architecture " + c.architecture + " (Gemma's blocks: post norms, GELU, scaled embeddings)";
    else if (c.head_dim > 0 && c.n_heads > 0 && c.head_dim * c.n_heads != c.dim)
        beyond = "head_dim " + std::to_string(c.head_dim) + " (not dim / n_heads)";
    else if (c.rope_scaling != RopeScaling::None)
        beyond = "rope scaling";
    else if (c.sliding_window > 0 && c.sliding_window < c.context_length)
        beyond = "a sliding window of " + std::to_string(c.sliding_window) + " positions";
    if (!beyond.empty()) return error(StatusCode::Unsupported, path + ": a llama2.c checkpoint cannot hold " + beyond);
    h.version = 0;
    h.dim = c.dim;
    h.hidden_dim = c.hidden_dim;
    h.n_layers = c.n_layers;
    h.n_heads = c.n_heads;
    h.n_kv_heads = c.n_kv_heads;
    h.vocab_size = c.vocab_size;
    h.seq_len = c.context_length;
    h.shared_classifier = c.shared_classifier;
    if (std::string why = llama2c::check_header(h); !why.empty())
        return error(StatusCode::InvalidArgument, path + ": cannot write a llama2.c checkpoint: " + why);
    return Status::ok();
}

// run.c's RoPE tables as export.py computes them in float32: freqs[i] = 1 / theta^(2i / head_size),
// real[t][i] = cos(t * freqs[i]), imag[t][i] = sin(t * freqs[i]).
Status write_freq_cis(AtomicFile& f, const Header& h, double theta, bool imag) {
    const int64_t half = h.head_size() / 2;
    std::vector<float> freqs(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i)
        freqs[i] =
            1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(h.head_size()));
    std::vector<float> row(static_cast<size_t>(half));
    for (int64_t t = 0; t < h.seq_len; ++t) {
        for (int64_t i = 0; i < half; ++i) {
            const float angle = static_cast<float>(t) * freqs[i];
            row[i] = imag ? std::sin(angle) : std::cos(angle);
        }
        if (Status s = f.write(row.data(), row.size() * sizeof(float)); !s) return s;
    }
    return Status::ok();
}

}  // namespace

Status write_llama2c(const std::string& path, const ModelConfig& config, const std::vector<WriteTensor>& tensors) {
    Header h;
    if (Status s = header_from_config(path, config, h); !s) return s;

    // Index the given tensors by (role, layer), rejecting what llama2.c has no place for.
    std::map<std::pair<TensorRole, int32_t>, const WriteTensor*> given;
    for (const WriteTensor& t : tensors) {
        const int32_t layer = is_global(t.role) ? -1 : t.layer;
        const std::string name = t.role == TensorRole::Other ? t.name : gguf_name(t.role, layer);
        if (t.role == TensorRole::Other)
            return error(StatusCode::InvalidArgument,
                         path + ": tensor '" + t.name + "' has no role; a llama2.c checkpoint has no place for it");
        if (t.role == TensorRole::Output && h.shared_classifier)
            return error(StatusCode::InvalidArgument, path + ": tensor '" + name +
                                                          "' given, but config.shared_classifier says the "
                                                          "classifier is token_embd");
        if (!is_global(t.role) && (t.layer < 0 || t.layer >= h.n_layers))
            return error(StatusCode::InvalidArgument, path + ": tensor '" + name + "': layer " +
                                                          std::to_string(t.layer) + " is outside 0.." +
                                                          std::to_string(h.n_layers - 1));
        if (t.data == nullptr && !t.fill)
            return error(StatusCode::InvalidArgument, path + ": tensor '" + name + "' has no data");
        if (t.dtype != DType::F32)
            return error(StatusCode::InvalidArgument, path + ": tensor '" + name + "': its data is float32, not " +
                                                          std::string(dtype_name(t.dtype)));
        if (!given.emplace(std::make_pair(t.role, layer), &t).second)
            return error(StatusCode::InvalidArgument, path + ": tensor '" + name + "' is given twice");
        if (rope_reorder_needed(t.role, config.rope_style, RopeStyle::Interleaved))
            if (Status st = check_rope_reorderable(config, t.shape, path + ": tensor '" + name + "'"); !st) return st;
    }

    // Every stored tensor present with its exact shape, and the size of the whole file representable.
    const std::vector<Segment> segments = llama2c::layout(h);
    uint64_t total = llama2c::kLegacyHeaderBytes;
    for (const Segment& s : segments) {
        uint64_t item_bytes = 4;
        for (int64_t d : s.shape)
            if (!checked_mul(item_bytes, static_cast<uint64_t>(d), item_bytes))
                return error(StatusCode::InvalidArgument, path + ": '" + llama2c::item_name(s, 0) + "' is too large");
        const int64_t n_items = s.per_layer ? h.n_layers : 1;
        uint64_t segment_bytes = 0;
        if (!checked_mul(item_bytes, static_cast<uint64_t>(n_items), segment_bytes) ||
            !checked_add(total, segment_bytes, total))
            return error(StatusCode::InvalidArgument,
                         path + ": the checkpoint's size overflows 64 bits at '" + llama2c::item_name(s, 0) + "'");
        if (s.kind == SegmentKind::FreqCis) continue;
        for (int64_t i = 0; i < n_items; ++i) {
            const int32_t layer = s.per_layer ? static_cast<int32_t>(i) : -1;
            const std::string name = llama2c::item_name(s, layer);
            auto it = given.find({s.role, layer});
            if (it == given.end())
                return error(StatusCode::InvalidArgument, path + ": missing tensor '" + name + "' (role " +
                                                              std::string(role_name(s.role)) + ", layer " +
                                                              std::to_string(layer) + ")");
            if (it->second->shape != s.shape)
                return error(StatusCode::InvalidArgument, path + ": tensor '" + name + "' has shape " +
                                                              shape_to_string(it->second->shape) + "; llama2.c needs " +
                                                              shape_to_string(s.shape));
        }
    }

    auto created = AtomicFile::create(path);
    if (!created) return created.status();
    AtomicFile f = std::move(created).value();

    // A negative vocab_size is the legacy format's only way of saying "the classifier follows the weights".
    const int32_t header[7] = {
        static_cast<int32_t>(h.dim),        static_cast<int32_t>(h.hidden_dim),
        static_cast<int32_t>(h.n_layers),   static_cast<int32_t>(h.n_heads),
        static_cast<int32_t>(h.n_kv_heads), static_cast<int32_t>(h.shared_classifier ? h.vocab_size : -h.vocab_size),
        static_cast<int32_t>(h.seq_len),
    };
    if (Status s = f.write(header, sizeof header); !s) return s;
    for (const Segment& s : segments) {
        if (s.kind == SegmentKind::FreqCis) {
            const bool imag = std::string_view(s.label) == "freq_cis_imag";
            if (Status st = write_freq_cis(f, h, config.rope_theta, imag); !st) return st;
            continue;
        }
        const int64_t n_items = s.per_layer ? h.n_layers : 1;
        std::vector<float> filled;  // a tensor handed over by fill: one at a time
        for (int64_t i = 0; i < n_items; ++i) {
            const WriteTensor& t = *given.at({s.role, s.per_layer ? static_cast<int32_t>(i) : -1});
            uint64_t numel = 1;
            for (int64_t d : s.shape) numel *= static_cast<uint64_t>(d);  // checked above
            const float* data = t.data;
            if (data == nullptr) {
                filled.assign(numel, 0.0f);
                if (Status st = t.fill(filled.data()); !st) return st;
                data = filled.data();
            }
            if (rope_reorder_needed(t.role, config.rope_style, RopeStyle::Interleaved)) {
                // run.c rotates adjacent pairs: q/k of a half-split (HF) model are reordered first
                const auto reordered = rope_reorder(data, t.shape[0], t.shape[1], config.head_size(), config.rope_style,
                                                    RopeStyle::Interleaved);
                if (Status st = f.write(reordered.data(), numel * sizeof(float)); !st) return st;
                continue;
            }
            if (Status st = f.write(data, numel * sizeof(float)); !st) return st;
        }
    }
    if (f.bytes_written() != total)
        return error(StatusCode::Internal, path + ": wrote " + std::to_string(f.bytes_written()) +
                                               " bytes, the layout says " + std::to_string(total));
    return f.commit();
}

}  // namespace gkq
