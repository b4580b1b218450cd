// make_output_probe (gkq/workflows.h): what one matrix's quantization error costs at the model's output, measured.
#include "gkq/workflows.h"

#include <algorithm>
#include <utility>

namespace gkq {

namespace {

// `base` with tensor `index` replaced by float32 values of the same shape; everything else is base's.
class OverlayWeights final : public Weights {
public:
    OverlayWeights(const Weights& base, size_t index, std::vector<float> values)
        : m_base(base), m_index(index), m_info(base.tensor_info(index)), m_values(std::move(values)) {
        m_info.dtype = DType::F32;
    }
    std::string_view kind() const override { return m_base.kind(); }
    const std::string& label() const override { return m_base.label(); }
    const ModelConfig& config() const override { return m_base.config(); }
    const Vocabulary& vocabulary() const override { return m_base.vocabulary(); }
    size_t n_tensors() const override { return m_base.n_tensors(); }
    const TensorInfo& tensor_info(size_t i) const override { return i == m_index ? m_info : m_base.tensor_info(i); }
    uint64_t stored_bytes(size_t i) const override {
        return i == m_index ? m_values.size() * sizeof(float) : m_base.stored_bytes(i);
    }
    Status whole() const override { return m_base.whole(); }
    Result<StoredTensor> read_stored(size_t i) const override {
        if (i != m_index) return m_base.read_stored(i);
        StoredTensor t;
        t.info = m_info;
        t.data = {reinterpret_cast<const uint8_t*>(m_values.data()), m_values.size() * sizeof(float)};
        return t;
    }
    void drop_resident(size_t i) const override {
        if (i != m_index) m_base.drop_resident(i);
    }
    Result<std::vector<float>> read_f32(size_t i) const override {
        if (i != m_index) return m_base.read_f32(i);
        return m_values;
    }
    Result<std::optional<StoredFactors>> read_factors(size_t i) const override {
        if (i != m_index) return m_base.read_factors(i);
        return std::optional<StoredFactors>{};
    }

private:
    const Weights& m_base;
    size_t m_index;
    TensorInfo m_info;
    std::vector<float> m_values;  // (rows, cols)
};

}  // namespace

Result<BpwOutputProbe> make_output_probe(const Weights& model, const OutputProbeRequest& request,
                                         const ProgressFn& progress) {
    auto tokenizer = choose_tokenizer(model.label(), model.vocabulary(), model.config().vocab_size, request.tokenizer);
    if (!tokenizer) return tokenizer.status();
    auto raw = read_eval_text(request.text_path);
    if (!raw) return raw.status();
    EvalText text = make_eval_text(*tokenizer, *raw);
    if (request.max_tokens > 0 && static_cast<int64_t>(text.tokens.size()) > request.max_tokens)
        text.tokens.resize(static_cast<size_t>(request.max_tokens));
    if (text.tokens.size() < 2)
        return error(StatusCode::InvalidArgument, request.text_path + ": the calibration text has fewer than 2 tokens");
    TransformerOptions topt;
    topt.n_threads = request.n_threads;
    std::shared_ptr<BaseLogits> kept;
    {  // the model itself is released before the first probe loads its copy
        auto base = Transformer::load(model, topt);
        if (!base) return base.status();
        auto windows =
            resolve_eval_options(request.windows, std::min(model.config().context_length, base->n_context()));
        if (!windows) return windows.status().with_context(request.text_path);
        auto logits = compute_base_logits(*base, text, *windows, 0, progress);
        if (!logits) return logits.status();
        kept = std::make_shared<BaseLogits>(std::move(logits).value());
    }
    const Weights* weights = &model;
    return BpwOutputProbe([weights, kept, topt](size_t index, std::vector<float> values) -> Result<double> {
        if (index >= weights->n_tensors()) return error(StatusCode::InvalidArgument, "output probe: no such tensor");
        const TensorInfo& info = weights->tensor_info(index);
        if (static_cast<int64_t>(values.size()) != info.n_elements())
            return error(StatusCode::InvalidArgument, "output probe: '" + info.name + "' takes " +
                                                          std::to_string(info.n_elements()) + " values, not " +
                                                          std::to_string(values.size()));
        OverlayWeights overlay(*weights, index, std::move(values));
        auto candidate = Transformer::load(overlay, topt);
        if (!candidate) return candidate.status();
        auto report = evaluate_compare_saved(*kept, *candidate);
        if (!report) return report.status();
        return report->compare.mean_kld;
    });
}

}  // namespace gkq
