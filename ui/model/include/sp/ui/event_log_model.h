#pragma once
// The run's event log as a table for views: Time, Step, Kind, Message, State. Rows only ever
// append (beginInsertRows for the new ones); a command's state change repaints its row.
// Colours and icons are the view's business: it reads CategoryRole and CommandStateRole.
#include <QAbstractTableModel>
#include <QPointer>

#include "sp/ui/event_log.h"

namespace sp::ui {

class RunSession;

class EventLogModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column { TimeColumn, StepColumn, KindColumn, MessageColumn, StateColumn, ColumnCount };
    enum Role {
        CategoryRole = Qt::UserRole,  // int(EventCategory)
        CommandStateRole,             // int(CommandState)
        TimestampRole,                // double, seconds since the epoch
        RequestIdRole,                // QString, our commands only
        StepRole,                     // qlonglong, the step the entry belongs to; -1: none
    };

    explicit EventLogModel(RunSession* session, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Catches up with the log: inserts rows for new entries (a log that started over resets the model).
    void sync();
    // The log the rows show (its index answers EventLogFilter); null without a session.
    const EventLog* log() const;

  private:
    void onCommandStateChanged(const QString& request_id);

    QPointer<RunSession> session_;
    int rows_ = 0;
    std::uint64_t log_serial_ = 0;  // EventLog::serial() of the log the rows are from
};

}  // namespace sp::ui
