#pragma once
// What the two halves of the loss planner share (loss_plan_prepare.cpp: its input; loss_plan.cpp: the
// solver).
#include <cstdint>
#include <cstring>
#include <limits>

#include "sp/budget.h"

namespace sp::loss_plan_detail {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A double's representation: what the remembered input is compared by (NaN equal to the same NaN, -0
// not to +0), and what orders positive efficiencies (narrow_by_buckets).
inline std::uint64_t bits(double v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

// A block's bytes in `p`, from a BudgetBlock or the planner's key of one (the same fields).
template <class Block>
double bytes_in(const Block& b, Precision p) {
    return b.bytes_bf16 * bytes_per_element(p) / 2.0;
}

// A block's estimated loss change in `p`: 0 for BF16, the estimate for the others (NaN: unknown).
template <class Block>
double cost_in(const Block& b, Precision p) {
    return p == Precision::bf16 ? 0.0 : b.loss_pct[std::size_t(p)];
}

}  // namespace sp::loss_plan_detail
