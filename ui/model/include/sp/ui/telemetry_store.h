#pragma once
// The dashboard's one copy of a run's telemetry: columnar, per block per update, Qt-free.
// Live and replay sources both end here; everything the dashboard draws reads from it.
//
// Layout: one UpdateRow per update record (run-level values), and per block its columns. A block's
// history is contiguous (charts, heatmap rows), and appending an update touches each block's columns
// once. What each field keeps (half_float.h has the codecs' errors):
//   sensitivity          fp16, every update      (heatmap, charts: drawn at every update; in [0, 1])
//   l2_norm              bf16, every update      (the gradient chart: any size)
//   state, reason        a byte each, every update (heatmap precision mode, table, Why panel)
//   grad_score, error_score, relative_magnitude, max_abs
//                        float, the latest kDetailWindow updates only (the table and the Why panel
//                        at a chosen update; older updates read them as missing)
// Both drawn fields also have a SeriesSummary per block (min/max/mean per power-of-two span, about
// 0.25 bytes per block-update for the two), for zoomed-out drawing and for the updates a live run's
// retention (setRetainUpdates) no longer keeps at full resolution.
// Memory: kBytesPerBlockUpdate per block per update (only the retained ones), plus the summaries,
// plus kDetailWindow * 16 bytes per block, plus UpdateRow per update (run-level rows are all kept,
// each RunField with a summary too). The charts read all of these in place (store_series.h).
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sp/layout.h"
#include "sp/precision.h"
#include "sp/telemetry.h"
#include "sp/ui/half_float.h"
#include "sp/ui/series_summary.h"

namespace sp::ui {

inline constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();

// Run-level values of one update record. Missing values are NaN.
struct UpdateRow {
    std::int64_t step = 0;
    double timestamp = 0.0;
    int blocks_bf16 = 0;
    int blocks_int8 = 0;
    int blocks_fp8 = 0;
    int blocks_int4 = 0;
    int precision_changes = 0;
    float mean_sensitivity = kMissing;
    float max_sensitivity = kMissing;
    float min_sensitivity = kMissing;
    float estimated_saving_pct = kMissing;
    float measured_saving_pct = kMissing;  // only from runtimes that count real bytes
    float budget_target_pct = kMissing;    // only in mode "budget"
    float train_loss = kMissing;
    float eval_loss = kMissing;
    std::int64_t eval_step = 0;  // when eval_loss was measured (the record's eval_step, else its step)
    bool has_details = false;    // false: the record's block_details was empty (original tool)
};

// The run-level values a chart draws, one per update (UpdateRow's fields of the same names).
enum class RunField : std::uint8_t {
    estimated_saving,
    measured_saving,
    budget_target,
    blocks_bf16,
    blocks_int8,
    blocks_fp8,
    blocks_int4,
    train_loss,
    eval_loss,
};
inline constexpr int kRunFieldCount = 9;
float runValue(const UpdateRow& row, RunField field);

// A block's state at one update, unpacked.
struct BlockCell {
    bool present = false;  // false: this update carried no detail for the block
    Precision precision = Precision::bf16;
    ForcedBy forced = ForcedBy::none;
    Reason reason = Reason::hold;
    bool changed = false;
};

enum class BlockField : std::uint8_t {
    sensitivity,
    grad_score,
    error_score,
    relative_magnitude,
    l2_norm,
    max_abs,
};
inline constexpr int kBlockFieldCount = 6;

// A drawn field's column (sensitivity or l2_norm) read in place: one value per update, decoded
// from its 16-bit form; an update the store no longer keeps (retention) reads as the mean of its
// summary's finest span (SeriesSummary::kFirstSpan updates), NaN past it. Valid until the store is
// next changed.
class FieldSeries {
  public:
    enum class Codec : std::uint8_t { fp16, bf16 };
    FieldSeries() = default;
    FieldSeries(const std::uint16_t* data, std::size_t first, std::size_t size, Codec codec,
                const SeriesSummary* summary)
        : data_(data), first_(first), size_(size), codec_(codec), summary_(summary) {}
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // The first update read from the column itself (before it: from the summary).
    std::size_t firstKept() const { return first_; }
    float operator[](std::size_t update) const {
        if (update < first_) return summary_->finestMean(update);
        const std::uint16_t v = data_[update - first_];
        return codec_ == Codec::fp16 ? fromHalf(v) : fromBfloat16(v);
    }

