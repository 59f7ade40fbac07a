#include "sp/ui/rank_status_model.h"

#include <algorithm>
#include <chrono>
#include <type_traits>
#include <variant>

#include "sp/config.h"
#include "sp/distributed.h"
#include "sp/run_end.h"

namespace sp::ui {
namespace {

const QString kNone = QStringLiteral("—");

qint64 steadyMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::int64_t intervalOf(const std::string& config_json, std::int64_t fallback) {
    if (config_json.empty()) return fallback;
    try {
        return sp::parse_config(config_json).update_interval_steps;
    } catch (const sp::ConfigError&) {  // a config we cannot read: keep what we had
        return fallback;
    }
}

std::vector<sp::Precision> mapOf(const sp::UpdateRecord& update) {
    int blocks = 0;
    for (const sp::BlockDetail& d : update.block_details) blocks = std::max(blocks, d.id + 1);
    std::vector<sp::Precision> map(std::size_t(blocks), sp::Precision::bf16);
    for (const sp::BlockDetail& d : update.block_details)
        if (d.id >= 0) map[std::size_t(d.id)] = d.precision;
    return map;
}

// The warning whose cause a column shows, if any.
std::optional<RankStatusModel::WarningKind> warningShownIn(int column) {
    switch (column) {
        case RankStatusModel::MapColumn:
            return RankStatusModel::WarningKind::map;
        case RankStatusModel::BehindColumn:
            return RankStatusModel::WarningKind::behind;
        case RankStatusModel::StateColumn:
            return RankStatusModel::WarningKind::silent;
        default:
            return std::nullopt;
    }
}

}  // namespace

QString toString(RankStatusModel::WarningKind kind) {
    switch (kind) {
        case RankStatusModel::WarningKind::map:
            return QStringLiteral("map");
        case RankStatusModel::WarningKind::behind:
            return QStringLiteral("behind");
        case RankStatusModel::WarningKind::silent:
            return QStringLiteral("silent");
    }
    return {};
}

RankStatusModel::RankStatusModel(const QStringList& endpoints, QObject* parent)
    : QAbstractTableModel(parent), clock_(steadyMs) {
    const qint64 now = clock_();
    for (const QString& e : endpoints) {
        RankStatus s;
        s.endpoint = e;
        s.last_heard_ms = now;  // a rank never heard counts its silence from here
        ranks_.push_back(std::move(s));
    }
}

void RankStatusModel::setClock(Clock clock) {
    clock_ = std::move(clock);
    const qint64 now = clock_();
    for (RankStatus& s : ranks_) s.last_heard_ms = now;
}

// ---- Feeding ----

void RankStatusModel::header(int r, const sp::RunHeader& header) {
    if (r < 0 || r >= rankCount()) return;
    startOver(r, QString::fromStdString(header.run_id));
    if (r == 0) {
        if (!header.blocks.empty()) {
            block_names_.clear();
            for (const sp::BlockInfo& b : header.blocks) block_names_.push_back(b.name);
        }
        update_interval_ = intervalOf(header.config_json, update_interval_);
    }
    heard(r);
    changed();
}

void RankStatusModel::snapshot(int r, const sp::protocol::Snapshot& snapshot) {
    if (r < 0 || r >= rankCount()) return;
    startOver(r, QString::fromStdString(snapshot.run_id));
    if (r == 0) {
        block_names_.clear();
        for (const sp::BlockInfo& b : snapshot.layout) block_names_.push_back(b.name);
        update_interval_ = intervalOf(snapshot.config_json, update_interval_);
    }
    reachStep(r, snapshot.step);
    if (snapshot.last_update) onUpdate(r, *snapshot.last_update);
    heard(r);
    changed();
}

void RankStatusModel::records(int r, const std::vector<sp::TelemetryRecord>& records) {
    if (r < 0 || r >= rankCount()) return;
    for (const sp::TelemetryRecord& rec : records) {
        std::visit(
            [&](const auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, sp::UpdateRecord>) {
                    onUpdate(r, x);
                } else if constexpr (std::is_same_v<T, sp::RunHeader>) {
                    startOver(r, QString::fromStdString(x.run_id));
                } else if constexpr (std::is_same_v<T, sp::EventRecord>) {
                    reachStep(r, x.step);
                    if (x.kind == sp::kRunEndKind) at(r).finished = true;
                } else {
                    reachStep(r, x.step);
                }
            },
            rec);
    }
    heard(r);
    changed();
}

void RankStatusModel::heartbeat(int r, std::int64_t step) {
    if (r < 0 || r >= rankCount()) return;
    reachStep(r, step);
    heard(r);
    changed();
}

void RankStatusModel::sourceState(int r, SourceState state) {
    if (r < 0 || r >= rankCount()) return;
    at(r).state = state;
    if (state == SourceState::live) heard(r);
    changed();
}

