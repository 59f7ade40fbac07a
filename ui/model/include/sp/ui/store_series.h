#pragma once
// A chart line read in place from a TelemetryStore, never copied: a run-level value of each update
// (RunField: the saving, the blocks per precision, the losses) or a block's drawn field
// (sensitivity, l2_norm), against the updates' steps (the eval loss against where it was measured).
// Drawn at a bounded number of points: the visible range's own samples when they are at most two per
// pixel column, else a min/max envelope per column from the store's summaries, O(columns x log n)
// whatever the number of updates in view.
#include <cstddef>
#include <vector>

#include "sp/ui/decimate.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

class StoreSeries {
  public:
    StoreSeries() = default;
    // RunField `field` over the store's first `count` updates (clamped to its update count).
    static StoreSeries run(const TelemetryStore& store, RunField field, std::size_t count);
    // A block's drawn field; an empty series for another field or a block out of range.
    static StoreSeries block(const TelemetryStore& store, int block, BlockField field, std::size_t count);

    std::size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    // Where update u is drawn: its step (the eval loss: its eval_step).
    double x(std::size_t u) const;
    // Its value as the store keeps it (NaN: missing).
    float y(std::size_t u) const;
    // Min/max/mean of updates [first, last) from the store's summary.
    SpanStats stats(std::size_t first, std::size_t last) const;
    // The first update whose x is >= `v` (lower) or > `v` (upper), in [0, size()]. x must not
    // decrease (steps ascend within a run).
    std::size_t lowerBound(double v) const;
    std::size_t upperBound(double v) const;

  private:
    const TelemetryStore* store_ = nullptr;
    std::size_t count_ = 0;
    bool run_level_ = true;
    RunField run_field_ = RunField::estimated_saving;
    int block_ = -1;
    BlockField block_field_ = BlockField::sensitivity;
    FieldSeries column_;  // the block's column (block series)
};

// One pixel column of an envelope: updates [first, last) whose x falls in it, and their stats.
struct ColumnEnvelope {
    std::size_t first = 0;
    std::size_t last = 0;
    SpanStats stats;
};

// Splits [x_lo, x_hi] into `columns` equal pixel columns (the last one closed) and gives each its
// updates and their min/max/mean from the summary. O(columns x log n).
std::vector<ColumnEnvelope> columnEnvelopes(const StoreSeries& series, double x_lo, double x_hi, int columns);

// What a chart draws of `series` over [x_lo, x_hi] across `columns` pixel columns, with one sample
// beyond each edge so the line reaches the border: the samples themselves when the range holds at
// most 2 per column (NaN breaks or is skipped as `gaps` says); else per column its minimum and
// maximum from columnEnvelopes (the one nearer the previous point first), a column with updates but
// no value breaking the line under GapPolicy::break_line (narrower gaps are not drawn). At most
// 2 x columns + 2 points either way.
DecimatedSeries drawStoreSeries(const StoreSeries& series, double x_lo, double x_hi, int columns,
                                GapPolicy gaps = GapPolicy::break_line);

}  // namespace sp::ui
