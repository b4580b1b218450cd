// The workbench side of gkq::check_output_not_input: an export (knot, reconstructed model, chart) whose chosen file is
// one of the inputs (the open model's files, the knot being exported) is refused with a message box, before any work.
#pragma once

#include "gkq/atomic_file.h"

#include <QMessageBox>
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

}  // namespace gkq::ui
