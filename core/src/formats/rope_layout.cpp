#include "formats/rope_layout.h"

#include <algorithm>

namespace gkq {

bool rope_reorder_needed(TensorRole role, RopeStyle from, RopeStyle to) {
    return from != to && (role == TensorRole::AttnQ || role == TensorRole::AttnK);
}

Status check_rope_reorderable(const ModelConfig& config, const std::vector<int64_t>& shape, const std::string& where) {
    const int64_t hs = config.head_size();
    if (config.n_heads <= 0 || config.dim % config.n_heads != 0 || hs <= 0 || hs % 2 != 0 || shape.size() != 2 ||
        shape[0] % hs != 0)
        return error(StatusCode::InvalidArgument, where + " (" + shape_to_string(shape) +
                                                      ") cannot be reordered between the interleaved and "
                                                      "half-split rotary layouts with dim " +
                                                      std::to_string(config.dim) + " and " +
                                                      std::to_string(config.n_heads) + " heads");
    return Status::ok();
}

std::vector<float> rope_reorder(const float* src, int64_t rows, int64_t cols, int64_t head_size, RopeStyle from,
                                RopeStyle to) {
    std::vector<float> out(static_cast<size_t>(rows * cols));
    if (from == to) {
        std::copy_n(src, rows * cols, out.data());
        return out;
    }
    const int64_t half = head_size / 2;
    for (int64_t h = 0; h < rows / head_size; ++h)
        for (int64_t i = 0; i < half; ++i)
            for (int64_t j = 0; j < 2; ++j) {
                const int64_t interleaved = h * head_size + 2 * i + j;
                const int64_t split = h * head_size + j * half + i;
                const int64_t s = from == RopeStyle::Interleaved ? interleaved : split;
                const int64_t d = from == RopeStyle::Interleaved ? split : interleaved;
                std::copy_n(src + s * cols, cols, out.data() + d * cols);
            }
    return out;
}

}  // namespace gkq
