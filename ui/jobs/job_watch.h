// What every panel that runs jobs shows under its buttons — a progress bar and a status line — and the one place
// that routes the JobRunner's signals for the panel's own jobs to it: progress of an owned job moves the bar and
// shows "NN.N % — what"; its end (finished, cancelled, dropped as stale, failed with the message) reaches `ended`,
// after the bar is put in its final state (full when finished, empty otherwise) and a progress line nobody
// replaced says "done" or "cancelled".
// Jobs the panel does not own (another panel's, or one it has replaced) are ignored.
#pragma once

#include <QString>
#include <functional>
#include <string>

class QLabel;
class QObject;
class QProgressBar;
class QWidget;

namespace gkq::ui {

class JobRunner;

enum class JobEnd { Finished, Cancelled, Failed };

struct ProgressWidgets {
    QProgressBar* bar = nullptr;  // range 0..1000, at 0
    QLabel* status = nullptr;     // word-wrapped, selectable (errors name files: users copy them)
};
ProgressWidgets makeProgressWidgets(QWidget* parent);

// `owns(id)` says whether the job is the panel's; `context` bounds the connections' lifetime; `prefix` goes in front
// of the progress text ("Encoding the rknot: ").
void watchJobs(JobRunner* runner, QObject* context, std::function<bool(quint64)> owns, ProgressWidgets widgets,
               std::function<void(quint64 id, JobEnd how, const QString& message)> ended, const QString& prefix = {});

// "1 min 05 s" / "42 s": a duration measured or extrapolated from a measurement (plain std::string: job threads
// build their progress lines with it).
std::string durationText(double seconds);

}  // namespace gkq::ui
