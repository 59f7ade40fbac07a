#pragma once
// A data-parallel job followed as one run (agent/PROTOCOL.md §11). Rank 0's source is the run's
// (its RunSession: the store, the views, the commands; the one data path); this object listens to
// that same source, owns the other ranks' sources, feeds every rank's stream into a RankStatusModel
// and writes the job's warnings into rank 0's event log as they appear and clear.
#include <memory>
#include <vector>

#include <QObject>
#include <QTimer>

#include "sp/ui/rank_status_model.h"

namespace sp::ui {

class RunSession;
class TelemetrySource;

class RankJob : public QObject {
    Q_OBJECT
  public:
    // How often the time-based warnings (silence, a lasting lag) are looked at again.
    static constexpr int kEvaluateMs = 500;

    // `session` is rank 0's run; `others` are ranks 1..N-1 in order. The job is the session's child
    // when `parent` is null.
    RankJob(RunSession* session, std::vector<std::unique_ptr<TelemetrySource>> others,
            QObject* parent = nullptr);
    ~RankJob() override;

    // Starts the other ranks' sources (the session starts its own).
    void start();
    void stop();

    RankStatusModel* model() const { return model_; }
    int rankCount() const { return model_->rankCount(); }
    const TelemetrySource& source(int rank) const;

  private:
    void follow(int rank, TelemetrySource* source);
    void logWarnings();

    RunSession* session_;
    std::vector<std::unique_ptr<TelemetrySource>> others_;
    RankStatusModel* model_;
    QTimer evaluate_;
    std::vector<RankStatusModel::Warning> logged_;  // the warnings written to the log, still active
};

}  // namespace sp::ui
