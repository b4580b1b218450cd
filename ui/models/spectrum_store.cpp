#include "models/spectrum_store.h"

#include <algorithm>

namespace gkq::ui {

SpectrumStore::SpectrumStore(QObject* parent) : QObject(parent) {}

void SpectrumStore::setSpectra(std::vector<TensorSpectrum> spectra, Source source, const QString& cacheFile) {
    m_byName.clear();
    m_ordered.clear();
    m_source = source;
    m_cacheFile = cacheFile;
    for (TensorSpectrum& s : spectra) {
        if (!s.skipped.empty() || s.singular_values.empty()) continue;
        auto p = std::make_shared<const TensorSpectrum>(std::move(s));
        m_byName.insert(QString::fromStdString(p->name), p);
        m_ordered.push_back(std::move(p));
    }
    std::stable_sort(m_ordered.begin(), m_ordered.end(),
                     [](const auto& a, const auto& b) { return a->layer < b->layer; });
    emit changed();
}

void SpectrumStore::clear() {
    m_byName.clear();
    m_ordered.clear();
    m_source = Source::None;
    m_cacheFile.clear();
    emit changed();
}

std::shared_ptr<const TensorSpectrum> SpectrumStore::find(const QString& name) const {
    return m_byName.value(name);
}

std::vector<std::shared_ptr<const TensorSpectrum>> SpectrumStore::byRole(TensorRole role) const {
    std::vector<std::shared_ptr<const TensorSpectrum>> out;
    for (const auto& s : m_ordered)
        if (s->role == role) out.push_back(s);
    return out;
}

std::vector<TensorRole> SpectrumStore::roles() const {
    std::vector<TensorRole> out;
    for (const auto& s : m_ordered)
        if (std::find(out.begin(), out.end(), s->role) == out.end()) out.push_back(s->role);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace gkq::ui
