#pragma once
// The routing policy: window-averaged gradient statistics -> sensitivity -> precision, with
// hysteresis, cooldown, config force lists, operator pins and modes. The normative semantics
// are written down in core/POLICY.md; this class implements exactly those.
//
// Per step the caller does: expire_pins(step) and apply(commands) at the step boundary,
// observe(step, stats) for each block that had gradients, update(step, now), then observe_loss(step,
// loss) when it has the loss. update() returns a record only on update steps; precisions() is the
// map the trainer's runtime should use after it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sp/budget.h"
#include "sp/command.h"
#include "sp/config.h"
#include "sp/layout.h"
#include "sp/loss_monitor.h"
#include "sp/loss_plan.h"
#include "sp/stats.h"
#include "sp/telemetry.h"

namespace sp {

struct PrecisionChange {
    int block_id = 0;
    Precision from = Precision::bf16;
    Precision to = Precision::bf16;
    Reason reason = Reason::policy;
};

// The decision rules on their own (rules 5 and 6 of POLICY.md), for tests and tools.
Precision initial_precision(double sensitivity, const Config& c);
Precision hysteresis_precision(Precision current, double sensitivity, const Config& c);

struct CommandOutcome {
    bool ok = false;
    std::string error;                     // set when !ok; nothing was applied then
    std::vector<PrecisionChange> changes;  // effective precision changes the command caused at once
};

// What the loss feedback did with one step's loss (POLICY.md, "Loss feedback").
struct LossFeedback {
    LossVerdict verdict;  // judged at every step, whether or not rollback is enabled
    // The blocks the policy had moved to a lower precision within rollback_window_steps before the
    // step: rolled back to BF16 on a spike or a non-finite loss (ascending ids; `changes` lists them).
    std::vector<int> suspects;
    std::vector<PrecisionChange> changes;
    // Pins given release_on_spike that the alarm released (rule 20; ascending ids). Those below BF16
    // went back to BF16 with the suspects (in `changes`) and are held there alike.
    std::vector<int> released_pins;
    std::int64_t cooldown_until = 0;  // rolled-back blocks stay BF16 before this step
    bool alarm() const {
        return verdict.kind == LossVerdict::Kind::spike || verdict.kind == LossVerdict::Kind::nonfinite;
    }
    bool rolled_back() const { return !suspects.empty(); }
};

// Pins whose lifetime ended (rule 20): released at a step boundary like a `release` command.
struct PinExpiry {
    std::vector<int> blocks;               // ascending ids
    std::vector<PrecisionChange> changes;  // only a block with a config force changes at once
};

class Policy {
  public:
    // Throws ConfigError when the config does not fit the layout (a forced block id the model
    // lacks, a calibration list of the wrong length or with negative/non-finite errors).
    Policy(Config config, BlockLayout layout, std::vector<double> calibration_errors = {});

    const Config& config() const { return config_; }
    const BlockLayout& layout() const { return layout_; }
    int block_count() const { return int(layout_.size()); }
    Mode mode() const { return mode_; }

    // Records one block's statistics for `step`. An observation with non-finite values is kept out
    // of the window and marks the block unsafe until the next update. Throws std::invalid_argument
    // for a block id outside the layout.
    void observe(std::int64_t step, const BlockGradStats& stats);

    // The latest SNR estimate of a block's formats (rule 17); held until the next one. Throws
    // std::invalid_argument for a block id outside the layout.
    void observe_snr(const BlockSnr& snr);

    // The latest loss-change estimate of a block's formats (rule 23), in the loss's units; held until
    // the next one. The plans use it as it is, against the tolerance times the loss EMA of loss
    // feedback; records show it in percent of that EMA.
    // Throws std::invalid_argument for a block id outside the layout.
    void observe_loss_estimate(const BlockLossEstimate& estimate);

    // Rule 19: the formats each block may take (BF16 is always allowed), from a "never slower than
    // BF16" gate file; by default every format. Throws std::invalid_argument for another length.
    void set_admitted_formats(std::vector<FormatMask> admitted);
    const std::vector<FormatMask>& admitted_formats() const { return admitted_; }
    // The formats the trainer's runtime can materialize: pins to others are rejected and the policy
    // never routes to them. Default: every format.
    void set_materializable(FormatMask formats);
    FormatMask materializable() const { return materializable_; }
    // Why `command` would be rejected ("" when it would be applied): unknown blocks, a format the
    // runtime cannot materialize. Reads only state fixed at setup, so another thread may call it.
    std::string check_command(const Command& command) const;

