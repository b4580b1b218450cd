// ManualWindow: Help > Manual, the README and docs/ rendered in the workbench (Markdown, with their images): links
// between the pages follow inside the window with Back / Forward, a link out of the manual (a web address, a file
// that is not Markdown) opens in the desktop's viewer, and "Open in viewer" hands the page shown to it.
#pragma once

#include <QDialog>
#include <QString>

class QTextBrowser;
class QToolButton;

namespace gkq::ui {

class ManualWindow : public QDialog {
    Q_OBJECT
public:
    explicit ManualWindow(QWidget* parent = nullptr);
    // Shows `markdownPath` (README.md of the manual); false when it cannot be read.
    bool openPage(const QString& markdownPath);
    QTextBrowser* browser() const { return m_browser; }
    QString currentPage() const;  // the local path shown

private:
    QTextBrowser* m_browser = nullptr;
    QToolButton* m_back = nullptr;
    QToolButton* m_forward = nullptr;
};

}  // namespace gkq::ui
