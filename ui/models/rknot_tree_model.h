// RknotTreeModel: every field of an rknot (docs/rknot-format.md) as a tree — objects and arrays are branches, values
// are leaves — with the columns key, value, type, allowed values and a note (how a value is obtained, why a field is
// read-only, why a null is null).
// Contract: an edit goes through the core's rknot_set (the PATH=VALUE edit and the validation of `gkq rknot set`),
// so a value the core rejects never enters the model; the rejection (editRejected, lastError) names the JSON path
// and the allowed type or range. Only the tuning fields (method, rank, bit_width, expected_accuracy_loss), the
// user-set resonance_tuning and model_name are editable; measured and derived fields are read-only so that every
// number in the file stays measured. Null values show as empty, with the reason in the note.
// The model keeps the rknot as edited and, when it came from a file, the rknot on disk; diff() lists the JSON paths
// whose values differ. setData pushes one command per edit on the undo stack when one is set; undo restores the
// previous JSON literal exactly.
#pragma once

#include "gkq/rknot.h"
#include "gkq/status.h"

#include <QAbstractItemModel>
#include <QHash>
#include <QString>
#include <optional>
#include <string>
#include <vector>

class QUndoStack;

namespace gkq::ui {

class RknotTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { Key, Value, Type, Allowed, Note, ColumnCount };
    static constexpr int PathRole = Qt::UserRole;         // the JSON path, e.g. folded_waves.layers[3].bit_width
    static constexpr int LiteralRole = Qt::UserRole + 1;  // a leaf's value as a JSON literal (null, 4, "text")

    // One changed leaf: its JSON path and its value (JSON literal) on disk and as edited.
    struct Change {
        QString path;
        QString onDisk;
        QString edited;
    };

    explicit RknotTreeModel(QObject* parent = nullptr);

    // Shows `r` (a validated rknot). `onDisk` is the file's content it is compared with (nullopt: never saved);
    // `label` names it in error messages (the file path).
    void setRknot(const Rknot& r, std::optional<Rknot> onDisk, const QString& label);
    void clear();
    // The edited rknot became the file's content (after a save).
    void markSaved(const QString& label);

    bool hasRknot() const { return m_rknot.has_value(); }
    const Rknot& rknot() const { return *m_rknot; }  // only when hasRknot()
    bool hasDiskVersion() const { return m_disk.has_value(); }
    // Differs from the file (always true for an rknot that was never saved).
    bool isModified() const;
    // The changed leaves, in document order (empty without a disk version).
    std::vector<Change> diff() const;
    QString label() const { return m_label; }

    // Sets the leaf at `path` to the JSON `literal` through rknot_set; editable fields only. No undo command.
    Status setValue(const QString& path, const QString& literal);
    // The leaf's value as a JSON literal; empty when there is no such leaf.
    QString literal(const QString& path) const;
    QModelIndex indexOfPath(const QString& path, int column = Key) const;
    bool isEditablePath(const QString& path) const;
    QString lastError() const { return m_lastError; }

    // Edits through setData become commands on `stack` (not owned); nullptr: applied directly.
    void setUndoStack(QUndoStack* stack) { m_undo = stack; }

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

signals:
    void editRejected(const QString& message);
    void modifiedChanged(bool modified);
    void edited(const QString& path);  // a leaf changed (edit, undo or redo)

private:
    enum class Kind { Object, Array, String, Integer, Number, Bool, Null };
    struct Node {
        int parent = -1;  // index into m_nodes; -1: top level
        int row = 0;      // row under the parent
        std::vector<int> children;
        QString key;   // field name, or "[i]" for an array entry
        QString path;  // JSON path
        Kind kind = Kind::Null;
        QString literal;  // leaves: the JSON literal; branches: empty
        QString summary;  // branches: a one-line description shown in the value column
    };

    // Rebuilds the nodes from m_rknot; updates in place (dataChanged) when the shape is unchanged, else resets.
    void refresh();
    QVariant nodeData(const Node& n, int column, int role) const;
    QString textForEdit(const Node& n, const QVariant& value) const;
    void updateModified();

    std::optional<Rknot> m_rknot;
    std::optional<Rknot> m_disk;
    std::string m_diskJson;  // rknot_to_json(*m_disk)
    QString m_label;
    std::vector<Node> m_nodes;     // depth-first, parents before children
    std::vector<int> m_top;        // top-level nodes
    QHash<QString, int> m_byPath;  // JSON path -> node
    QUndoStack* m_undo = nullptr;
    QString m_lastError;
    bool m_modified = false;
};

}  // namespace gkq::ui
