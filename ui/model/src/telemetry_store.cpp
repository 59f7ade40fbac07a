#include "sp/ui/telemetry_store.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace sp::ui {
namespace {

// Packed state byte: precision (3 bits) | forced (2 bits) << 3 | changed << 5 | present << 6.
constexpr std::uint8_t kChangedBit = 1u << 5;
constexpr std::uint8_t kPresentBit = 1u << 6;
static_assert(kPrecisionCount <= 8, "the precision takes 3 bits of the state byte");
const std::uint16_t kMissingHalf = toHalf(kMissing);
const std::uint16_t kMissingBfloat16 = toBfloat16(kMissing);
constexpr std::size_t kWindow = TelemetryStore::kDetailWindow;

bool byId(const BlockDetail& a, const BlockDetail& b) {
    return a.id < b.id;
}

// The detail field's slot in BlockColumns::recent (-1: a column of its own).
int detailSlot(BlockField f) {
    switch (f) {
        case BlockField::grad_score:
            return 0;
        case BlockField::error_score:
            return 1;
        case BlockField::relative_magnitude:
            return 2;
        case BlockField::max_abs:
            return 3;
        default:
            return -1;
    }
}

std::uint8_t packState(const BlockDetail& d, bool changed) {
    return static_cast<std::uint8_t>((static_cast<unsigned>(d.precision) & 7u) |
                                     ((static_cast<unsigned>(d.forced) & 3u) << 3) |
                                     (changed ? kChangedBit : 0u) | kPresentBit);
}

Precision precisionOf(std::uint8_t state) {
    return static_cast<Precision>(state & 7u);
}

ForcedBy forcedOf(std::uint8_t state) {
    return static_cast<ForcedBy>((state >> 3) & 3u);
}

UpdateRow rowOf(const UpdateRecord& r) {
    UpdateRow row;
    row.step = r.step_id;
    row.timestamp = r.timestamp;
    row.blocks_bf16 = r.blocks_bf16;
    row.blocks_int8 = r.blocks_int8;
    row.blocks_fp8 = r.blocks_fp8;
    row.blocks_int4 = r.blocks_int4;
    if (r.budget_target_pct) row.budget_target_pct = static_cast<float>(*r.budget_target_pct);
    row.precision_changes = r.precision_changes;
    row.mean_sensitivity = static_cast<float>(r.mean_sensitivity);
    row.max_sensitivity = static_cast<float>(r.max_sensitivity);
    row.min_sensitivity = static_cast<float>(r.min_sensitivity);
    row.estimated_saving_pct = static_cast<float>(r.estimated_bandwidth_saving_pct);
    if (r.measured_bandwidth_saving_pct)
        row.measured_saving_pct = static_cast<float>(*r.measured_bandwidth_saving_pct);
    if (r.train_loss) row.train_loss = static_cast<float>(*r.train_loss);
    if (r.eval_loss) row.eval_loss = static_cast<float>(*r.eval_loss);
    row.eval_step = r.eval_step.value_or(r.step_id);
    row.has_details = !r.block_details.empty();
    return row;
}

}  // namespace

float runValue(const UpdateRow& row, RunField field) {
    switch (field) {
        case RunField::estimated_saving:
            return row.estimated_saving_pct;
        case RunField::measured_saving:
            return row.measured_saving_pct;
        case RunField::budget_target:
            return row.budget_target_pct;
        case RunField::blocks_bf16:
            return static_cast<float>(row.blocks_bf16);
        case RunField::blocks_int8:
            return static_cast<float>(row.blocks_int8);
        case RunField::blocks_fp8:
            return static_cast<float>(row.blocks_fp8);
        case RunField::blocks_int4:
            return static_cast<float>(row.blocks_int4);
        case RunField::train_loss:
            return row.train_loss;
        case RunField::eval_loss:
            return row.eval_loss;
    }
    return kMissing;
}

