// compute_imatrix: llama-imatrix's collection (tools/imatrix/imatrix.cpp, IMatrixCollector::collect_imatrix and
// compute_imatrix) over gkq's forward pass, through the transformer's matrix input observer; and the importance
// llama-quantize derives from a file (tools/quantize/quantize.cpp, load_imatrix).
#include "gkq/imatrix.h"

#include "gkq/naming.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"

#include "common/mapped_file.h"
#include "common/sha256.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace gkq {

const ImatrixEntry* Imatrix::find(std::string_view name) const {
    auto it = std::lower_bound(entries.begin(), entries.end(), name,
                               [](const ImatrixEntry& e, std::string_view n) { return e.name < n; });
    return it != entries.end() && it->name == name ? &*it : nullptr;
}

std::string imatrix_tensor_name(const ArchSpec& arch, TensorRole role, int32_t layer) {
    if (const TensorSpec* fused = find_fused_tensor(arch, role); fused != nullptr && layer >= 0)
        return tensor_name(*fused, NameFormat::Gguf, layer);
    switch (role) {
        case TensorRole::AttnQ:
        case TensorRole::AttnK:
        case TensorRole::AttnV:
        case TensorRole::AttnO:
        case TensorRole::FfnGate:
        case TensorRole::FfnUp:
        case TensorRole::FfnDown: return layer >= 0 ? gguf_name(role, layer) : std::string();
        case TensorRole::Output: return gguf_name(role, -1);
        default: return {};
    }
}

namespace {

// One tensor's running sums, in float32 as llama-imatrix keeps them (Stats::values).
struct Accumulator {
    int64_t n_cols = 0;
    std::vector<float> sums;  // (n_cols)
    int64_t count = 0;
};

// Removes the observer however compute_imatrix returns.
struct ObserverGuard {
    Transformer& t;
    ~ObserverGuard() { t.set_matrix_input_observer({}); }
};

}  // namespace

const GramEntry* GramSet::find(std::string_view name) const {
    auto it = std::lower_bound(entries.begin(), entries.end(), name,
                               [](const GramEntry& e, std::string_view n) { return e.name < n; });
    return it != entries.end() && it->name == name ? &*it : nullptr;
}

std::string gram_input_name(const ArchSpec& arch, TensorRole role, int32_t layer) {
    switch (role) {
        case TensorRole::AttnK:
        case TensorRole::AttnV: return imatrix_tensor_name(arch, TensorRole::AttnQ, layer);
        case TensorRole::FfnUp: return imatrix_tensor_name(arch, TensorRole::FfnGate, layer);
        default: return imatrix_tensor_name(arch, role, layer);
    }
}

uint64_t gram_collect_bytes(const GramSet& set) {
    uint64_t b = 0;
    for (const GramEntry& e : set.entries) b += static_cast<uint64_t>(e.n_cols) * static_cast<uint64_t>(e.n_cols) * 8;
    return b;
}

