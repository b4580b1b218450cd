// The architecture rows (see gkq/arch.h) and our own role names: the one file that spells the file formats'
// tensor names and hyperparameter keys. Names follow llama.cpp's llama-arch.cpp (GGUF) and the HF transformers
// modeling files (HF); shapes are PyTorch's (out_features, in_features).
#include "formats/model_families.h"
#include "gkq/arch.h"

#include <array>

namespace gkq {

namespace {

// ---------------------------------------------------------------- shared by the llama family
// Functions rather than globals: the table may be built during another file's static initialization.

std::vector<HParamKey> llama_hf_keys() {
    return {
        {HParam::Embd, "hidden_size"},
        {HParam::Ffn, "intermediate_size"},
        {HParam::Layers, "num_hidden_layers"},
        {HParam::Heads, "num_attention_heads"},
        {HParam::KvHeads, "num_key_value_heads"},
        {HParam::Vocab, "vocab_size"},
        {HParam::Context, "max_position_embeddings"},
        {HParam::RopeTheta, "rope_theta"},
        {HParam::NormEps, "rms_norm_eps"},
        {HParam::Tied, "tie_word_embeddings"},
        {HParam::HeadDim, "head_dim"},
        {HParam::RopeScalingType, "rope_scaling.rope_type"},
        {HParam::RopeScalingType, "rope_scaling.type"},  // transformers before 4.45
        {HParam::RopeFactor, "rope_scaling.factor"},
        {HParam::RopeLowFreqFactor, "rope_scaling.low_freq_factor"},
        {HParam::RopeHighFreqFactor, "rope_scaling.high_freq_factor"},
        {HParam::RopeOriginalContext, "rope_scaling.original_max_position_embeddings"},
        {HParam::PartialRotary, "partial_rotary_factor"},
        {HParam::Experts, "num_experts"},        // Qwen2-MoE, Qwen3-MoE, OLMoE
        {HParam::Experts, "num_local_experts"},  // Mixtral, PhiMoE
    };
}

// GGUF stores no tied flag: a tied model has no output.weight.
std::vector<HParamKey> llama_gguf_keys() {
    return {
        {HParam::Context, "%s.context_length"},
        {HParam::Embd, "%s.embedding_length"},
        {HParam::Ffn, "%s.feed_forward_length"},
        {HParam::Layers, "%s.block_count"},
        {HParam::Heads, "%s.attention.head_count"},
        {HParam::KvHeads, "%s.attention.head_count_kv"},
        {HParam::Vocab, "%s.vocab_size"},
        {HParam::RopeTheta, "%s.rope.freq_base"},
        {HParam::NormEps, "%s.attention.layer_norm_rms_epsilon"},
        {HParam::HeadDim, "%s.attention.key_length"},
        {HParam::HeadDim, "%s.attention.value_length"},  // llama.cpp sizes v by it (gkq's heads are square)
        {HParam::RopeScalingType, "%s.rope.scaling.type"},
        {HParam::RopeFactor, "%s.rope.scaling.factor"},
        {HParam::RopeDims, "%s.rope.dimension_count"},
        {HParam::Experts, "%s.expert_count"},
    };
}

TensorSpec one(std::string_view hf, std::string_view gguf, TensorRole role, Size rows, Size cols,
               Need need = Need::Always) {
    return TensorSpec{hf, gguf, {RolePart{role, rows}}, cols, need};
}

// token_embd, one block in the order the transformer loads it, output_norm, output.
std::vector<TensorSpec> llama_tensors() {
    using R = TensorRole;
    return {
        one("model.embed_tokens.weight", "token_embd.weight", R::TokenEmbd, Size::Vocab, Size::Embd),
        one("model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight", R::AttnNorm, Size::Embd, Size::None),
        one("model.layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight", R::AttnQ, Size::QOut, Size::Embd),
        one("model.layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight", R::AttnK, Size::KvOut, Size::Embd),
        one("model.layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight", R::AttnV, Size::KvOut, Size::Embd),
        one("model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight", R::AttnO, Size::Embd, Size::QOut),
        one("model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight", R::FfnNorm, Size::Embd,
            Size::None),
        one("model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight", R::FfnGate, Size::Ffn, Size::Embd),
        one("model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight", R::FfnDown, Size::Embd, Size::Ffn),
        one("model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight", R::FfnUp, Size::Ffn, Size::Embd),
        one("model.norm.weight", "output_norm.weight", R::OutputNorm, Size::Embd, Size::None),
        one("lm_head.weight", "output.weight", R::Output, Size::Vocab, Size::Embd, Need::Untied),
        // Llama 3 rope scaling as llama.cpp's converter stores it (HF files give the parameters in config.json)
        one("", "rope_freqs.weight", R::RopeFreqs, Size::HalfHead, Size::None, Need::Optional),
    };
}

// The llama tensors with `extra` inserted after the v projection (q/k/v biases, q/k norms).
std::vector<TensorSpec> llama_tensors_with(std::vector<TensorSpec> extra) {
    std::vector<TensorSpec> t = llama_tensors();
    auto after_v = t.begin() + 5;  // token_embd, attn_norm, q, k, v
    t.insert(after_v, extra.begin(), extra.end());
    return t;
}

ArchSpec llama_family(std::string_view name, std::string_view hf_class, std::string_view gguf_name) {
    ArchSpec a;
    a.name = name;
    a.hf_classes = {hf_class};
    a.hf_model_type = name;
    a.gguf_name = gguf_name;
    a.written_as = "llama";
    a.hf_keys = llama_hf_keys();
    a.gguf_keys = llama_gguf_keys();
    a.hf_block = "model.layers.%d.";
    a.gguf_block = "blk.%d.";
    a.tensors = llama_tensors();
    a.hf_rope = RopeStyle::HalfSplit;      // HF rotates halves (i, i + head_size/2)
    a.gguf_rope = RopeStyle::Interleaved;  // llama.cpp's converter permutes q/k to adjacent pairs (LLAMA rope)
    a.hf_activation = "silu";
    return a;
}

// ---------------------------------------------------------------- the Gemma family
// Gemma 2 / 3 blocks (transformers' modeling_gemma2/3, llama.cpp's models/gemma2.cpp and gemma3.cpp): (1 + w)
// RMSNorm for every norm (HF stores w; llama.cpp's converter adds the 1, so GGUF norms multiply as stored), a norm
// after the attention and after the FFN, a GELU-tanh gated FFN, embeddings times sqrt(dim), halves rotated in both
// formats (NEOX rope: the converter does not permute q/k), windowed and global blocks. HF's post_attention_layernorm
// is the norm after the attention here (llama's is the FFN's input norm); pre_feedforward_layernorm is that.
ArchSpec gemma_family(std::string_view name, std::string_view hf_class, std::string_view hf_model_type,
                      std::vector<TensorSpec> qk_norms) {
    using R = TensorRole;
    ArchSpec a = llama_family(name, hf_class, name);
    a.hf_model_type = hf_model_type;
    a.written_as = name;
    a.hf_keys.push_back({HParam::SlidingWindow, "sliding_window"});
    a.hf_keys.push_back({HParam::QueryPreAttnScalar, "query_pre_attn_scalar"});
    a.hf_keys.push_back({HParam::FinalSoftcap, "final_logit_softcapping"});
    a.gguf_keys.push_back({HParam::SlidingWindow, "%s.attention.sliding_window"});
    a.gguf_keys.push_back({HParam::SlidingWindowPattern, "%s.attention.sliding_window_pattern"});
    a.gguf_keys.push_back({HParam::RopeLocalTheta, "%s.rope.freq_base_swa"});
    a.gguf_keys.push_back({HParam::FinalSoftcap, "%s.final_logit_softcapping"});
    std::vector<TensorSpec> t = {
        one("model.embed_tokens.weight", "token_embd.weight", R::TokenEmbd, Size::Vocab, Size::Embd),
        one("model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight", R::AttnNorm, Size::Embd, Size::None),
        one("model.layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight", R::AttnQ, Size::QOut, Size::Embd),
        one("model.layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight", R::AttnK, Size::KvOut, Size::Embd),
        one("model.layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight", R::AttnV, Size::KvOut, Size::Embd),
    };
    t.insert(t.end(), qk_norms.begin(), qk_norms.end());
    for (TensorSpec& s : std::vector<TensorSpec>{
             one("model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight", R::AttnO, Size::Embd,
                 Size::QOut),
             one("model.layers.%d.post_attention_layernorm.weight", "blk.%d.post_attention_norm.weight",
                 R::AttnPostNorm, Size::Embd, Size::None),
             one("model.layers.%d.pre_feedforward_layernorm.weight", "blk.%d.ffn_norm.weight", R::FfnNorm, Size::Embd,
                 Size::None),
             one("model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight", R::FfnGate, Size::Ffn, Size::Embd),
             one("model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight", R::FfnDown, Size::Embd, Size::Ffn),
             one("model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight", R::FfnUp, Size::Ffn, Size::Embd),
             one("model.layers.%d.post_feedforward_layernorm.weight", "blk.%d.post_ffw_norm.weight", R::FfnPostNorm,
                 Size::Embd, Size::None),
             one("model.norm.weight", "output_norm.weight", R::OutputNorm, Size::Embd, Size::None),
         })
        t.push_back(std::move(s));
    a.tensors = std::move(t);
    a.hf_rope = a.gguf_rope = RopeStyle::HalfSplit;
    a.block.post_norms = true;
    a.block.norm = NormKind::RmsOnePlus;
    a.block.activation = Activation::GeluTanh;
    a.block.sliding_window = true;
    a.block.embd_scale = EmbdScale::SqrtDim;
    a.hf_activation = "gelu_pytorch_tanh";
    return a;
}

// ---------------------------------------------------------------- the rows

std::vector<ArchSpec> make_table() {
    using R = TensorRole;
    std::vector<ArchSpec> t;
    t.push_back(llama_family("llama", "LlamaForCausalLM", "llama"));
    // Mistral is llama with an optional sliding window (config.json's sliding_window). llama.cpp's converter writes
    // it as general.architecture llama, whose loader reads no window; so does our GGUF writer (the window is then
    // gone: llama.cpp and gkq compute such a file with full attention), while the HF writer keeps the window.
    ArchSpec mistral = llama_family("mistral", "MistralForCausalLM", "llama");
    mistral.written_as = "mistral";
    mistral.hf_keys.push_back({HParam::SlidingWindow, "sliding_window"});
    mistral.block.sliding_window = true;
    t.push_back(std::move(mistral));
    // Qwen2 / Qwen2.5: llama with q/k/v biases, rotating halves in both formats (llama.cpp's NEOX rope: its
    // converter does not permute q/k). Its config's sliding_window applies only with use_sliding_window, which
    // llama.cpp ignores: not read.
    ArchSpec qwen2 = llama_family("qwen2", "Qwen2ForCausalLM", "qwen2");
    qwen2.written_as = "qwen2";
    qwen2.tensors = llama_tensors_with({
        one("model.layers.%d.self_attn.q_proj.bias", "blk.%d.attn_q.bias", R::AttnQBias, Size::QOut, Size::None),
        one("model.layers.%d.self_attn.k_proj.bias", "blk.%d.attn_k.bias", R::AttnKBias, Size::KvOut, Size::None),
        one("model.layers.%d.self_attn.v_proj.bias", "blk.%d.attn_v.bias", R::AttnVBias, Size::KvOut, Size::None),
    });
    qwen2.gguf_rope = RopeStyle::HalfSplit;
    qwen2.block.q_bias = qwen2.block.k_bias = qwen2.block.v_bias = true;
    t.push_back(std::move(qwen2));
    // Qwen3: no biases; RMSNorm over each head of q and k before rope; head_dim from the config.
    ArchSpec qwen3 = llama_family("qwen3", "Qwen3ForCausalLM", "qwen3");
    qwen3.written_as = "qwen3";
    qwen3.tensors = llama_tensors_with({
        one("model.layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight", R::AttnQNorm, Size::Head,
            Size::None),
        one("model.layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight", R::AttnKNorm, Size::Head,
            Size::None),
    });
    qwen3.gguf_rope = RopeStyle::HalfSplit;
    qwen3.block.qk_norm = true;
    t.push_back(std::move(qwen3));
    // Gemma 2: windowed and global blocks alternating (llama.cpp: pattern 2, window 4096 unless the file says),
    // attention scores and logits soft-capped (llama.cpp's defaults 50 and 30 when a GGUF gives none), always a tied
    // classifier (llama.cpp loads no output.weight).
    ArchSpec gemma2 = gemma_family("gemma2", "Gemma2ForCausalLM", "gemma2", {});
    gemma2.hf_keys.push_back({HParam::AttnSoftcap, "attn_logit_softcapping"});
    gemma2.gguf_keys.push_back({HParam::AttnSoftcap, "%s.attn_logit_softcapping"});
    gemma2.block.attn_softcap = gemma2.block.final_softcap = true;
    gemma2.defaults = {{HParam::AttnSoftcap, 50.0},
                       {HParam::FinalSoftcap, 30.0},
                       {HParam::SlidingWindow, 4096},
                       {HParam::SlidingWindowPattern, 2}};
    gemma2.gguf_scale_by_embd_layers = 46;
    t.push_back(std::move(gemma2));
    // Gemma 3 (text; Gemma3ForCausalLM, model_type gemma3_text): per-head q/k norms, 5 windowed blocks per global
    // one (sliding_window_pattern 6; llama.cpp's default, its converter writes no pattern), the windowed blocks
    // rotating with rope_local_base_freq unscaled and the global ones with rope_theta and the rope scaling; the
    // logits soft-capped only where the config says. The window applies only when the file gives one.
    ArchSpec gemma3 = gemma_family("gemma3", "Gemma3ForCausalLM", "gemma3_text",
                                   {
                                       one("model.layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight",
                                           R::AttnQNorm, Size::Head, Size::None),
                                       one("model.layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight",
                                           R::AttnKNorm, Size::Head, Size::None),
                                   });
    gemma3.tensors.push_back(one("lm_head.weight", "output.weight", R::Output, Size::Vocab, Size::Embd, Need::Untied));
    gemma3.hf_keys.push_back({HParam::RopeLocalTheta, "rope_local_base_freq"});
    gemma3.hf_keys.push_back({HParam::SlidingWindowPattern, "sliding_window_pattern"});
    gemma3.hf_keys.push_back(
        {HParam::SlidingWindowPattern, "_sliding_window_pattern"});  // newer configs, beside layer_types
    gemma3.block.qk_norm = true;
    gemma3.block.final_softcap = true;
    gemma3.block.local_rope_unscaled = true;
    gemma3.defaults = {{HParam::SlidingWindowPattern, 6}, {HParam::RopeLocalTheta, 10000.0}};
    gemma3.gguf_scale_by_embd_layers = 62;
    t.push_back(std::move(gemma3));
    // Phi-3 (llama.cpp's models/phi3.cpp): llama's blocks with q, k and v in one projection (qkv_proj, GGUF attn_qkv:
    // q rows, then k, then v) and the gate and up projections in one (gate_up_proj; GGUF's ffn_up holds both, gate
    // rows first, which llama.cpp's SwiGLU splits in halves). The readers split both into one view per role and the
    // writers join them back (formats/fused_tensors.h); llama.cpp also loads separate attn_q/k/v from GGUF, and so does
    // gkq, which writes the fused form llama.cpp's converter writes. Halves rotated in both formats (NEOX rope: the
    // converter does not permute q/k). The window the converter writes (sliding_window) llama.cpp switches off: not
    // read, attention is full as llama.cpp computes it. The 128k models' longrope scaling (rope_scaling type su or
    // longrope; GGUF's rope_factors_long/short tensors) is read as an unsupported rope scaling, which the transformer
    // refuses.
    ArchSpec phi3 = llama_family("phi3", "Phi3ForCausalLM", "phi3");
    phi3.written_as = "phi3";
    phi3.tensors = {
        one("model.embed_tokens.weight", "token_embd.weight", R::TokenEmbd, Size::Vocab, Size::Embd),
        one("model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight", R::AttnNorm, Size::Embd, Size::None),
        TensorSpec{"model.layers.%d.self_attn.qkv_proj.weight",
                   "blk.%d.attn_qkv.weight",
                   {{R::AttnQ, Size::QOut}, {R::AttnK, Size::KvOut}, {R::AttnV, Size::KvOut}},
                   Size::Embd,
                   Need::Always,
                   R::AttnV},
        // llama.cpp's phi3 loader takes separate q/k/v where a file has no attn_qkv
        one("", "blk.%d.attn_q.weight", R::AttnQ, Size::QOut, Size::Embd, Need::Separate),
        one("", "blk.%d.attn_k.weight", R::AttnK, Size::KvOut, Size::Embd, Need::Separate),
        one("", "blk.%d.attn_v.weight", R::AttnV, Size::KvOut, Size::Embd, Need::Separate),
        one("model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight", R::AttnO, Size::Embd, Size::QOut),
        one("model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight", R::FfnNorm, Size::Embd,
            Size::None),
        TensorSpec{"model.layers.%d.mlp.gate_up_proj.weight",
                   "blk.%d.ffn_up.weight",
                   {{R::FfnGate, Size::Ffn}, {R::FfnUp, Size::Ffn}},
                   Size::Embd,
                   Need::Always,
                   R::FfnUp},
        one("model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight", R::FfnDown, Size::Embd, Size::Ffn),
        one("model.norm.weight", "output_norm.weight", R::OutputNorm, Size::Embd, Size::None),
        one("lm_head.weight", "output.weight", R::Output, Size::Vocab, Size::Embd, Need::Untied),
        one("", "rope_factors_long.weight", R::Other, Size::HalfHead, Size::None, Need::UnsupportedRope),
        one("", "rope_factors_short.weight", R::Other, Size::HalfHead, Size::None, Need::UnsupportedRope),
    };
    phi3.hf_rope = phi3.gguf_rope = RopeStyle::HalfSplit;
    t.push_back(std::move(phi3));
    return t;
}

constexpr std::array<std::string_view, kTensorRoleCount> kRoleNames = {
    "token_embd",  "attn_q",      "attn_k",      "attn_v",      "attn_o",     "ffn_gate",       "ffn_up",
    "ffn_down",    "attn_norm",   "ffn_norm",    "output_norm", "output",     "other",          "attn_q_bias",
    "attn_k_bias", "attn_v_bias", "attn_q_norm", "attn_k_norm", "rope_freqs", "attn_post_norm", "ffn_post_norm",
};

struct RopeScalingNames {
    RopeScaling type;
    std::string_view hf;
    std::string_view gguf;  // empty: the format has no name for it
};
constexpr std::array<RopeScalingNames, 3> kRopeScalingNames = {{
    {RopeScaling::None, "default", "none"},
    {RopeScaling::Linear, "linear", "linear"},
    {RopeScaling::Llama3, "llama3", ""},  // GGUF: the rope_freqs tensor
}};

}  // namespace

const std::vector<ArchSpec>& arch_table() {
    static const std::vector<ArchSpec> table = make_table();
    return table;
}

// HF model_type values and GGUF architecture names of llama.cpp's (llama-arch.cpp) that gkq cannot run, the most asked
// for first.
const std::vector<UnsupportedArch>& unsupported_archs() {
    static constexpr std::string_view kMoe = "a mixture-of-experts feed-forward (a router and experts)";
    static constexpr std::string_view kMamba = "state-space (Mamba) layers in place of attention";
    static constexpr std::string_view kMla = "multi-head latent attention and a mixture-of-experts feed-forward";
    static const std::vector<UnsupportedArch> list = {
        {"mixtral", kMoe},
        {"qwen2_moe", kMoe},
        {"qwen2moe", kMoe},
        {"qwen3_moe", kMoe},
        {"qwen3moe", kMoe},
        {"phimoe", kMoe},
        {"olmoe", kMoe},
        {"granitemoe", kMoe},
        {"dbrx", kMoe},
        {"deepseek_v2", kMla},
        {"deepseek2", kMla},
        {"deepseek_v3", kMla},
        {"mamba", kMamba},
        {"mamba2", kMamba},
        {"jamba", "state-space (Mamba) layers and a mixture-of-experts feed-forward"},
        {"falcon_h1", "state-space (Mamba) layers beside attention"},
        {"rwkv6", "RWKV time-mixing layers in place of attention"},
        {"rwkv7", "RWKV time-mixing layers in place of attention"},
        {"llava", "a vision encoder (multimodal)"},
        {"mllama", "a vision encoder and cross-attention layers (multimodal)"},
        {"qwen2_vl", "a vision encoder (multimodal) and M-RoPE"},
        {"qwen2vl", "a vision encoder (multimodal) and M-RoPE"},
        {"phi2", "LayerNorm, parallel attention and feed-forward, and partial rotary embeddings"},
        {"gpt2", "LayerNorm, learned position embeddings and a GELU feed-forward"},
        {"bert", "an encoder (bidirectional attention, LayerNorm)"},
    };
    return list;
}

const UnsupportedArch* find_unsupported_arch(std::string_view name) {
    for (const UnsupportedArch& u : unsupported_archs())
        if (u.name == name) return &u;
    return nullptr;
}

const ArchSpec& default_arch() {
    return arch_table().front();
}

FamilyNames family_names(ModelFamily f) {
    auto of = [](const ArchSpec* a) { return FamilyNames{a->hf_classes.front(), a->hf_model_type, a}; };
    switch (f) {
        case ModelFamily::Llama: return of(find_arch("llama"));
        case ModelFamily::Mistral: return of(find_arch("mistral"));
        case ModelFamily::Qwen2: return of(find_arch("qwen2"));
    }
    return of(&default_arch());
}

const ArchNameKeys& arch_name_keys() {
    static const ArchNameKeys keys{"general.architecture", "architectures", "model_type", "hidden_act"};
    return keys;
}

// Our own identifiers for roles (JSON output, rknot files, messages), not a file format's names; here because
// several of them equal GGUF's tensor names.
std::string_view role_name(TensorRole r) {
    return kRoleNames[static_cast<size_t>(r)];
}

std::string_view rope_scaling_name(RopeScaling r, NameFormat format) {
    for (const RopeScalingNames& n : kRopeScalingNames)
        if (n.type == r) return format == NameFormat::Hf ? n.hf : n.gguf;
    return {};
}

bool rope_scaling_from_name(std::string_view name, NameFormat format, RopeScaling& out) {
    for (const RopeScalingNames& n : kRopeScalingNames) {
        const std::string_view spelled = format == NameFormat::Hf ? n.hf : n.gguf;
        if (!spelled.empty() && spelled == name) {
            out = n.type;
            return true;
        }
    }
    return false;
}

TensorRole role_from_name(std::string_view name) {
    for (size_t i = 0; i < kRoleNames.size(); ++i)
        if (kRoleNames[i] == name) return static_cast<TensorRole>(i);
    return TensorRole::Other;
}

}  // namespace gkq
