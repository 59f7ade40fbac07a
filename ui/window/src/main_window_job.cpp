// MainWindow and the agents it follows live: connecting to one agent or to the ranks of a
// data-parallel job, and the job's rank panel and warning bar (agent/PROTOCOL.md §11).
#include <QDockWidget>
#include <QLabel>

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
    rank_dock_->setVisible(several);
    const QString warning = several ? job->model()->warningText() : QString();
    job_warning_->setText(warning);
    job_warning_->setToolTip(warning.isEmpty() ? QString() : tr("See the Ranks panel and the event log"));
    job_warning_->setVisible(!warning.isEmpty());
}

}  // namespace sp::ui