Result<Imatrix> compute_imatrix(Transformer& transformer, const std::vector<int32_t>& tokens_in, int32_t bos,
                                const ImatrixOptions& options, const ProgressFn& progress, GramSet* gram) {
    const int64_t n_ctx = options.n_ctx;
    if (n_ctx < 1) return error(StatusCode::InvalidArgument, "imatrix: the context must be at least 1 token");
    if (n_ctx > transformer.n_context())
        return error(StatusCode::InvalidArgument, "imatrix: a context of " + std::to_string(n_ctx) +
                                                      " tokens exceeds the model's " +
                                                      std::to_string(transformer.n_context()) + " positions");
    const auto n_tokens = static_cast<int64_t>(tokens_in.size());
    if (n_tokens < 2 * n_ctx)
        return error(StatusCode::InvalidArgument, "imatrix: the text tokenizes to only " + std::to_string(n_tokens) +
                                                      " tokens; a context of " + std::to_string(n_ctx) +
                                                      " tokens needs at least " + std::to_string(2 * n_ctx));
    const int64_t n_chunk_max = n_tokens / n_ctx;
    const int64_t n_chunk = options.n_chunks < 0 ? n_chunk_max : std::min(options.n_chunks, n_chunk_max);
    if (n_chunk < 1) return error(StatusCode::InvalidArgument, "imatrix: --chunks must be at least 1");

    std::map<std::string, Accumulator> stats;  // ordered by name: the files' order
    std::map<std::string, GramEntry> grams;    // upper triangles while collecting
    std::string observe_error;
    const ArchSpec& arch = arch_or_default(transformer.config().architecture);
    transformer.set_matrix_input_observer([&](TensorRole role, int32_t layer, const float* x, int64_t n, int64_t cols) {
        if (role == TensorRole::Output && !options.process_output) return;
        // a fused tensor is one product to llama-imatrix: its first part's input, counted once
        if (const TensorSpec* fused = find_fused_tensor(arch, role);
            fused != nullptr && fused->parts.front().role != role)
            return;
        const std::string name = imatrix_tensor_name(arch, role, layer);
        if (name.empty()) return;  // a tied classifier, as llama-imatrix (its src0 is token_embd)
        Accumulator& a = stats[name];
        if (a.sums.empty()) {
            a.n_cols = cols;
            a.sums.assign(static_cast<size_t>(cols), 0.0f);
        } else if (a.n_cols != cols) {
            observe_error =
                name + ": inconsistent input size (" + std::to_string(a.n_cols) + " vs " + std::to_string(cols) + ")";
            return;
        }
        float* acc = a.sums.data();
        for (int64_t t = 0; t < n; ++t) {
            const float* row = x + t * cols;
            for (int64_t j = 0; j < cols; ++j) acc[j] += row[j] * row[j];
        }
        a.count += n;
        // Gram matrices: once per distinct input (attn_k / attn_v / ffn_up read their group's, already counted).
        if (gram == nullptr || role == TensorRole::AttnK || role == TensorRole::AttnV || role == TensorRole::FfnUp)
            return;
        GramEntry& g = grams[name];
        if (g.gram.empty()) {
            g.name = name;
            g.n_cols = cols;
            g.gram.assign(static_cast<size_t>(cols * cols), 0.0);
        }
        double* G = g.gram.data();
        std::vector<double> xd(static_cast<size_t>(cols));
        for (int64_t t = 0; t < n; ++t) {
            const float* row = x + t * cols;
            for (int64_t j = 0; j < cols; ++j) xd[static_cast<size_t>(j)] = row[j];
            for (int64_t i = 0; i < cols; ++i) {
                const double xi = xd[static_cast<size_t>(i)];
                if (xi == 0.0) continue;
                double* gi = G + i * cols;
                for (int64_t j = i; j < cols; ++j) gi[j] += xi * xd[static_cast<size_t>(j)];
            }
        }
        g.count += n;
    });
    ObserverGuard guard{transformer};

    std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
    std::vector<float> all_logits;
    if (options.process_output)
        all_logits.resize(static_cast<size_t>(n_ctx) * static_cast<size_t>(transformer.config().vocab_size));
    for (int64_t c = 0; c < n_chunk; ++c) {
        std::copy(tokens_in.begin() + c * n_ctx, tokens_in.begin() + (c + 1) * n_ctx, chunk.begin());
        if (bos >= 0) chunk[0] = bos;
        auto run =
            transformer.forward_batch(chunk.data(), n_ctx, 0, options.process_output ? all_logits.data() : nullptr);
        if (!run) return run.status();
        if (!observe_error.empty()) return error(StatusCode::Internal, "imatrix: " + observe_error);
        for (const auto& [name, a] : stats) {
            for (float v : a.sums)
                if (!std::isfinite(v)) {
                    return error(StatusCode::InvalidArgument,
                                 "imatrix: non-finite values in " + name + " after chunk " + std::to_string(c + 1));
                }
        }
        if (!report_progress(progress, static_cast<double>(c + 1) / static_cast<double>(n_chunk),
                             "chunk " + std::to_string(c + 1) + "/" + std::to_string(n_chunk)))
            return error(StatusCode::Cancelled, "imatrix: cancelled");
    }

    Imatrix m;
    m.format = ImatrixFormat::Gguf;
    if (!options.dataset.empty()) m.datasets.push_back(options.dataset);
    m.chunk_size = static_cast<int32_t>(n_ctx);
    int64_t max_count = 0;
    for (auto& [name, a] : stats) {
        ImatrixEntry e;
        e.name = name;
        e.n_cols = a.n_cols;
        e.sums = std::move(a.sums);
        e.counts = {a.count};
        max_count = std::max(max_count, a.count);
        m.entries.push_back(std::move(e));
    }
    m.chunk_count = static_cast<int32_t>(max_count / n_ctx);  // llama-imatrix's m_last_chunk
    if (gram != nullptr) {
        gram->entries.clear();
        gram->datasets = m.datasets;
        gram->chunk_size = m.chunk_size;
        gram->chunk_count = static_cast<int32_t>(n_chunk);
        for (auto& [name, g] : grams) {
            const int64_t c = g.n_cols;
            for (int64_t i = 0; i < c; ++i)
                for (int64_t j = 0; j < i; ++j)
                    g.gram[static_cast<size_t>(i * c + j)] = g.gram[static_cast<size_t>(j * c + i)];
            for (double v : g.gram)
                if (!std::isfinite(v))
                    return error(StatusCode::InvalidArgument, "imatrix: non-finite Gram matrix values in " + name);
            gram->entries.push_back(std::move(g));
        }
    }
    return m;
}

