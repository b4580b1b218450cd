#include "models/layer_role_model.h"

#include "charts/chart_style.h"
#include "gkq/knot.h"
#include "models/display_format.h"

#include <QBrush>
#include <QStringList>
#include <algorithm>
#include <cmath>

namespace gkq::ui {

namespace {
QString latin1(std::string_view v) {
    return QString::fromLatin1(v.data(), static_cast<qsizetype>(v.size()));
}
}  // namespace

QString methodText(Method m) {
    return latin1(method_name(m));
}

QString factorBitsText(int factorBits, DType residual) {
    const QString type = residual != DType::Other ? latin1(dtype_name(residual)) : QString();
    if (factorBits > 0 && !type.isEmpty()) return QStringLiteral("%1 + %2").arg(factorBits).arg(type);
    if (factorBits > 0) return QString::number(factorBits);
    if (!type.isEmpty()) return type;
    return QStringLiteral("-");
}

LayerRoleModel::LayerRoleModel(QObject* parent) : QAbstractTableModel(parent) {}

const std::vector<TensorRole>& LayerRoleModel::columnRoles() {
    static const std::vector<TensorRole> roles = {TensorRole::AttnQ,   TensorRole::AttnK,     TensorRole::AttnV,
                                                  TensorRole::AttnO,   TensorRole::FfnGate,   TensorRole::FfnUp,
                                                  TensorRole::FfnDown, TensorRole::TokenEmbd, TensorRole::Output};
    return roles;
}

QColor LayerRoleModel::methodColor(Method m) {
    return seriesColor(static_cast<int>(m));  // 20 distinct colours, kMethodCount of them used
}

QColor LayerRoleModel::scaleColor(double t) {
    return heatColor(t);  // the spectrum heat map's ramp
}

void LayerRoleModel::reset(int nLayers) {
    m_layers = std::max(0, nLayers);
    m_cells.assign(static_cast<size_t>(m_layers + 1) * columnRoles().size(), Cell{});
}

LayerRoleModel::Cell* LayerRoleModel::cellFor(TensorRole role, int32_t layer) {
    const auto& roles = columnRoles();
    const auto it = std::find(roles.begin(), roles.end(), role);
    if (it == roles.end()) return nullptr;
    const bool block = role != TensorRole::TokenEmbd && role != TensorRole::Output;
    if (block && (layer < 0 || layer >= m_layers)) return nullptr;
    const int row = block ? layer : m_layers;
    return &m_cells[static_cast<size_t>(row) * roles.size() + static_cast<size_t>(it - roles.begin())];
}

void LayerRoleModel::setReport(const QuantizeReport& report, int nLayers) {
    beginResetModel();
    int layers = nLayers;
    for (const QuantizedTensor& q : report.tensors) layers = std::max(layers, q.codec.layer + 1);
    reset(layers);
    for (const QuantizedTensor& q : report.tensors) {
        const TensorReport& c = q.codec;
        Cell* cell = cellFor(c.role, c.layer);
        if (cell == nullptr || c.n_dims() != 2) continue;
        cell->filled = true;
        cell->name = QString::fromStdString(c.name);
        cell->method = c.method;
        cell->bits = factorBitsText(c.factor_bits, c.residual_type);
        cell->bpw = q.bits_per_weight();
        cell->bpwBasis = tr("record and index entry");
        cell->relError = c.rel_error;
        cell->maxAbs = c.max_abs_error;
        cell->fallback = QString::fromStdString(c.fallback);
    }
    m_source = tr("quantization");
    endResetModel();
}

void LayerRoleModel::setKnot(const Weights& weights) {
    beginResetModel();
    const auto* knot = dynamic_cast<const KnotFile*>(&weights);
    int layers = static_cast<int>(weights.config().n_layers);
    if (knot)
        for (const KnotEntry& e : knot->entries()) layers = std::max(layers, e.layer + 1);
    reset(knot ? layers : 0);
    if (knot) {
        for (const KnotEntry& e : knot->entries()) {
            Cell* cell = cellFor(e.role, e.layer);
            if (cell == nullptr || e.n_dims() != 2) continue;
            const int64_t n = e.n_elements();
            cell->filled = true;
            cell->name = QString::fromStdString(e.name);
            cell->method = e.method;
            cell->bits = factorBitsText(e.factor_bits, e.method == Method::LowRankResidual
                                                           ? residual_code_type(e.residual_code).value_or(DType::Other)
                                                           : DType::Other);
            cell->bpw = n > 0 ? 8.0 * static_cast<double>(e.record_bytes) / static_cast<double>(n) : 0.0;
            cell->bpwBasis = tr("record");
        }
        m_source = tr("knot records");
    } else {
        m_source.clear();
    }
    endResetModel();
}

int LayerRoleModel::setMeasuredErrors(const std::vector<std::pair<QString, double>>& errors, const QString& from) {
    int n = 0;
    for (const auto& [name, error] : errors) {
        const QModelIndex at = indexOfTensor(name);
        if (!at.isValid()) continue;
        Cell& c = m_cells[static_cast<size_t>(at.row()) * columnRoles().size() + static_cast<size_t>(at.column())];
        if (c.relError) continue;
        c.relError = error;
        c.errorSource = from;
        ++n;
    }
    if (n > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
    return n;
}

void LayerRoleModel::clear() {
    beginResetModel();
    reset(0);
    m_layers = 0;
    m_cells.clear();
    m_source.clear();
    endResetModel();
}

void LayerRoleModel::setMeasure(Measure m) {
    if (m == m_measure) return;
    m_measure = m;
    if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

void LayerRoleModel::setLogScale(bool on) {
    if (on == m_log) return;
    m_log = on;
    if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

std::optional<double> LayerRoleModel::shownValue(const Cell& c) const {
    if (!c.filled) return std::nullopt;
    switch (m_measure) {
        case Measure::Method: return std::nullopt;
        case Measure::BitsPerWeight: return c.bpw;
        case Measure::RelError:
            if (!c.relError) return std::nullopt;
            if (!m_log) return *c.relError;
            if (*c.relError <= 0.0) return std::nullopt;  // exact: no place on a log scale (said in the tooltip)
            return std::log10(*c.relError);
    }
    return std::nullopt;
}

std::optional<std::pair<double, double>> LayerRoleModel::scaleRange() const {
    std::optional<std::pair<double, double>> range;
    for (const Cell& c : m_cells) {
        const std::optional<double> v = shownValue(c);
        if (!v) continue;
        if (!range)
            range = std::pair{*v, *v};
        else
            range = std::pair{std::min(range->first, *v), std::max(range->second, *v)};
    }
    return range;
}

std::vector<Method> LayerRoleModel::methodsPresent() const {
    std::vector<Method> out;
    for (Method m : all_methods())
        if (std::any_of(m_cells.begin(), m_cells.end(), [m](const Cell& c) { return c.filled && c.method == m; }))
            out.push_back(m);
    return out;
}

QModelIndex LayerRoleModel::indexOfTensor(const QString& name) const {
    const int columns = columnCount();
    for (size_t i = 0; i < m_cells.size(); ++i)
        if (m_cells[i].filled && m_cells[i].name == name)
            return index(static_cast<int>(i) / columns, static_cast<int>(i) % columns);
    return {};
}

int LayerRoleModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || m_cells.empty() ? 0 : m_layers + 1;
}

int LayerRoleModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(columnRoles().size());
}

const LayerRoleModel::Cell& LayerRoleModel::cell(const QModelIndex& index) const {
    return m_cells[static_cast<size_t>(index.row()) * columnRoles().size() + static_cast<size_t>(index.column())];
}

QString LayerRoleModel::toolTip(const Cell& c) const {
    QStringList lines;
    lines << c.name;
    lines << tr("method %1, bits %2").arg(methodText(c.method), c.bits);
    lines << tr("%1 bits per weight (%2)").arg(formatNumber(c.bpw), c.bpwBasis);
    if (c.relError && c.maxAbs)
        lines << tr("rel_error %1, max_abs %2").arg(formatNumber(*c.relError), formatNumber(*c.maxAbs));
    else if (c.relError)
        lines << tr("rel_error %1 (measured by %2)").arg(formatNumber(*c.relError), c.errorSource);
    else
        lines << tr("error not measured (a knot's records alone hold no original to measure against)");
    if (!c.fallback.isEmpty()) lines << tr("fallback: %1").arg(c.fallback);
    return lines.join(QLatin1Char('\n'));
}

QVariant LayerRoleModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Cell& c = cell(index);
    if (!c.filled) return {};  // empty: no value of any role
    switch (role) {
        case NameRole: return c.name;
        case MethodRole: return methodText(c.method);
        case BpwRole: return c.bpw;
        case RelErrorRole: return c.relError ? QVariant(*c.relError) : QVariant();
        case Qt::ToolTipRole: return toolTip(c);
        case Qt::DisplayRole:
            switch (m_measure) {
                case Measure::Method: return methodText(c.method);
                case Measure::BitsPerWeight: return formatNumber(c.bpw, 3);
                case Measure::RelError: return c.relError ? formatNumber(*c.relError, 3) : QString();
            }
            return {};
        case ScaleRole: {
            const std::optional<double> v = shownValue(c);
            const auto range = scaleRange();
            if (!v || !range) return {};
            return range->second > range->first ? (*v - range->first) / (range->second - range->first) : 0.5;
        }
        case Qt::BackgroundRole: {
            if (m_measure == Measure::Method) return QBrush(methodColor(c.method));
            const QVariant t = data(index, ScaleRole);
            return t.isValid() ? QVariant(QBrush(scaleColor(t.toDouble()))) : QVariant();
        }
        default: return {};
    }
}

QVariant LayerRoleModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (role != Qt::DisplayRole) return {};
    if (orientation == Qt::Horizontal) {
        if (section < 0 || section >= columnCount()) return {};
        return latin1(role_name(columnRoles()[static_cast<size_t>(section)]));
    }
    if (section < 0 || section >= rowCount()) return {};
    return section < m_layers ? QString::number(section) : tr("outside blocks");
}

}  // namespace gkq::ui
