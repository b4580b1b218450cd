// ArchSpec: the transformer architectures this program knows, as data (the role llama.cpp's llama-arch.cpp plays
// there). Per architecture: its names (HF config.json `architectures` classes and `model_type`, GGUF
// `general.architecture`), the hyperparameter keys of config.json and of GGUF metadata, every tensor it stores
// with its HF and GGUF name pattern and the logical roles it holds (a fused tensor holds several, by row range),
// each role's shape as an expression of the config, the rotary layout each format stores q/k in, and the
// features of its blocks as flags. Readers, writers and the transformer take names, keys and shapes from these
// rows; the rows are in core/src/formats/arch_table.cpp, the only file that spells a format's tensor names or
// hyperparameter keys (tests/repo/check_names_in_table.sh enforces that).
// Adding an architecture: a row there, plus the forward-pass code for block features it is the first to use.
#pragma once

#include "gkq/model_config.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gkq {

// The naming convention a tensor name or key follows. llama2.c files carry no names and take the GGUF ones.
enum class NameFormat : uint8_t { Hf, Gguf };

// A size of the config: the terms of shape expressions.
enum class Size : uint8_t {
    None,      // no such dimension (the second dimension of a 1-D tensor)
    Embd,      // dim
    Ffn,       // hidden_dim
    Vocab,     // vocab_size
    QOut,      // n_heads * head_size
    KvOut,     // n_kv_heads * head_size
    Head,      // head_size
    HalfHead,  // head_size / 2
};
int64_t size_value(Size s, const ModelConfig& c);  // 0 for None

// The ModelConfig fields the formats store as hyperparameters.
enum class HParam : uint8_t {
    Embd,                  // dim
    Ffn,                   // hidden_dim
    Layers,                // n_layers
    Heads,                 // n_heads
    KvHeads,               // n_kv_heads
    Vocab,                 // vocab_size
    Context,               // context_length
    RopeTheta,             // rope_theta
    NormEps,               // norm_eps
    Tied,                  // shared_classifier
    HeadDim,               // head_dim
    SlidingWindow,         // sliding_window
    RopeScalingType,       // rope_scaling
    RopeFactor,            // rope_factor
    RopeLowFreqFactor,     // rope_low_freq_factor
    RopeHighFreqFactor,    // rope_high_freq_factor
    RopeOriginalContext,   // rope_original_context
    SlidingWindowPattern,  // sliding_window_pattern
    RopeLocalTheta,        // rope_local_theta
    AttnSoftcap,           // attn_softcap
    FinalSoftcap,          // final_softcap
    QueryPreAttnScalar,    // query_pre_attn_scalar
    PartialRotary,         // partial_rotary_factor (read, never written)
    RopeDims,              // rope_dims (read, never written)
    Experts,               // n_experts (read, never written)
};
// Non-negative integer, number, boolean, a RopeScaling by its name (rope_scaling_from_name).
enum class HParamKind : uint8_t { Count, Real, Flag, RopeType };
HParamKind hparam_kind(HParam p);

// The field `p` names in `c`: the pointer of its kind set, the others null.
struct HParamField {
    int64_t* count = nullptr;
    double* real = nullptr;
    bool* flag = nullptr;
    RopeScaling* rope = nullptr;
};
HParamField hparam_field(HParam p, ModelConfig& c);
// Whether a writer stores `p` for `c`: the sizes and flags every model has always; head_dim, the sliding window and
// Gemma's values when set (> 0); the rope scaling keys when the config scales (the llama3 ones only for Llama3).
bool hparam_written(HParam p, const ModelConfig& c);

// A value an architecture's config has when its file does not say (llama.cpp's loader defaults, which are also the
// HF config class's): set before the keys are read.
struct HParamDefault {
    HParam param;
    double value;  // a Count's or Flag's too
};
void apply_defaults(const std::vector<HParamDefault>& defaults, ModelConfig& c);

struct HParamKey {
    HParam param;
    // config.json key ("a.b": key b of the object under key a), or GGUF key pattern with %s standing for the GGUF
    // architecture. A parameter may have several keys (older spellings); readers take the last present, writers
    // write the first.
    std::string_view key;
};

// A rope scaling type's name in a format's files ("linear", "llama3"; GGUF has no name for Llama3, whose factors
// are the rope_freqs tensor); empty when the format has none. rope_scaling_from_name: false for a name this
// program does not compute ("yarn", "longrope", ...), `out` then untouched.
std::string_view rope_scaling_name(RopeScaling r, NameFormat format);
bool rope_scaling_from_name(std::string_view name, NameFormat format, RopeScaling& out);
// Llama 3 rope scaling as llama.cpp's converter computes its rope_freqs tensor: per rotary pair i, the divisor of
// its frequency theta^(-2i/head_size) (1, rope_factor, or a smooth blend by wavelength). Empty unless Llama3.
std::vector<float> llama3_rope_divisors(const ModelConfig& c);