    // Rule 3: whether update(step) will produce a record.
    bool is_update_step(std::int64_t step) const;

    // Runs an update when `step` is an update step and returns its record (`timestamp` goes into it
    // verbatim); nullptr otherwise. The record is owned by the policy and valid until the next
    // update() — reusing it keeps an update free of allocations (10,000 blocks are 1 MiB of details).
    const UpdateRecord* update(std::int64_t step, double timestamp);

    // Applies an operator command at the boundary of `step`. All-or-nothing: an invalid command
    // (unknown block, precision this build does not route) changes nothing.
    CommandOutcome apply(const Command& command, std::int64_t step);

    // Releases the pins whose `for_steps` ended at the boundary of `step` (rule 20). Call once per
    // step before apply(); the result is valid until the next call.
    const PinExpiry& expire_pins(std::int64_t step);

    // Loss feedback: judges the training loss of `step` (the loss of the forward pass that ran with
    // the map of the previous steps). On a spike or a non-finite loss it releases the pins given
    // release_on_spike (rule 20) and, when rollback_enabled, rolls back to BF16 every block the policy
    // moved to a lower precision within rollback_window_steps before `step`; both are held at BF16
    // for rollback_cooldown_steps. Call once per step, after update(); the result is valid until the
    // next call.
    const LossFeedback& observe_loss(std::int64_t step, double loss);

    // Data-parallel followers (agent/PROTOCOL.md §11): takes rank 0's map where it differs from this
    // policy's own, with rank 0's reasons, and keeps the state the rules read (cooldowns, what loss
    // feedback may roll back) as if the decisions had been made here. When `step` was an update step,
    // its record (the one update() returned) is amended to the adopted map. Returns the changes.
    // Throws std::invalid_argument when a map or reason list has another length than the layout.
    std::vector<PrecisionChange> adopt(std::int64_t step, const std::vector<Precision>& map,
                                       const std::vector<Reason>& reasons);
    // The effective block -> precision map now.
    const std::vector<Precision>& precisions() const { return effective_; }
    const std::vector<std::optional<Precision>>& pins() const { return pins_; }
    // The step at whose boundary a block's pin ends by itself; nullopt: no pin, or until released.
    std::optional<std::int64_t> pin_expires_at(int block) const;
    bool pin_releases_on_spike(int block) const { return pin_on_spike_.at(std::size_t(block)) != 0; }
    std::optional<std::int64_t> last_update_step() const { return last_update_; }
    double budget_target_pct() const { return budget_target_pct_; }
    double loss_tolerance_pct() const { return loss_tolerance_pct_; }
    // Changes made by the most recent update() (empty when it was not an update step).
    const std::vector<PrecisionChange>& last_changes() const { return last_changes_; }

  private:
    static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min();
    static constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
    struct Decision {
        Precision next = Precision::bf16;
        Reason reason = Reason::hold;
    };
    // The phases of update(), in POLICY.md's order.
    void begin_record(UpdateRecord& rec, std::int64_t step, double timestamp) const;
    // Each phase is one pass over the record's block details (2.6 MB at 10,000 blocks, more than a
    // core's cache), so sums a later phase needs are taken in the pass that makes their terms.
    struct WindowTotals {
        double l2_sum = 0.0;  // of the blocks with a window, in block order
        int with_window = 0;
    };
    WindowTotals average_windows(UpdateRecord& rec) const;  // rule 2
    // Rule 4; in mode budget (`budget` not null) also each block's planner input (rule 18).
    void score_blocks(UpdateRecord& rec, const WindowTotals& totals, std::int64_t step,
                      std::vector<BudgetBlock>* budget) const;
    void fill_budget_block(BudgetBlock& bb, std::size_t b, const BlockDetail& d, std::int64_t step) const;
    // One block's decision by rule 9's priority: pin or force list, mode (rule 8), safety (rule 4),
    // then the budget plan or the dynamic rules.
    Decision decide(BlockDetail& d, std::int64_t step, bool first_dynamic,
                    const std::vector<Precision>& planned) const;
    Decision decide_dynamic(BlockDetail& d, std::int64_t step, bool first) const;  // rules 5-7, 16, 17
    Decision decide_budget(BlockDetail& d, Precision planned) const;
    // Rule 21: the loss planners' plan (mode budget with cost_estimator "loss", or mode tolerance);
    // writes the record's estimated_loss_pct.
    std::vector<Precision> plan_on_loss(UpdateRecord& rec);
    // Budget on the loss falls back to the sensitivity greedy until an estimate can be put in percent
    // (the first loss seen after the first profile): its target holds from the first update.
    bool plans_on_loss() const {
        return mode_ == Mode::tolerance || (mode_ == Mode::budget && loss_estimator_ && loss_in_percent());
    }
    // Some estimate is known and a loss EMA scales between the loss's units and percent of it.
    bool loss_in_percent() const {
        return loss_estimated_ && loss_monitor_.history() > 0 && loss_monitor_.ema() > 0.0 &&
               std::isfinite(loss_monitor_.ema());
    }
    void apply_decision(BlockDetail& d, const Decision& decision, std::int64_t step);
    // Rule 10, block by block as each block's decision is applied, then the record's totals. The
    // totals are summed in a local of the caller's and written to the record once (end_tally), so
    // that the sums stay in registers rather than in the record.
    struct Tally {
        int changes = 0;
        std::array<int, kPrecisionCount> blocks{};            // by format
        std::array<double, kPrecisionCount> bytes_bf16_in{};  // by format: its blocks' BF16 bytes
        double sens_sum = 0.0, sens_max = 0.0, sens_min = 1.0;
    };
    void tally_block(BlockDetail& d, Tally& t) const;
    void end_tally(UpdateRecord& rec, const Tally& t) const;
    void tally(UpdateRecord& rec) const;  // both, over a finished record (adopt)
    void end_update(std::int64_t step, bool first_dynamic);
    bool cooling(std::size_t block, std::int64_t step) const;
    std::int64_t free_from(std::size_t block) const;  // first step the cooldowns allow a policy move
    FormatMask allowed(std::size_t block) const { return admitted_[block] & materializable_; }

