#include "jobs/job_watch.h"

#include "jobs/job_runner.h"

#include <QLabel>
#include <QProgressBar>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

namespace gkq::ui {

std::string durationText(double seconds) {
    const auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
    char buf[48];
    if (total >= 60)
        std::snprintf(buf, sizeof buf, "%lld min %02lld s", total / 60, total % 60);
    else
        std::snprintf(buf, sizeof buf, "%lld s", total);
    return buf;
}

ProgressWidgets makeProgressWidgets(QWidget* parent) {
    ProgressWidgets w;
    w.bar = new QProgressBar(parent);
    w.bar->setRange(0, 1000);
    w.bar->setValue(0);
    w.status = new QLabel(parent);
    w.status->setWordWrap(true);
    w.status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return w;
}

void watchJobs(JobRunner* runner, QObject* context, std::function<bool(quint64)> owns, ProgressWidgets widgets,
               std::function<void(quint64, JobEnd, const QString&)> ended, const QString& prefix) {
    // The last progress line shown: a job whose panel writes no final word replaces it with "done" or
    // "cancelled", so neither the bar nor the line stays at an intermediate step once the job has ended.
    auto shown = std::make_shared<QString>();
    QObject::connect(runner, &JobRunner::progressChanged, context,
                     [owns, widgets, prefix, shown](quint64 id, double fraction, const QString& what) {
                         if (id == 0 || !owns(id)) return;
                         widgets.bar->setValue(static_cast<int>(fraction * 1000.0));
                         *shown =
                             QStringLiteral("%1%2 % — %3").arg(prefix, QString::number(100.0 * fraction, 'f', 1), what);
                         widgets.status->setText(*shown);
                     });
    auto end = [owns, ended, widgets, prefix, shown](quint64 id, JobEnd how, const QString& message) {
        if (id == 0 || !owns(id)) return;
        const bool stillProgress = !shown->isEmpty() && widgets.status->text() == *shown;
        shown->clear();
        if (how == JobEnd::Finished) {
            widgets.bar->setValue(widgets.bar->maximum());
            if (stillProgress) widgets.status->setText(prefix + QObject::tr("done"));
        } else {
            widgets.bar->setValue(widgets.bar->minimum());
            if (stillProgress && how == JobEnd::Cancelled) widgets.status->setText(prefix + QObject::tr("cancelled"));
        }
        ended(id, how, message);
    };
    QObject::connect(runner, &JobRunner::finished, context, [end](quint64 id) { end(id, JobEnd::Finished, {}); });
    QObject::connect(runner, &JobRunner::cancelled, context, [end](quint64 id) { end(id, JobEnd::Cancelled, {}); });
    QObject::connect(runner, &JobRunner::staleDropped, context, [end](quint64 id) { end(id, JobEnd::Cancelled, {}); });
    QObject::connect(runner, &JobRunner::failed, context,
                     [end](quint64 id, const QString& message) { end(id, JobEnd::Failed, message); });
}

}  // namespace gkq::ui
