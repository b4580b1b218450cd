// quantize --target-bpw: every projection measured with each k-quant (and Q8_0), then a greedy choice under the
// budget by error reduction per bit (gkq/quantize.h: plan_target_bpw).
#include "codec/llama_mix.h"
#include "gkq/codec.h"
#include "gkq/quantize.h"
#include "gkq/type_traits.h"
#include "gkq/weights.h"
#include "knot/parallel.h"

#include <algorithm>
#include <cmath>

namespace gkq {

namespace {

// The k-quants of llama-quantize's mixtures, Q8_0, and IQ4_NL (4.5 bits per weight in legacy-size blocks with a
// non-linear code book: for rows the 256-value blocks do not divide, the one 4.5-bit type better than Q4_0).
constexpr DType kSearched[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::IQ4_NL,
                               DType::Q5_K, DType::Q6_K, DType::Q8_0};

double type_bits(DType t) {
    const TypeTraits& tr = type_traits(t);
    return 8.0 * static_cast<double>(tr.block_bytes) / static_cast<double>(tr.block_elements);
}

// The types a matrix of rows of `cols` values is measured with: after the fallback, each once, cheapest first.
// `tied`: the model has no output matrix, so token_embd is the output too and takes its type, as llama-quantize's
// llama_tensor_get_type gives it. `all`: token_embd and output are searched like the projections (their effect on the
// output is measured by the probe, so their errors compare with the projections').
std::vector<DType> candidate_types(TensorRole role, int64_t cols, bool tied, bool all) {
    if (tied && role == TensorRole::TokenEmbd) role = TensorRole::Output;
    std::vector<DType> out;
    auto add = [&](DType wanted) {
        const DType t = llama_fallback_type(wanted, cols);
        if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    };
    if (all)
        for (DType t : kSearched) add(t);
    else if (role == TensorRole::TokenEmbd)
        add(DType::Q4_K);
    else if (role == TensorRole::Output)
        add(cols % type_traits(DType::Q6_K).block_elements == 0 ? DType::Q6_K : DType::Q8_0);
    else
        for (DType t : kSearched) add(t);
    std::stable_sort(out.begin(), out.end(), [](DType a, DType b) { return type_bits(a) < type_bits(b); });
    return out;
}

// The type of a measured candidate of a searched matrix (one of candidate_types()).
DType candidate_type(const BpwCandidate& c, TensorRole role, int64_t cols, bool tied) {
    for (DType t : candidate_types(role, cols, tied, true))
        if (t == DType::F16 ? c.method == Method::F16 : block_method_for(t) == c.method) return t;
    return DType::F16;  // not reached: every candidate was measured from that list
}

// The candidate of type t for w: its bits per weight and its error; `decoded` (optional) receives its values.
Result<BpwCandidate> measure(const TensorInfo& info, const std::vector<float>& w, const float* importance, DType t,
                             std::vector<float>* decoded = nullptr) {
    BpwCandidate c;
    c.bits_per_weight = type_bits(t);
    if (t == DType::F16) {
        c.method = Method::F16;
    } else {
        c.method = *block_method_for(t);
    }
    TensorInput in;
    static_cast<TensorInfo&>(in) = info;
    in.dtype = DType::F32;
    in.data = w.data();
    in.importance = importance;
    CodecParams p;
    p.method = c.method;
    auto e = encode_tensor(in, p);
    if (!e) return e.status();
    auto back = decode_tensor(*e);
    if (!back) return back.status();
    const int64_t cols = info.cols();
    double err = 0.0;
    for (size_t i = 0; i < w.size(); ++i) {
        const double d = static_cast<double>(w[i]) - static_cast<double>((*back)[i]);
        const double wt = importance != nullptr ? static_cast<double>(importance[static_cast<int64_t>(i) % cols]) : 1.0;
        err += wt * d * d;
    }
    c.error = err;
    if (decoded != nullptr) *decoded = std::move(back).value();
    return c;
}

}  // namespace

Result<BpwPlan> plan_target_bpw(const Weights& model, double target_bpw,
                                const std::vector<std::vector<float>>& importance, int n_threads,
                                const ProgressFn& progress, const BpwOutputProbe& probe) {
    const std::string& label = model.label();
    if (!(target_bpw > 0.0 && target_bpw <= 32.0))
        return error(StatusCode::InvalidArgument, "--target-bpw " + std::to_string(target_bpw) + " is not in (0, 32]");
    if (Status s = model.whole(); !s) return s;
    BpwPlan plan;
    plan.target_bpw = target_bpw;
    plan.weighted = !importance.empty();
    double fixed_bits = 0.0;  // norms and other tensors that are not searched
    std::vector<size_t> matrices;
    const bool tied = model.index_of(TensorRole::Output, -1) < 0;
    for (size_t i = 0; i < model.n_tensors(); ++i) {
        const TensorInfo& t = model.tensor_info(i);
        plan.n_params += t.n_elements();
        const bool searched = t.n_dims() == 2 && role_is_matrix(t.role);  // projections, token_embd, output
        if (searched)
            matrices.push_back(i);
        else
            fixed_bits += 32.0 * static_cast<double>(t.n_elements());
    }
    if (plan.n_params <= 0) return error(StatusCode::InvalidArgument, label + ": no parameters to plan");

    plan.tensors.resize(matrices.size());
    const int threads = knot::worker_count(n_threads, matrices.size());
    size_t done = 0;
    Status st = knot::run_ordered<BpwPlanTensor>(
        matrices.size(), threads, static_cast<size_t>(threads) + 1,
        [&](size_t j) -> Result<BpwPlanTensor> {
            const size_t i = matrices[j];
            const TensorInfo& info = model.tensor_info(i);
            auto w = model.read_f32(i);
            if (!w) return w.status();
            const float* imp = i < importance.size() && !importance[i].empty() ? importance[i].data() : nullptr;
            BpwPlanTensor pt;
            pt.source_index = i;
            pt.name = info.name;
            pt.role = info.role;
            pt.layer = info.layer;
            pt.n_elements = info.n_elements();
            for (DType t : candidate_types(info.role, info.cols(), tied, static_cast<bool>(probe))) {
                auto c = measure(info, *w, imp, t);
                if (!c) return c.status().with_context(label + ": tensor '" + info.name + "'");
                // Of two types with the same bits per weight (Q4_K and IQ4_NL, or Q4_0 and IQ4_NL where the k-quants
                // fall back), the one with the smaller error.
                if (!pt.candidates.empty() && pt.candidates.back().bits_per_weight == c->bits_per_weight) {
                    if (c->error < pt.candidates.back().error) pt.candidates.back() = *c;
                    continue;
                }
                pt.candidates.push_back(*c);
            }
            return pt;
        },
        [&](size_t j, BpwPlanTensor pt) -> Status {
            plan.tensors[j] = std::move(pt);
            if (!report_progress(progress, static_cast<double>(++done) / static_cast<double>(matrices.size()),
                                 plan.tensors[j].name))
                return error(StatusCode::Cancelled, label + ": planning cancelled");
            return Status::ok();
        });
    if (!st) return st;

    // Output sensitivities: each searched matrix alone at its cheapest candidate, the model run on the probe's text.
    if (probe) {
        plan.output_measured = true;
        size_t n_probed = 0, probed = 0;
        for (const BpwPlanTensor& pt : plan.tensors) n_probed += pt.candidates.size() > 1 ? 1 : 0;
        for (BpwPlanTensor& pt : plan.tensors) {
            if (pt.candidates.size() < 2) continue;
            const size_t i = pt.source_index;
            const TensorInfo& info = model.tensor_info(i);
            auto w = model.read_f32(i);
            if (!w) return w.status();
            const float* imp = i < importance.size() && !importance[i].empty() ? importance[i].data() : nullptr;
            std::vector<float> values;
            auto c =
                measure(info, *w, imp, candidate_type(pt.candidates.front(), info.role, info.cols(), tied), &values);
            if (!c) return c.status().with_context(label + ": tensor '" + info.name + "'");
            std::vector<float>().swap(*w);  // the probe loads a model: hold one copy of the matrix, not two
            auto kld = probe(i, std::move(values));
            if (!kld) return kld.status().with_context(label + ": output probe of tensor '" + info.name + "'");
            pt.probe_kld = std::max(0.0, *kld);
            pt.sensitivity = c->error > 0.0 ? pt.probe_kld / c->error : 0.0;
            if (!report_progress(progress, static_cast<double>(++probed) / static_cast<double>(n_probed),
                                 pt.name + " (output)"))
                return error(StatusCode::Cancelled, label + ": planning cancelled");
        }
    }

    // Every matrix at its cheapest candidate, then the best upgrade per bit while the budget holds.
    const double budget = target_bpw * static_cast<double>(plan.n_params);
    double bits = fixed_bits;
    for (const BpwPlanTensor& t : plan.tensors)
        bits += t.candidates.front().bits_per_weight * static_cast<double>(t.n_elements);
    plan.lowest_bpw = bits / static_cast<double>(plan.n_params);
    if (bits > budget) {
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "%s: --target-bpw %.3f is below what the cheapest types need, %.3f bits per weight",
                      label.c_str(), target_bpw, plan.lowest_bpw);
        return error(StatusCode::InvalidArgument, buf);
    }
    for (;;) {
        double best_ratio = 0.0;
        size_t best_t = 0, best_c = 0;
        for (size_t t = 0; t < plan.tensors.size(); ++t) {
            const BpwPlanTensor& pt = plan.tensors[t];
            const BpwCandidate& cur = pt.candidates[pt.chosen];
            for (size_t c = pt.chosen + 1; c < pt.candidates.size(); ++c) {
                const double added =
                    (pt.candidates[c].bits_per_weight - cur.bits_per_weight) * static_cast<double>(pt.n_elements);
                const double gain = pt.sensitivity * (cur.error - pt.candidates[c].error);
                if (added <= 0.0 || gain <= 0.0 || bits + added > budget) continue;
                if (gain / added > best_ratio) {
                    best_ratio = gain / added;
                    best_t = t;
                    best_c = c;
                }
            }
        }
        if (best_ratio <= 0.0) break;
        BpwPlanTensor& pt = plan.tensors[best_t];
        bits += (pt.candidates[best_c].bits_per_weight - pt.candidates[pt.chosen].bits_per_weight) *
                static_cast<double>(pt.n_elements);
        pt.chosen = best_c;
    }
    plan.planned_bpw = bits / static_cast<double>(plan.n_params);
    for (const BpwPlanTensor& t : plan.tensors) {
        LayerOverride o;
        o.layer = t.layer;
        o.role = t.role;
        o.params.method = t.candidates[t.chosen].method;
        plan.overrides.push_back(o);
    }
    return plan;
}

Status check_target_bpw_preset(const std::string& preset) {
    auto p = find_preset(preset);
    if (!p) return p.status();
    if (p->llama_mixture.empty() && preset != "q8_0" && preset != "q4_0")
        return error(StatusCode::InvalidArgument,
                     "--target-bpw needs a block-type base preset (a k-quant mixture, q8_0 or q4_0), not " + preset);
    return Status::ok();
}

}  // namespace gkq
