// ModelConfig: the architecture hyperparameters of a LLaMA-family model, read from config.json (HF), GGUF
// metadata ("llama.*" keys) or the llama2.c header. Fields a format does not carry keep the documented
// defaults of that format's reference runtime (llama2.c: rope_theta 10000, norm_eps 1e-5).
#pragma once

#include <cstdint>
#include <string>

namespace gkq {

// How q/k rows pair up for rotary embeddings. llama2.c and GGUF (llama) rotate adjacent pairs (2i, 2i+1);
// HF transformers' Llama rotates halves (i, i + head_size/2). The same trained model stored both ways
// differs by a fixed permutation of the q and k rows within each head (as llama.cpp's converter applies).
enum class RopeStyle : uint8_t { Interleaved, HalfSplit };

// How rotary frequencies are rescaled for contexts beyond the trained one (HF rope_scaling.rope_type).
enum class RopeScaling : uint8_t {
    None,
    Linear,  // positions divided by rope_factor
    Llama3,  // Llama 3.1/3.2: each pair's frequency divided by a factor between 1 and rope_factor by its wavelength
    Unsupported,  // a type this program does not compute (yarn, longrope, dynamic, ...): refused by the forward pass
};

// What a stored RMSNorm weight means. Gemma's HF checkpoints store w for a norm that multiplies by (1 + w);
// llama.cpp's converter adds the 1 into its GGUF (so GGUF norms multiply as stored), as it does for every norm
// weight of the model (q/k and post norms too).
enum class NormStorage : uint8_t {
    Multiplier,   // x / rms(x) * w
    OffsetByOne,  // x / rms(x) * (1 + w)
};

struct ModelConfig {
    std::string architecture = "llama";
    int64_t dim = 0;         // embedding width (hidden_size)
    int64_t hidden_dim = 0;  // FFN width (intermediate_size)
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;
    int64_t vocab_size = 0;
    int64_t context_length = 0;  // max positions (llama2.c seq_len)
    double rope_theta = 10000.0;
    double norm_eps = 1e-5;
    bool shared_classifier = true;                  // output projection tied to token_embd
    RopeStyle rope_style = RopeStyle::Interleaved;  // of the q/k weights as stored (HalfSplit for HF safetensors)
    int64_t head_dim = 0;                           // width of one head when the config sets it; 0: dim / n_heads
    RopeScaling rope_scaling = RopeScaling::None;
    double rope_factor = 1.0;            // Linear, Llama3: the context extension factor
    double rope_low_freq_factor = 1.0;   // Llama3
    double rope_high_freq_factor = 4.0;  // Llama3
    int64_t rope_original_context = 0;   // Llama3: original_max_position_embeddings
    int64_t sliding_window = 0;          // > 0: a token attends to itself and the window - 1 before it
    // The blocks that use the window: every block when 0; else block l when l % pattern < pattern - 1 (Gemma 2
    // alternates with 2, Gemma 3 has 5 local blocks per global one with 6; 1: none), as llama.cpp's set_swa_pattern.
    int64_t sliding_window_pattern = 0;
    double rope_local_theta = 0.0;      // > 0: rope theta of the windowed blocks (Gemma 3's rope_local_base_freq)
    double attn_softcap = 0.0;          // > 0: attention scores become cap * tanh(score / cap) (Gemma 2)
    double final_softcap = 0.0;         // > 0: the logits likewise
    int64_t query_pre_attn_scalar = 0;  // > 0: scores scaled by 1/sqrt(it) instead of 1/sqrt(head_size) (Gemma)
    NormStorage norm_storage = NormStorage::Multiplier;  // of the norm weights as stored (OffsetByOne: Gemma's HF)
    // Partial rotary embeddings (Phi-4-mini, a Phi3ForCausalLM, rotates 3/4 of each head), read only to be refused
    // (model_check.h: config_problems), never written: gkq rotates whole heads.
    double partial_rotary_factor = 0.0;  // HF's partial_rotary_factor when set; 0: unset
    int64_t rope_dims = 0;               // GGUF's rope.dimension_count when set; 0: unset
    // Experts of a mixture-of-experts feed-forward (Mixtral is GGUF architecture "llama" with them), read only to be
    // refused (gkq/model_check.h: architecture_problem), never written; 0: a dense model.
    int64_t n_experts = 0;

    int64_t head_size() const { return head_dim > 0 ? head_dim : n_heads > 0 ? dim / n_heads : 0; }
    int64_t q_dim() const { return n_heads * head_size(); }      // width of all query heads
    int64_t kv_dim() const { return n_kv_heads * head_size(); }  // width of all key (or value) heads
    // Whether block `layer` attends within the sliding window (and rotates with rope_local_theta).
    bool layer_windowed(int64_t layer) const {
        if (sliding_window <= 0) return false;
        if (sliding_window_pattern <= 0) return true;
        return layer % sliding_window_pattern < sliding_window_pattern - 1;
    }
};

}  // namespace gkq