void TelemetryStore::reset(BlockLayout layout) {
    layout_ = std::move(layout);
    layout_given_ = !layout_.empty();
    rejected_ = 0;
    first_kept_ = 0;
    // Give the memory back: a restarted run may be much smaller.
    std::vector<UpdateRow>().swap(rows_);
    std::vector<std::uint32_t>().swap(updates_with_changes_);
    for (SeriesSummary& summary : run_summaries_) summary = SeriesSummary();
    std::vector<BlockColumns>(layout_.size()).swap(blocks_);
}

void TelemetryStore::reserve(std::size_t updates) {
    rows_.reserve(updates);
    for (SeriesSummary& summary : run_summaries_) summary.reserve(updates);
    for (BlockColumns& b : blocks_) {
        b.sensitivity.reserve(updates);
        b.l2_norm.reserve(updates);
        b.sensitivity_summary.reserve(updates);
        b.l2_summary.reserve(updates);
        b.state.reserve(updates);
        b.reason.reserve(updates);
    }
}

void TelemetryStore::setRetainUpdates(std::size_t updates) {
    retain_ = updates == 0 ? 0 : std::max(updates, kMinRetainUpdates);
    dropOldColumns();
}

void TelemetryStore::dropOldColumns() {
    const std::size_t kept = rows_.size() - first_kept_;
    if (retain_ == 0 || kept <= retain_ + retain_ / 4) return;
    const std::size_t drop = kept - retain_;
    const auto cut = [drop](auto& column) {
        column.erase(column.begin(), column.begin() + std::ptrdiff_t(drop));
    };
    for (BlockColumns& b : blocks_) {
        cut(b.sensitivity);
        cut(b.l2_norm);
        cut(b.state);
        cut(b.reason);
    }
    first_kept_ += drop;
}

void TelemetryStore::adoptLayout(const BlockLayout& layout) {
    if (!layout.empty()) layout_given_ = true;
    if (layout.size() > layout_.size()) growBlocks(static_cast<int>(layout.size()));
    for (std::size_t i = 0; i < layout.size(); ++i) {
        layout_[i].name = layout[i].name;
        layout_[i].bytes_bf16 = layout[i].bytes_bf16;
    }
}

void TelemetryStore::growBlocks(int count) {
    const std::size_t old = blocks_.size();
    if (static_cast<std::size_t>(count) <= old) return;
    const std::size_t n = rows_.size();
    const std::size_t cap = std::max(rows_.capacity(), n);
    blocks_.resize(static_cast<std::size_t>(count));
    layout_.reserve(static_cast<std::size_t>(count));
    for (std::size_t id = old; id < blocks_.size(); ++id) {
        if (layout_.size() <= id) {
            BlockInfo info;
            info.id = static_cast<int>(id);
            info.name = "blocks." + std::to_string(id);
            layout_.push_back(std::move(info));
        }
        // Earlier updates read as missing for the new block; reserve like the other columns.
        BlockColumns& b = blocks_[id];
        const std::size_t kept = n - first_kept_;
        b.sensitivity.reserve(cap);
        b.sensitivity.assign(kept, kMissingHalf);
        b.l2_norm.reserve(cap);
        b.l2_norm.assign(kept, kMissingBfloat16);
        b.state.reserve(cap);
        b.state.assign(kept, 0);
        b.reason.reserve(cap);
        b.reason.assign(kept, static_cast<std::uint8_t>(Reason::hold));
        for (std::size_t u = 0; u < n; ++u) {
            b.sensitivity_summary.append(kMissing);
            b.l2_summary.append(kMissing);
        }
    }
}

