// The loss planner's input (sp/loss_plan.h, POLICY.md rule 23): each block's options in the solver's
// terms, remembered by block from plan to plan, and the solver's input gathered from them.
//
// Remembered by block, each keyed on what it depends on: the options as listed (list_options: on the
// block's estimates, formats, size and current format, the question and the hysteresis), and the
// block's part of the solver's input made from them (make_ready: the tie term, normalized, the hull
// moves; on the tie weight too). A plan lists and makes ready again only the blocks whose key changed,
// and gathers the free blocks' moves (prepare) only when the free set or a part changed: the same
// arithmetic on the same numbers as preparing all of them again, so the same plan as a fresh planner's.
#include <algorithm>
#include <array>
#include <cmath>

#include "loss_plan_detail.h"
#include "sp/loss_plan.h"

namespace sp {
using loss_plan_detail::bits;
using loss_plan_detail::bytes_in;
using loss_plan_detail::cost_in;
using loss_plan_detail::kInf;

namespace {

// Of `count` options in weight order (`value_of(k)`: the k-th one's value), the places of those
// cheaper than every heavier one, into `front`, heaviest first; returns how many. The rule both list_options
// (on its sort order) and keep_front apply.
template <class ValueOf>
std::size_t cheaper_than_heavier(std::size_t count, ValueOf value_of,
                                 std::array<std::uint8_t, kPrecisionCount>& front) {
    std::size_t kept = 0;
    double best = kInf;
    for (std::size_t k = count; k-- > 0;) {  // from the heaviest down, the cheapest first among equals
        const double v = value_of(k);
        if (v < best) {
            front[kept++] = std::uint8_t(k);
            best = v;
        }
    }
    return kept;
}

// Keeps of `count` options (weight ascending) only those cheaper than every heavier one, in place;
// returns how many.
std::size_t keep_front(LossPlanner::Option* o, std::size_t count) {
    std::array<std::uint8_t, kPrecisionCount> front{};
    const std::size_t kept = cheaper_than_heavier(
        count, [o](std::size_t k) { return o[k].value; }, front);
    // The k-th kept place is at or above k and above every earlier one: no place is overwritten unread.
    for (std::size_t k = 0; k < kept; ++k) o[k] = o[front[kept - 1 - k]];
    return kept;
}

}  // namespace

// The block's options: BF16 and every admissible format with a known cost, in the solver's terms, then
// only those no other option dominates (at least as heavy and no dearer), weight ascending. Formats of
// one width are all listed: under hysteresis the current one may be dearer yet weigh more. Returns the
// block's part in the tie weight (plan); the options go to `out`, their number to `count`. Tolerance values
// leave out the tie weight's term, which is added once the weight is known: dominance among equal values goes
// to the heavier (cheaper) option, as the term would decide it.
LossPlanner::TiePart LossPlanner::list_options(const BudgetBlock& b, Question q, double hysteresis,
                                               Option* out, std::uint8_t& count_out) {
    const double keep = 1.0 + hysteresis;
    // Field by field, and sorted by index: copies of whole options just written stall the load
    // (store forwarding), and a plan lists every block after each profile.
    std::array<double, kPrecisionCount> weight{}, value{};
    std::array<Precision, kPrecisionCount> format{};
    std::array<std::uint8_t, kPrecisionCount> order{};
    std::size_t count = 0;
    TiePart part;
    for (Precision p : kAllPrecisions) {
        const double cost = cost_in(b, p);
        if (p != Precision::bf16 && (!has_format(b.admissible, p) || !std::isfinite(cost))) continue;
        const double saved = b.bytes_bf16 - bytes_in(b, p);
        if (p != Precision::bf16) {
            part.smallest_saving = std::min(part.smallest_saving, saved);
            part.dearest = std::max(part.dearest, std::fabs(cost));
        }
        const double held = p == b.current ? keep : 1.0;
        format[count] = p;
        weight[count] = q == Question::budget ? saved : -cost;
        value[count] = q == Question::budget ? cost / held : -saved * held;
        order[count] = std::uint8_t(count);
        ++count;
    }
    // Weight ascending; among equal weights the dearest first. An insertion sort: five options at most.
    const auto before = [&](std::uint8_t x, std::uint8_t y) {
        if (weight[x] != weight[y]) return weight[x] < weight[y];
        return value[x] != value[y] ? value[x] > value[y] : format[x] > format[y];
    };
    for (std::size_t i = 1; i < count; ++i)
        for (std::size_t j = i; j > 0 && before(order[j], order[j - 1]); --j)
            std::swap(order[j], order[j - 1]);
    std::array<std::uint8_t, kPrecisionCount> front{};
    const std::size_t kept = cheaper_than_heavier(
        count, [&](std::size_t k) { return value[order[k]]; }, front);
    for (std::size_t k = 0; k < kept; ++k) {
        const std::uint8_t i = order[front[kept - 1 - k]];
        out[k].weight = weight[i];
        out[k].value = value[i];
        out[k].format = format[i];
    }
    count_out = std::uint8_t(kept);
    return part;
}

// Lists a block's options again unless nothing they depend on changed since it was last listed (its
// estimates, formats, size and current format, compared bit for bit: NaN equal to the same NaN, -0 not
// to +0; the question and the hysteresis, checked by plan): the estimates change only when they are
// profiled. True when nothing changed; else its part of the solver's input is made again too (prepare).
bool LossPlanner::remember(const BudgetBlock& b, std::size_t block, Question q, double hysteresis) {
    Key& key = keys_[block];
    bool same = key.known && bits(key.bytes_bf16) == bits(b.bytes_bf16) && key.admissible == b.admissible &&
                key.current == b.current;
    for (std::size_t p = 0; p < kPrecisionCount; ++p)
        same = same && bits(key.loss_pct[p]) == bits(b.loss_pct[p]);
    if (same) return true;
    key = Key{b.loss_pct, b.bytes_bf16, b.admissible, b.current, true};
    ties_[block] = list_options(b, q, hysteresis, listed_[block].data(), listed_count_[block]);
    ready_ok_[block] = 0;
    return false;
}

// A block's part of the solver's input, from its listed options. Tolerance: among plans that save the
// same, the one that costs the least. Each option's value carries its cost times a weight `tie` small
// enough that all the blocks' costs together weigh a millionth of the smallest saving any of them can
// make: it decides between equal savings and never against a saving. Where two options' values differ
// by less than the term (hysteresis near 0.5), it can leave a lighter option no cheaper than a heavier
// one: such options are dropped, as a front on the full values drops them. Then its weights less its
// lightest (every item starts at 0 and the need moves by their sum), and its moves along the lower
// convex hull of its options, efficiencies rising (the relaxation's, relax).
void LossPlanner::make_ready(std::size_t block, bool weigh, double tie) {
    Ready& r = ready_[block];
    Option* o = options_.data() + kPrecisionCount * block;
    std::copy(listed_[block].begin(), listed_[block].end(), o);
    std::size_t count = listed_count_[block];
    if (weigh) {
        bool dominated = false;
        for (std::size_t j = 0; j < count; ++j) {
            o[j].value -= tie * o[j].weight;  // + tie * cost: the weight is minus the cost
            dominated |= j > 0 && !(o[j - 1].value < o[j].value);
        }
        if (dominated) count = keep_front(o, count);
    }
    r.count = std::uint8_t(count);
    r.lightest = o[0].weight;
    for (std::size_t j = count; j-- > 0;) o[j].weight -= o[0].weight;
    r.moves = 0;
    for (std::size_t from = 0; from + 1 < count;) {
        std::size_t to = from + 1;  // the hull's next point: the least slope (ties: the farthest)
        double slope = (o[to].value - o[from].value) / (o[to].weight - o[from].weight);
        for (std::size_t j = to + 1; j < count; ++j) {
            const double s = (o[j].value - o[from].value) / (o[j].weight - o[from].weight);
            if (s <= slope) {
                slope = s;
                to = j;
            }
        }
        r.hull[r.moves++] = {slope, o[to].weight - o[from].weight, o[to].value - o[from].value, 0,
                             std::uint8_t(to)};
        from = to;
    }
    ready_ok_[block] = 1;
}

// The solver's input: the free blocks' parts (made again where stale), in block order. Their options
// stay where make_ready put them (option_start_, option_end_ point at them); their hull moves are
// gathered into hull_, with their least and largest efficiency. The buffer only grows (hull_size_ says
// how much is used), so that gathering is plain stores.
void LossPlanner::prepare(bool weigh, double tie) {
    const std::size_t n = item_block_.size();
    if (hull_.size() < (kPrecisionCount - 1) * n) hull_.resize((kPrecisionCount - 1) * n);
    option_start_.resize(n);
    option_end_.resize(n);
    lightest_.resize(n);
    const Option* options = options_.data();
    Move* hull = hull_.data();
    std::uint32_t moves = 0;
    double heaviest = 0, base = 0, least = kInf, most = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint32_t b = item_block_[i];
        if (!ready_ok_[b]) make_ready(b, weigh, tie);
        const Ready& r = ready_[b];
        const auto at = std::uint32_t(kPrecisionCount * b);
        option_start_[i] = at;
        option_end_[i] = at + r.count;
        lightest_[i] = r.lightest;
        heaviest += options[at + r.count - 1].weight;
        base += options[at].value;
        for (std::size_t m = 0; m < r.moves; ++m) {
            Move mv = r.hull[m];  // made whole before it is stored: a store read back in part stalls
            mv.item = i;
            hull[moves] = mv;
            ++moves;
            least = std::min(least, r.hull[m].efficiency);
            most = std::max(most, r.hull[m].efficiency);
        }
    }
    hull_size_ = moves;
    hull_least_ = least;
    hull_most_ = most;
    heaviest_ = heaviest;
    base_ = base;
    prepared_ = true;
}