void RankStatusModel::heard(int r) {
    at(r).last_heard_ms = clock_();
}

// A new run id on this rank (its agent restarted): what it reported before is another run's.
void RankStatusModel::startOver(int r, const QString& run_id) {
    RankStatus& s = at(r);
    if (run_id.isEmpty() || run_id == s.run_id) return;
    const bool first = s.run_id.isEmpty();
    s.run_id = run_id;
    if (first) return;
    RankStatus fresh;
    fresh.endpoint = s.endpoint;
    fresh.state = s.state;
    fresh.run_id = run_id;
    fresh.last_heard_ms = s.last_heard_ms;
    s = std::move(fresh);
}

void RankStatusModel::reachStep(int r, std::int64_t step) {
    RankStatus& s = at(r);
    if (!s.step || step > *s.step) s.step = step;
}

void RankStatusModel::onUpdate(int r, const sp::UpdateRecord& update) {
    RankStatus& s = at(r);
    const std::int64_t step = update.step_id;
    reachStep(r, step);
    if (!s.update_step || step >= *s.update_step) {
        s.update_step = step;
        s.train_loss = update.train_loss;
    }
    std::vector<sp::Precision> map = mapOf(update);
    const std::uint64_t checksum = sp::map_checksum(map);
    s.maps[step] = {checksum, std::move(map)};
    while (s.maps.size() > kKeptMaps) s.maps.erase(s.maps.begin());
    if (r != 0) {
        compare(r, step);
        return;
    }
    for (int q = 1; q < rankCount(); ++q) compare(q, step);
}

// Rank r's map at `step` against rank 0's, once both are in.
void RankStatusModel::compare(int r, std::int64_t step) {
    RankStatus& s = at(r);
    const auto mine = s.maps.find(step);
    const auto& reference = at(0).maps;
    const auto theirs = reference.find(step);
    if (mine == s.maps.end() || theirs == reference.end()) return;
    if (s.compared_step && step < *s.compared_step) return;  // a later step was compared already
    s.compared_step = step;
    const auto& [my_sum, my_map] = mine->second;
    const auto& [their_sum, their_map] = theirs->second;
    s.agrees = my_sum == their_sum && my_map.size() == their_map.size();
    s.difference.clear();
    if (s.agrees) return;
    // describe_map_difference words it from this rank's side ("here"); the dashboard names it.
    s.difference = QString::fromStdString(sp::describe_map_difference(my_map, their_map, block_names_, 0))
                       .replace(QStringLiteral(" here, "), QStringLiteral(" on rank %1, ").arg(r));
}

void RankStatusModel::changed() {
    if (rankCount() > 0) emit dataChanged(index(0, 0), index(rankCount() - 1, ColumnCount - 1));
    evaluate();
}

void RankStatusModel::evaluate() {
    const qint64 now = clock_();
    const std::int64_t threshold = behindThreshold();
    for (int r = 0; r < rankCount(); ++r) {
        RankStatus& s = at(r);
        const std::optional<std::int64_t> behind = stepsBehind(r);
        const bool lagging = !s.finished && behind && *behind > threshold;
        if (!lagging)
            s.behind_since_ms = -1;
        else if (s.behind_since_ms < 0)
            s.behind_since_ms = now;
    }
    // The silence shown in the state column moves with the clock.
    if (rankCount() > 0) emit dataChanged(index(0, StateColumn), index(rankCount() - 1, StateColumn));
    std::vector<Warning> next = computeWarnings();
    if (next == warnings_) return;
    warnings_ = std::move(next);
    emit warningsChanged();
}

// ---- Queries ----

std::optional<std::int64_t> RankStatusModel::furthestStep() const {
    std::optional<std::int64_t> furthest;
    for (const RankStatus& s : ranks_)
        if (s.step && (!furthest || *s.step > *furthest)) furthest = s.step;
    return furthest;
}

std::optional<std::int64_t> RankStatusModel::stepsBehind(int r) const {
    const RankStatus& s = status(r);
    if (!s.step) return std::nullopt;
    return *furthestStep() - *s.step;
}

std::int64_t RankStatusModel::behindThreshold() const {
    return std::max<std::int64_t>(2 * update_interval_, kMinBehindSteps);
}

