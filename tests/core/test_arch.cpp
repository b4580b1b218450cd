// The architecture table (gkq/arch.h): every row consistent with itself, names that round-trip through match and
// format in both conventions, the exact names and shapes llama.cpp and HF use for llama, lookups by every kind
// of name, and the fused tensors of Phi-3's row (q/k/v and gate/up, by row range).
#include "gkq/arch.h"
#include "gkq/naming.h"

#include <QtTest>

#include <algorithm>
#include <set>

using namespace gkq;

namespace {

ModelConfig small_config() {
    ModelConfig c;
    c.dim = 64;
    c.hidden_dim = 192;
    c.n_layers = 5;
    c.n_heads = 8;
    c.n_kv_heads = 4;
    c.vocab_size = 512;
    return c;
}

const TensorSpec& spec_of(const ArchSpec& a, TensorRole role) {
    const TensorSpec* t = find_tensor(a, role);
    if (t == nullptr) qFatal("no tensor of role %s", std::string(role_name(role)).c_str());
    return *t;
}

}  // namespace

class TestArch : public QObject {
    Q_OBJECT

private slots:
    void rowsAreConsistent() {
        std::set<std::string_view> names;
        for (const ArchSpec& a : arch_table()) {
            QVERIFY2(names.insert(a.name).second, std::string(a.name).c_str());
            QVERIFY(!a.hf_classes.empty());
            QVERIFY(!a.hf_model_type.empty());
            QVERIFY(!a.gguf_name.empty());
            QVERIFY2(find_arch(a.written_as) != nullptr, std::string(a.name).c_str());
            QVERIFY(!a.hf_activation.empty());
            for (std::string_view block : {a.hf_block, a.gguf_block}) QVERIFY(block.find("%d") != std::string::npos);
            for (const HParamKey& k : a.gguf_keys) QVERIFY(k.key.find("%s") != std::string::npos);
            std::set<TensorRole> roles;
            for (const TensorSpec& t : a.tensors) {
                QVERIFY(!t.parts.empty());
                QVERIFY(!t.hf.empty() || !t.gguf.empty());
                if (t.need == Need::UnsupportedRope) {  // a marker, no role (Phi-3's longrope factors)
                    QVERIFY(!t.fused() && t.parts.front().role == TensorRole::Other);
                    continue;
                }
                if (t.need == Need::Separate) {  // a fused tensor's part stored alone (Phi-3's GGUF attn_q/k/v)
                    QVERIFY(!t.fused() && find_fused_tensor(a, t.parts.front().role) != nullptr);
                    QVERIFY(find_tensor(a, t.parts.front().role) == nullptr);  // never written
                    continue;
                }
                // a fused tensor is typed by one of its parts' rules; a lone one by its own
                QCOMPARE(t.fused(), t.quant_as != TensorRole::Other);
                if (t.fused())
                    QVERIFY(std::any_of(t.parts.begin(), t.parts.end(),
                                        [&](const RolePart& p) { return p.role == t.quant_as; }));
                for (const RolePart& p : t.parts) {
                    QVERIFY(p.role != TensorRole::Other);
                    QVERIFY2(roles.insert(p.role).second, std::string(role_name(p.role)).c_str());
                    QVERIFY(p.rows != Size::None);
                }
                // A block tensor has a block index in each of its names, under the row's block prefix.
                for (auto [pattern, block] : {std::pair{t.hf, a.hf_block}, std::pair{t.gguf, a.gguf_block}}) {
                    if (pattern.empty()) continue;
                    QCOMPARE(pattern.find("%d") != std::string::npos, t.per_layer());
                    if (t.per_layer()) QVERIFY(pattern.substr(0, block.size()) == block);
                }
            }
            // The transformer's roles are all there (llama's 12 and rope_freqs, plus each row's own): the table's
            // rows are the architectures it runs.
            // Gemma: no rope_freqs, two post norms; Gemma 2 no output (always tied), Gemma 3 q/k norms. Phi-3: llama's
            // 12 (q/k/v and gate/up as parts of two fused tensors), no rope_freqs.
            const size_t own = a.name == "qwen2" ? 3 : a.name == "qwen3" ? 2 : 0;
            const size_t apart = a.name == "gemma2" ? 13 : a.name == "gemma3" ? 16 : a.name == "phi3" ? 12 : 0;
            QCOMPARE(roles.size(), apart > 0 ? apart : size_t{13} + own);
        }
    }

