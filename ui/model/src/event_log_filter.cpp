#include "sp/ui/event_log_filter.h"

#include <algorithm>

#include "sp/ui/event_log_model.h"

namespace sp::ui {

EventLogFilter::EventLogFilter(QObject* parent) : QAbstractProxyModel(parent) {}

const EventLog* EventLogFilter::log() const {
    return source_ ? source_->log() : nullptr;
}

void EventLogFilter::setSourceModel(QAbstractItemModel* source) {
    for (const QMetaObject::Connection& c : connections_) disconnect(c);
    connections_.clear();
    beginResetModel();
    source_ = qobject_cast<EventLogModel*>(source);
    QAbstractProxyModel::setSourceModel(source_.data());
    if (source_) {
        connections_ << connect(
            source_, &QAbstractItemModel::rowsInserted, this,
            [this](const QModelIndex&, int first, int last) { onRowsInserted(first, last); });
        connections_ << connect(source_, &QAbstractItemModel::dataChanged, this,
                                &EventLogFilter::onDataChanged);
        connections_ << connect(source_, &QAbstractItemModel::modelAboutToBeReset, this,
                                [this] { beginResetModel(); });
        connections_ << connect(source_, &QAbstractItemModel::modelReset, this, &EventLogFilter::onReset);
    }
    rows_ = wanted();
    endResetModel();
}

void EventLogFilter::onReset() {
    rows_ = wanted();
    endResetModel();
}

void EventLogFilter::setCategory(std::optional<EventCategory> category) {
    if (category == category_) return;
    category_ = category;
    update();
}

void EventLogFilter::setStepLimit(std::optional<std::int64_t> step) {
    if (step == step_limit_) return;
    step_limit_ = step;
    update();
}

std::vector<int> EventLogFilter::wanted() const {
    const EventLog* events = log();
    if (events == nullptr) return {};
    // Entries the source model has not inserted yet (it syncs with the log on the repaint timer) wait.
    const std::size_t synced = std::size_t(source_->rowCount());
    const std::vector<std::size_t> all = events->select(category_, step_limit_);
    const auto end = std::lower_bound(all.begin(), all.end(), synced);
    return {all.begin(), end};
}

void EventLogFilter::update() {
    std::vector<int> next = wanted();
    const auto [old_at, next_at] = std::mismatch(rows_.begin(), rows_.end(), next.begin(), next.end());
    const int common = int(old_at - rows_.begin());
    if (old_at != rows_.end()) {
        beginRemoveRows(QModelIndex(), common, int(rows_.size()) - 1);
        rows_.resize(std::size_t(common));
        endRemoveRows();
    }
    if (next_at != next.end()) {
        beginInsertRows(QModelIndex(), common, int(next.size()) - 1);
        rows_ = std::move(next);
        endInsertRows();
    }
}

void EventLogFilter::onRowsInserted(int first, int last) {
    const EventLog* events = log();
    if (events == nullptr) return;
    std::vector<int> added;
    for (int row = first; row <= last; ++row)
        if (events->matches(std::size_t(row), category_, step_limit_)) added.push_back(row);
    if (added.empty()) return;
    if (!rows_.empty() && added.front() <= rows_.back()) {  // not an append (EventLogModel only appends)
        update();
        return;
    }
    const int at = int(rows_.size());
    beginInsertRows(QModelIndex(), at, at + int(added.size()) - 1);
    rows_.insert(rows_.end(), added.begin(), added.end());
    endInsertRows();
}

// A command's state or step changed: its row repaints, and shows or hides when the filter says so.
void EventLogFilter::onDataChanged(const QModelIndex& top_left, const QModelIndex& bottom_right,
                                   const QList<int>& roles) {
    const EventLog* events = log();
    if (events == nullptr) return;
    for (int row = top_left.row(); row <= bottom_right.row(); ++row) {
        const auto at = std::lower_bound(rows_.begin(), rows_.end(), row);
        const int proxy_row = int(at - rows_.begin());
        const bool shown = at != rows_.end() && *at == row;
        const bool wanted = events->matches(std::size_t(row), category_, step_limit_);
        if (shown && wanted) {
            emit dataChanged(index(proxy_row, top_left.column()), index(proxy_row, bottom_right.column()),
                             roles);
        } else if (shown) {
            beginRemoveRows(QModelIndex(), proxy_row, proxy_row);
            rows_.erase(at);
            endRemoveRows();
        } else if (wanted) {
            beginInsertRows(QModelIndex(), proxy_row, proxy_row);
            rows_.insert(at, row);
            endInsertRows();
        }
    }
}

QModelIndex EventLogFilter::mapToSource(const QModelIndex& proxy) const {
    if (!source_ || !proxy.isValid() || proxy.row() >= int(rows_.size())) return {};
    return source_->index(rows_[std::size_t(proxy.row())], proxy.column());
}

QModelIndex EventLogFilter::mapFromSource(const QModelIndex& source) const {
    if (!source.isValid()) return {};
    const auto at = std::lower_bound(rows_.begin(), rows_.end(), source.row());
    if (at == rows_.end() || *at != source.row()) return {};
    return index(int(at - rows_.begin()), source.column());
}

QModelIndex EventLogFilter::index(int row, int column, const QModelIndex& parent) const {
    if (parent.isValid() || row < 0 || row >= rowCount() || column < 0 || column >= columnCount()) return {};
    return createIndex(row, column);
}

QModelIndex EventLogFilter::parent(const QModelIndex&) const {
    return {};
}

int EventLogFilter::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(rows_.size());
}

int EventLogFilter::columnCount(const QModelIndex& parent) const {
    return parent.isValid() || !source_ ? 0 : source_->columnCount();
}

QVariant EventLogFilter::headerData(int section, Qt::Orientation orientation, int role) const {
    if (!source_ || orientation != Qt::Horizontal)
        return QAbstractProxyModel::headerData(section, orientation, role);
    return source_->headerData(section, orientation, role);
}

}  // namespace sp::ui