std::optional<std::string> TelemetryStore::append(const UpdateRecord& r) {
    // Details are sorted by id (the writer's order and the reader's); a producer that breaks
    // that still loads, through a sorted copy.
    const std::vector<BlockDetail>* details = &r.block_details;
    std::vector<BlockDetail> sorted;
    if (!std::is_sorted(details->begin(), details->end(), byId)) {
        sorted = r.block_details;
        std::stable_sort(sorted.begin(), sorted.end(), byId);
        details = &sorted;
    }
    if (auto problem = checkIds(*details)) {
        ++rejected_;
        return "step " + std::to_string(r.step_id) + ": " + *problem;
    }
    if (!details->empty() && details->back().id >= blockCount()) growBlocks(details->back().id + 1);

    const std::size_t update = rows_.size();
    auto it = details->begin();
    for (std::size_t id = 0; id < blocks_.size(); ++id) {
        if (it != details->end() && static_cast<std::size_t>(it->id) == id) {
            appendBlock(blocks_[id], &*it, update);
            ++it;
            while (it != details->end() && static_cast<std::size_t>(it->id) == id)
                ++it;  // duplicate: first wins
        } else {
            appendBlock(blocks_[id], nullptr, update);
        }
    }
    rows_.push_back(rowOf(r));
    if (rows_.back().precision_changes > 0) updates_with_changes_.push_back(std::uint32_t(rows_.size() - 1));
    for (int f = 0; f < kRunFieldCount; ++f)
        run_summaries_[std::size_t(f)].append(runValue(rows_.back(), RunField(f)));
    dropOldColumns();
    return std::nullopt;
}

std::optional<std::string> TelemetryStore::checkIds(const std::vector<BlockDetail>& sorted) const {
    if (sorted.empty()) return std::nullopt;
    if (sorted.front().id < 0) return "block id " + std::to_string(sorted.front().id) + " is negative";
    const int limit = layout_given_ ? blockCount() : kMaxBlocksWithoutLayout;
    if (sorted.back().id < limit) return std::nullopt;
    const std::string id = "block id " + std::to_string(sorted.back().id);
    if (layout_given_) return id + " is outside the header's layout of " + std::to_string(limit) + " blocks";
    return id + " is beyond the " + std::to_string(limit) + " blocks taken without a header";
}

void TelemetryStore::appendBlock(BlockColumns& b, const BlockDetail* d, std::size_t update) {
    if (b.recent.empty()) b.recent.assign(kWindow * kDetailFieldCount, kMissing);
    float* recent = b.recent.data() + (update % kWindow) * kDetailFieldCount;
    if (!d) {
        b.sensitivity.push_back(kMissingHalf);
        b.l2_norm.push_back(kMissingBfloat16);
        b.state.push_back(0);
        b.reason.push_back(static_cast<std::uint8_t>(Reason::hold));
        b.sensitivity_summary.append(kMissing);
        b.l2_summary.append(kMissing);
        std::fill(recent, recent + kDetailFieldCount, kMissing);
        return;
    }
    // A change is what the record says, or what the store sees against the block's previous
    // present update (records lost in between still count their switch).
    bool changed = d->changed;
    if (!b.state.empty() && (b.state.back() & kPresentBit) && precisionOf(b.state.back()) != d->precision)
        changed = true;
    if (!b.seen) {
        b.seen = true;
        b.base_switches = std::max(0, d->switches - (changed ? 1 : 0));
        b.base_last_change_step = changed ? -1 : d->last_change_step;
    }
    const auto sensitivity = static_cast<float>(d->sensitivity);
    const auto l2 = static_cast<float>(d->l2_norm);
    b.sensitivity.push_back(toHalf(sensitivity));
    b.l2_norm.push_back(toBfloat16(l2));
    b.sensitivity_summary.append(sensitivity);
    b.l2_summary.append(l2);
    recent[0] = static_cast<float>(d->grad_score);
    recent[1] = static_cast<float>(d->error_score);
    recent[2] = static_cast<float>(d->relative_magnitude);
    recent[3] = static_cast<float>(d->max_abs);
    b.state.push_back(packState(*d, changed));
    b.reason.push_back(static_cast<std::uint8_t>(d->reason));
    b.reason_text = d->reason_text;
    b.snr = d->snr_db;
    b.text_update = update;
    if (changed) b.change_updates.push_back(static_cast<std::uint32_t>(update));
    noteHistory(b, *d, update);
}

