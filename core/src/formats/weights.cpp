// What every Weights shares: lookups by role or name, the parameter count, and no factors unless a knot says so.
#include "gkq/weights.h"

namespace gkq {

int64_t Weights::index_of(TensorRole role, int32_t layer) const {
    for (size_t i = 0; i < n_tensors(); ++i) {
        const TensorInfo& t = tensor_info(i);
        if (t.role == role && t.layer == layer) return static_cast<int64_t>(i);
    }
    return -1;
}

int64_t Weights::index_of(std::string_view name) const {
    for (size_t i = 0; i < n_tensors(); ++i)
        if (tensor_info(i).name == name) return static_cast<int64_t>(i);
    return -1;
}

int64_t Weights::n_params() const {
    int64_t n = 0;
    for (size_t i = 0; i < n_tensors(); ++i) n += tensor_info(i).n_elements();
    return n;
}

Result<std::optional<StoredFactors>> Weights::read_factors(size_t i) const {
    if (i >= n_tensors()) return error(StatusCode::InvalidArgument, label() + ": no tensor " + std::to_string(i));
    return std::optional<StoredFactors>();
}

}  // namespace gkq
