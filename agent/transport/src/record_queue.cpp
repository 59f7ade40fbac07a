#include "record_queue.h"

#include <iterator>
#include <utility>

namespace sp::transport::detail {

bool RecordQueue::push(SharedRecord record, bool& was_empty) {
    std::lock_guard lock(mutex_);
    was_empty = items_.empty();
    if (items_.size() >= capacity_) {
        ++drops_;
        return false;
    }
    items_.push_back(Item{std::move(record), pushed_++});
    return true;
}

void RecordQueue::set_snapshot(protocol::Snapshot snapshot, SharedRecord last_update) {
    std::lock_guard lock(mutex_);
    snapshot_ = PendingSnapshot{std::move(snapshot), std::move(last_update), pushed_};
}

RecordQueue::Batch RecordQueue::take(std::size_t max) {
    Batch batch;
    std::lock_guard lock(mutex_);
    if (items_.size() <= max) {
        batch.items.swap(items_);
    } else {
        const auto cut = items_.begin() + std::ptrdiff_t(max);
        batch.items.assign(std::make_move_iterator(items_.begin()), std::make_move_iterator(cut));
        items_.erase(items_.begin(), cut);
    }
    batch.backlog = !items_.empty();
    // Due once every item pushed before it is in hand.
    const std::uint64_t next = items_.empty() ? pushed_ : items_.front().index;
    if (snapshot_ && snapshot_->after <= next) batch.snapshot.swap(snapshot_);
    batch.drops_total = drops_;
    return batch;
}

}  // namespace sp::transport::detail