Result<std::vector<float>> imatrix_importance(const Imatrix& imatrix, std::string_view name, int64_t n_cols) {
    const ImatrixEntry* e = imatrix.find(name);
    if (e == nullptr) return error(StatusCode::NotFound, "imatrix: no entry for " + std::string(name));
    if (e->n_cols != n_cols || e->sums.size() != static_cast<size_t>(n_cols) || e->counts.size() != 1)
        return error(StatusCode::InvalidArgument,
                     "imatrix: " + std::string(name) + " has " + std::to_string(e->sums.size()) + " values (" +
                         std::to_string(e->counts.size()) + " matrices of " + std::to_string(e->n_cols) +
                         " columns) but the model's tensor has " + std::to_string(n_cols) + " columns");
    std::vector<float> w(static_cast<size_t>(n_cols));
    if (imatrix.format == ImatrixFormat::Gguf) {
        const auto count = static_cast<float>(e->counts[0]);
        for (size_t i = 0; i < w.size(); ++i) w[i] = count > 0.0f ? e->sums[i] / count : 1.0f;
    } else {
        const int64_t ncall = e->counts[0];
        for (size_t i = 0; i < w.size(); ++i) w[i] = ncall > 0 ? e->sums[i] / static_cast<float>(ncall) : e->sums[i];
    }
    return w;
}

