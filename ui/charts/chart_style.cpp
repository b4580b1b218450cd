#include "charts/chart_style.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace gkq::ui {

QColor seriesColor(int i) {
    static const QColor kPalette[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xe1, 0x57, 0x59),
                                      QColor(0x76, 0xb7, 0xb2), QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                                      QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7), QColor(0x9c, 0x75, 0x5f),
                                      QColor(0x17, 0xbe, 0xcf)};
    constexpr int n = static_cast<int>(std::size(kPalette));
    const int k = std::max(0, i);
    const QColor c = kPalette[k % n];
    return k / n % 2 == 0 ? c : c.darker(150);
}

QColor heatColor(double t) {
    static const QColor stops[] = {QColor(68, 1, 84), QColor(59, 82, 139), QColor(33, 145, 140), QColor(94, 201, 98),
                                   QColor(253, 231, 37)};
    t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4.0;
    const int i = std::min(3, static_cast<int>(t));
    const double f = t - i;
    const QColor& a = stops[i];
    const QColor& b = stops[i + 1];
    return QColor(static_cast<int>(a.red() + f * (b.red() - a.red())),
                  static_cast<int>(a.green() + f * (b.green() - a.green())),
                  static_cast<int>(a.blue() + f * (b.blue() - a.blue())));
}

QColor referenceLineColor() {
    return QColor(0x55, 0x55, 0x55);
}

int NiceRange::tickCount() const {
    return step > 0.0 ? static_cast<int>(std::lround((max - min) / step)) + 1 : 2;
}

NiceRange niceRange(double lo, double hi, int maxTicks, double upper) {
    NiceRange r;
    if (!std::isfinite(lo) || !std::isfinite(hi)) return r;
    if (hi < lo) std::swap(lo, hi);
    if (hi == lo) hi = lo + (lo == 0.0 ? 1.0 : std::abs(lo) * 0.1);
    maxTicks = std::max(2, maxTicks);
    const double raw = (hi - lo) / (maxTicks - 1);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (const double m : {1.0, 2.0, 5.0, 10.0}) {
        r.step = m * magnitude;
        r.min = std::floor(lo / r.step) * r.step;
        r.max = std::ceil(hi / r.step) * r.step;
        if (r.tickCount() <= maxTicks) break;
    }
    if (upper > 0.0 && r.max > upper && hi <= upper) r.max = upper;
    return r;
}

}  // namespace gkq::ui
