#pragma once
// The budget allocator (POLICY.md rule 18), after QSync's greedy allocator: every free block starts
// at its cheapest admissible format; then, while the saving stays at or above the target, blocks
// move back up one format level at a time, the move with the largest sensitivity decrease per extra
// byte first (a max-heap). Pure and deterministic, so the simulator replays it exactly.
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "sp/precision.h"

namespace sp {

inline constexpr double kNoLossEstimate = std::numeric_limits<double>::quiet_NaN();

struct BudgetBlock {
    double bytes_bf16 = 0;                // the block's size at BF16
    double sensitivity = 0;               // the policy's score in [0, 1]
    PerFormat snr_db{};                   // estimated SNR per format; not finite: the nominal SNR
    FormatMask admissible = kAllFormats;  // formats it may take (BF16 is always admissible)
    std::optional<Precision> fixed;       // forced, pinned, cooling or unsafe: kept as is
    Precision current = Precision::bf16;  // where it stands (hysteresis favours it)
    // The estimated loss change per format (POLICY.md rule 23; NaN: unknown), in any one unit for all
    // blocks: the planners compare sums of it with the limit they are given, in the same unit. The
    // policy passes the loss's own units (its limit: the tolerance times the loss EMA / 100), the
    // experiment's oracle measured gaps in percent. Read by the loss planners only (sp/loss_plan.h).
    PerFormat loss_pct = {kNoLossEstimate, kNoLossEstimate, kNoLossEstimate, kNoLossEstimate,
                          kNoLossEstimate};
};

struct BudgetPlan {
    std::vector<Precision> precision;  // by block
    double saving_pct = 0;             // estimated saving against all-BF16 of the plan
    int moves_up = 0;                  // moves the greedy phase made
};

// The SNR a format is assumed to have when no estimate is known (dB): BF16 56.6, INT8 43.3, FP8 E4M3
// 32.5, FP8 E5M2 26.5, INT4 20.1 (POLICY.md rule 18 derives them).
double nominal_snr_db(Precision p);

// The sensitivity a block keeps in format p: sensitivity * 10^(-snr/10), the share of its signal
// power the format's noise would replace.
double sensitivity_in(const BudgetBlock& b, Precision p);

namespace detail {
inline constexpr std::uint8_t kNoBudgetFormat = 0xff;  // a level a block cannot stand at
// A move up of a free block from one level to the next it can take.
struct BudgetMove {
    double gain;  // the gain the greedy's max-heap would pop it at (see BudgetPlanner::order_moves)
    int block;
    std::uint8_t from_level, to_level;
};
// The moves' order: bucketed by gain, each bucket sorted when the plan reaches it. The storage only;
// core/src/descending_buckets.h fills and reads it.
struct DescendingBuckets {
    struct Entry {
        double value;
        std::uint32_t index;
    };
    std::vector<std::uint32_t> keys;    // by item: the bucketing key of its value
    std::vector<Entry> entries;         // by bucket, each bucket's entries in index order
    std::vector<std::uint32_t> starts;  // bucket b holds entries[starts[b], starts[b + 1])
    std::vector<std::uint32_t> fill;    // while filling: where each bucket's next entry goes
};
}  // namespace detail

// plan_budget with its working storage kept from one plan to the next. A policy plans at every
// update: at 10,000 blocks, allocating about 2 MB afresh each time cost more in page faults than the
// plan itself. It also remembers each block's formats, bytes and 10^(-snr/10) per level while what
// they depend on stays the same (the SNR estimates change only when the SNR is profiled); only the
// sensitivity is new at every update. The plan is the same as plan_budget's, bit for bit.
class BudgetPlanner {
  public:
    BudgetPlan plan(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis);

  private:
    // A free block's three byte levels (INT4, 8-bit, BF16), remembered with what they depend on, and
    // where the block stands in the plan being made. Each array has a fourth entry, "no level", so that
    // a block's moves are worked out without a branch on whether it has them (start_block).
    struct Shape {
        // What the plan's scan reads, first: one cache line of the block's.
        std::uint8_t level = 0;  // where it stands in the plan
        std::array<std::uint8_t, 4>
            format{};  // a Precision; detail::kNoBudgetFormat: it cannot stand at that level
        std::array<double, 4> bytes{};
        bool known = false;  // the key below is set
        PerFormat snr_db{};  // the key, with `admissible` and `bytes_bf16` (compared bit for bit)
        FormatMask admissible = 0;
        double bytes_bf16 = 0;
        std::array<std::uint8_t, 4> next{};   // the next level up it can stand at; 3: none
        std::array<double, 4> extra{};        // bytes[next[l]] - bytes[l]: a move up's cost
        std::array<double, 4> noise_share{};  // 10^(-snr/10) of the level's format
        std::uint8_t start = 0;               // its cheapest level
    };
    const Shape& shape_of(const BudgetBlock& b, std::size_t block);
    double start_block(const BudgetBlock& b, std::size_t block, double hysteresis);
    void order_moves();

    std::vector<Shape> shapes_;
    std::vector<detail::BudgetMove> moves_;  // two slots a block; the first move_count_ are listed
    std::size_t move_count_ = 0;
    detail::DescendingBuckets order_;  // the moves in the greedy's order
    double smallest_move_ = 0;         // the fewest extra bytes any listed move costs
};

// The plan for `target_pct` (bytes saved against all-BF16, in percent). `hysteresis` >= 0 weighs a
// move that brings a block back to the byte level it stands at by (1 + hysteresis), so the plan
// does not flip between near-equal choices from one update to the next.
BudgetPlan plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis);

}  // namespace sp
