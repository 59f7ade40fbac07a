#pragma once
// The budget planner as it was first written (one priority queue, every format and sensitivity
// recomputed per move): the oracle test_budget compares the optimized sp::plan_budget with, plan
// for plan, on random layouts.
#include <cmath>
#include <optional>
#include <queue>

#include "sp/budget.h"

namespace sp::test {
namespace reference_budget {

constexpr double kLevels[] = {0.5, 1.0, 2.0};
constexpr int kLevelCount = 3;
inline int level_of(Precision p) {
    const double b = bytes_per_element(p);
    for (int i = 0; i < kLevelCount; ++i)
        if (b == kLevels[i]) return i;
    return kLevelCount - 1;
}

// The format a block takes at a byte level: among its admissible formats of that width, the one with
// the highest SNR (ties: INT8, then FP8 E4M3, then E5M2). None: nullopt.
inline std::optional<Precision> format_at(const BudgetBlock& b, int level) {
    if (level == kLevelCount - 1) return Precision::bf16;
    std::optional<Precision> best;
    double best_snr = 0;
    for (Precision p : kLowFormatsCheapestFirst) {
        if (level_of(p) != level || !has_format(b.admissible, p)) continue;
        const double snr =
            std::isfinite(b.snr_db[std::size_t(p)]) ? b.snr_db[std::size_t(p)] : nominal_snr_db(p);
        if (!best || snr > best_snr) {
            best = p;
            best_snr = snr;
        }
    }
    return best;
}

struct Move {
    double gain;  // sensitivity decrease per extra byte (hysteresis weighted)
    int block;
    int to_level;
    bool operator<(const Move& o) const {  // max-heap on gain; ties: lower block id first
        return gain != o.gain ? gain < o.gain : block > o.block;
    }
};

}  // namespace reference_budget

inline BudgetPlan reference_plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct,
                                        double hysteresis) {
    const std::size_t n = blocks.size();
    BudgetPlan plan;
    plan.precision.assign(n, Precision::bf16);
    std::vector<int> level(n, reference_budget::kLevelCount - 1);
    double total_bf16 = 0, bytes = 0;
    auto bytes_at = [&](std::size_t b, Precision p) {
        return blocks[b].bytes_bf16 * bytes_per_element(p) / 2.0;
    };

    // Start: every free block at its cheapest admissible level.
    for (std::size_t b = 0; b < n; ++b) {
        total_bf16 += blocks[b].bytes_bf16;
        if (blocks[b].fixed) {
            plan.precision[b] = *blocks[b].fixed;
        } else {
            for (int l = 0; l < reference_budget::kLevelCount; ++l) {
                if (const auto p = reference_budget::format_at(blocks[b], l)) {
                    plan.precision[b] = *p;
                    level[b] = l;
                    break;
                }
            }
        }
        bytes += bytes_at(b, plan.precision[b]);
    }
    auto saving_pct = [&](double b) { return total_bf16 > 0 ? 100.0 * (1.0 - b / total_bf16) : 0.0; };

    // The next move up of a free block: to the next admissible level, gain = sensitivity removed per byte.
    std::priority_queue<reference_budget::Move> heap;
    auto push_next = [&](std::size_t b) {
        if (blocks[b].fixed) return;
        for (int l = level[b] + 1; l < reference_budget::kLevelCount; ++l) {
            const auto to = reference_budget::format_at(blocks[b], l);
            if (!to) continue;
            const double extra = bytes_at(b, *to) - bytes_at(b, plan.precision[b]);
            double gain = (sensitivity_in(blocks[b], plan.precision[b]) - sensitivity_in(blocks[b], *to)) /
                          std::max(extra, 1e-300);
            if (l == reference_budget::level_of(blocks[b].current))
                gain *= 1.0 + hysteresis;  // back to where it stands
            heap.push({gain, int(b), l});
            return;
        }
    };
    for (std::size_t b = 0; b < n; ++b) push_next(b);

    // A move that would break the target is dropped (the block stays); cheaper moves after it may still fit.
    while (!heap.empty()) {
        const reference_budget::Move m = heap.top();
        heap.pop();
        const std::size_t b = std::size_t(m.block);
        const Precision to = *reference_budget::format_at(blocks[b], m.to_level);
        const double after = bytes - bytes_at(b, plan.precision[b]) + bytes_at(b, to);
        if (saving_pct(after) < target_pct) continue;
        bytes = after;
        plan.precision[b] = to;
        level[b] = m.to_level;
        ++plan.moves_up;
        push_next(b);
    }
    plan.saving_pct = saving_pct(bytes);
    return plan;
}

}  // namespace sp::test
