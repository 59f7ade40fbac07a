#include "app_timings.h"

#include <QEvent>
#include <QMetaObject>
#include <cstdio>

#include "sp/ui/heatmap_view.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"

namespace sp::dashboard {

AppTimings::AppTimings(sp::ui::MainWindow* window, QElapsedTimer since_start, QObject* parent)
    : QObject(parent), window_(window), since_start_(since_start) {
    if (auto* heatmap = window->findChild<sp::ui::HeatmapView*>())
        heatmap->viewport()->installEventFilter(this);
    for (sp::ui::RunSession* session : window->sessions())
        connect(session, &sp::ui::RunSession::stateChanged, this, &AppTimings::checkLoaded);
}

void AppTimings::mark(const char* name) {
    // A paint that ran just before (the screenshot's own, for a file that loaded before the first
    // frame) is marked first: its queued mark may never run once the program exits.
    if (paint_seen_ && std::string(name) != "first_paint_s") mark("first_paint_s");
    if (!marked_.insert(name).second) return;
    std::fprintf(stderr, "sp-dashboard: timing %s %.3f\n", name, double(since_start_.nsecsElapsed()) / 1e9);
    std::fflush(stderr);
}

bool AppTimings::eventFilter(QObject* watched, QEvent* event) {
    const sp::ui::RunSession* current = window_->currentSession();
    if (event->type() == QEvent::Paint && !paint_seen_ && current != nullptr && !current->store().empty()) {
        paint_seen_ = true;
        // Marked once this paint is done and the frame flushed: the next turn of the event loop.
        QMetaObject::invokeMethod(
            this, [this] { mark("first_paint_s"); }, Qt::QueuedConnection);
    }
    return QObject::eventFilter(watched, event);
}

void AppTimings::checkLoaded() {
    bool any_replay = false;
    for (const sp::ui::RunSession* s : window_->sessions()) {
        if (s->isLive()) continue;
        any_replay = true;
        if (s->state() != sp::ui::SourceState::loaded && s->state() != sp::ui::SourceState::failed) return;
    }
    if (any_replay) mark("loaded_s");
}

}  // namespace sp::dashboard
