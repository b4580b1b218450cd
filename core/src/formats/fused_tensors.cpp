// Fused tensors split on read and joined on write (see fused_tensors.h).
#include "formats/fused_tensors.h"

#include "formats/rope_layout.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace gkq {

namespace {

// "attn_q, attn_k and attn_v"
std::string part_names(const TensorSpec& spec) {
    std::string s;
    for (size_t i = 0; i < spec.parts.size(); ++i) {
        if (i > 0) s += i + 1 == spec.parts.size() ? " and " : ", ";
        s += role_name(spec.parts[i].role);
    }
    return s;
}

std::vector<int64_t> part_shape(const TensorSpec& spec, size_t part, const ModelConfig& c) {
    const int64_t rows = part_rows(spec, part, c).count;
    if (spec.cols == Size::None) return {rows};
    return {rows, size_value(spec.cols, c)};
}

}  // namespace

// ---------------------------------------------------------------- read: one view per part

Status split_fused_tensors(ModelFileData& d) {
    if (d.format == ModelFormat::Llama2c) return Status::ok();
    const ArchSpec* arch = find_arch(d.config.architecture);
    if (arch == nullptr) return Status::ok();
    const NameFormat format = d.format == ModelFormat::Gguf ? NameFormat::Gguf : NameFormat::Hf;
    std::vector<Tensor> out;
    out.reserve(d.tensors.size());
    for (Tensor& t : d.tensors) {
        const TensorMatch m = match_tensor(*arch, format, t.name);
        if (m.spec != nullptr && m.spec->need == Need::UnsupportedRope)
            d.config.rope_scaling = RopeScaling::Unsupported;
        if (m.spec == nullptr || !m.spec->fused()) {
            out.push_back(std::move(t));
            continue;
        }
        const TensorSpec& spec = *m.spec;
        const std::vector<int64_t> want = stored_shape(spec, d.config);
        const std::string where = d.path + ": tensor '" + t.name + "'";
        if (t.shape != want)
            return error(StatusCode::Corrupt, where + " has shape " + shape_to_string(t.shape) + "; " +
                                                  d.config.architecture + " stores " + part_names(spec) + " in it as " +
                                                  shape_to_string(want));
        const auto rows = static_cast<uint64_t>(want[0]);
        if (t.scales != nullptr || rows == 0 || t.n_bytes % rows != 0)
            return error(StatusCode::Corrupt, where + ": " + std::to_string(t.n_bytes) + " bytes of " + t.type_name +
                                                  " do not divide into its " + std::to_string(rows) + " rows");
        const uint64_t row_bytes = t.n_bytes / rows;
        for (size_t p = 0; p < spec.parts.size(); ++p) {
            const RowRange r = part_rows(spec, p, d.config);
            Tensor v = t;
            v.name = part_view_name(t.name, spec.parts[p].role);
            v.role = spec.parts[p].role;
            v.layer = m.layer;
            v.shape = part_shape(spec, p, d.config);
            const uint64_t begin = static_cast<uint64_t>(r.begin) * row_bytes;
            v.n_bytes = static_cast<uint64_t>(r.count) * row_bytes;
            v.data = t.data + begin;
            v.file_offset = t.file_offset + begin;
            out.push_back(std::move(v));
        }
    }
    d.tensors = std::move(out);
    return Status::ok();
}

// ---------------------------------------------------------------- write: the parts joined back