std::vector<RankStatusModel::Warning> RankStatusModel::computeWarnings() const {
    const qint64 now = clock_();
    const auto silent = [&](const RankStatus& s) { return !s.finished && now - s.last_heard_ms > kSilentMs; };
    std::vector<Warning> out;
    for (int r = 0; r < rankCount(); ++r) {
        const RankStatus& s = status(r);
        if (s.compared_step && !s.agrees)
            out.push_back({r, WarningKind::map, *s.compared_step,
                           QStringLiteral("rank %1's map at step %2 differs from rank 0's: %3")
                               .arg(r)
                               .arg(*s.compared_step)
                               .arg(s.difference)});
        if (s.behind_since_ms >= 0 && now - s.behind_since_ms >= kBehindGraceMs) {
            int furthest = 0;
            while (status(furthest).step != furthestStep()) ++furthest;
            out.push_back({r, WarningKind::behind, *s.step,
                           QStringLiteral("rank %1 is %2 steps behind (step %3, rank %4 at step %5; more "
                                          "than %6); this clears when it catches up")
                               .arg(r)
                               .arg(*stepsBehind(r))
                               .arg(*s.step)
                               .arg(furthest)
                               .arg(*furthestStep())
                               .arg(behindThreshold())});
        }
        bool others_heard = false;
        for (int q = 0; q < rankCount(); ++q)
            if (q != r && !status(q).finished && !silent(status(q))) others_heard = true;
        if (silent(s) && others_heard)
            out.push_back({r, WarningKind::silent, -1,
                           QStringLiteral("rank %1 (%2) has sent nothing for %3 s while the others are "
                                          "heard; this clears when it is heard again")
                               .arg(r)
                               .arg(s.endpoint)
                               .arg((now - s.last_heard_ms) / 1000)});
    }
    return out;
}

QString RankStatusModel::warningText() const {
    QStringList lines;
    for (const Warning& w : warnings_) lines << w.text;
    return lines.join(QLatin1Char('\n'));
}

// ---- The table ----

int RankStatusModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : rankCount();
}

int RankStatusModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QString RankStatusModel::cellText(int r, int column) const {
    const RankStatus& s = status(r);
    const auto number = [](const std::optional<std::int64_t>& v) { return v ? QString::number(*v) : kNone; };
    switch (column) {
        case RankColumn:
            return QString::number(r);
        case EndpointColumn:
            return s.endpoint;
        case StateColumn: {
            const QString text = s.finished ? QStringLiteral("finished") : toString(s.state);
            const qint64 quiet = clock_() - s.last_heard_ms;
            return !s.finished && quiet > kSilentMs
                       ? QStringLiteral("%1, silent %2 s").arg(text).arg(quiet / 1000)
                       : text;
        }
        case RunColumn:
            return s.run_id.isEmpty() ? kNone : s.run_id;
        case StepColumn:
            return number(s.step);
        case BehindColumn:
            return number(stepsBehind(r));
        case UpdateColumn:
            return number(s.update_step);
        case MapColumn:
            if (r == 0) return QStringLiteral("reference");
            if (!s.compared_step) return kNone;
            return (s.agrees ? QStringLiteral("agrees (step %1)") : QStringLiteral("differs (step %1)"))
                .arg(*s.compared_step);
        case LossColumn:
            return s.train_loss ? QString::number(*s.train_loss, 'g', 5) : kNone;
        default:
            return {};
    }
}

QVariant RankStatusModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const int r = index.row();
    const int column = index.column();
    if (role == Qt::DisplayRole) return cellText(r, column);
    if (role == Qt::TextAlignmentRole) {
        const bool numeric = column == RankColumn || column == StepColumn || column == BehindColumn ||
                             column == UpdateColumn || column == LossColumn;
        return QVariant::fromValue(
            Qt::Alignment(numeric ? Qt::AlignRight | Qt::AlignVCenter : Qt::AlignLeft | Qt::AlignVCenter));
    }
    const std::optional<WarningKind> kind = warningShownIn(column);
    const auto warning = std::find_if(warnings_.begin(), warnings_.end(), [&](const Warning& w) {
        return kind && w.rank == r && w.kind == *kind;
    });
    if (role == WarnedRole) return warning != warnings_.end();
    if (role == Qt::ToolTipRole) {
        if (warning != warnings_.end()) return warning->text;
        if (column == MapColumn && r != 0 && !status(r).compared_step)
            return tr("No update of this rank and of rank 0 at the same step yet");
        return cellText(r, column);
    }
    return {};
}

QVariant RankStatusModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    static const char* const kTitles[ColumnCount] = {"Rank",   "Endpoint", "State", "Run",     "Step",
                                                     "Behind", "Update",   "Map",   "Job loss"};
    static const char* const kTips[ColumnCount] = {
        "The rank's index in the job (rank 0 decides and takes commands)",
        "The rank's telemetry endpoint",
        "The connection to the rank's agent; silent: nothing heard, heartbeats included",
        "The rank's run id",
        "The latest step the rank reported (heartbeats, records)",
        "Steps behind the furthest rank",
        "The step of the rank's latest update record",
        "Whether the rank's map at its latest comparable update step equals rank 0's (map checksum)",
        "The job's mean train loss at the rank's latest update: the agent all-reduces every step's loss "
        "over the ranks, so each rank reports the same value (not its own batch's)"};
    if (role == Qt::DisplayRole) return tr(kTitles[section]);
    if (role == Qt::ToolTipRole) return tr(kTips[section]);
    return {};
}

}  // namespace sp::ui
