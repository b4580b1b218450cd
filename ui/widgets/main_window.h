// MainWindow: the workbench's top-level window. For now it opens a model and shows its configuration and
// tensors; the spectrum, quantize, compare, saturation, rknot and export panels attach here later.
#pragma once

#include "gkq/model_file.h"

#include <QMainWindow>
#include <memory>
#include <optional>

class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace gkq::ui {

class TensorTableModel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens a model; on failure shows the error in the window (and returns false), never exits.
    bool openModel(const QString& path);
    QString lastError() const { return m_lastError; }
    TensorTableModel* tensorModel() const { return m_tensorModel; }

private:
    void openDialog();
    void showError(const QString& message);

    TensorTableModel* m_tensorModel = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QTableView* m_table = nullptr;
    QLabel* m_summary = nullptr;
    std::optional<ModelFile> m_model;
    QString m_lastError;
};

}  // namespace gkq::ui