Result<std::vector<WriteTensor>> join_fused_tensors(const std::string& path, const ModelConfig& config,
                                                    NameFormat format, const std::vector<WriteTensor>& given) {
    const ArchSpec& arch = arch_for_writing(config.architecture);
    const bool any_fused =
        std::any_of(arch.tensors.begin(), arch.tensors.end(), [](const TensorSpec& s) { return s.fused(); });
    if (!any_fused) return given;
    const RopeStyle target_rope = format == NameFormat::Hf ? arch.hf_rope : arch.gguf_rope;

    std::vector<WriteTensor> out;
    std::vector<bool> taken(given.size(), false);
    for (size_t i = 0; i < given.size(); ++i) {
        if (taken[i]) continue;
        const TensorSpec* spec = given[i].role == TensorRole::Other ? nullptr : find_fused_tensor(arch, given[i].role);
        if (spec == nullptr) {
            out.push_back(given[i]);
            continue;
        }
        const int32_t layer = given[i].layer;
        const std::string name = tensor_name(*spec, format, layer);
        const std::string where = path + ": tensor '" + name + "'";
        if (name.empty())
            return error(StatusCode::InvalidArgument,
                         path + ": " + config.architecture + " has no name for its fused " + part_names(*spec));
        // every part of this block, in the row's order
        auto parts = std::make_shared<std::vector<WriteTensor>>();
        std::vector<bool> reorder;
        for (size_t p = 0; p < spec->parts.size(); ++p) {
            const TensorRole role = spec->parts[p].role;
            size_t k = given.size();
            for (size_t j = i; j < given.size(); ++j)
                if (!taken[j] && given[j].role == role && given[j].layer == layer) {
                    k = j;
                    break;
                }
            if (k == given.size())
                return error(StatusCode::InvalidArgument, where + " holds " + part_names(*spec) + "; " +
                                                              std::string(role_name(role)) + " of block " +
                                                              std::to_string(layer) + " is not given");
            const std::vector<int64_t> want = part_shape(*spec, p, config);
            if (given[k].shape != want)
                return error(StatusCode::InvalidArgument, where + ": its part " + std::string(role_name(role)) +
                                                              " is " + shape_to_string(given[k].shape) + ", not " +
                                                              shape_to_string(want));
            const bool r = rope_reorder_needed(role, config.rope_style, target_rope);
            if (r) {
                if (Status st = check_rope_reorderable(config, want, where); !st) return st;
            }
            taken[k] = true;
            parts->push_back(given[k]);
            reorder.push_back(r);
        }

        WriteTensor joined;
        joined.name = name;
        joined.role = TensorRole::Other;
        joined.layer = layer;
        joined.shape = stored_shape(*spec, config);
        joined.store_as = parts->front().store_as;
        bool all_stored = true, all_floats = true;
        for (const WriteTensor& w : *parts) {
            if (w.store_as != joined.store_as)
                return error(
                    StatusCode::InvalidArgument,
                    where + " holds " + part_names(*spec) + " in one type, but they come as " +
                        std::string(dtype_name(parts->front().store_as == DType::Other ? DType::F32
                                                                                       : parts->front().store_as)) +
                        " and " + std::string(dtype_name(w.store_as == DType::Other ? DType::F32 : w.store_as)));
            all_stored = all_stored && static_cast<bool>(w.fill_stored);
            all_floats = all_floats && !w.fill_stored && (w.data != nullptr || w.fill);
        }
        const bool any_reorder = std::find(reorder.begin(), reorder.end(), true) != reorder.end();
        if (all_stored && !any_reorder) {
            joined.fill_stored = [parts](std::vector<uint8_t>& bytes) -> Status {
                bytes.clear();
                std::vector<uint8_t> one;
                for (const WriteTensor& w : *parts) {
                    if (Status s = w.fill_stored(one); !s) return s;
                    bytes.insert(bytes.end(), one.begin(), one.end());
                }
                return Status::ok();
            };
        } else if (all_floats) {
            joined.fill = [parts, reorder, head = config.head_size(), from = config.rope_style,
                           target_rope](float* out) -> Status {
                for (size_t p = 0; p < parts->size(); ++p) {
                    const WriteTensor& w = (*parts)[p];
                    const int64_t n = w.n_elements();
                    if (w.data != nullptr)
                        std::memcpy(out, w.data, static_cast<size_t>(n) * sizeof(float));
                    else if (Status s = w.fill(out); !s)
                        return s;
                    if (reorder[p]) {
                        const std::vector<float> r = rope_reorder(out, w.shape[0], w.shape[1], head, from, target_rope);
                        std::copy(r.begin(), r.end(), out);
                    }
                    out += n;
                }
                return Status::ok();
            };
        } else {
            return error(StatusCode::InvalidArgument,
                         where + ": its parts " + part_names(*spec) +
                             " come some as stored bytes and some as floats (or q/k stored bytes would need their "
                             "rotary rows reordered); give them all as floats");
        }
        out.push_back(std::move(joined));
    }
    return out;
}

}  // namespace gkq
