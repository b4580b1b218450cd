// The spectra cache: what analyze_model computed for a model, kept in a file beside the model so that the next
// `gkq analyze` with the same options, or the workbench's next open, reads it instead of computing it again.
// docs/spectrum-cache.md describes the key and the file format.
//
// Key. A cached result is used only when both halves of its key equal the ones computed now:
//   data:    for every file the model is read from (model_input_files: the model file or its shards, and the
//            config.json / tokenizer files beside it), its name relative to the model, its size in bytes and its
//            modification time in nanoseconds; and the SHA-256 of the tensor index (per tensor: name, dtype, shape,
//            role, layer, stored bytes, and the file offset of a model file's tensor). Nothing in it reads tensor
//            data, so the key of an 8 B model costs a stat per file and a hash of a few kilobytes.
//   options: what the values depend on (full, top_k, oversampling, power iterations, seed; not the thread count,
//            which does not change a result).
// A file rewritten with the same size, the same tensor index and the same modification time to the nanosecond
// would be taken for the one cached; anything else (a touch, a copy without preserved times, an edit) is a miss.
//
// Location. `<model file>.gkq-spectra` beside a model file; `<folder>/.gkq-spectra` inside a model folder. When that
// is not writable, $XDG_CACHE_HOME/gkq/spectra/<SHA-256 of the absolute model path>.gkq-spectra (XDG_CACHE_HOME
// defaults to ~/.cache). Lookups try the one beside first, then that one.
//
// Reading is bounded (the file size and every count are checked before anything is allocated) and verified (a
// SHA-256 of the whole file ends it); a file that fails either, or belongs to other data, is not used, and the
// lookup's notes name it and say why. Nothing throws. Writes replace the file atomically (gkq/atomic_file.h) and
// keep the sections of other option sets whose data key still matches.
#pragma once

#include "gkq/spectrum.h"
#include "gkq/status.h"

#include <optional>
#include <string>
#include <vector>

namespace gkq {

class Weights;

struct SpectrumCacheKey {
    std::string data;     // the files and the tensor index, one component per line
    std::string options;  // the analysis options, one line
};

// The key of `model` opened from `model_path` (the path as given to open_weights: a file or a folder), analyzed with
// `options`. IoError when a file the model is read from cannot be stat'ed.
Result<SpectrumCacheKey> spectrum_cache_key(const Weights& model, const std::string& model_path,
                                            const AnalyzeOptions& options);

// Where the cache of `model_path` lives: beside (or inside) the model, and the per-user fallback (empty when neither
// XDG_CACHE_HOME nor HOME is set).
struct SpectrumCachePaths {
    std::string beside;
    std::string fallback;
};
SpectrumCachePaths spectrum_cache_paths(const std::string& model_path);

struct SpectrumCacheLookup {
    std::optional<std::vector<TensorSpectrum>> spectra;  // set on a hit, in analyze_model's order
    std::string path;                                    // the file of the hit
    std::vector<std::string> notes;  // why a file that exists was not used ("FILE: ..."), one per file
};

// Looks `key` up in the cache files of `model_path` (beside first, then the fallback).
SpectrumCacheLookup read_spectrum_cache(const std::string& model_path, const SpectrumCacheKey& key);

// Writes `spectra` under `key`: beside the model, else (that failed) in the fallback folder, which is created.
// Returns the path written; IoError naming both paths when neither could be written.
Result<std::string> write_spectrum_cache(const std::string& model_path, const SpectrumCacheKey& key,
                                         const std::vector<TensorSpectrum>& spectra);

// The same, to and from one explicit file (what the two above use; tests call them directly).
Status write_spectrum_cache_file(const std::string& path, const SpectrumCacheKey& key,
                                 const std::vector<TensorSpectrum>& spectra);
// nullopt with `note` ("FILE: why") when the file is unreadable, corrupt, or holds no section for `key`; a file that
// does not exist gives nullopt with an empty note.
std::optional<std::vector<TensorSpectrum>> read_spectrum_cache_file(const std::string& path,
                                                                    const SpectrumCacheKey& key, std::string& note);

}  // namespace gkq
