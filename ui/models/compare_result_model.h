// CompareResultModel: one row per preset of a Compare run — the knot's whole-file bits per weight and the core's
// evaluation of it against the base model (mean KLD ± SE, same top token, perplexity ratio). toCsv() writes the
// same rows with full precision.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <vector>

namespace gkq::ui {

struct ComparePoint {
    QString preset;
    quint64 fileBytes = 0;
    double bitsPerWeight = 0.0;
    double meanKld = 0.0;
    double meanKldSe = 0.0;
    double sameTop = 0.0;
    double pplRatio = 0.0;
    qint64 tokens = 0;
};

class CompareResultModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Preset, Bpw, MeanKld, KldSe, SameTop, PplRatio, FileBytes, ColumnCount };
    static constexpr int RawRole = Qt::UserRole + 1;

    explicit CompareResultModel(QObject* parent = nullptr);

    void setPoints(std::vector<ComparePoint> points);
    void addPoint(ComparePoint point);  // one more row at the end
    const std::vector<ComparePoint>& points() const { return m_points; }
    QString toCsv() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<ComparePoint> m_points;
};

}  // namespace gkq::ui