// A GGUF key pattern with %s replaced by the architecture's GGUF name.
std::string gguf_key(std::string_view pattern, std::string_view gguf_arch);

// One logical role inside a stored tensor: a fused tensor stacks its parts' rows in order.
struct RolePart {
    TensorRole role = TensorRole::Other;
    Size rows = Size::None;
};

enum class Need : uint8_t {
    Always,    // every model of the architecture stores it
    Untied,    // stored only when the classifier is not shared with token_embd (the output projection)
    Optional,  // used when present (GGUF's rope_freqs: Llama 3 rope scaling stored as a tensor)
    // Never used: its presence means a rope scaling gkq does not compute (GGUF's rope_factors_long/short of Phi-3's
    // longrope models), so a model file holding it reads with rope scaling Unsupported, which the transformer refuses.
    UnsupportedRope,
    // A part of a fused tensor stored on its own, which llama.cpp also loads (Phi-3's attn_q/k/v in GGUF): read as
    // that role, never written (the writers store the fused tensor) and not a role of its own in required_roles.
    Separate,
};

// One tensor an architecture stores.
struct TensorSpec {
    std::string_view hf;    // "model.layers.%d.self_attn.q_proj.weight"; %d the block index; empty: not in HF files
    std::string_view gguf;  // "blk.%d.attn_q.weight"; empty: not in GGUF files
    std::vector<RolePart> parts;  // its role, or a fused tensor's roles in row order
    Size cols = Size::None;       // None: a 1-D tensor of parts[0].rows elements
    Need need = Need::Always;
    // A fused tensor: the role whose llama-quantize type rules it follows as one tensor (llama.cpp types a tensor by
    // its name's category: attn_qkv like attn_v, Phi-3's fused ffn_up like ffn_up). Other for the rest.
    TensorRole quant_as = TensorRole::Other;

    bool per_layer() const;  // its names carry a block index
    bool fused() const { return parts.size() > 1; }
};

enum class NormKind : uint8_t {
    Rms,         // x / rms(x) * w
    RmsOnePlus,  // x / rms(x) * (1 + w): Gemma's (HF stores w; see norm_storage)
};
enum class Activation : uint8_t { Silu, GeluTanh };  // of the gated FFN
enum class EmbdScale : uint8_t { None, SqrtDim };    // token embeddings multiplied by sqrt(dim) (Gemma)

// The features of an architecture's blocks. The forward pass computes the all-default block (llama's); values
// such as a soft-cap or a window size come from the config, the flags say the architecture has them.
struct BlockFlags {
    bool q_bias = false;
    bool k_bias = false;
    bool v_bias = false;
    bool qk_norm = false;     // per-head RMSNorm of q and k before rope
    bool post_norms = false;  // norms after the attention and after the FFN output
    NormKind norm = NormKind::Rms;
    Activation activation = Activation::Silu;
    bool attn_softcap = false;    // attention logits soft-capped
    bool final_softcap = false;   // output logits soft-capped
    bool sliding_window = false;  // the config may limit attention to a window of positions
    EmbdScale embd_scale = EmbdScale::None;
    // The windowed blocks rotate with rope_local_theta and no rope scaling (Gemma 3's local layers); otherwise every
    // block rotates alike (llama.cpp gives Gemma 2's local layers the global scaling).
    bool local_rope_unscaled = false;
};

struct ArchSpec {
    std::string_view name;                     // ModelConfig::architecture ("llama")
    std::vector<std::string_view> hf_classes;  // config.json "architectures" entries ("LlamaForCausalLM")
    std::string_view hf_model_type;            // config.json "model_type"
    std::string_view gguf_name;                // general.architecture, as llama.cpp's converter writes it
    std::string_view written_as;               // the row whose names and keys the writers use for this architecture
    std::vector<HParamKey> hf_keys;            // in the order the writer puts them
    std::vector<HParamKey> gguf_keys;          // in the order the writer puts them
    std::string_view hf_block;                 // prefix of every block tensor ("model.layers.%d."); unknown tensors
    std::string_view gguf_block;               //   under it keep their block index
    std::vector<TensorSpec> tensors;           // in the order the transformer loads them
    RopeStyle hf_rope = RopeStyle::HalfSplit;
    RopeStyle gguf_rope = RopeStyle::Interleaved;
    BlockFlags block;
    std::string_view hf_activation;       // config.json "hidden_act" value
    std::vector<HParamDefault> defaults;  // before either format's keys are read
    // GGUF stores no attention scale for Gemma: llama.cpp takes 1/sqrt(dim / n_heads) for this block count (the
    // 27B model's) and 1/sqrt(head_size) otherwise; the GGUF reader sets query_pre_attn_scalar the same way. 0: none.
    int64_t gguf_scale_by_embd_layers = 0;
};

