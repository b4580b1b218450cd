#include "models/display_format.h"

#include "gkq/arch.h"

#include <cmath>
#include <string>

namespace gkq::ui {

namespace {
constexpr std::string_view kWeightSuffix = ".weight";

// The block prefix pattern ("model.layers.%d.") for block `layer`.
std::string blockPrefix(std::string_view pattern, int32_t layer) {
    std::string p(pattern);
    if (const size_t at = p.find("%d"); at != std::string::npos) p.replace(at, 2, std::to_string(layer));
    return p;
}

QString withoutWeightSuffix(std::string name) {
    if (name.size() > kWeightSuffix.size() && name.ends_with(kWeightSuffix))
        name.resize(name.size() - kWeightSuffix.size());
    return QString::fromStdString(name);
}
}  // namespace

QLocale displayLocale() {
    QLocale locale;
    locale.setNumberOptions(locale.numberOptions() & ~QLocale::OmitGroupSeparator);
    return locale;
}

QString formatCount(qint64 value) {
    return displayLocale().toString(value);
}

QString formatCount(quint64 value) {
    return displayLocale().toString(value);
}

QString formatNumber(double value, int significant) {
    if (std::isnan(value)) return QStringLiteral("nan");
    if (std::isinf(value)) return value > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
    if (value == 0.0) return QStringLiteral("0");
    significant = std::max(1, significant);
    const double magnitude = std::abs(value);
    if (magnitude < 1e-4 || magnitude >= 1e15) return displayLocale().toString(value, 'e', significant - 1);
    // Digits after the point so that `significant` digits show, taken after rounding (9.9996 -> "10.00").
    int exponent = static_cast<int>(std::floor(std::log10(magnitude)));
    int decimals = std::max(0, significant - 1 - exponent);
    const double scale = std::pow(10.0, decimals);
    if (std::abs(std::round(magnitude * scale) / scale) >= std::pow(10.0, exponent + 1))
        decimals = std::max(0, decimals - 1);
    return displayLocale().toString(value, 'f', decimals);
}

QString shortTensorName(const ArchSpec& arch, std::string_view stored) {
    std::string_view fused;
    TensorRole part = TensorRole::Other;
    if (split_part_view_name(stored, fused, part))  // a part of a fused tensor: "blk.3.attn_qkv[attn_k]"
        return shortTensorName(arch, fused) + QLatin1Char('[') + QString::fromUtf8(role_name(part)) + QLatin1Char(']');
    for (const NameFormat format : {NameFormat::Gguf, NameFormat::Hf}) {
        const TensorMatch m = match_tensor(arch, format, stored);
        if (m.spec != nullptr) {
            const std::string gguf = tensor_name(*m.spec, NameFormat::Gguf, m.layer);
            if (!gguf.empty()) return withoutWeightSuffix(gguf);
        }
        if (m.layer >= 0) {  // an unknown tensor under the block prefix: the GGUF prefix, the rest as stored
            const std::string from = blockPrefix(format == NameFormat::Hf ? arch.hf_block : arch.gguf_block, m.layer);
            if (stored.starts_with(from))
                return withoutWeightSuffix(blockPrefix(arch.gguf_block, m.layer) +
                                           std::string(stored.substr(from.size())));
        }
    }
    return withoutWeightSuffix(std::string(stored));
}

}  // namespace gkq::ui