LossPlan LossPlanner::plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct,
                                  double hysteresis) {
    return plan(blocks, Question::budget, target_pct, hysteresis);
}

LossPlan LossPlanner::plan_tolerance(const std::vector<BudgetBlock>& blocks, double tolerance_pct,
                                     double hysteresis) {
    return plan(blocks, Question::tolerance, tolerance_pct, hysteresis);
}

// Every block's options are remembered, fixed ones' too, and the tie weight is taken over all of them:
// so it stays the same while only the free set changes (blocks cooling down, forced, freed), and the
// free blocks' parts with it.
LossPlan LossPlanner::plan(const std::vector<BudgetBlock>& blocks, Question q, double limit_pct,
                           double hysteresis) {
    LossPlan out;
    out.precision.assign(blocks.size(), Precision::bf16);
    if (q != listed_question_ ||
        bits(hysteresis) != bits(listed_hysteresis_)) {  // every block's options change
        keys_.clear();
        listed_question_ = q;
        listed_hysteresis_ = hysteresis;
    }
    keys_.resize(blocks.size(), Key{{}, 0.0, 0, Precision::bf16, false});
    ties_.resize(blocks.size());
    listed_.resize(blocks.size());
    listed_count_.resize(blocks.size());
    ready_.resize(blocks.size());
    options_.resize(kPrecisionCount * blocks.size());
    ready_ok_.resize(blocks.size(), 0);
    // The solver's input is gathered again only when an item or its part changed: the free blocks as
    // item_block_ holds them from the last plan, each block's key as it was.
    bool same = prepared_;
    std::size_t items = 0;
    double total_bf16 = 0, fixed_saved = 0, fixed_cost = 0, smallest_saving = kInf, costs = 0;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        const BudgetBlock& block = blocks[b];
        total_bf16 += block.bytes_bf16;
        const bool kept = remember(block, b, q, hysteresis);
        smallest_saving = std::min(smallest_saving, ties_[b].smallest_saving);
        costs += ties_[b].dearest;
        if (block.fixed) {
            out.precision[b] = *block.fixed;
            fixed_saved += block.bytes_bf16 - bytes_in(block, *block.fixed);
            const double cost = cost_in(block, *block.fixed);
            if (std::isfinite(cost)) fixed_cost += cost;  // an unknown cost counts as none
            continue;
        }
        if (items < item_block_.size()) {
            same = same && item_block_[items] == b;
            item_block_[items] = std::uint32_t(b);
        } else {
            same = false;
            item_block_.push_back(std::uint32_t(b));
        }
        ++items;
        same = kept && same;
    }
    same = same && items == item_block_.size();
    item_block_.resize(items);
    const bool weigh = q == Question::tolerance && std::isfinite(smallest_saving) && costs > 0;
    const double tie = weigh ? 1e-6 * smallest_saving / costs : 0.0;
    if (weigh != ready_weigh_ || bits(tie) != bits(ready_tie_)) {  // every block's part changes
        std::fill(ready_ok_.begin(), ready_ok_.end(), 0);
        ready_weigh_ = weigh;
        ready_tie_ = tie;
        same = false;
    }
    if (!same) prepare(weigh, tie);
    const double need =
        q == Question::budget ? limit_pct / 100.0 * total_bf16 - fixed_saved : -(limit_pct - fixed_cost);
    out.feasible = solve(need);
    out.core = core_.size();
    write_plan(out, fixed_saved, fixed_cost, total_bf16);
    return out;
}

// The free blocks' formats into the plan, and its saving and summed cost with the fixed blocks' (`saved`,
// `cost`). From the keys, which hold the blocks' sizes and estimates bit for bit in a line a block.
void LossPlanner::write_plan(LossPlan& out, double saved, double cost, double total_bf16) const {
    for (std::size_t i = 0; i < item_block_.size(); ++i) {
        const std::size_t b = item_block_[i];
        const Precision p = options_[option_start_[i] + choice_[i]].format;
        out.precision[b] = p;
        const Key& key = keys_[b];
        saved += key.bytes_bf16 - bytes_in(key, p);
        cost += cost_in(key, p);
    }
    out.saving_pct = total_bf16 > 0 ? 100.0 * saved / total_bf16 : 0.0;
    out.loss_pct = cost;
}

}  // namespace sp
