#pragma once
// Per block, the periods the heatmap marks on its rows: pinned by the operator, forced by the run's
// config, and at a precision other than BF16. Kept as runs of consecutive updates, extended as
// updates arrive (an append reads one cell per block), so painting a row's marks costs a binary
// search and a few runs, not a read of every visible cell. What the store's retention dropped is
// dropped here too (a live run's runs stay bounded by the retention). Private to sp_ui.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sp/ui/telemetry_store.h"

namespace sp::ui {

struct UpdateRun {
    std::uint32_t first = 0;  // updates [first, last)
    std::uint32_t last = 0;
    std::uint8_t value = 0;  // precision runs: the sp::Precision
};
using UpdateRuns = std::vector<UpdateRun>;

// The runs of `runs` (sorted, disjoint) that overlap updates [first, last).
std::pair<UpdateRuns::const_iterator, UpdateRuns::const_iterator> runsOverlapping(const UpdateRuns& runs,
                                                                                  std::size_t first,
                                                                                  std::size_t last);

class HeatmapRuns {
  public:
    void clear() { valid_ = false; }
    // Extends the runs with the updates appended since the last sync; rebuilds when `generation`
    // (the backing image's) moved.
    void sync(const TelemetryStore& store, std::uint64_t generation);

    const UpdateRuns& pinned(int block) const { return blocks_[std::size_t(block)].pin; }
    const UpdateRuns& configForced(int block) const { return blocks_[std::size_t(block)].config; }
    // Present cells at a precision other than BF16, one run per stretch of the same precision.
    const UpdateRuns& notBf16(int block) const { return blocks_[std::size_t(block)].precision; }
    int blocks() const { return int(blocks_.size()); }
    // The runs held, of all blocks and kinds (for tests of the bound).
    std::size_t heldRuns() const;

  private:
    struct BlockRuns {
        UpdateRuns pin, config, precision;
    };
    static void extend(UpdateRuns& runs, std::uint32_t update, std::uint8_t value);
    // Drops the runs before `update` (the store's first kept one) and clips the one across it: once
    // per retention chunk, so O(1) amortised per update.
    void dropBefore(std::size_t update);

    std::vector<BlockRuns> blocks_;
    std::size_t columns_ = 0;
    std::size_t first_kept_ = 0;  // no run starts before it
    std::uint64_t generation_ = 0;
    bool valid_ = false;
};

}  // namespace sp::ui
