#pragma once
// The dashboard's one copy of a run's telemetry: columnar, per block per update, Qt-free.
// Live and replay sources both end here; everything the dashboard draws reads from it.
//
// Layout: one UpdateRow per update record (run-level values), and per block one column per
// numeric field (float) plus a packed state byte and a reason byte. A block's history is therefore
// contiguous (charts, heatmap rows), and appending an update touches each block's columns once.
// Memory: kBytesPerBlockUpdate per block per update, plus UpdateRow per update.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sp/layout.h"
#include "sp/precision.h"
#include "sp/telemetry.h"

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

class TelemetryStore {
  public:
    // Six float columns + state byte + reason byte.
    static constexpr std::size_t kBytesPerBlockUpdate = kBlockFieldCount * sizeof(float) + 2;

    // Drops all updates and starts over with `layout` (may be empty: blocks then appear as
    // update records name them, called "blocks.<id>").
    void reset(BlockLayout layout);
    void reserve(std::size_t updates);
    // Takes names and sizes from `layout` for the blocks it describes (growing the store when it
    // has more blocks) without dropping updates: a header that arrives after the first records.
    void adoptLayout(const BlockLayout& layout);

    // Appends one update. Block ids beyond the layout grow it (earlier updates read as missing
    // for the new blocks). Blocks the record does not mention are missing at this update.
    void append(const UpdateRecord& r);

    const BlockLayout& layout() const { return layout_; }
    int blockCount() const { return static_cast<int>(layout_.size()); }
    std::size_t updateCount() const { return rows_.size(); }
    bool empty() const { return rows_.empty(); }

    const UpdateRow& row(std::size_t update) const { return rows_[update]; }
    const std::vector<UpdateRow>& rows() const { return rows_; }

    // One block's column, one value per update (NaN where missing).
    const std::vector<float>& series(int block, BlockField field) const;
    float value(int block, std::size_t update, BlockField field) const;
    BlockCell cell(int block, std::size_t update) const;

    // Precision changes of `block` at updates <= `update`, and the step of the last one (-1: none).
    int switchesUpTo(int block, std::size_t update) const;
    std::int64_t lastChangeStep(int block, std::size_t update) const;

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

    // Bytes held by the columns and rows (capacity, not size).
    std::size_t memoryBytes() const;

  private:
    struct BlockColumns {
        std::vector<float> fields[kBlockFieldCount];
        std::vector<std::uint8_t> state;            // precision | forced << 3 | changed << 5 | present << 6
        std::vector<std::uint8_t> reason;           // sp::Reason
        std::vector<std::uint32_t> change_updates;  // update indices where precision changed
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

    BlockLayout layout_;
    std::vector<UpdateRow> rows_;
    std::vector<BlockColumns> blocks_;
};

}  // namespace sp::ui