    void hyperparameterKeysCoverTheConfig() {
        ModelConfig c;
        std::set<const void*> fields;
        for (int p = 0; p <= static_cast<int>(HParam::QueryPreAttnScalar); ++p) {
            const HParamField f = hparam_field(static_cast<HParam>(p), c);
            const int set = (f.count != nullptr) + (f.real != nullptr) + (f.flag != nullptr) + (f.rope != nullptr);
            QCOMPARE(set, 1);
            QCOMPARE(f.count != nullptr, hparam_kind(static_cast<HParam>(p)) == HParamKind::Count);
            QCOMPARE(f.real != nullptr, hparam_kind(static_cast<HParam>(p)) == HParamKind::Real);
            QVERIFY(fields
                        .insert(f.count  ? static_cast<const void*>(f.count)
                                : f.real ? static_cast<const void*>(f.real)
                                : f.flag ? static_cast<const void*>(f.flag)
                                         : static_cast<const void*>(f.rope))
                        .second);
        }
        for (const ArchSpec& a : arch_table()) {
            // every field (rope_scaling's type under two spellings), Mistral's window too
            // Gemma's: window, query_pre_attn_scalar, final soft-cap; Gemma 2's attention soft-cap; Gemma 3's local
            // rope theta and window pattern (two spellings)
            const size_t hf_own = a.name == "mistral" ? 1 : a.name == "gemma2" ? 4 : a.name == "gemma3" ? 6 : 0;
            // partial_rotary_factor, num_experts and num_local_experts: read to refuse them
            QCOMPARE(a.hf_keys.size(), size_t{20} + hf_own);
            // no tied flag (GGUF: no output.weight), no window (llama.cpp's llama has none) and no llama3
            // parameters (GGUF: the rope_freqs tensor); Gemma's window, pattern, local theta, soft-caps
            const size_t gguf_own = a.name == "gemma2" ? 5 : a.name == "gemma3" ? 4 : 0;
            // rope.dimension_count and expert_count: read to refuse partial rotary and experts
            QCOMPARE(a.gguf_keys.size(), size_t{15} + gguf_own);
        }
        QCOMPARE(gguf_key("%s.attention.head_count_kv", "llama"), std::string("llama.attention.head_count_kv"));
        QCOMPARE(gguf_key("general.name", "llama"), std::string("general.name"));
    }

    void llamaNamesAreLlamaCpps() {
        const ArchSpec& a = *find_arch("llama");
        const std::pair<TensorRole, const char*> gguf[] = {
            {TensorRole::TokenEmbd, "token_embd.weight"},   {TensorRole::AttnNorm, "blk.3.attn_norm.weight"},
            {TensorRole::AttnQ, "blk.3.attn_q.weight"},     {TensorRole::AttnK, "blk.3.attn_k.weight"},
            {TensorRole::AttnV, "blk.3.attn_v.weight"},     {TensorRole::AttnO, "blk.3.attn_output.weight"},
            {TensorRole::FfnNorm, "blk.3.ffn_norm.weight"}, {TensorRole::FfnGate, "blk.3.ffn_gate.weight"},
            {TensorRole::FfnDown, "blk.3.ffn_down.weight"}, {TensorRole::FfnUp, "blk.3.ffn_up.weight"},
            {TensorRole::OutputNorm, "output_norm.weight"}, {TensorRole::Output, "output.weight"},
        };
        const std::pair<TensorRole, const char*> hf[] = {
            {TensorRole::TokenEmbd, "model.embed_tokens.weight"},
            {TensorRole::AttnNorm, "model.layers.3.input_layernorm.weight"},
            {TensorRole::AttnQ, "model.layers.3.self_attn.q_proj.weight"},
            {TensorRole::AttnO, "model.layers.3.self_attn.o_proj.weight"},
            {TensorRole::FfnNorm, "model.layers.3.post_attention_layernorm.weight"},
            {TensorRole::FfnGate, "model.layers.3.mlp.gate_proj.weight"},
            {TensorRole::FfnDown, "model.layers.3.mlp.down_proj.weight"},
            {TensorRole::OutputNorm, "model.norm.weight"},
            {TensorRole::Output, "lm_head.weight"},
        };
        for (auto [role, name] : gguf) {
            const int32_t layer = std::string_view(name).substr(0, 4) == "blk." ? 3 : -1;
            QCOMPARE(tensor_name(a, NameFormat::Gguf, role, layer), std::string(name));
            QCOMPARE(gguf_name(role, layer), std::string(name));
            QCOMPARE(parse_gguf_name(name).role, role);
            QCOMPARE(parse_gguf_name(name).layer, layer);
        }
        for (auto [role, name] : hf) {
            const int32_t layer = std::string_view(name).substr(0, 13) == "model.layers." ? 3 : -1;
            QCOMPARE(hf_name(role, layer), std::string(name));
            QCOMPARE(parse_hf_name(name).role, role);
            QCOMPARE(parse_hf_name(name).layer, layer);
        }
        QCOMPARE(hf_name(TensorRole::Other, 0), std::string());
        QCOMPARE(gguf_name(TensorRole::TokenEmbd, 7), std::string("token_embd.weight"));  // global: no layer
    }