void TelemetryStore::noteHistory(BlockColumns& b, const BlockDetail& d, std::size_t update) {
    const std::uint8_t now = b.state.back();
    const auto at = static_cast<std::uint32_t>(update);
    if (b.last_present_state & kPresentBit) {
        if (precisionOf(b.last_present_state) != d.precision) b.precision_edges.push_back(at);
        const bool was_pinned = forcedOf(b.last_present_state) == ForcedBy::pin;
        if (was_pinned && d.forced != ForcedBy::pin) {
            b.pin_ends.push_back(at);
            b.pin_ends_from.push_back(b.last_present_update);
        }
    }
    if ((now & kChangedBit) && d.reason == Reason::policy) b.policy_moves.push_back(at);
    b.last_present_state = now;
    b.last_present_update = at;
}

FieldSeries TelemetryStore::series(int block, BlockField field) const {
    if (block < 0 || block >= blockCount()) return {};
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    if (field == BlockField::sensitivity)
        return {b.sensitivity.data(), first_kept_, first_kept_ + b.sensitivity.size(),
                FieldSeries::Codec::fp16, &b.sensitivity_summary};
    if (field == BlockField::l2_norm)
        return {b.l2_norm.data(), first_kept_, first_kept_ + b.l2_norm.size(), FieldSeries::Codec::bf16,
                &b.l2_summary};
    return {};
}

SpanStats TelemetryStore::stats(int block, BlockField field, std::size_t first, std::size_t last) const {
    const FieldSeries s = series(block, field);
    if (s.empty()) return {};
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    const SeriesSummary& summary = field == BlockField::sensitivity ? b.sensitivity_summary : b.l2_summary;
    // Dropped updates only through whole entries: their raw values are gone.
    return summary.stats(first, last, [&](std::size_t u) { return u < first_kept_ ? kMissing : s[u]; });
}

SpanStats TelemetryStore::runStats(RunField field, std::size_t first, std::size_t last) const {
    return run_summaries_[std::size_t(field)].stats(first, last,
                                                    [&](std::size_t u) { return runValue(rows_[u], field); });
}

float TelemetryStore::value(int block, std::size_t update, BlockField field) const {
    const int slot = detailSlot(field);
    if (slot < 0) {  // a dropped update has no value of its own (series() draws it from the summary)
        const FieldSeries s = series(block, field);
        return update < s.size() && update >= first_kept_ ? s[update] : kMissing;
    }
    // Only the latest kDetailWindow updates keep the detail fields.
    const std::size_t n = rows_.size();
    if (block < 0 || block >= blockCount() || update >= n || n - update > kWindow) return kMissing;
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    // Allocated at the block's first append: a block a late header added has none yet.
    if (b.recent.empty()) return kMissing;
    return b.recent[(update % kWindow) * kDetailFieldCount + static_cast<std::size_t>(slot)];
}

BlockCell TelemetryStore::cell(int block, std::size_t update) const {
    BlockCell c;
    if (block < 0 || block >= blockCount() || update >= rows_.size()) return c;
    if (update < first_kept_) return c;  // retention dropped it
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    const std::uint8_t s = b.state[update - first_kept_];
    if (!(s & kPresentBit)) return c;
    c.present = true;
    c.precision = precisionOf(s);
    c.forced = forcedOf(s);
    c.changed = (s & kChangedBit) != 0;
    c.reason = static_cast<Reason>(b.reason[update - first_kept_]);
    return c;
}

int TelemetryStore::switchesUpTo(int block, std::size_t update) const {
    if (block < 0 || block >= blockCount()) return 0;
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    const auto end = std::upper_bound(b.change_updates.begin(), b.change_updates.end(), update);
    return b.base_switches + static_cast<int>(end - b.change_updates.begin());
}

std::optional<std::size_t> TelemetryStore::lastPolicyMove(int block, std::size_t update) const {
    if (block < 0 || block >= blockCount() || update >= rows_.size()) return std::nullopt;
    const std::vector<std::uint32_t>& moves = blocks_[static_cast<std::size_t>(block)].policy_moves;
    const auto end = std::upper_bound(moves.begin(), moves.end(), update);
    if (end == moves.begin() || *(end - 1) < first_kept_) return std::nullopt;  // none, or dropped
    return *(end - 1);
}

