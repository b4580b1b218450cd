// Synthetic checkpoints (see gkq/synth.h): the table of published shapes, the SVD-free construction of matrices
// with prescribed singular values, and the streaming writer driver.
#include "gkq/synth.h"

#include "formats/hf_config.h"
#include "formats/model_families.h"

#include "gkq/arch.h"
#include "gkq/atomic_file.h"
#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/model_writer.h"

#include <cblas.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <new>

namespace gkq {

namespace fs = std::filesystem;

// ---- the synthetic vocabulary ---------------------------------------------------------------------------------
// A model-shaped checkpoint needs a tokenizer of its vocabulary size for generate / eval / quantize to run: the
// llama SPM layout with <unk> <s> </s>, the 256 byte-fallback tokens <0x00>..<0xFF> (so every text encodes), then
// numbered words "\u2581w<id>" with descending scores. It is synthetic and says so in the files' metadata; it is not
// the real model's vocabulary.

namespace {

Vocabulary synthetic_vocabulary(int64_t n) {
    Vocabulary v;
    v.model = "llama";
    v.bos_id = 1;
    v.eos_id = 2;
    const auto add = [&](std::string piece, float score, int32_t type) {
        v.max_token_length = std::max(v.max_token_length, static_cast<int32_t>(piece.size()));
        v.tokens.push_back(std::move(piece));
        v.scores.push_back(score);
        v.token_types.push_back(type);
    };
    // GGUF token types as llama.cpp numbers them: 1 normal, 2 unknown, 3 control, 6 byte.
    add("<unk>", 0.0f, 2);
    add("<s>", 0.0f, 3);
    add("</s>", 0.0f, 3);
    for (int b = 0; b < 256 && static_cast<int64_t>(v.tokens.size()) < n; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        add(buf, 0.0f, 6);
    }
    while (static_cast<int64_t>(v.tokens.size()) < n) {
        const auto id = static_cast<int64_t>(v.tokens.size());
        add("\xe2\x96\x81w" + std::to_string(id), -static_cast<float>(id), 1);
    }
    return v;
}

// llama2.c's tokenizer.bin: int32 max_token_length, then per token f32 score, int32 length, the bytes.
std::string llama2c_tokenizer_bytes(const Vocabulary& v) {
    std::string out;
    const auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    put(&v.max_token_length, 4);
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        const auto len = static_cast<int32_t>(v.tokens[i].size());
        put(&v.scores[i], 4);
        put(&len, 4);
        put(v.tokens[i].data(), v.tokens[i].size());
    }
    return out;
}

}  // namespace

// ---- the table ----------------------------------------------------------------------------------------------------
// Values from each model's config.json on the Hugging Face hub (hf_id); `params` is the count those shapes give,
// as the model cards state it (test_synth checks the two agree).

namespace {

// A row with its family's names (HF class, model_type, the ArchSpec row) from the architecture table.
SynthModel row(std::string_view name, std::string_view hf_id, ModelFamily family, int64_t dim, int64_t ffn,
               int64_t layers, int64_t heads, int64_t kv, int64_t vocab, int64_t context, double theta, double eps,
               bool tied, bool bias, int64_t params) {
    const FamilyNames f = family_names(family);
    SynthModel m;
    m.name = name;
    m.hf_id = hf_id;
    m.hf_class = f.hf_class;
    m.model_type = f.model_type;
    m.architecture = f.arch ? f.arch->name : std::string_view();
    m.dim = dim;
    m.hidden_dim = ffn;
    m.n_layers = layers;
    m.n_heads = heads;
    m.n_kv_heads = kv;
    m.vocab_size = vocab;
    m.context_length = context;
    m.rope_theta = theta;
    m.norm_eps = eps;
    m.tied = tied;
    m.qkv_bias = bias;
    m.params = params;
    return m;
}

}  // namespace

