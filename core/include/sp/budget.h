#pragma once
// The budget allocator (POLICY.md rule 18), after QSync's greedy allocator: every free block starts
// at its cheapest admissible format; then, while the saving stays at or above the target, blocks
// move back up one format level at a time, the move with the largest sensitivity decrease per extra
// byte first (a max-heap). Pure and deterministic, so the simulator replays it exactly.
#include <optional>
#include <vector>

#include "sp/precision.h"

namespace sp {

struct BudgetBlock {
    double bytes_bf16 = 0;                // the block's size at BF16
    double sensitivity = 0;               // the policy's score in [0, 1]
    PerFormat snr_db{};                   // estimated SNR per format; not finite: the nominal SNR
    FormatMask admissible = kAllFormats;  // formats it may take (BF16 is always admissible)
    std::optional<Precision> fixed;       // forced, pinned, cooling or unsafe: kept as is
    Precision current = Precision::bf16;  // where it stands (hysteresis favours it)
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

// The plan for `target_pct` (bytes saved against all-BF16, in percent). `hysteresis` >= 0 weighs a
// move that brings a block back to the byte level it stands at by (1 + hysteresis), so the plan
// does not flip between near-equal choices from one update to the next.
BudgetPlan plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis);

}  // namespace sp