// What the norm weights of `arch` mean as `format` stores them: HF files store the architecture's own weights
// (w of a (1 + w) norm for RmsOnePlus), GGUF files what multiplies (llama.cpp's converter adds the 1).
NormStorage norm_storage(const ArchSpec& arch, NameFormat format);

// ---- the table

const std::vector<ArchSpec>& arch_table();
// An architecture llama.cpp runs that the table has no row for, with what the forward pass would need to run it.
struct UnsupportedArch {
    std::string_view name;     // ModelConfig::architecture as the readers set it (HF model_type, GGUF's name)
    std::string_view missing;  // "a mixture-of-experts feed-forward"
};
const std::vector<UnsupportedArch>& unsupported_archs();
const UnsupportedArch* find_unsupported_arch(std::string_view name);  // nullptr when not listed
// The row whose names and keys apply to an architecture the table does not have (llama: such models are
// listed with llama's names, as llama.cpp's loader reads any architecture's keys under its own prefix).
const ArchSpec& default_arch();
// By ModelConfig::architecture; nullptr when the table has no such row.
const ArchSpec* find_arch(std::string_view name);
// By a GGUF general.architecture (the row llama.cpp writes it for, else the row of that name); nullptr if none.
const ArchSpec* find_arch_gguf(std::string_view gguf_name);
const ArchSpec* find_arch_hf_model_type(std::string_view model_type);
const ArchSpec* find_arch_hf_class(std::string_view hf_class);
// find_arch(name), or default_arch().
const ArchSpec& arch_or_default(std::string_view name);
// The row the writers use for a model of architecture `name`: its written_as row (default_arch() when unknown).
const ArchSpec& arch_for_writing(std::string_view name);
// The table's names for messages: "llama and mistral".
std::string arch_names_list();

// Keys that name the architecture itself, the same for every row.
struct ArchNameKeys {
    std::string_view gguf_architecture;  // "general.architecture"
    std::string_view hf_architectures;   // "architectures"
    std::string_view hf_model_type;      // "model_type"
    std::string_view hf_activation;      // "hidden_act"
};
const ArchNameKeys& arch_name_keys();

// ---- tensor names

struct TensorMatch {
    const TensorSpec* spec = nullptr;  // null: no tensor of the architecture has this name
    int32_t layer = -1;                // the block index, also for unknown tensors under the block prefix
};
TensorMatch match_tensor(const ArchSpec& arch, NameFormat format, std::string_view name);
// The role a matched tensor is listed with: its one role; Other for no match and for a fused tensor (its roles
// are its parts).
TensorRole listed_role(const TensorMatch& m);

// The stored name of `spec` in block `layer` (layer ignored for global tensors); empty if the format lacks it.
std::string tensor_name(const TensorSpec& spec, NameFormat format, int32_t layer);
// The fused tensor that holds `role` among its parts; nullptr if none does.
const TensorSpec* find_fused_tensor(const ArchSpec& arch, TensorRole role);
// How many tensors a file written for `arch` holds for tensors of these roles and blocks: the parts of one block's
// fused tensor count once (the writers join them), every other tensor once.
size_t n_stored_tensors(const ArchSpec& arch, const std::vector<std::pair<TensorRole, int32_t>>& tensors);
// The tensor that holds `role` as its only part and is written; nullptr if none (or only a fused one) does.
const TensorSpec* find_tensor(const ArchSpec& arch, TensorRole role);
// tensor_name(*find_tensor(arch, role), ...); empty for Other and for roles without a tensor of their own.
std::string tensor_name(const ArchSpec& arch, NameFormat format, TensorRole role, int32_t layer);

// The name a reader gives the view of part `role` of the fused tensor stored as `stored` (readers split fused
// tensors into one view per role, writers join them back: formats/fused_tensors.h): "blk.0.attn_qkv.weight[attn_q]".
std::string part_view_name(std::string_view stored, TensorRole role);
// The inverse: true and `stored` and `role` set for a part view's name; false for any other name.
bool split_part_view_name(std::string_view name, std::string_view& stored, TensorRole& role);

// Rows [begin, begin + count) of part `part` of `spec` for `c`, and the stored tensor's shape.
struct RowRange {
    int64_t begin = 0;
    int64_t count = 0;
};
RowRange part_rows(const TensorSpec& spec, size_t part, const ModelConfig& c);
std::vector<int64_t> stored_shape(const TensorSpec& spec, const ModelConfig& c);

// One role the forward pass reads, with the shape the config implies ((rows, cols), or (n) for a vector).
struct RequiredRole {
    TensorRole role = TensorRole::Other;
    int32_t layer = -1;
    std::vector<int64_t> shape;
    bool optional = false;  // Need::Optional: read when present
};
// Every role `arch` stores for `c`, in the row's order with its block tensors repeated for each layer (a fused
// tensor's parts each); the output projection only when the classifier is not shared; no UnsupportedRope tensors.
std::vector<RequiredRole> required_roles(const ArchSpec& arch, const ModelConfig& c, bool shared_classifier);

}  // namespace gkq