const std::vector<SynthModel>& synth_models() {
    using F = ModelFamily;
    static const std::vector<SynthModel> rows = {
        // name, hf_id, family, dim, ffn, layers, heads, kv heads, vocab, context, rope theta, norm eps, tied,
        // q/k/v bias, params
        row("tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", F::Llama, 2048, 5632, 22, 32, 4, 32000, 2048,
            10000.0, 1e-5, false, false, 1100048384),
        row("llama-3.2-1b", "meta-llama/Llama-3.2-1B", F::Llama, 2048, 8192, 16, 32, 8, 128256, 131072, 500000.0, 1e-5,
            true, false, 1235814400),
        row("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", F::Qwen2, 896, 4864, 24, 14, 2, 151936, 32768, 1000000.0, 1e-6, true,
            true, 494032768),
        row("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B", F::Qwen2, 1536, 8960, 28, 12, 2, 151936, 131072, 1000000.0, 1e-6, true,
            true, 1543714304),
        row("llama-2-7b", "meta-llama/Llama-2-7b-hf", F::Llama, 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0, 1e-5,
            false, false, 6738415616),
        row("mistral-7b", "mistralai/Mistral-7B-v0.1", F::Mistral, 4096, 14336, 32, 32, 8, 32000, 32768, 10000.0, 1e-5,
            false, false, 7241732096),
        row("llama-3-8b", "meta-llama/Meta-Llama-3-8B", F::Llama, 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0, 1e-5,
            false, false, 8030261248),
    };
    return rows;
}

const SynthModel* find_synth_model(std::string_view name) {
    for (const SynthModel& m : synth_models())
        if (m.name == name) return &m;
    return nullptr;
}

std::string synth_model_names() {
    std::string out;
    for (const SynthModel& m : synth_models()) out += (out.empty() ? "" : ", ") + std::string(m.name);
    return out;
}

std::vector<TensorInfo> synth_tensors(const SynthModel& m, int64_t n_layers) {
    if (n_layers <= 0 || n_layers > m.n_layers) n_layers = m.n_layers;
    const ArchSpec& arch = arch_for_writing(m.architecture.empty() ? std::string_view("llama") : m.architecture);
    const int64_t head = m.dim / m.n_heads, q_out = m.n_heads * head, kv_out = m.n_kv_heads * head;
    std::vector<TensorInfo> out;
    auto add = [&](TensorRole role, int32_t layer, std::vector<int64_t> shape) {
        out.push_back({tensor_name(arch, NameFormat::Hf, role, layer), role, layer, std::move(shape), DType::F32});
    };
    add(TensorRole::TokenEmbd, -1, {m.vocab_size, m.dim});
    for (int32_t l = 0; l < n_layers; ++l) {
        add(TensorRole::AttnQ, l, {q_out, m.dim});
        add(TensorRole::AttnK, l, {kv_out, m.dim});
        add(TensorRole::AttnV, l, {kv_out, m.dim});
        if (m.qkv_bias) {  // beside each projection's weight (qwen2)
            add(TensorRole::AttnQBias, l, {q_out});
            add(TensorRole::AttnKBias, l, {kv_out});
            add(TensorRole::AttnVBias, l, {kv_out});
        }
        add(TensorRole::AttnO, l, {m.dim, q_out});
        add(TensorRole::FfnGate, l, {m.hidden_dim, m.dim});
        add(TensorRole::FfnUp, l, {m.hidden_dim, m.dim});
        add(TensorRole::FfnDown, l, {m.dim, m.hidden_dim});
        add(TensorRole::AttnNorm, l, {m.dim});
        add(TensorRole::FfnNorm, l, {m.dim});
    }
    add(TensorRole::OutputNorm, -1, {m.dim});
    if (!m.tied) add(TensorRole::Output, -1, {m.vocab_size, m.dim});
    return out;
}

int64_t synth_param_count(const SynthModel& m, int64_t n_layers) {
    int64_t n = 0;
    for (const TensorInfo& t : synth_tensors(m, n_layers)) n += t.n_elements();
    return n;
}

// ---- matrices ---------------------------------------------------------------------------------------------------

namespace {

// splitmix64 and Box-Muller: portable, so a seed gives the same bytes with any standard library.
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    double uniform_open() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
    double gaussian() {
        constexpr double kTwoPi = 6.283185307179586476925;
        const double r = std::sqrt(-2.0 * std::log(uniform_open()));
        return r * std::cos(kTwoPi * uniform_open());
    }
    uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<__uint128_t>(next()) * n) >> 64); }
};

// config.json for a row the architecture table has none for: the model's own class and type, its published keys,
// so the file says what the shapes are (gkq's readers do not run it).
std::string foreign_config_json(const SynthModel& m, const ModelConfig& config, DType dtype) {
    // llama's keys carry every value of these rows; the family's own class and model_type replace llama's
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(hf_config_json(config, dtype));
    const ArchNameKeys& keys = arch_name_keys();
    j[std::string(keys.hf_architectures)] = nlohmann::ordered_json::array({std::string(m.hf_class)});
    j[std::string(keys.hf_model_type)] = std::string(m.model_type);
    return j.dump(2) + "\n";
}