    void unknownNamesKeepTheirBlock() {
        const std::pair<const char*, RoleAndLayer> cases[] = {
            {"blk.2.attn_q.bias", {TensorRole::Other, 2}},
            {"blk.03.attn_q.weight", {TensorRole::AttnQ, 3}},
            {"blk.-1.attn_q.weight", {TensorRole::Other, -1}},
            {"blk.x.attn_q.weight", {TensorRole::Other, -1}},
            {"blk..attn_q.weight", {TensorRole::Other, -1}},
            {"blk.4", {TensorRole::Other, -1}},
            {"blk.99999999999.attn_q.weight", {TensorRole::Other, -1}},
            {"rope_freqs.weight", {TensorRole::RopeFreqs, -1}},  // a row's tensor (Llama 3 rope scaling)
            {"model.layers.3.self_attn.q_proj.weight", {TensorRole::Other, -1}},  // an HF name in GGUF
        };
        for (auto [name, want] : cases) {
            const RoleAndLayer got = parse_gguf_name(name);
            QVERIFY2(got.role == want.role && got.layer == want.layer, name);
        }
        QCOMPARE(parse_hf_name("model.layers.11.self_attn.rotary_emb.inv_freq").layer, 11);
        QCOMPARE(parse_hf_name("blk.3.attn_q.weight").role, TensorRole::Other);
    }

    void namesRoundTripInEveryRow() {
        for (const ArchSpec& a : arch_table())
            for (NameFormat f : {NameFormat::Hf, NameFormat::Gguf})
                for (const TensorSpec& t : a.tensors)
                    for (int32_t layer : {0, 7, 1234}) {
                        const std::string name = tensor_name(t, f, layer);
                        if (name.empty()) continue;
                        const TensorMatch m = match_tensor(a, f, name);
                        QVERIFY2(m.spec == &t, name.c_str());
                        QCOMPARE(m.layer, t.per_layer() ? layer : -1);
                        QCOMPARE(listed_role(m), t.fused() ? TensorRole::Other : t.parts.front().role);
                    }
    }

