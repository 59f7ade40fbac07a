#pragma once
// One row per block at a chosen update of a RunSession's store (default: follow the latest):
// id, name, precision, sensitivity, scores, pin/force, last change step, switches.
// DisplayRole is text; SortRole carries raw numbers so a QSortFilterProxyModel sorts numerically
// (missing values are an invalid QVariant and sort last). refresh() repaints only changed cells.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <QAbstractTableModel>
#include <QElapsedTimer>
#include <QPointer>
#include <QTimer>

#include "sp/ui/telemetry_store.h"

namespace sp::ui {

class RunSession;

class BlockTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    // Name, Precision and Why first: what an operator reads, in sight in a narrow dock.
    enum Column {
        NameColumn,
        PrecisionColumn,
        WhyColumn,
        IdColumn,
        SensitivityColumn,
        GradScoreColumn,
        ErrorScoreColumn,
        RelativeMagnitudeColumn,
        ForcedColumn,
        LastChangeColumn,
        SwitchesColumn,
        ColumnCount
    };
    enum Role { SortRole = Qt::UserRole };
    static constexpr std::size_t kFollowLatest = std::numeric_limits<std::size_t>::max();

    explicit BlockTableModel(RunSession* session, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Shows the store at update `update` (clamped to the last), or kFollowLatest.
    void setUpdate(std::size_t update);
    std::size_t update() const { return update_; }
    bool followsLatest() const { return update_ == kFollowLatest; }
    // The update index shown now; kFollowLatest when the store is empty.
    std::size_t shownUpdate() const;

    // Re-reads the store: rows for new blocks are inserted, changed cells get dataChanged.
    void refresh();
    // While following the latest update, refreshes at most this often (batches arriving faster
    // are coalesced; a replay that finishes loading refreshes at once). 0: on every batch.
    void setMinRefreshInterval(int ms) { min_refresh_ms_ = ms; }
    int minRefreshInterval() const { return min_refresh_ms_; }

  private:
    // What one row shows, as compared between refreshes.
    struct RowState {
        BlockCell cell;
        float values[4] = {kMissing, kMissing, kMissing, kMissing};  // sensitivity .. rel. magnitude
        std::int64_t last_change = -1;
        int switches = 0;
        std::string name;
        std::optional<Precision> pin;  // forced == pin: the pinned precision
        QString pending;               // our commands on the block not yet applied (RunSession::pendingFor)
        QString pin_terms;             // how the pin ends besides a release (RunSession::pinTermsFor)
        std::string why;               // reason_text (latest update only), else "reason: " + the cell's
        std::string history;           // why a hold holds (decision_history.h), any update
        std::optional<std::int64_t> may_switch_at;  // the cooldown's end, while it runs
        PerFormat snr = kNoSnr;

        // The Why column: the reason, what explains a hold, the cooldown.
        std::string whyText() const;
    };
    RowState readRow(int block, std::size_t update) const;
    static QString headerToolTip(int section);
    void rebuild();
    void onUpdatesAppended();

    QPointer<RunSession> session_;
    std::size_t update_ = kFollowLatest;
    std::vector<RowState> rows_;
    int min_refresh_ms_ = 100;
    QElapsedTimer last_refresh_;
    QTimer refresh_timer_;  // single shot: the coalesced refresh
};

}  // namespace sp::ui