uint64_t mix_seed(uint64_t seed, uint64_t index) {
    Rng r{seed ^ (index * 0xD1B54A32D192ED03ULL)};
    return r.next();
}

// Row-major (b, b) orthogonal: modified Gram-Schmidt (twice, in double) of a Gaussian block.
void random_orthogonal(int64_t b, Rng& rng, std::vector<double>& work, std::vector<float>& q) {
    work.resize(static_cast<size_t>(b * b));
    for (double& x : work) x = rng.gaussian();
    for (int64_t i = 0; i < b; ++i) {  // row i orthogonalized against rows < i
        double* qi = &work[static_cast<size_t>(i * b)];
        for (int pass = 0; pass < 2; ++pass)
            for (int64_t j = 0; j < i; ++j) {
                const double* qj = &work[static_cast<size_t>(j * b)];
                double d = 0.0;
                for (int64_t c = 0; c < b; ++c) d += qi[c] * qj[c];
                for (int64_t c = 0; c < b; ++c) qi[c] -= d * qj[c];
            }
        double norm = 0.0;
        for (int64_t c = 0; c < b; ++c) norm += qi[c] * qi[c];
        norm = std::sqrt(norm);
        for (int64_t c = 0; c < b; ++c) qi[c] /= norm;  // a Gaussian row is never in the span of the others (p = 0)
    }
    q.assign(work.begin(), work.end());
}

void random_permutation(int64_t n, Rng& rng, std::vector<int64_t>& perm) {
    perm.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
    for (int64_t i = n - 1; i > 0; --i)
        std::swap(perm[static_cast<size_t>(i)], perm[rng.below(static_cast<uint64_t>(i + 1))]);
}

}  // namespace

std::vector<double> synth_singular_values(int64_t rows, int64_t cols, const SynthMatrixOptions& options) {
    const int64_t n = std::min(rows, cols);
    const double beta = 1.0 / (2.0 * (options.alpha - 1.0));
    std::vector<double> s(static_cast<size_t>(std::max<int64_t>(n, 0)));
    double energy = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        s[static_cast<size_t>(i)] = std::pow(static_cast<double>(i + 1), -beta);
        energy += s[static_cast<size_t>(i)] * s[static_cast<size_t>(i)];
    }
    const double target = options.element_std * std::sqrt(static_cast<double>(rows) * static_cast<double>(cols));
    const double c = energy > 0.0 ? target / std::sqrt(energy) : 0.0;
    for (double& x : s) x *= c;
    return s;
}

