#pragma once
// Operator commands between the threads that submit them (the transport's I/O thread, the trainer's
// own calls) and the training thread, which applies them at the next step boundary. Also holds
// what check() needs (the block count, the formats the runtime can materialize), so that a command
// is checked against the same state on any thread.
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "sp/command.h"
#include "sp/policy.h"  // CommandOutcome

namespace sp::agent::detail {

struct CommandQueueItem {
    Command command;
    std::function<void(const CommandOutcome& outcome, std::int64_t step)> done;
    std::string request_id;
};

class CommandQueue {
  public:
    using Item = CommandQueueItem;

    void set_block_count(int blocks) {
        std::lock_guard<std::mutex> lock(mutex_);
        block_count_ = blocks;
    }
    void set_materializable(FormatMask formats) {
        std::lock_guard<std::mutex> lock(mutex_);
        materializable_ = formats;
    }
    // A data-parallel follower takes no commands: every check answers `why` (agent/PROTOCOL.md §11).
    void refuse_all(std::string why) {
        std::lock_guard<std::mutex> lock(mutex_);
        refusal_ = std::move(why);
    }
    // Why the command would be rejected when applied ("" when it would be applied).
    std::string check(const Command& command) const {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!refusal_.empty()) return refusal_;
        return sp::check_command(command, block_count_, materializable_);
    }
    // Queues the command; returns the step whose boundary will apply it.
    std::int64_t push(Item item) {
        std::lock_guard<std::mutex> lock(mutex_);
        queued_.push_back(std::move(item));
        return boundary_step_ + 1;
    }
    // The training thread at the boundary of `step`: everything queued so far, oldest first.
    std::vector<Item> take_at_boundary(std::int64_t step) {
        std::vector<Item> taken;
        std::lock_guard<std::mutex> lock(mutex_);
        taken.swap(queued_);
        boundary_step_ = step;
        return taken;
    }

  private:
    mutable std::mutex mutex_;
    std::vector<Item> queued_;
    std::int64_t boundary_step_ = -1;  // the last step whose boundary took the queue
    int block_count_ = 0;
    FormatMask materializable_ = kAllFormats;
    std::string refusal_;
};

}  // namespace sp::agent::detail
