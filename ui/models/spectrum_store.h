// SpectrumStore: the spectra computed for the open model, cached per tensor name, shared read-only with the
// panels (TensorSpectrum values are copied in from the analysis job; nothing here points into a model or knot).
// It records where the spectra it holds came from: computed by an analysis, or read from the spectra cache file
// beside the model (gkq/spectrum_cache.h), and that file's path.
#pragma once

#include "gkq/spectrum.h"

#include <QHash>
#include <QObject>
#include <QString>
#include <memory>
#include <vector>

namespace gkq::ui {

class SpectrumStore : public QObject {
    Q_OBJECT
public:
    explicit SpectrumStore(QObject* parent = nullptr);

    enum class Source { None, Computed, Cache };

    void setSpectra(std::vector<TensorSpectrum> spectra, Source source = Source::Computed,
                    const QString& cacheFile = QString());
    void clear();
    bool isEmpty() const { return m_byName.isEmpty(); }
    int size() const { return static_cast<int>(m_byName.size()); }
    // nullptr when the tensor has no (analyzed) spectrum.
    std::shared_ptr<const TensorSpectrum> find(const QString& name) const;
    // Analyzed spectra of `role` in layer order (tensors outside the blocks first).
    std::vector<std::shared_ptr<const TensorSpectrum>> byRole(TensorRole role) const;
    // Roles that have at least one analyzed spectrum, in TensorRole order.
    std::vector<TensorRole> roles() const;
    Source source() const { return m_source; }
    // Computed: the cache file the spectra were written to (empty when none could be); Cache: the file read.
    QString cacheFile() const { return m_cacheFile; }

signals:
    void changed();

private:
    QHash<QString, std::shared_ptr<const TensorSpectrum>> m_byName;
    std::vector<std::shared_ptr<const TensorSpectrum>> m_ordered;
    Source m_source = Source::None;
    QString m_cacheFile;
};

}  // namespace gkq::ui
