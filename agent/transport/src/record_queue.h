#pragma once
// The records on their way from the training thread to the I/O thread, and the snapshot stitched
// into their order. A snapshot given by update_snapshot() describes the state after every record
// queued before it, so the I/O thread stamps it with the seq of the last of those records once they
// are published, never earlier: a late joiner that replays what follows the snapshot's seq then
// misses nothing and sees nothing twice (agent/PROTOCOL.md §5). Thread-safe; the training thread
// only ever takes its short lock.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include "sp/jsonl.h"
#include "sp/protocol.h"
#include "sp/record_line.h"

namespace sp::transport::detail {

class RecordQueue {
  public:
    struct Item {
        SharedRecord record;
        std::uint64_t index;  // push order
    };
    struct PendingSnapshot {
        protocol::Snapshot snapshot;
        SharedRecord last_update;  // its line is the reply's last_update (null: snapshot.last_update)
        std::uint64_t after;       // items with index < after were pushed before the snapshot
    };
    // What the I/O thread takes in one go.
    struct Batch {
        std::deque<Item> items;
        // Due once the items with index < snapshot->after are published (all of them are in
        // `items` or were taken before).
        std::optional<PendingSnapshot> snapshot;
        std::uint64_t drops_total = 0;  // pushes refused so far
        bool backlog = false;           // items were left for the next take
    };

    explicit RecordQueue(std::size_t capacity) : capacity_(capacity) {}

    // False, counting a drop, when the queue is full. `was_empty`: the I/O thread may be asleep.
    bool push(SharedRecord record, bool& was_empty);
    void set_snapshot(protocol::Snapshot snapshot, SharedRecord last_update);
    // Up to `max` items, oldest first, with the snapshot when it is due.
    Batch take(std::size_t max);

  private:
    const std::size_t capacity_;
    std::mutex mutex_;
    std::deque<Item> items_;
    std::uint64_t pushed_ = 0;
    std::uint64_t drops_ = 0;
    std::optional<PendingSnapshot> snapshot_;
};

}  // namespace sp::transport::detail
