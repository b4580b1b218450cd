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

std::string hf_name(TensorRole role, int32_t layer) {
    return tensor_name(default_arch(), NameFormat::Hf, role, layer);
}

std::string gguf_name(TensorRole role, int32_t layer) {
    return tensor_name(default_arch(), NameFormat::Gguf, role, layer);
}

}  // namespace gkq
