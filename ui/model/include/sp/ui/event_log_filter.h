#pragma once
// An EventLogModel's rows of one kind (or all) up to a step (or all), for the event log panel. The
// rows come from the log's index (EventLog::select): a new kind or step limit costs the entries that
// match, not the log, and changes the rows it shows by inserting and removing at the end where it can
// (a replay moving its cursor keeps the view's scroll and selection). New entries cost themselves.
#include <cstdint>
#include <optional>
#include <vector>

#include <QAbstractProxyModel>
#include <QPointer>

#include "sp/ui/event_log.h"

namespace sp::ui {

class EventLogModel;

class EventLogFilter : public QAbstractProxyModel {
    Q_OBJECT
  public:
    explicit EventLogFilter(QObject* parent = nullptr);

    // An EventLogModel (anything else, or null, shows nothing).
    void setSourceModel(QAbstractItemModel* source) override;
    // One kind of entry; nullopt: every kind.
    void setCategory(std::optional<EventCategory> category);
    // Hides entries of later steps (entries without a step always show); nullopt shows all.
    void setStepLimit(std::optional<std::int64_t> step);

    QModelIndex mapToSource(const QModelIndex& proxy) const override;
    QModelIndex mapFromSource(const QModelIndex& source) const override;
    QModelIndex index(int row, int column, const QModelIndex& parent = QModelIndex()) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    // The source's headers, also while no row shows.
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  private:
    const EventLog* log() const;
    // The source rows to show now, ascending.
    std::vector<int> wanted() const;
    // Moves the rows to wanted(): the common start stays, the rest is removed and inserted.
    void update();
    void onRowsInserted(int first, int last);
    void onDataChanged(const QModelIndex& top_left, const QModelIndex& bottom_right, const QList<int>& roles);
    void onReset();

    QPointer<EventLogModel> source_;
    std::optional<EventCategory> category_;
    std::optional<std::int64_t> step_limit_;
    std::vector<int> rows_;  // the source rows shown, ascending
    QList<QMetaObject::Connection> connections_;
};

}  // namespace sp::ui