  private:
    const std::uint16_t* data_ = nullptr;
    std::size_t first_ = 0;
    std::size_t size_ = 0;
    Codec codec_ = Codec::fp16;
    const SeriesSummary* summary_ = nullptr;
};

class TelemetryStore {
  public:
    // fp16 sensitivity + bf16 l2_norm + state byte + reason byte.
    static constexpr std::size_t kBytesPerBlockUpdate = 2 * sizeof(std::uint16_t) + 2;
    // The latest updates whose grad_score, error_score, relative_magnitude and max_abs are kept
    // (float): enough to scrub back a while in the table and the Why panel, 8 KiB per block.
    static constexpr std::size_t kDetailWindow = 512;
    // Without a header's layout, block ids up to this are taken (blocks appear as records name
    // them); a larger id is a bad record. With a layout, its size is the limit.
    static constexpr int kMaxBlocksWithoutLayout = 8192;

    // Drops all updates and starts over with `layout` (may be empty: blocks then appear as
    // update records name them, called "blocks.<id>").
    void reset(BlockLayout layout);
    void reserve(std::size_t updates);
    // Live runs: keep the per-block columns (drawn fields, state, reason) of the latest `updates`
    // updates only (at least kMinRetainUpdates; 0: all, the default and a replay's). Older updates
    // keep their rows, their precision-change history and the summaries: their drawn fields read as
    // the summary's finest-span mean, their cells as not present. Dropped in chunks of a quarter of
    // `updates`, so the columns hold at most 1.25 x `updates`.
    void setRetainUpdates(std::size_t updates);
    std::size_t retainUpdates() const { return retain_; }
    static constexpr std::size_t kMinRetainUpdates = 1024;
    // The first update whose per-block columns are kept (0 unless retention dropped some).
    std::size_t firstKept() const { return first_kept_; }
    // Takes names and sizes from `layout` for the blocks it describes (growing the store when it
    // has more blocks) without dropping updates: a header that arrives after the first records.
    void adoptLayout(const BlockLayout& layout);

    // Appends one update; nullopt, or why the record was rejected and not appended. Without a
    // header's layout, block ids below kMaxBlocksWithoutLayout grow the store (earlier updates read
    // as missing for the new blocks); with one, an id outside it rejects the record: a corrupt id
    // cannot grow the store. Blocks the record does not mention are missing at this update.
    std::optional<std::string> append(const UpdateRecord& r);
    // Records append() rejected since the last reset.
    std::uint64_t rejectedCount() const { return rejected_; }

    const BlockLayout& layout() const { return layout_; }
    int blockCount() const { return static_cast<int>(layout_.size()); }
    std::size_t updateCount() const { return rows_.size(); }
    bool empty() const { return rows_.empty(); }

    const UpdateRow& row(std::size_t update) const { return rows_[update]; }
    const std::vector<UpdateRow>& rows() const { return rows_; }
    // The updates whose row has precision_changes > 0, ascending: the charts' change marks read
    // those in view without a pass over every update.
    const std::vector<std::uint32_t>& updatesWithChanges() const { return updates_with_changes_; }

    // One block's column of a drawn field (sensitivity, l2_norm), one value per update (NaN where
    // missing); empty for another field (read those with value()) or a block out of range.
    FieldSeries series(int block, BlockField field) const;
    // Min/max/mean of a drawn field over updates [first, last) from its summary (O(log n) entries
    // plus at most 2 * SeriesSummary::kFirstSpan values at the edges); empty stats otherwise.
    SpanStats stats(int block, BlockField field, std::size_t first, std::size_t last) const;
    // Min/max/mean of a run-level value over updates [first, last), from its summary (O(log n)).
    SpanStats runStats(RunField field, std::size_t first, std::size_t last) const;
    // The field's value at an update as kept (NaN: missing, or dropped by retention, or a detail
    // field older than kDetailWindow updates).
    float value(int block, std::size_t update, BlockField field) const;
    BlockCell cell(int block, std::size_t update) const;

