// MainWindow and the agents it follows live: connecting to one agent or to the ranks of a
// data-parallel job, and the job's rank panel and warning bar (agent/PROTOCOL.md §11).
#include <QAction>
#include <QDockWidget>
#include <QEvent>
#include <QLabel>
#include <QSettings>

#include "sp/ui/connection_dialog.h"
#include "sp/ui/job_spec.h"
#include "sp/ui/live_source.h"
#include "sp/ui/main_window.h"
#include "sp/ui/rank_job.h"
#include "sp/ui/rank_panel.h"
#include "sp/ui/recent_list.h"
#include "sp/ui/run_session.h"

namespace sp::ui {

bool MainWindow::connectTo(const ConnectionRequest& request, QString* error) {
    std::optional<std::vector<LiveEndpoints>> ranks = parseJobSpec(request.spec, request.ranks, error);
    if (!ranks) return false;
    if (!request.server_key_file.isEmpty()) {
        LiveEndpoints keys;
        if (!loadCurveKeys(request.server_key_file, request.client_key_file, keys, error)) return false;
        for (LiveEndpoints& e : *ranks) {
            e.server_public_key = keys.server_public_key;
            e.client_public_key = keys.client_public_key;
            e.client_secret_key = keys.client_secret_key;
        }
    }
    // A job from --ranks N is remembered as its list, so the recent entry reconnects to every rank.
    recent_endpoints_->add(ranks->size() > 1 ? jobSpecText(*ranks) : request.spec);
    updateRecentMenus();
    // Rank 0 is the run (the one data path); the other ranks feed the job's rank status model.
    addSession(std::make_unique<LiveSource>(ranks->front()));
    if (ranks->size() > 1) {
        std::vector<std::unique_ptr<TelemetrySource>> others;
        for (std::size_t r = 1; r < ranks->size(); ++r)
            others.push_back(std::make_unique<LiveSource>((*ranks)[r]));
        auto* job = new RankJob(sessions_.back(), std::move(others));
        jobs_.back() = job;
        connect(job->model(), &RankStatusModel::warningsChanged, this, [this, job] {
            if (jobOf(current_) == job) showJob();
        });
        job->start();
        showJob();
        // Following a job is what the user just asked for: its tab comes to the front.
        if (!ranks_closed_) rank_dock_->raise();
    }
    return true;
}

RankJob* MainWindow::jobOf(const RunSession* session) const {
    const auto at = std::find(sessions_.begin(), sessions_.end(), session);
    return at == sessions_.end() ? nullptr : jobs_[std::size_t(at - sessions_.begin())];
}

void MainWindow::showJob() {
    RankJob* job = jobOf(current_);
    const bool several = job != nullptr && job->rankCount() > 1;
    if (rank_panel_->model() != (several ? job->model() : nullptr))
        rank_panel_->setModel(several ? job->model() : nullptr);
    rank_dock_->toggleViewAction()->setEnabled(several);
    rank_dock_->setVisible(several && !ranks_closed_);
    const QString warning = several ? job->model()->warningText() : QString();
    job_warning_->setText(warning);
    job_warning_->setToolTip(warning.isEmpty() ? QString() : tr("See the Ranks panel and the event log"));
    job_warning_->setVisible(!warning.isEmpty());
}

void MainWindow::placeRanksDock() {
    // Under the heatmap and charts a job's panel took their height (at 1600×1000 a 2-rank job shrank
    // the charts from 392 to 334 pixels); as a tab of the right-hand column it takes none. The user
    // may drag it anywhere: the window's saved state keeps that place.
    addDockWidget(Qt::RightDockWidgetArea, rank_dock_);
    tabifyDockWidget(event_dock_, rank_dock_);
    event_dock_->raise();
}

void MainWindow::rememberRanksClosed(bool closed) {
    ranks_closed_ = closed;
    QSettings().setValue(QLatin1String(kRanksClosedKey), closed);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
    // A close is the user's (the dock's close button, or View ▸ Ranks unchecked); showJob hides the
    // dock without one. Jobs followed from now on, in later sessions too, leave it closed.
    if (watched == rank_dock_ && event->type() == QEvent::Close) rememberRanksClosed(true);
    return QMainWindow::eventFilter(watched, event);
}

}  // namespace sp::ui
