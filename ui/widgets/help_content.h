// What the Help menu shows, built from what this binary really has: About (version, build options, compiler, Qt
// and library versions, and each kernel backend with the device that runs it or why it cannot), the keyboard
// shortcuts of the window's own actions, the manual's location (README.md and docs/ beside the installed binary
// or in the source tree this was built from), and one paragraph of context help (F1) per view.
#pragma once

#include <QString>

class QWidget;

namespace gkq::ui {

QString aboutText();  // rich text
// Every action in `window`'s menu bar that has a shortcut: "Ctrl+O — Open...", one per row (rich text).
QString shortcutsText(const QWidget* window);
// README.md of the manual; empty when neither an installed copy nor the source tree's is found.
QString manualPath();
// The help of view `tab` (MainWindow::Tab) in rich text: what it shows, what its numbers mean, where to read more.
QString viewHelpText(int tab);

}  // namespace gkq::ui
