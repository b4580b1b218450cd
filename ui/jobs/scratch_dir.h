// Scratch folders of the workbench (the quantize runs' run-N.knot, reconstruction outputs): one
// QTemporaryDir per owner, removed with it when the workbench exits. Their names carry the process id, so the next
// start removes the folders that a killed or crashed workbench left behind (removeStaleScratch()).
#pragma once

#include <QDir>
#include <QString>
#include <QStringList>

#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace gkq::ui {

inline const QString& scratchPrefix() {
    static const QString prefix = QStringLiteral("gkq-scratch-");
    return prefix;
}

// The QTemporaryDir template: $TMPDIR/gkq-scratch-<pid>-XXXXXX.
inline QString scratchTemplate() {
    return QDir::tempPath() + QLatin1Char('/') + scratchPrefix() + QString::number(::getpid()) +
           QStringLiteral("-XXXXXX");
}

// Removes every $TMPDIR/gkq-scratch-<pid>-* folder whose process no longer runs; returns how many it removed.
inline int removeStaleScratch() {
    QDir tmp(QDir::tempPath());
    int removed = 0;
    for (const QString& name : tmp.entryList({scratchPrefix() + QLatin1Char('*')}, QDir::Dirs | QDir::NoDotAndDotDot)) {
        const QString rest = name.mid(scratchPrefix().size());
        const qsizetype dash = rest.indexOf(QLatin1Char('-'));
        bool ok = false;
        const long pid = dash > 0 ? rest.left(dash).toLong(&ok) : 0;
        if (!ok || pid <= 0 || pid == static_cast<long>(::getpid())) continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running (or not ours)
        if (QDir(tmp.filePath(name)).removeRecursively()) ++removed;
    }
    return removed;
}

}  // namespace gkq::ui
