// whitenedSpectra: the Spectrum view's "as the data sees it", on a worker thread. It reads a Gram file (gkq imatrix
// --gram) and matches it with the open model (load_model_gram: a file of another model, or not a Gram file at all,
// fails with the core's message, which names the file, the entry and the tensor), then computes, for every matrix
// whose input has an entry, whitened_spectrum(): the singular values of W L, L the Cholesky factor of the Gram matrix
// X^T X of the matrix's inputs, exactly as `gkq analyze --gram` does. A matrix the core cannot whiten (a Gram entry
// that is not finite, not positive definite even with the shift, too large for memory) keeps its message, naming the
// Gram file, the entry and the tensor, and the others go on. Progress after every matrix, weighted by its cost
// (rows x cols^2 flops for the product; the SVD is of the same order), with the count done and the time left at the
// rate so far; false from the callback stops between matrices (Cancelled).
#pragma once

#include "gkq/codec.h"
#include "gkq/progress.h"
#include "gkq/status.h"
#include "gkq/weights.h"

#include <map>
#include <string>
#include <vector>

namespace gkq::ui {

struct WhitenedSpectra {
    std::string gramFile;                              // as given
    std::map<std::string, WhitenedSpectrum> byTensor;  // by stored tensor name: the matrices computed
    std::map<std::string, std::string> failed;         // by stored tensor name: why it could not be computed
    std::vector<std::string> withoutEntry;             // 2-D matrices whose input the file has no entry for
    double seconds = 0.0;                              // wall time of the whole job
};

Result<WhitenedSpectra> whitenedSpectra(const Weights& model, const std::string& gramFile,
                                        const ProgressFn& progress = {});

}  // namespace gkq::ui
