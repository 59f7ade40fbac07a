#include "sp/ui/event_log_model.h"

#include <QDateTime>

#include "sp/ui/run_session.h"

namespace sp::ui {

EventLogModel::EventLogModel(RunSession* session, QObject* parent)
    : QAbstractTableModel(parent), session_(session) {
    if (!session) return;
    rows_ = static_cast<int>(session->events().size());
    log_serial_ = session->events().serial();
    connect(session, &RunSession::eventsAppended, this, &EventLogModel::sync);
    connect(session, &RunSession::commandStateChanged, this, &EventLogModel::onCommandStateChanged);
}

int EventLogModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : rows_;
}

int EventLogModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

const EventLog* EventLogModel::log() const {
    return session_ ? &session_->events() : nullptr;
}

void EventLogModel::sync() {
    const int size = session_ ? static_cast<int>(session_->events().size()) : 0;
    const std::uint64_t serial = session_ ? session_->events().serial() : 0;
    if (serial != log_serial_ || size < rows_) {  // another log (a new run's): nothing to keep
        beginResetModel();
        rows_ = size;
        log_serial_ = serial;
        endResetModel();
        return;
    }
    if (size == rows_) return;
    beginInsertRows(QModelIndex(), rows_, size - 1);
    rows_ = size;
    endInsertRows();
}

void EventLogModel::onCommandStateChanged(const QString& request_id) {
    if (!session_) return;
    const auto index = session_->events().findCommand(request_id);
    // Rows not inserted yet get their current state when sync() inserts them.
    if (!index || static_cast<int>(*index) >= rows_) return;
    const int row = static_cast<int>(*index);
    emit dataChanged(this->index(row, 0), this->index(row, ColumnCount - 1));
}

QVariant EventLogModel::data(const QModelIndex& index, int role) const {
    if (!session_ || !index.isValid() || index.row() >= rows_ || index.column() >= ColumnCount ||
        std::size_t(index.row()) >= session_->events().size())  // the log started over, not synced yet
        return {};
    const EventEntry& e = session_->events().at(static_cast<std::size_t>(index.row()));
    switch (role) {
        case Qt::DisplayRole:
            switch (index.column()) {
                case TimeColumn:
                    return e.timestamp > 0
                               ? QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(e.timestamp * 1000.0))
                                     .toString(QStringLiteral("hh:mm:ss"))
                               : QString();
                case StepColumn:
                    return e.step >= 0 ? QVariant(static_cast<qlonglong>(e.step)) : QVariant(QString());
                case KindColumn:
                    return toString(e.category);
                case MessageColumn:
                    return e.text;
                case StateColumn:
                    return toString(e.state);
                default:
                    return {};
            }
        case StepRole:
            return static_cast<qlonglong>(e.step);
        case Qt::ToolTipRole: {
            QString tip = e.text;
            if (!e.detail.isEmpty()) tip += QLatin1Char('\n') + e.detail;
            if (!e.request_id.isEmpty()) tip += QStringLiteral("\nrequest %1").arg(e.request_id);
            return tip;
        }
        case CategoryRole:
            return static_cast<int>(e.category);
        case CommandStateRole:
            return static_cast<int>(e.state);
        case TimestampRole:
            return e.timestamp;
        case RequestIdRole:
            return e.request_id;
        default:
            return {};
    }
}

QVariant EventLogModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case TimeColumn:
            return tr("Time");
        case StepColumn:
            return tr("Step");
        case KindColumn:
            return tr("Kind");
        case MessageColumn:
            return tr("Message");
        case StateColumn:
            return tr("State");
        default:
            return {};
    }
}

}  // namespace sp::ui
