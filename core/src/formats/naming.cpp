#include "gkq/naming.h"

namespace gkq {

RoleAndLayer parse_tensor_name(const ArchSpec& arch, NameFormat format, std::string_view name) {
    const TensorMatch m = match_tensor(arch, format, name);
    return {listed_role(m), m.layer};
}

RoleAndLayer parse_hf_name(std::string_view name) {
    return parse_tensor_name(default_arch(), NameFormat::Hf, name);
}

RoleAndLayer parse_gguf_name(std::string_view name) {
    return parse_tensor_name(default_arch(), NameFormat::Gguf, name);
}

namespace {

// The default row's name, else the first row that has the role (biases, q/k norms).
std::string any_row_name(NameFormat format, TensorRole role, int32_t layer) {
    std::string name = tensor_name(default_arch(), format, role, layer);
    for (const ArchSpec& a : arch_table()) {
        if (!name.empty()) break;
        name = tensor_name(a, format, role, layer);
    }
    return name;
}

}  // namespace

std::string hf_name(TensorRole role, int32_t layer) {
    return any_row_name(NameFormat::Hf, role, layer);
}

std::string gguf_name(TensorRole role, int32_t layer) {
    return any_row_name(NameFormat::Gguf, role, layer);
}

}  // namespace gkq