    std::optional<Precision> forced_precision(int block, ForcedBy* by) const;
    // Ends a block's pin (a release command, an expiry, a spike): back to its config force if it has
    // one, otherwise it keeps its precision until the next update, with no cooldown (rule 9).
    void release_pin(int block, std::int64_t step, std::vector<PrecisionChange>* changes);
    void release_pins_on_spike(LossFeedback& fb, std::int64_t step);
    void set_effective(int block, Precision p, std::int64_t step, Reason why,
                       std::vector<PrecisionChange>* changes);

    Config config_;
    BlockLayout layout_;
    std::vector<double> calibration_errors_;  // empty: no calibration (error_score 0)
    Mode mode_;

    // Window of the last `history_window` finite observations per block (flat, block-major).
    std::vector<double> win_l2_, win_max_, win_var_, win_mean_;
    std::vector<int> win_count_, win_head_;
    std::vector<char> nonfinite_since_update_;
    std::vector<PerFormat> snr_;        // latest estimate per block (NaN: none yet)
    std::vector<FormatMask> admitted_;  // gate, per block
    FormatMask materializable_ = kAllFormats;
    double budget_target_pct_ = 0;
    double loss_tolerance_pct_ = 0;
    bool loss_estimator_ = false;             // config_.loss_estimator(), read once (it compares strings)
    std::vector<PerFormat> loss_delta_;       // latest loss-change estimate per block (NaN: none yet)
    bool loss_estimated_ = false;             // some block has one (else no update converts them)
    std::vector<BudgetBlock> budget_blocks_;  // rule 18's input, rebuilt at each update in place
    BudgetPlanner budget_planner_;
    LossPlanner loss_planner_;

    std::vector<Precision> effective_;
    std::vector<Precision> recorded_;                // as in the previous record
    std::vector<Precision> recorded_before_update_;  // recorded_ before the latest update (for adopt)
    std::vector<std::optional<Precision>> pins_;
    // The error for a release naming blocks without a pin ("" when every one is pinned).
    std::string unpinned_in(const std::vector<int>& blocks) const;
    std::vector<std::int64_t> pin_until_;  // the step a pin ends at, kForever: until released
    std::vector<char> pin_on_spike_;       // the pin's release_on_spike
    PinExpiry expiry_;
    std::vector<std::optional<Precision>> config_force_;
    std::vector<std::int64_t> cooldown_from_;   // step of the last policy change, or none
    std::vector<std::int64_t> rollback_until_;  // a rolled-back block is held in BF16 before this step
    std::vector<std::int64_t> lowered_at_;      // step the policy last moved it below BF16, or none
    std::vector<std::int64_t> last_change_step_;
    std::vector<int> switches_;
    std::vector<PrecisionChange> last_changes_;
    LossMonitor loss_monitor_;
    LossFeedback loss_feedback_;
    UpdateRecord record_;
    std::optional<std::int64_t> last_update_;
    bool dynamic_assigned_ = false;  // the first dynamic update has happened
};

}  // namespace sp
