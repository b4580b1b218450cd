#include "gkq/naming.h"

#include <array>
#include <charconv>

namespace gkq {

namespace {

struct Suffix {
    std::string_view hf;    // after "model.layers.N."
    std::string_view gguf;  // after "blk.N."
    TensorRole role;
};

constexpr std::array<Suffix, 9> kLayerSuffixes = {{
    {"self_attn.q_proj.weight", "attn_q.weight", TensorRole::AttnQ},
    {"self_attn.k_proj.weight", "attn_k.weight", TensorRole::AttnK},
    {"self_attn.v_proj.weight", "attn_v.weight", TensorRole::AttnV},
    {"self_attn.o_proj.weight", "attn_output.weight", TensorRole::AttnO},
    {"mlp.gate_proj.weight", "ffn_gate.weight", TensorRole::FfnGate},
    {"mlp.up_proj.weight", "ffn_up.weight", TensorRole::FfnUp},
    {"mlp.down_proj.weight", "ffn_down.weight", TensorRole::FfnDown},
    {"input_layernorm.weight", "attn_norm.weight", TensorRole::AttnNorm},
    {"post_attention_layernorm.weight", "ffn_norm.weight", TensorRole::FfnNorm},
}};

// Parses "<prefix><digits>.<rest>"; returns the layer and rest, or layer -1.
int32_t parse_layer(std::string_view name, std::string_view prefix, std::string_view& rest) {
    if (name.substr(0, prefix.size()) != prefix) return -1;
    name.remove_prefix(prefix.size());
    size_t dot = name.find('.');
    if (dot == 0 || dot == std::string_view::npos) return -1;
    int32_t layer = -1;
    auto [p, ec] = std::from_chars(name.data(), name.data() + dot, layer);
    if (ec != std::errc() || p != name.data() + dot || layer < 0) return -1;
    rest = name.substr(dot + 1);
    return layer;
}

}  // namespace

RoleAndLayer parse_hf_name(std::string_view name) {
    if (name == "model.embed_tokens.weight") return {TensorRole::TokenEmbd, -1};
    if (name == "model.norm.weight") return {TensorRole::OutputNorm, -1};
    if (name == "lm_head.weight") return {TensorRole::Output, -1};
    std::string_view rest;
    int32_t layer = parse_layer(name, "model.layers.", rest);
    if (layer < 0) return {};
    for (const auto& s : kLayerSuffixes)
        if (s.hf == rest) return {s.role, layer};
    return {TensorRole::Other, layer};
}

RoleAndLayer parse_gguf_name(std::string_view name) {
    if (name == "token_embd.weight") return {TensorRole::TokenEmbd, -1};
    if (name == "output_norm.weight") return {TensorRole::OutputNorm, -1};
    if (name == "output.weight") return {TensorRole::Output, -1};
    std::string_view rest;
    int32_t layer = parse_layer(name, "blk.", rest);
    if (layer < 0) return {};
    for (const auto& s : kLayerSuffixes)
        if (s.gguf == rest) return {s.role, layer};
    return {TensorRole::Other, layer};
}

std::string hf_name(TensorRole role, int32_t layer) {
    switch (role) {
        case TensorRole::TokenEmbd: return "model.embed_tokens.weight";
        case TensorRole::OutputNorm: return "model.norm.weight";
        case TensorRole::Output: return "lm_head.weight";
        case TensorRole::Other: return {};
        default: break;
    }
    for (const auto& s : kLayerSuffixes)
        if (s.role == role) return "model.layers." + std::to_string(layer) + "." + std::string(s.hf);
    return {};
}

std::string gguf_name(TensorRole role, int32_t layer) {
    switch (role) {
        case TensorRole::TokenEmbd: return "token_embd.weight";
        case TensorRole::OutputNorm: return "output_norm.weight";
        case TensorRole::Output: return "output.weight";
        case TensorRole::Other: return {};
        default: break;
    }
    for (const auto& s : kLayerSuffixes)
        if (s.role == role) return "blk." + std::to_string(layer) + "." + std::string(s.gguf);
    return {};
}

}  // namespace gkq