Status synth_matrix(float* out, int64_t rows, int64_t cols, const SynthMatrixOptions& options) {
    if (rows <= 0 || cols <= 0 || out == nullptr)
        return error(StatusCode::InvalidArgument,
                     "synth_matrix: empty matrix " + std::to_string(rows) + " x " + std::to_string(cols));
    if (!(options.alpha > 1.0) || !(options.element_std > 0.0) || !std::isfinite(options.alpha) ||
        !std::isfinite(options.element_std))
        return error(StatusCode::InvalidArgument, "synth_matrix: alpha must be > 1 and element_std > 0");
    if (std::max(rows, cols) * kSynthTile > INT32_MAX)
        return error(StatusCode::Unsupported, "synth_matrix: " + std::to_string(rows) + " x " + std::to_string(cols) +
                                                  " exceeds the 32-bit BLAS index range");
    const int64_t n = std::min(rows, cols);
    try {
        const std::vector<double> s = synth_singular_values(rows, cols, options);
        std::fill(out, out + rows * cols, 0.0f);
        for (int64_t i = 0; i < n; ++i) out[i * cols + i] = static_cast<float>(s[static_cast<size_t>(i)]);

        Rng rng{options.seed};
        std::vector<int64_t> perm;
        std::vector<double> work;
        std::vector<float> q, g, h;
        // S V^T: each round multiplies the n nonzero rows on the right by P B (columns permuted into blocks, each
        // block times its orthogonal matrix); rows >= n of S are zero and stay zero.
        g.resize(static_cast<size_t>(std::max(rows, cols) * kSynthTile));
        h.resize(g.size());
        for (int round = 0; round < kSynthRounds; ++round) {
            random_permutation(cols, rng, perm);
            for (int64_t j0 = 0; j0 < cols; j0 += kSynthTile) {
                const int64_t b = std::min(kSynthTile, cols - j0);
                const int64_t* idx = &perm[static_cast<size_t>(j0)];
                random_orthogonal(b, rng, work, q);
                for (int64_t r = 0; r < n; ++r)
                    for (int64_t c = 0; c < b; ++c) g[static_cast<size_t>(r * b + c)] = out[r * cols + idx[c]];
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(b),
                            static_cast<int>(b), 1.0f, g.data(), static_cast<int>(b), q.data(), static_cast<int>(b),
                            0.0f, h.data(), static_cast<int>(b));
                for (int64_t r = 0; r < n; ++r)
                    for (int64_t c = 0; c < b; ++c) out[r * cols + idx[c]] = h[static_cast<size_t>(r * b + c)];
            }
        }
        // U (S V^T): each round multiplies on the left by B P (rows permuted into blocks).
        for (int round = 0; round < kSynthRounds; ++round) {
            random_permutation(rows, rng, perm);
            for (int64_t i0 = 0; i0 < rows; i0 += kSynthTile) {
                const int64_t b = std::min(kSynthTile, rows - i0);
                const int64_t* idx = &perm[static_cast<size_t>(i0)];
                random_orthogonal(b, rng, work, q);
                for (int64_t r = 0; r < b; ++r)
                    std::copy(out + idx[r] * cols, out + (idx[r] + 1) * cols, g.begin() + r * cols);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(b), static_cast<int>(cols),
                            static_cast<int>(b), 1.0f, q.data(), static_cast<int>(b), g.data(), static_cast<int>(cols),
                            0.0f, h.data(), static_cast<int>(cols));
                for (int64_t r = 0; r < b; ++r)
                    std::copy(h.begin() + r * cols, h.begin() + (r + 1) * cols, out + idx[r] * cols);
            }
        }
    } catch (const std::bad_alloc&) {
        return error(StatusCode::InvalidArgument, "synth_matrix: out of memory for a " + std::to_string(rows) + " x " +
                                                      std::to_string(cols) + " matrix's working blocks");
    }
    return Status::ok();
}

// ---- checkpoints --------------------------------------------------------------------------------------------------

