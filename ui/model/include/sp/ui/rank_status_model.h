#pragma once
// The ranks of a data-parallel job side by side (agent/PROTOCOL.md §11), one row per rank: where
// it is, whether it is heard, its run id, its latest step and how far it trails the furthest rank,
// its latest update and whether that update's map agrees with rank 0's at the same step (map
// checksums, sp::map_checksum), its latest train loss. It also words the job's warnings:
//  - map: rank r's update at step S carries a different map than rank 0's at S. Stays until a later
//    update of rank r agrees with rank 0's.
//  - behind: rank r trails the furthest rank by more than behindThreshold() steps, for longer than
//    kBehindGraceMs (a heartbeat's period of sampling lag is not a lag). Clears when it catches up.
//  - silent: nothing from rank r (heartbeats count) for more than kSilentMs while another rank is
//    heard. Clears when it is heard again.
// A rank whose run ended (run_end) is never behind or silent. Fed by RankJob from each rank's
// source, or directly by tests; time comes from a clock tests can replace.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>

#include "sp/jsonl.h"
#include "sp/protocol.h"
#include "sp/ui/telemetry_source.h"

namespace sp::ui {

class RankStatusModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column {
        RankColumn,
        EndpointColumn,
        StateColumn,
        RunColumn,
        StepColumn,
        BehindColumn,
        UpdateColumn,
        MapColumn,
        LossColumn,
        ColumnCount
    };
    // True on a cell that shows a warning's cause (the Map, Behind or State cell); views colour it.
    enum Role { WarnedRole = Qt::UserRole };

    static constexpr qint64 kSilentMs = 5000;
    static constexpr qint64 kBehindGraceMs = 2000;
    static constexpr std::int64_t kMinBehindSteps = 20;
    // Update maps kept per rank for comparing with the other side when it arrives.
    static constexpr std::size_t kKeptMaps = 256;

    enum class WarningKind : std::uint8_t { map, behind, silent };
    struct Warning {
        int rank = 0;
        WarningKind kind = WarningKind::map;
        std::int64_t step = -1;  // the update step (map), the rank's step (behind), -1 (silent)
        QString text;
        bool operator==(const Warning& o) const {
            return rank == o.rank && kind == o.kind && step == o.step && text == o.text;
        }
    };

    struct RankStatus {
        QString endpoint;
        SourceState state = SourceState::idle;
        bool finished = false;  // its run_end arrived
        QString run_id;
        std::optional<std::int64_t> step;           // the latest step heard (heartbeat, record, snapshot)
        std::optional<std::int64_t> update_step;    // the latest update record's step
        std::optional<double> train_loss;           // that update's train loss
        std::optional<std::int64_t> compared_step;  // the latest update step compared with rank 0's
        bool agrees = true;                         // at compared_step
        QString difference;                         // when not: the first differing blocks
        qint64 last_heard_ms = 0;
        qint64 behind_since_ms = -1;  // -1: not more than the threshold behind
        // Recent update maps by step (kKeptMaps at most), with their checksums.
        std::map<std::int64_t, std::pair<std::uint64_t, std::vector<sp::Precision>>> maps;
    };

    // Milliseconds on a monotonic clock.
    using Clock = std::function<qint64()>;

    // One row per endpoint (rank 0 first); the clock defaults to a steady clock.
    explicit RankStatusModel(const QStringList& endpoints, QObject* parent = nullptr);

    // Replaces the clock (tests); every rank counts as heard at the new clock's now.
    void setClock(Clock clock);

    // What rank `r`'s source said.
    void header(int r, const sp::RunHeader& header);
    void snapshot(int r, const sp::protocol::Snapshot& snapshot);
    void records(int r, const std::vector<sp::TelemetryRecord>& records);
    void heartbeat(int r, std::int64_t step);
    void sourceState(int r, SourceState state);
    // Re-evaluates the time-based warnings (silence, a lasting lag); RankJob calls it twice a second.
    void evaluate();

    int rankCount() const { return int(ranks_.size()); }
    const RankStatus& status(int r) const { return ranks_[std::size_t(r)]; }
    // The furthest step any rank reached; nullopt before any step was heard.
    std::optional<std::int64_t> furthestStep() const;
    // Steps rank `r` trails the furthest rank; nullopt before it was heard.
    std::optional<std::int64_t> stepsBehind(int r) const;
    // max(2 × the job's update_interval_steps, kMinBehindSteps), the interval from rank 0's config.
    std::int64_t behindThreshold() const;
    const std::vector<Warning>& warnings() const { return warnings_; }
    // The warnings one per line ("" when none), for the window's warning bar.
    QString warningText() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  signals:
    // The warnings changed (one appeared or cleared, or its text changed).
    void warningsChanged();

  private:
    RankStatus& at(int r) { return ranks_[std::size_t(r)]; }
    void heard(int r);
    void startOver(int r, const QString& run_id);
    void reachStep(int r, std::int64_t step);
    void onUpdate(int r, const sp::UpdateRecord& update);
    void compare(int r, std::int64_t step);
    void changed();
    std::vector<Warning> computeWarnings() const;
    QString cellText(int r, int column) const;

    std::vector<RankStatus> ranks_;
    std::vector<std::string> block_names_;  // rank 0's layout, for the difference's wording
    std::int64_t update_interval_ = 10;
    Clock clock_;
    std::vector<Warning> warnings_;
};

QString toString(RankStatusModel::WarningKind kind);

}  // namespace sp::ui