    // Precision changes of `block` at updates <= `update`, and the step of the last one (-1: none).
    int switchesUpTo(int block, std::size_t update) const;
    std::int64_t lastChangeStep(int block, std::size_t update) const;
    // The latest kept update at or before `update` at which the policy moved the block (present,
    // changed, reason policy); nullopt when none. O(log moves).
    std::optional<std::size_t> lastPolicyMove(int block, std::size_t update) const;
    // For a block present and not pinned at `update`: the latest kept update before it at which the
    // block was pinned, when its precision has not changed since; nullopt otherwise. O(log events).
    std::optional<std::size_t> pinnedUntil(int block, std::size_t update) const;

    // The block's detail at an update as the record had it (the numeric fields at float
    // precision; switches and last_change_step from the store's own history).
    BlockDetail detail(int block, std::size_t update) const;

    // The decision in words (reason_text) and the SNR estimates of the block's latest present update:
    // kept for that update only (a string per block per update would dwarf the columns). Empty / no
    // SNR when `update` is not that update or the record had none.
    std::string reasonText(int block, std::size_t update) const;
    PerFormat snr(int block, std::size_t update) const;

    // The last update whose step is <= `step`; nullopt when there is none.
    std::optional<std::size_t> updateAtOrBefore(std::int64_t step) const;

    // Bytes held by the columns, the detail window and the rows (capacity, not size).
    std::size_t memoryBytes() const;

  private:
    static constexpr int kDetailFieldCount = 4;  // grad_score, error_score, relative_magnitude, max_abs
    struct BlockColumns {
        std::vector<std::uint16_t> sensitivity;  // fp16
        std::vector<std::uint16_t> l2_norm;      // bf16
        SeriesSummary sensitivity_summary, l2_summary;
        std::vector<float> recent;         // kDetailWindow x kDetailFieldCount, update u at u % kDetailWindow
        std::vector<std::uint8_t> state;   // precision | forced << 3 | changed << 5 | present << 6
        std::vector<std::uint8_t> reason;  // sp::Reason
        std::vector<std::uint32_t> change_updates;  // update indices where precision changed
        // What the Why column reads of a block's past (decision_history.h), as updates: these grow
        // with events, not with updates. Each is present; "previous" is the previous present update.
        std::vector<std::uint32_t> precision_edges;  // at another precision than the previous
        std::vector<std::uint32_t> pin_ends;         // not pinned, the previous pinned...
        std::vector<std::uint32_t> pin_ends_from;    // ...that previous one: the pin's last update
        std::vector<std::uint32_t> policy_moves;     // changed, with reason policy
        std::uint8_t last_present_state = 0;         // 0: no present update yet
        std::uint32_t last_present_update = 0;
        // What the record said before the store's own history began (late join): the block's
        // switches and last change step at its first present update, minus that update's own.
        int base_switches = 0;
        std::int64_t base_last_change_step = -1;
        bool seen = false;
        std::string reason_text;  // of update text_update
        PerFormat snr = kNoSnr;
        std::size_t text_update = static_cast<std::size_t>(-1);
    };
    void growBlocks(int count);
    std::optional<std::string> checkIds(const std::vector<BlockDetail>& sorted) const;
    void appendBlock(BlockColumns& b, const BlockDetail* d, std::size_t update);
    static void noteHistory(BlockColumns& b, const BlockDetail& d, std::size_t update);

    BlockLayout layout_;
    bool layout_given_ = false;  // from a header (reset / adoptLayout with blocks): ids beyond are bad
    std::uint64_t rejected_ = 0;
    std::size_t retain_ = 0;      // 0: keep every update's columns
    std::size_t first_kept_ = 0;  // updates before it live only in the summaries
    void dropOldColumns();
    std::vector<UpdateRow> rows_;
    std::vector<std::uint32_t> updates_with_changes_;
    // One summary per RunField (9 x 0.125 bytes per update): the charts' zoomed-out envelopes.
    std::array<SeriesSummary, kRunFieldCount> run_summaries_;
    std::vector<BlockColumns> blocks_;
};

}  // namespace sp::ui