Result<ModelImportance> load_model_importance(const std::string& path, const Weights& weights) {
    const ArchSpec& arch = arch_or_default(weights.config().architecture);
    auto m = read_imatrix(path);
    if (!m) return m.status();
    auto file = MappedFile::open(path);
    if (!file) return file.status();
    ModelImportance mi;
    mi.sha256 = sha256_hex(file->data(), static_cast<size_t>(file->size()));
    const size_t slash = path.find_last_of('/');
    mi.file_name = slash == std::string::npos ? path : path.substr(slash + 1);
    mi.command = "--imatrix " + mi.file_name + " sha256:" + mi.sha256;
    mi.by_tensor.resize(weights.n_tensors());
    std::vector<uint8_t> used(m->entries.size(), 0);
    for (size_t i = 0; i < weights.n_tensors(); ++i) {
        const TensorInfo& t = weights.tensor_info(i);
        if (t.n_dims() < 2 || !role_is_matrix(t.role)) continue;
        const std::string name = imatrix_tensor_name(arch, t.role, t.layer);
        if (name.empty()) continue;
        const ImatrixEntry* e = m->find(name);
        if (e == nullptr) {
            if (t.role != TensorRole::Output) mi.without.push_back(t.name);
            continue;
        }
        auto w = imatrix_importance(*m, name, t.cols());
        if (!w)
            return error(w.status().code(),
                         path + ": " + w.status().message() + " ('" + t.name + "' of " + weights.label() + ")");
        used[static_cast<size_t>(e - m->entries.data())] = 1;
        mi.by_tensor[i] = std::move(w).value();
        ++mi.n_weighted;
    }
    for (size_t k = 0; k < m->entries.size(); ++k)
        if (!used[k])
            return error(StatusCode::InvalidArgument, path + ": entry " + m->entries[k].name + " names no matrix of " +
                                                          weights.label() + " (an imatrix of another model?)");
    mi.metadata.set("quantize.imatrix.file", MetaValue::of_string(mi.file_name));
    if (!m->datasets.empty()) mi.metadata.set("quantize.imatrix.dataset", MetaValue::of_string(m->datasets.front()));
    mi.metadata.set("quantize.imatrix.entries_count", MetaValue::of_int(static_cast<int64_t>(m->entries.size())));
    if (m->chunk_count > 0) mi.metadata.set("quantize.imatrix.chunks_count", MetaValue::of_int(m->chunk_count));
    mi.metadata.set("gkq.imatrix.sha256", MetaValue::of_string(mi.sha256));
    return mi;
}

}  // namespace gkq

namespace gkq {

Result<ModelGram> load_model_gram(const std::string& path, const Weights& weights) {
    const ArchSpec& arch = arch_or_default(weights.config().architecture);
    auto set = read_gram(path);
    if (!set) return set.status();
    auto file = MappedFile::open(path);
    if (!file) return file.status();
    ModelGram mg;
    mg.sha256 = sha256_hex(file->data(), static_cast<size_t>(file->size()));
    const size_t slash = path.find_last_of('/');
    mg.command = "--gram " + (slash == std::string::npos ? path : path.substr(slash + 1)) + " sha256:" + mg.sha256;
    mg.by_tensor.resize(weights.n_tensors());
    std::vector<std::shared_ptr<const std::vector<double>>> shared(set->entries.size());
    std::vector<uint8_t> used(set->entries.size(), 0);
    for (size_t i = 0; i < weights.n_tensors(); ++i) {
        const TensorInfo& t = weights.tensor_info(i);
        if (t.n_dims() < 2 || !role_is_matrix(t.role)) continue;
        const std::string name = gram_input_name(arch, t.role, t.layer);
        if (name.empty()) continue;
        const GramEntry* e = set->find(name);
        if (e == nullptr) continue;
        if (e->n_cols != t.cols())
            return error(StatusCode::InvalidArgument, path + ": entry " + name + " has " + std::to_string(e->n_cols) +
                                                          " columns but '" + t.name + "' of " + weights.label() +
                                                          " has " + std::to_string(t.cols()));
        const auto k = static_cast<size_t>(e - set->entries.data());
        if (!shared[k]) shared[k] = std::make_shared<const std::vector<double>>(e->gram);
        used[k] = 1;
        mg.by_tensor[i] = shared[k];
        ++mg.n_matrices;
    }
    for (size_t k = 0; k < set->entries.size(); ++k)
        if (!used[k])
            return error(StatusCode::InvalidArgument, path + ": entry " + set->entries[k].name +
                                                          " names no matrix input of " + weights.label() +
                                                          " (a Gram file of another model?)");
    return mg;
}

}  // namespace gkq
