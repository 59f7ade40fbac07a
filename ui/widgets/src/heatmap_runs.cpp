#include "heatmap_runs.h"

#include <algorithm>

namespace sp::ui {

std::pair<UpdateRuns::const_iterator, UpdateRuns::const_iterator> runsOverlapping(const UpdateRuns& runs,
                                                                                  std::size_t first,
                                                                                  std::size_t last) {
    const auto begin = std::partition_point(runs.begin(), runs.end(),
                                            [first](const UpdateRun& r) { return r.last <= first; });
    const auto end =
        std::partition_point(begin, runs.end(), [last](const UpdateRun& r) { return r.first < last; });
    return {begin, end};
}

void HeatmapRuns::extend(UpdateRuns& runs, std::uint32_t update, std::uint8_t value) {
    if (!runs.empty() && runs.back().last == update && runs.back().value == value) {
        runs.back().last = update + 1;
    } else {
        runs.push_back(UpdateRun{update, update + 1, value});
    }
}

void HeatmapRuns::sync(const TelemetryStore& store, std::uint64_t generation) {
    const std::size_t updates = store.updateCount();
    if (!valid_ || generation != generation_ || store.blockCount() != blocks() || updates < columns_) {
        valid_ = true;
        generation_ = generation;
        columns_ = 0;
        first_kept_ = 0;
        blocks_.assign(std::size_t(store.blockCount()), BlockRuns{});
    }
    for (int b = 0; b < blocks(); ++b) {
        BlockRuns& runs = blocks_[std::size_t(b)];
        for (std::size_t u = columns_; u < updates; ++u) {
            const BlockCell c = store.cell(b, u);
            if (!c.present) continue;
            const auto at = std::uint32_t(u);
            if (c.forced == ForcedBy::pin) extend(runs.pin, at, 0);
            if (c.forced == ForcedBy::config) extend(runs.config, at, 0);
            if (c.precision != Precision::bf16) extend(runs.precision, at, std::uint8_t(c.precision));
        }
    }
    columns_ = updates;
    dropBefore(store.firstKept());
}

void HeatmapRuns::dropBefore(std::size_t update) {
    if (update <= first_kept_) return;
    first_kept_ = update;
    const auto from = std::uint32_t(update);
    auto drop = [from](UpdateRuns& runs) {
        const auto kept = std::partition_point(runs.begin(), runs.end(),
                                               [from](const UpdateRun& r) { return r.last <= from; });
        runs.erase(runs.begin(), kept);
        if (!runs.empty() && runs.front().first < from) runs.front().first = from;
        // A live run holds a retention's worth of runs: give back what a longer history grew to.
        if (runs.capacity() > 4 * runs.size() + 16) runs.shrink_to_fit();
    };
    for (BlockRuns& runs : blocks_) {
        drop(runs.pin);
        drop(runs.config);
        drop(runs.precision);
    }
}

std::size_t HeatmapRuns::heldRuns() const {
    std::size_t n = 0;
    for (const BlockRuns& runs : blocks_) n += runs.pin.size() + runs.config.size() + runs.precision.size();
    return n;
}

}  // namespace sp::ui
