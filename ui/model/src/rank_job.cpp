#include "sp/ui/rank_job.h"

#include <algorithm>

#include "sp/ui/run_session.h"

namespace sp::ui {
namespace {

QStringList labels(const RunSession& session, const std::vector<std::unique_ptr<TelemetrySource>>& others) {
    QStringList out{session.source().label()};
    for (const auto& s : others) out << s->label();
    return out;
}

// What the log says when a warning clears.
QString clearedText(const RankStatusModel& model, const RankStatusModel::Warning& w) {
    const RankStatusModel::RankStatus& s = model.status(w.rank);
    switch (w.kind) {
        case RankStatusModel::WarningKind::map:
            if (s.compared_step && s.agrees)
                return QStringLiteral("rank %1's map agrees with rank 0's again at step %2")
                    .arg(w.rank)
                    .arg(*s.compared_step);
            return QStringLiteral("rank %1's map: no longer compared (the rank restarted)").arg(w.rank);
        case RankStatusModel::WarningKind::behind:
            return QStringLiteral("rank %1 caught up (step %2)").arg(w.rank).arg(s.step.value_or(-1));
        case RankStatusModel::WarningKind::silent:
            return QStringLiteral("rank %1 is heard again").arg(w.rank);
    }
    return {};
}

}  // namespace

RankJob::RankJob(RunSession* session, std::vector<std::unique_ptr<TelemetrySource>> others, QObject* parent)
    : QObject(parent != nullptr ? parent : session),
      session_(session),
      others_(std::move(others)),
      model_(new RankStatusModel(labels(*session, others_), this)) {
    follow(0, &session->source());
    for (std::size_t r = 0; r < others_.size(); ++r) follow(int(r) + 1, others_[r].get());
    connect(model_, &RankStatusModel::warningsChanged, this, &RankJob::logWarnings);
    evaluate_.setInterval(kEvaluateMs);
    connect(&evaluate_, &QTimer::timeout, model_, &RankStatusModel::evaluate);
}

RankJob::~RankJob() {
    stop();
}

void RankJob::follow(int rank, TelemetrySource* source) {
    RankStatusModel* m = model_;
    connect(source, &TelemetrySource::headerReceived, m,
            [m, rank](const sp::RunHeader& h) { m->header(rank, h); });
    connect(source, &TelemetrySource::snapshotReceived, m,
            [m, rank](const sp::protocol::Snapshot& s) { m->snapshot(rank, s); });
    connect(source, &TelemetrySource::recordsReceived, m, [m, rank](const RecordBatch& batch) {
        if (batch) m->records(rank, *batch);
    });
    connect(source, &TelemetrySource::heartbeatReceived, m,
            [m, rank](qint64 step) { m->heartbeat(rank, step); });
    connect(source, &TelemetrySource::stateChanged, m,
            [m, rank](SourceState state, const QString&) { m->sourceState(rank, state); });
}

void RankJob::start() {
    for (const auto& s : others_) s->start();
    evaluate_.start();
}

void RankJob::stop() {
    evaluate_.stop();
    for (const auto& s : others_) s->stop();
}

const TelemetrySource& RankJob::source(int rank) const {
    return rank == 0 ? session_->source() : *others_[std::size_t(rank) - 1];
}

// A warning goes into the log once when it appears (its text then keeps changing with the clock
// and the step counts, the log does not) and once when it clears; a map warning again when a later
// step differs after an agreement.
void RankJob::logWarnings() {
    const std::vector<RankStatusModel::Warning>& now = model_->warnings();
    const auto same = [](const RankStatusModel::Warning& a, const RankStatusModel::Warning& b) {
        return a.rank == b.rank && a.kind == b.kind;
    };
    for (const RankStatusModel::Warning& was : logged_)
        if (std::none_of(now.begin(), now.end(), [&](const auto& w) { return same(w, was); }))
            session_->note(EventCategory::other, clearedText(*model_, was), {},
                           model_->status(was.rank).compared_step.value_or(-1));
    for (const RankStatusModel::Warning& w : now)
        if (std::none_of(logged_.begin(), logged_.end(), [&](const auto& was) { return same(w, was); }))
            session_->note(EventCategory::warning, w.text, source(w.rank).label(), w.step);
    logged_ = now;
}

}  // namespace sp::ui
