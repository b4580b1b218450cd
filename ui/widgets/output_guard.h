// The workbench side of gkq::check_output_not_input: an export (knot, reconstructed model, chart) whose chosen file is
// one of the inputs (the open model's files, the knot being exported) is refused with a message box, before any work.
// suggestedOutputPath: the name an export dialog proposes, beside the input in a folder the user can write to.
#pragma once

#include "gkq/atomic_file.h"

#include <QDir>
#include <QFileInfo>
#include <QMessageBox>
#include <QStandardPaths>
#include <QString>
#include <QWidget>

#include <string>
#include <vector>

namespace gkq::ui {

// True (and a window-modal, non-blocking message box on `parent`, and `message` set) when `output` would replace one
// of `inputs`.
inline bool refuseOutputOverInput(QWidget* parent, const QString& output, const std::vector<std::string>& inputs,
                                  QString* message = nullptr) {
    const Status s = check_output_not_input(output.toStdString(), inputs);
    if (s) return false;
    const QString text = QString::fromStdString(s.message());
    if (message) *message = text;
    auto* box = new QMessageBox(QMessageBox::Warning, QObject::tr("Export refused"), text, QMessageBox::Ok, parent);
    box->setObjectName(QStringLiteral("exportRefused"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
    return true;
}

// "<folder>/<model>-<tag>.<suffix>": <model> is the input's name without its extensions (a folder's own name), the
// folder the one holding the input's files when it is writable, else the user's documents folder (or home).
inline QString suggestedOutputPath(const QString& input, const QString& tag, const QString& suffix) {
    const QFileInfo in(input);
    QString base = in.isDir() ? in.fileName() : in.completeBaseName();
    if (base.endsWith(QStringLiteral(".knot"))) base.chop(5);  // x.knot.gz
    if (base.isEmpty()) base = QStringLiteral("model");
    QString folder = in.isDir() ? in.absoluteFilePath() : in.absolutePath();
    if (input.isEmpty() || !QFileInfo(folder).isWritable()) {
        folder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
        if (folder.isEmpty() || !QFileInfo(folder).isWritable()) folder = QDir::homePath();
    }
    const QString name = tag.isEmpty() ? base : base + QLatin1Char('-') + tag;
    return QDir(folder).filePath(name + QLatin1Char('.') + suffix);
}

}  // namespace gkq::ui