Result<SynthReport> synth_model(const SynthModel& m, const std::string& dir, const SynthOptions& options,
                                const ProgressFn& progress) {
    if (options.dtype != DType::F32 && options.dtype != DType::F16 && options.dtype != DType::BF16)
        return error(StatusCode::InvalidArgument,
                     "synth: --dtype must be bf16, f16 or f32, not " + std::string(dtype_name(options.dtype)));
    if (options.n_layers > m.n_layers)
        return error(StatusCode::InvalidArgument, "synth: " + std::string(m.name) + " has " +
                                                      std::to_string(m.n_layers) + " layers, not " +
                                                      std::to_string(options.n_layers));
    if (options.format == SynthFormat::Gguf && m.architecture.empty())
        return error(StatusCode::Unsupported, "synth: " + std::string(m.name) + " (" + std::string(m.model_type) +
                                                  ") has no row in gkq's architecture table, so no GGUF names; "
                                                  "write it with --format hf");
    const SynthMatrixOptions probe{options.alpha, options.element_std, 0};
    if (!(probe.alpha > 1.0) || !std::isfinite(probe.alpha))
        return error(StatusCode::InvalidArgument, "synth: --alpha must be a number > 1");

    const int64_t n_layers = options.n_layers > 0 ? options.n_layers : m.n_layers;
    ModelConfig config;
    config.architecture = m.architecture.empty() ? "llama" : std::string(m.architecture);
    config.dim = m.dim;
    config.hidden_dim = m.hidden_dim;
    config.n_layers = n_layers;
    config.n_heads = m.n_heads;
    config.n_kv_heads = m.n_kv_heads;
    config.vocab_size = m.vocab_size;
    config.context_length = m.context_length;
    config.rope_theta = m.rope_theta;
    config.norm_eps = m.norm_eps;
    config.shared_classifier = m.tied;
    // Random weights have no rotary layout to preserve: declare the target format's own, so nothing is reordered.
    config.rope_style = options.format == SynthFormat::Hf ? RopeStyle::HalfSplit : RopeStyle::Interleaved;

    const std::vector<TensorInfo> specs = synth_tensors(m, n_layers);
    uint64_t total_elems = 0;
    for (const TensorInfo& t : specs) {
        uint64_t e = 1;
        for (int64_t d : t.shape) e *= static_cast<uint64_t>(d);
        total_elems += e;
    }

    std::error_code ec;
    const bool created = !fs::exists(dir, ec);
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
        return error(StatusCode::IoError, dir + ": cannot create the folder" + (ec ? " (" + ec.message() + ")" : ""));

    WriteOptions wo;
    wo.dtype = options.dtype;
    wo.max_shard_bytes = options.max_shard_bytes;
    auto meta = [&](const std::string& key, const std::string& value) {
        wo.extra_metadata.entries.emplace_back(key, MetaValue::of_string(value));
    };
    const std::string prefix = options.format == SynthFormat::Gguf ? "gkq.synth." : "gkq_synth_";
    meta(prefix + "like", std::string(m.name));
    meta(prefix + "seed", std::to_string(options.seed));
    char alpha_text[32];
    std::snprintf(alpha_text, sizeof alpha_text, "%g", options.alpha);
    meta(prefix + "alpha", alpha_text);
    uint64_t done_elems = 0;
    bool cancelled = false;
    std::vector<WriteTensor> tensors;
    tensors.reserve(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        const TensorInfo& t = specs[i];
        WriteTensor w;
        static_cast<TensorInfo&>(w) = t;
        const uint64_t tensor_seed = mix_seed(options.seed, i);
        w.fill = [&, tensor_seed, i](float* out) -> Status {
            const TensorInfo& st = specs[i];
            if (!report_progress(progress, total_elems ? static_cast<double>(done_elems) / total_elems : 0.0,
                                 st.name)) {
                cancelled = true;
                return error(StatusCode::Cancelled, "cancelled");
            }
            uint64_t e = 1;
            for (int64_t d : st.shape) e *= static_cast<uint64_t>(d);
            Status s = Status::ok();
            if (st.shape.size() == 2) {
                s = synth_matrix(out, st.shape[0], st.shape[1], {options.alpha, options.element_std, tensor_seed});
            } else if (st.role == TensorRole::AttnQBias || st.role == TensorRole::AttnKBias ||
                       st.role == TensorRole::AttnVBias) {
                Rng rng{tensor_seed};
                for (uint64_t k = 0; k < e; ++k) out[k] = static_cast<float>(options.element_std * rng.gaussian());
            } else {  // norm weights
                std::fill(out, out + e, 1.0f);
            }
            done_elems += e;
            return s;
        };
        tensors.push_back(std::move(w));
    }

    SynthReport report;
    report.n_tensors = static_cast<int64_t>(specs.size());
    report.n_params = static_cast<int64_t>(total_elems);
    report.n_layers = n_layers;
    Status st = Status::ok();
    if (options.format == SynthFormat::Gguf) {
        const std::string path = (fs::path(dir) / "model.gguf").string();
        st = write_gguf(path, config, tensors, synthetic_vocabulary(m.vocab_size), wo);
        if (st) report.files.push_back(path);
    } else {
        if (m.architecture.empty()) wo.config_json = foreign_config_json(m, config, options.dtype);
        const std::string path = (fs::path(dir) / "model.safetensors").string();
        // The tokenizer first (small), so a failed or cancelled tensor write can take it away again.
        const std::string tok = (fs::path(dir) / "tokenizer.bin").string();
        st = write_file_atomic(tok, llama2c_tokenizer_bytes(synthetic_vocabulary(m.vocab_size)));
        if (st) {
            st = write_safetensors(path, config, tensors, wo);
            if (!st) fs::remove(tok, ec);
        }
        if (st) {
            const fs::path index = fs::path(dir) / "model.safetensors.index.json";
            report.files.push_back(fs::exists(index) ? index.string() : path);
            report.files.push_back((fs::path(dir) / "config.json").string());
            report.files.push_back(tok);
        }
    }
    if (!st) {
        if (created)
            fs::remove(dir, ec);  // the folder this call made, empty again (the writers removed their temporaries)
        return cancelled ? error(StatusCode::Cancelled, "synth: cancelled") : st;
    }
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string ext = e.path().extension().string();
        if (ext == ".safetensors" || ext == ".gguf") report.bytes += fs::file_size(e.path(), ec);
    }
    report_progress(progress, 1.0, "done");
    return report;
}

}  // namespace gkq
