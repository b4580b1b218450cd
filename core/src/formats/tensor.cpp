#include "gkq/tensor.h"

namespace gkq {

// role_name() and role_from_name() are with the architecture table (arch_table.cpp).

bool role_is_matrix(TensorRole r) {
    switch (r) {
        case TensorRole::TokenEmbd:
        case TensorRole::AttnQ:
        case TensorRole::AttnK:
        case TensorRole::AttnV:
        case TensorRole::AttnO:
        case TensorRole::FfnGate:
        case TensorRole::FfnUp:
        case TensorRole::FfnDown:
        case TensorRole::Output: return true;
        default: return false;
    }
}

bool role_is_norm(TensorRole r) {
    switch (r) {
        case TensorRole::AttnNorm:
        case TensorRole::FfnNorm:
        case TensorRole::OutputNorm:
        case TensorRole::AttnQNorm:
        case TensorRole::AttnKNorm:
        case TensorRole::AttnPostNorm:
        case TensorRole::FfnPostNorm: return true;
        default: return false;
    }
}

int64_t TensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0 || (d > 0 && n > INT64_MAX / d)) return -1;
        n *= d;
    }
    return n;
}

int64_t TensorInfo::rows() const {
    if (shape.size() < 2) return 1;
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
    return r;
}

int64_t TensorInfo::cols() const {
    return shape.empty() ? 1 : shape.back();
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
    if (shape.empty()) return "scalar";
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += " x ";
        s += std::to_string(shape[i]);
    }
    return s;
}

}  // namespace gkq