std::optional<std::size_t> TelemetryStore::pinnedUntil(int block, std::size_t update) const {
    if (block < 0 || block >= blockCount() || update >= rows_.size()) return std::nullopt;
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    // The block is not pinned at `update`: its latest pinned update is where the last pin ended.
    const auto end = std::upper_bound(b.pin_ends.begin(), b.pin_ends.end(), update);
    if (end == b.pin_ends.begin()) return std::nullopt;
    const std::size_t pinned = b.pin_ends_from[static_cast<std::size_t>(end - b.pin_ends.begin()) - 1];
    if (pinned < first_kept_) return std::nullopt;  // dropped by retention
    const auto edge = std::upper_bound(b.precision_edges.begin(), b.precision_edges.end(), pinned);
    if (edge != b.precision_edges.end() && *edge <= update) return std::nullopt;  // changed since
    return pinned;
}

std::int64_t TelemetryStore::lastChangeStep(int block, std::size_t update) const {
    if (block < 0 || block >= blockCount() || rows_.empty()) return -1;
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    const auto end = std::upper_bound(b.change_updates.begin(), b.change_updates.end(), update);
    if (end != b.change_updates.begin()) return rows_[*(end - 1)].step;
    // Before the store's own history: what the first record said, if that is not in the future.
    const std::size_t last = std::min(update, rows_.size() - 1);
    return b.base_last_change_step <= rows_[last].step ? b.base_last_change_step : -1;
}

BlockDetail TelemetryStore::detail(int block, std::size_t update) const {
    BlockDetail d;
    d.id = block;
    d.variance = kNoValue;
    d.mean = kNoValue;
    const BlockCell c = cell(block, update);
    d.precision = c.precision;
    d.forced = c.forced;
    d.changed = c.changed;
    d.reason = c.reason;
    d.sensitivity = value(block, update, BlockField::sensitivity);
    d.grad_score = value(block, update, BlockField::grad_score);
    d.error_score = value(block, update, BlockField::error_score);
    d.relative_magnitude = value(block, update, BlockField::relative_magnitude);
    d.l2_norm = value(block, update, BlockField::l2_norm);
    d.max_abs = value(block, update, BlockField::max_abs);
    d.switches = switchesUpTo(block, update);
    d.last_change_step = lastChangeStep(block, update);
    return d;
}

std::optional<std::size_t> TelemetryStore::updateAtOrBefore(std::int64_t step) const {
    // Steps ascend within a run (an agent restart resets the store).
    const auto it = std::upper_bound(rows_.begin(), rows_.end(), step,
                                     [](std::int64_t s, const UpdateRow& r) { return s < r.step; });
    if (it == rows_.begin()) return std::nullopt;
    return static_cast<std::size_t>(it - rows_.begin()) - 1;
}

std::size_t TelemetryStore::memoryBytes() const {
    std::size_t bytes = rows_.capacity() * sizeof(UpdateRow) + blocks_.capacity() * sizeof(BlockColumns) +
                        updates_with_changes_.capacity() * sizeof(std::uint32_t);
    for (const SeriesSummary& summary : run_summaries_) bytes += summary.memoryBytes();
    for (const BlockColumns& b : blocks_) {
        bytes += (b.sensitivity.capacity() + b.l2_norm.capacity()) * sizeof(std::uint16_t);
        bytes += b.recent.capacity() * sizeof(float);
        bytes += b.sensitivity_summary.memoryBytes() + b.l2_summary.memoryBytes();
        bytes += b.state.capacity() + b.reason.capacity();
        bytes += (b.change_updates.capacity() + b.precision_edges.capacity() + b.pin_ends.capacity() +
                  b.pin_ends_from.capacity() + b.policy_moves.capacity()) *
                 sizeof(std::uint32_t);
    }
    return bytes;
}

std::string TelemetryStore::reasonText(int block, std::size_t update) const {
    if (block < 0 || block >= blockCount()) return {};
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    return b.text_update == update ? b.reason_text : std::string();
}

PerFormat TelemetryStore::snr(int block, std::size_t update) const {
    if (block < 0 || block >= blockCount()) return kNoSnr;
    const BlockColumns& b = blocks_[static_cast<std::size_t>(block)];
    return b.text_update == update ? b.snr : kNoSnr;
}

}  // namespace sp::ui