    void shapesFollowTheConfig() {
        const ModelConfig c = small_config();
        const ArchSpec& a = default_arch();
        using V = std::vector<int64_t>;
        QCOMPARE(stored_shape(spec_of(a, TensorRole::TokenEmbd), c), (V{512, 64}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::AttnQ), c), (V{64, 64}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::AttnK), c), (V{32, 64}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::AttnV), c), (V{32, 64}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::AttnO), c), (V{64, 64}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::FfnGate), c), (V{192, 64}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::FfnDown), c), (V{64, 192}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::AttnNorm), c), (V{64}));
        QCOMPARE(stored_shape(spec_of(a, TensorRole::Output), c), (V{512, 64}));
        QCOMPARE(spec_of(a, TensorRole::Output).need, Need::Untied);
        QCOMPARE(spec_of(a, TensorRole::AttnQ).need, Need::Always);
    }

    void fusedTensorMapsToItsRoles() {
        const ArchSpec& a = *find_arch("phi3");
        ModelConfig c = small_config();
        c.architecture = "phi3";

        const TensorMatch qkv = match_tensor(a, NameFormat::Hf, "model.layers.4.self_attn.qkv_proj.weight");
        QVERIFY(qkv.spec != nullptr && qkv.spec->fused());
        QCOMPARE(qkv.layer, 4);
        QCOMPARE(listed_role(qkv), TensorRole::Other);  // its roles are its parts
        QVERIFY(match_tensor(a, NameFormat::Gguf, "blk.4.attn_qkv.weight").spec == qkv.spec);
        QCOMPARE(tensor_name(*qkv.spec, NameFormat::Gguf, 9), std::string("blk.9.attn_qkv.weight"));
        QCOMPARE(stored_shape(*qkv.spec, c), (std::vector<int64_t>{128, 64}));
        const std::pair<TensorRole, RowRange> qkv_rows[] = {
            {TensorRole::AttnQ, {0, 64}}, {TensorRole::AttnK, {64, 32}}, {TensorRole::AttnV, {96, 32}}};
        for (size_t i = 0; i < 3; ++i) {
            QCOMPARE(qkv.spec->parts[i].role, qkv_rows[i].first);
            QCOMPARE(part_rows(*qkv.spec, i, c).begin, qkv_rows[i].second.begin);
            QCOMPARE(part_rows(*qkv.spec, i, c).count, qkv_rows[i].second.count);
        }
        QCOMPARE(part_rows(*qkv.spec, 3, c).count, int64_t{0});

        // GGUF's ffn_up holds gate and up in this row: the same name means a different tensor than in llama's.
        const TensorMatch up = match_tensor(a, NameFormat::Gguf, "blk.0.ffn_up.weight");
        QVERIFY(up.spec != nullptr && up.spec->fused());
        QCOMPARE(part_rows(*up.spec, 1, c).begin, int64_t{192});
        QCOMPARE(stored_shape(*up.spec, c), (std::vector<int64_t>{384, 64}));
        QCOMPARE(parse_gguf_name("blk.0.ffn_up.weight").role, TensorRole::FfnUp);

        // Fused roles have no tensor of their own to be named by.
        QVERIFY(find_tensor(a, TensorRole::AttnK) == nullptr);
        QCOMPARE(tensor_name(a, NameFormat::Hf, TensorRole::AttnK, 0), std::string());
        QCOMPARE(parse_tensor_name(a, NameFormat::Hf, "model.layers.0.self_attn.k_proj.weight").role,
                 TensorRole::Other);  // HF's Phi-3 has only the fused form
        QCOMPARE(parse_tensor_name(a, NameFormat::Hf, "model.layers.0.self_attn.o_proj.weight").role,
                 TensorRole::AttnO);
        QCOMPARE(tensor_name(*up.spec, NameFormat::Hf, 2), std::string("model.layers.2.mlp.gate_up_proj.weight"));
        QCOMPARE(part_view_name("blk.0.attn_qkv.weight", TensorRole::AttnK),
                 std::string("blk.0.attn_qkv.weight[attn_k]"));
        std::string_view stored;
        TensorRole part = TensorRole::Other;
        QVERIFY(split_part_view_name("blk.0.attn_qkv.weight[attn_k]", stored, part));
        QCOMPARE(stored, std::string_view("blk.0.attn_qkv.weight"));
        QCOMPARE(part, TensorRole::AttnK);
        for (const char* not_a_view :
             {"blk.0.attn_qkv.weight", "blk.0.x[attn_z]", "[attn_q]", "blk.0.x[attn_q", "a[other]"})
            QVERIFY2(!split_part_view_name(not_a_view, stored, part), not_a_view);
        // the parts' roles are what the transformer reads, in row order
        std::vector<TensorRole> block0;
        for (const RequiredRole& r : required_roles(a, c, false))
            if (r.layer == 0) block0.push_back(r.role);
        using R = TensorRole;
        QCOMPARE(block0, (std::vector<R>{R::AttnNorm, R::AttnQ, R::AttnK, R::AttnV, R::AttnO, R::FfnNorm, R::FfnGate,
                                         R::FfnUp, R::FfnDown}));
        // the 128k models' longrope factors (GGUF): recognised, never a role
        const TensorMatch longrope = match_tensor(a, NameFormat::Gguf, "rope_factors_long.weight");
        QVERIFY(longrope.spec != nullptr && longrope.spec->need == Need::UnsupportedRope);
        // separate q/k/v, which llama.cpp's loader takes too: read as their roles (GGUF only)
        QCOMPARE(parse_tensor_name(a, NameFormat::Gguf, "blk.2.attn_v.weight").role, TensorRole::AttnV);
        QCOMPARE(parse_tensor_name(a, NameFormat::Gguf, "blk.2.attn_v.weight").layer, 2);
        QCOMPARE(listed_role(longrope), TensorRole::Other);
        QVERIFY(match_tensor(a, NameFormat::Gguf, "rope_factors_short.weight").spec != nullptr);
    }

    void lookups() {
        QCOMPARE(arch_names_list(), std::string("llama, mistral, qwen2, qwen3, gemma2, gemma3 and phi3"));
        QCOMPARE(default_arch().name, std::string_view("llama"));
        QVERIFY(find_arch("mamba") == nullptr);
        QCOMPARE(arch_or_default("mamba").name, std::string_view("llama"));
        QCOMPARE(find_arch_hf_class("MistralForCausalLM")->name, std::string_view("mistral"));
        QCOMPARE(find_arch_hf_class("LlamaForCausalLM")->name, std::string_view("llama"));
        QCOMPARE(find_arch_hf_class("Qwen2ForCausalLM")->name, std::string_view("qwen2"));
        QCOMPARE(find_arch_hf_class("Qwen3ForCausalLM")->name, std::string_view("qwen3"));
        QCOMPARE(find_arch_gguf("qwen2")->name, std::string_view("qwen2"));
        QCOMPARE(find_arch_gguf("qwen3")->name, std::string_view("qwen3"));
        QCOMPARE(find_arch_hf_model_type("mistral")->name, std::string_view("mistral"));
        // llama.cpp writes Mistral as general.architecture llama; a file that says mistral is still Mistral.
        QCOMPARE(find_arch_gguf("llama")->name, std::string_view("llama"));
        QCOMPARE(find_arch_gguf("mistral")->name, std::string_view("mistral"));
        QVERIFY(find_arch_gguf("mamba") == nullptr);
        QCOMPARE(find_arch_gguf("gemma2")->name, std::string_view("gemma2"));
        // Gemma 3's text model: its own model_type, the row's name
        QCOMPARE(find_arch_hf_model_type("gemma3_text")->name, std::string_view("gemma3"));
        QCOMPARE(find_arch_hf_class("Gemma3ForCausalLM")->name, std::string_view("gemma3"));
        QCOMPARE(find_arch_hf_class("Phi3ForCausalLM")->name, std::string_view("phi3"));
        QCOMPARE(find_arch_hf_model_type("phi3")->name, std::string_view("phi3"));
        QCOMPARE(find_arch_gguf("phi3")->name, std::string_view("phi3"));
        QCOMPARE(arch_for_writing("phi3").name, std::string_view("phi3"));
        // Writers write each row in its own names (Mistral's GGUF name is llama's), what the table lacks in llama's.
        QCOMPARE(arch_for_writing("mistral").name, std::string_view("mistral"));
        QCOMPARE(arch_for_writing("mistral").gguf_name, std::string_view("llama"));
        QCOMPARE(arch_for_writing("qwen2").name, std::string_view("qwen2"));
        QCOMPARE(arch_for_writing("mamba").name, std::string_view("llama"));
        QCOMPARE(arch_name_keys().gguf_architecture, std::string_view("general.architecture"));
    }

    void ropeAndBlockFlags() {
        for (const ArchSpec& a : arch_table()) {
            const bool qwen = a.name == "qwen2" || a.name == "qwen3";
            const bool gemma = a.name == "gemma2" || a.name == "gemma3";
            QCOMPARE(a.hf_rope, RopeStyle::HalfSplit);
            // llama.cpp permutes llama's q/k to adjacent pairs; qwen's, gemma's and phi3's run NEOX rope on halves,
            // unpermuted
            QCOMPARE(a.gguf_rope, qwen || gemma || a.name == "phi3" ? RopeStyle::HalfSplit : RopeStyle::Interleaved);
            const BlockFlags& b = a.block;
            QCOMPARE(b.q_bias && b.k_bias && b.v_bias, a.name == "qwen2");
            QCOMPARE(b.qk_norm, a.name == "qwen3" || a.name == "gemma3");
            QCOMPARE(b.post_norms, gemma);
            QCOMPARE(b.norm, gemma ? NormKind::RmsOnePlus : NormKind::Rms);
            QCOMPARE(b.activation, gemma ? Activation::GeluTanh : Activation::Silu);
            QCOMPARE(b.attn_softcap, a.name == "gemma2");
            QCOMPARE(b.final_softcap, gemma);
            QCOMPARE(b.embd_scale, gemma ? EmbdScale::SqrtDim : EmbdScale::None);
            QCOMPARE(b.local_rope_unscaled, a.name == "gemma3");
            QCOMPARE(a.hf_activation, std::string_view(gemma ? "gelu_pytorch_tanh" : "silu"));
            // HF's Gemma norms are w of (1 + w); GGUF's always multiply (llama.cpp's converter adds the 1)
            QCOMPARE(norm_storage(a, NameFormat::Hf), gemma ? NormStorage::OffsetByOne : NormStorage::Multiplier);
            QCOMPARE(norm_storage(a, NameFormat::Gguf), NormStorage::Multiplier);
        }
        // Gemma's names: HF's post_attention_layernorm is the norm after the attention (llama's FFN input norm)
        const ArchSpec& g2 = *find_arch("gemma2");
        auto role_of = [](const ArchSpec& a, NameFormat f, const char* name) {
            const RoleAndLayer r = parse_tensor_name(a, f, name);
            return std::make_pair(r.role, r.layer);
        };
        QCOMPARE(role_of(g2, NameFormat::Hf, "model.layers.1.post_attention_layernorm.weight"),
                 std::make_pair(TensorRole::AttnPostNorm, 1));
        QCOMPARE(role_of(g2, NameFormat::Hf, "model.layers.1.pre_feedforward_layernorm.weight"),
                 std::make_pair(TensorRole::FfnNorm, 1));
        QCOMPARE(role_of(g2, NameFormat::Gguf, "blk.2.post_attention_norm.weight"),
                 std::make_pair(TensorRole::AttnPostNorm, 2));
        QCOMPARE(role_of(g2, NameFormat::Gguf, "blk.0.post_ffw_norm.weight"),
                 std::make_pair(TensorRole::FfnPostNorm, 0));
        QCOMPARE(role_of(*find_arch("gemma3"), NameFormat::Gguf, "blk.0.attn_q_norm.weight"),
                 std::make_pair(TensorRole::AttnQNorm, 0));
        QVERIFY(role_is_norm(TensorRole::FfnPostNorm) && role_is_norm(TensorRole::AttnKNorm));
        QVERIFY(!role_is_norm(TensorRole::AttnQBias) && !role_is_norm(TensorRole::TokenEmbd));
        // the window's blocks: Gemma 2 alternates from a windowed block 0, Gemma 3 has 5 windowed per global one
        ModelConfig c;
        c.sliding_window = 4;
        QVERIFY(c.layer_windowed(0) && c.layer_windowed(7));
        c.sliding_window_pattern = 2;
        QVERIFY(c.layer_windowed(0) && !c.layer_windowed(1) && c.layer_windowed(2));
        c.sliding_window_pattern = 6;
        QVERIFY(c.layer_windowed(4) && !c.layer_windowed(5) && c.layer_windowed(6));
        c.sliding_window_pattern = 1;
        QVERIFY(!c.layer_windowed(0));
        c.sliding_window = 0;
        c.sliding_window_pattern = 2;
        QVERIFY(!c.layer_windowed(0));
        QVERIFY(!find_arch("llama")->block.sliding_window);
        QVERIFY(find_arch("mistral")->block.sliding_window);
    }

    void roleNamesRoundTrip() {
        for (size_t r = 0; r < kTensorRoleCount; ++r) {
            const auto role = static_cast<TensorRole>(r);
            QCOMPARE(role_from_name(role_name(role)), role);
        }
        QCOMPARE(role_name(TensorRole::AttnO), std::string_view("attn_o"));
        QCOMPARE(role_from_name("attn_output"), TensorRole::Other);
        QCOMPARE(role_name(TensorRole::AttnQBias), std::string_view("attn_q_bias"));
    }

    // The new rows' tensors in both formats, and the keys only some configs carry.
    void qwenRowsAndOptionalKeys() {
        const ArchSpec& q2 = *find_arch("qwen2");
        auto role_of = [](const ArchSpec& a, NameFormat f, const char* name) {
            const RoleAndLayer r = parse_tensor_name(a, f, name);
            return std::make_pair(r.role, r.layer);
        };
        QCOMPARE(role_of(q2, NameFormat::Hf, "model.layers.3.self_attn.k_proj.bias"),
                 std::make_pair(TensorRole::AttnKBias, 3));
        QCOMPARE(role_of(q2, NameFormat::Gguf, "blk.1.attn_v.bias"), std::make_pair(TensorRole::AttnVBias, 1));
        const ArchSpec& q3 = *find_arch("qwen3");
        QCOMPARE(role_of(q3, NameFormat::Hf, "model.layers.0.self_attn.q_norm.weight"),
                 std::make_pair(TensorRole::AttnQNorm, 0));
        QCOMPARE(role_of(q3, NameFormat::Gguf, "blk.0.attn_k_norm.weight"), std::make_pair(TensorRole::AttnKNorm, 0));
        QCOMPARE(role_of(default_arch(), NameFormat::Gguf, "rope_freqs.weight"),
                 std::make_pair(TensorRole::RopeFreqs, -1));
        ModelConfig c;
        c.dim = 64;
        c.n_heads = 4;
        c.head_dim = 32;
        QCOMPARE(size_value(Size::QOut, c), int64_t(128));
        QCOMPARE(size_value(Size::HalfHead, c), int64_t(16));
        QVERIFY(hparam_written(HParam::HeadDim, c));
        QVERIFY(!hparam_written(HParam::RopeFactor, c));
        c.rope_scaling = RopeScaling::Linear;
        QVERIFY(hparam_written(HParam::RopeFactor, c) && !hparam_written(HParam::RopeLowFreqFactor, c));
        RopeScaling r = RopeScaling::None;
        QVERIFY(rope_scaling_from_name("llama3", NameFormat::Hf, r) && r == RopeScaling::Llama3);
        QVERIFY(!rope_scaling_from_name("yarn", NameFormat::Hf, r));
        QVERIFY(rope_scaling_name(RopeScaling::Llama3, NameFormat::Gguf).empty());
    }

    // convert_hf_to_gguf.py's rope_freqs for Llama 3.2 1B (head 64, theta 500000, factor 32, low 1, high 4,
    // original context 8192): 1 for the fast pairs, 32 for the slow ones, a blend between.
    void llama3Divisors() {
        ModelConfig c;
        c.dim = 2048;
        c.n_heads = 32;
        c.rope_theta = 500000.0;
        c.rope_scaling = RopeScaling::Llama3;
        c.rope_factor = 32.0;
        c.rope_original_context = 8192;
        const std::vector<float> d = llama3_rope_divisors(c);
        QCOMPARE(d.size(), size_t(32));
        QCOMPARE(d.front(), 1.0f);
        QCOMPARE(d.back(), 32.0f);
        int blended = 0;
        for (float x : d) blended += x > 1.0f && x < 32.0f;
        QVERIFY(blended > 0);
        for (size_t i = 1; i < d.size(); ++i) QVERIFY(d[i] >= d[i - 1]);
    }
};

QTEST_APPLESS_MAIN(TestArch)
#include "test_arch.moc"
