#include "jobs/whitened_spectra_job.h"

#include "gkq/arch.h"
#include "gkq/imatrix.h"
#include "jobs/job_watch.h"

#include <chrono>

namespace gkq::ui {

Result<WhitenedSpectra> whitenedSpectra(const Weights& model, const std::string& gramFile, const ProgressFn& progress) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!report_progress(progress, 0.0, "reading " + gramFile)) return error(StatusCode::Cancelled, "cancelled");
    auto gram = load_model_gram(gramFile, model);
    if (!gram) return gram.status();

    WhitenedSpectra out;
    out.gramFile = gramFile;
    const ArchSpec& arch = arch_or_default(model.config().architecture);
    // The cost of each matrix to whiten: W L is rows x cols x cols multiply-adds, the thin SVD of the same order.
    std::vector<size_t> todo;
    double total = 0.0;
    for (size_t i = 0; i < model.n_tensors(); ++i) {
        const TensorInfo& t = model.tensor_info(i);
        if (t.n_dims() != 2 || t.rows() <= 0 || t.cols() <= 0) continue;
        if (i < gram->by_tensor.size() && gram->by_tensor[i]) {
            todo.push_back(i);
            total += static_cast<double>(t.rows()) * static_cast<double>(t.cols()) * static_cast<double>(t.cols());
        } else if (role_is_matrix(t.role)) {
            out.withoutEntry.push_back(t.name);
        }
    }

    double done = 0.0;
    for (size_t n = 0; n < todo.size(); ++n) {
        const size_t i = todo[n];
        const TensorInfo& t = model.tensor_info(i);
        // Errors name the Gram file, the entry the matrix reads and the tensor, as the model stores it.
        const std::string label =
            gramFile + ": entry " + gram_input_name(arch, t.role, t.layer) + " for tensor '" + t.name + "'";
        auto values = model.read_f32(i);
        model.drop_resident(i);
        if (!values) {
            out.failed[t.name] = values.message();
        } else {
            auto w = whitened_spectrum(values->data(), t.rows(), t.cols(), gram->by_tensor[i]->data(), label);
            if (w)
                out.byTensor[t.name] = std::move(w).value();
            else
                out.failed[t.name] = w.message();
        }
        gram->by_tensor[i].reset();  // the last matrix that reads an entry frees it
        done += static_cast<double>(t.rows()) * static_cast<double>(t.cols()) * static_cast<double>(t.cols());
        const double fraction = total > 0.0 ? done / total : 1.0;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string text =
            "matrix " + std::to_string(n + 1) + " of " + std::to_string(todo.size()) + " (" + t.name + ")";
        if (fraction > 0.0 && fraction < 1.0)
            text += ", about " + durationText(elapsed * (1.0 - fraction) / fraction) + " left at the rate so far";
        if (!report_progress(progress, fraction, text)) return error(StatusCode::Cancelled, "cancelled");
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace gkq::ui
