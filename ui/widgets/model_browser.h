// ModelBrowser: the open model's layers and tensors as a filterable tree (ModelTreeModel behind a recursive
// filter) with short names (the stored name in the tooltip); selecting a tensor emits tensorSelected(name) with
// the stored name, which drives the other panels.
#pragma once

#include <QWidget>

class QLineEdit;
class QSortFilterProxyModel;
class QTreeView;

namespace gkq::ui {

class ModelTreeModel;

class ModelBrowser : public QWidget {
    Q_OBJECT
public:
    explicit ModelBrowser(QWidget* parent = nullptr);

    ModelTreeModel* treeModel() const { return m_model; }
    QSortFilterProxyModel* proxyModel() const { return m_proxy; }
    void setFilterText(const QString& text);
    // Selects (and scrolls to) a tensor by name; false when no such tensor is visible.
    bool selectTensor(const QString& name);
    QString selectedTensor() const { return m_selected; }
    void expandAllLayers();
    QTreeView* treeView() const;
    // The narrowest width at which the tree still shows a short name and its role in full.
    int minimumUsableWidth() const;

signals:
    void tensorSelected(const QString& name);

private:
    void onCurrentChanged();

    ModelTreeModel* m_model = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QLineEdit* m_filter = nullptr;
    QTreeView* m_tree = nullptr;
    QString m_selected;
};

}  // namespace gkq::ui
