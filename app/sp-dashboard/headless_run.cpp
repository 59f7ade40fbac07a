#include "headless_run.h"

#include <QApplication>
#include <cstdio>
#include <cstdlib>

#include "app_timings.h"
#include "sp/ui/export.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"

namespace sp::dashboard {

HeadlessRun::HeadlessRun(sp::ui::MainWindow* window, DashboardOptions options, AppTimings* timings,
                         QObject* parent)
    : QObject(parent), window_(window), options_(std::move(options)), timings_(timings) {
    // The end of a load is a state change: the screenshot follows it at once, not at the next poll
    // (which still counts live updates and the timeout).
    for (sp::ui::RunSession* s : window_->sessions())
        connect(s, &sp::ui::RunSession::stateChanged, this, &HeadlessRun::poll, Qt::QueuedConnection);
    poll_.setInterval(100);
    connect(&poll_, &QTimer::timeout, this, &HeadlessRun::poll);
    poll_.start();
    clock_.start();
}

bool HeadlessRun::ready(QString* failure) const {
    const int wanted = options_.exit_after_updates > 0 ? options_.exit_after_updates : 1;
    std::size_t live_updates = 0;
    bool any_live = false, every_live_run_ended = true;
    for (const sp::ui::RunSession* s : window_->sessions()) {
        if (!s->followedBy().isEmpty()) {
            // An earlier run of a live source (the agent restarted): finished, nothing to wait for;
            // its updates came live.
            live_updates += s->store().updateCount();
            continue;
        }
        if (s->isLive()) {
            any_live = true;
            live_updates += s->store().updateCount();
            every_live_run_ended = every_live_run_ended && s->runEnd().has_value();
        } else if (s->state() == sp::ui::SourceState::failed) {
            *failure = s->loadReport().error;
        } else if (s->state() != sp::ui::SourceState::loaded) {
            return false;
        } else if (const sp::ui::LoadReport& r = s->loadReport(); r.records == 0 && !r.cancelled) {
            // Nothing to show is a failed load, whatever the file's lines were.
            *failure = s->source().label() + QStringLiteral(": no telemetry record in it");
            if (r.problem_count > 0)
                *failure +=
                    QStringLiteral(" (%1 bad lines; line %2: %3)")
                        .arg(r.problem_count)
                        .arg(r.problems.empty() ? 0 : r.problems.front().line)
                        .arg(QString::fromStdString(r.problems.empty() ? "" : r.problems.front().reason));
        }
    }
    // A run that ended before the updates asked for will send no more: show what came.
    return !any_live || live_updates >= static_cast<std::size_t>(wanted) || every_live_run_ended;
}

void HeadlessRun::poll() {
    if (!poll_.isActive()) return;  // finished: a queued state change came after
    QString failure;
    if (ready(&failure)) {
        if (!failure.isEmpty()) std::fprintf(stderr, "sp-dashboard: %s\n", qPrintable(failure));
        int code = failure.isEmpty() ? 0 : 1;
        if (!options_.screenshot.isEmpty()) {
            const QString error = sp::ui::exportPng(window_->renderWindow(), options_.screenshot);
            if (!error.isEmpty()) {
                std::fprintf(stderr, "sp-dashboard: %s\n", qPrintable(error));
                code = 1;
            } else {
                if (timings_ != nullptr) timings_->mark("screenshot_s");
                std::printf("sp-dashboard: wrote %s (%dx%d)\n", qPrintable(options_.screenshot),
                            window_->width(), window_->height());
            }
        }
        finish(code);
    } else if (clock_.elapsed() > options_.timeout_seconds * 1000LL) {
        std::fprintf(stderr, "sp-dashboard: timed out after %d s waiting for telemetry\n",
                     options_.timeout_seconds);
        if (!options_.screenshot.isEmpty()) sp::ui::exportPng(window_->renderWindow(), options_.screenshot);
        // A source that never delivered may be blocked where no one can stop it: the open() of a
        // FIFO without a writer, a read of a device that never ends. Returning from main would join
        // its thread and hang, so a timed-out headless run ends the process here; it has nothing
        // left to save (the screenshot is written).
        poll_.stop();
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(3);
    }
}

void HeadlessRun::finish(int code) {
    poll_.stop();
    std::fflush(stdout);
    QApplication::exit(code);
}

}  // namespace sp::dashboard
