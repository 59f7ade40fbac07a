// RunSession's earlier runs: when the source starts a new run (an agent restart, a file holding
// several runs), the run so far moves into a session of its own that the run picker keeps, so the
// user can still look at what happened before the restart. At most kEarlierRunsKept are kept.
#include <utility>

#include "session_text.h"
#include "sp/ui/run_session.h"

namespace sp::ui {

using namespace session_text;

namespace {

// What an earlier run reads from: nothing more comes (the agent that sent it started a new run).
class EndedSource final : public TelemetrySource {
  public:
    explicit EndedSource(QString label) : label_(std::move(label)) {}
    QString label() const override { return label_; }
    bool isLive() const override { return false; }
    void start() override {}
    void stop() override {}

  private:
    QString label_;
};

}  // namespace

QString RunSession::keepEarlierRun(const std::string& next_run_id) {
    // The old agent's queued commands never apply; their entries stay in the old run's log.
    rejectPending(QStringLiteral("the agent restarted before the command applied"));
    if (store_.empty() && !runEnd()) return {};  // nothing of the run to look at: not worth a place
    auto* earlier = new RunSession(std::make_unique<EndedSource>(source_->label()), this);
    earlier->from_agent_ = fromAgent();
    earlier->followed_by_ = qs(next_run_id);
    earlier->header_ = header_;
    earlier->state_ = state_;
    earlier->load_report_ = load_report_;
    earlier->messages_lost_ = std::exchange(messages_lost_, 0);
    earlier->step_stats_ = std::exchange(step_stats_, 0);
    earlier->store_ = std::exchange(store_, TelemetryStore{});
    store_.setRetainUpdates(earlier->store_.retainUpdates());  // the new run keeps the session's retention
    earlier->events_ = std::exchange(events_, EventLog{});
    earlier->pin_terms_ = std::exchange(pin_terms_, {});
    earlier->snapshot_pins_ = snapshot_pins_;
    earlier->snapshot_updates_ = snapshot_updates_;
    earlier->mode_seen_ = mode_seen_;
    earlier->target_seen_ = target_seen_;
    earlier->tolerance_seen_ = tolerance_seen_;
    earlier->run_end_ = run_end_;
    earlier->touch();
    // This log starts over: its views drop the old rows now, before anything is added.
    events_added_ = true;
    flushEvents();
    earlier_runs_.push_back(earlier);
    emit earlierRunKept(earlier);
    if (earlier_runs_.size() > kEarlierRunsKept) {
        RunSession* oldest = earlier_runs_.front();
        earlier_runs_.erase(earlier_runs_.begin());
        emit earlierRunDropped(oldest);
        oldest->deleteLater();
    }
    return QStringLiteral("; run %1 stays in the run picker").arg(qs(earlier->header_.run_id));
}

QString RunSession::runLabel() const {
    if (followed_by_.isEmpty()) return source_->label();
    return QStringLiteral("%1 · run %2").arg(source_->label(), qs(header_.run_id));
}

QString RunSession::earlierStateText() const {
    if (const std::optional<sp::RunEnd>& end = runEnd()) {
        const QString at = QStringLiteral("finished at step %1").arg(end->step);
        return end->reason == sp::kRunEndCompleted ? at : at + QStringLiteral(" (%1)").arg(qs(end->reason));
    }
    const std::optional<std::int64_t> last =
        store_.empty() ? run_end_.last_step() : std::optional<std::int64_t>(store_.rows().back().step);
    return last ? QStringLiteral("restarted after step %1").arg(*last)
                : QStringLiteral("restarted before its first update");
}

}  // namespace sp::ui
