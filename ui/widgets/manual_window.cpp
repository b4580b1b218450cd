#include "widgets/manual_window.h"

#include <QDesktopServices>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QPushButton>
#include <QTextBrowser>
#include <QTextDocument>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>

namespace gkq::ui {

namespace {
bool isMarkdown(const QUrl& url) {
    const QString suffix = QFileInfo(url.path()).suffix().toLower();
    return suffix == QLatin1String("md") || suffix == QLatin1String("markdown");
}
}  // namespace

ManualWindow::ManualWindow(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("GKQ Workbench manual"));
    setModal(false);
    resize(900, 700);
    m_browser = new QTextBrowser(this);
    m_browser->setOpenLinks(false);  // each link is routed below: Markdown pages here, the rest outside
    connect(m_browser, &QTextBrowser::anchorClicked, this, [this](const QUrl& link) {
        const QUrl url = m_browser->source().resolved(link);
        if (url.isLocalFile() && isMarkdown(url) && QFileInfo(url.toLocalFile()).isReadable()) {
            m_browser->setSource(url, QTextDocument::MarkdownResource);
        } else if (link.toString().startsWith(QLatin1Char('#'))) {
            m_browser->scrollToAnchor(link.fragment());
        } else if (QGuiApplication::platformName() != QLatin1String("offscreen")) {
            QDesktopServices::openUrl(url);
        }
    });

    m_back = new QToolButton(this);
    m_back->setText(tr("Back"));
    m_back->setToolTip(tr("The page shown before (Alt+Left)"));
    m_back->setShortcut(QKeySequence::Back);
    m_back->setEnabled(false);
    connect(m_back, &QToolButton::clicked, m_browser, &QTextBrowser::backward);
    connect(m_browser, &QTextBrowser::backwardAvailable, m_back, &QToolButton::setEnabled);
    m_forward = new QToolButton(this);
    m_forward->setText(tr("Forward"));
    m_forward->setToolTip(tr("The page shown after (Alt+Right)"));
    m_forward->setShortcut(QKeySequence::Forward);
    m_forward->setEnabled(false);
    connect(m_forward, &QToolButton::clicked, m_browser, &QTextBrowser::forward);
    connect(m_browser, &QTextBrowser::forwardAvailable, m_forward, &QToolButton::setEnabled);
    auto* external = new QPushButton(tr("Open in viewer"), this);
    external->setToolTip(tr("Open the page shown in the desktop's Markdown viewer or browser"));
    connect(external, &QPushButton::clicked, this, [this] {
        if (QGuiApplication::platformName() != QLatin1String("offscreen"))
            QDesktopServices::openUrl(m_browser->source());
    });
    auto* close = new QPushButton(tr("Close"), this);
    close->setToolTip(tr("Close the manual"));
    connect(close, &QPushButton::clicked, this, &QDialog::close);

    auto* bar = new QHBoxLayout();
    bar->addWidget(m_back);
    bar->addWidget(m_forward);
    bar->addStretch(1);
    bar->addWidget(external);
    bar->addWidget(close);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(bar);
    layout->addWidget(m_browser, 1);
}

bool ManualWindow::openPage(const QString& markdownPath) {
    const QFileInfo info(markdownPath);
    if (!info.isReadable()) return false;
    m_browser->setSource(QUrl::fromLocalFile(info.absoluteFilePath()), QTextDocument::MarkdownResource);
    return !m_browser->document()->isEmpty();
}

QString ManualWindow::currentPage() const {
    return m_browser->source().toLocalFile();
}

}  // namespace gkq::ui
