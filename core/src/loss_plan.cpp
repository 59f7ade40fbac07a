// The exact plans on the loss estimate (sp/loss_plan.h, POLICY.md rule 23).
//
// Both questions are put in one form: each item (a free block) takes one of its options; minimise the
// sum of the options' values subject to the sum of their weights reaching `need`. Budget: weight =
// bytes saved, value = estimated loss change. Tolerance: weight = minus the loss change, value = minus
// the bytes saved, need = minus the tolerance.
//
// plan() keeps the solver's input (prepare: the options with the tie term, normalized, and their hull
// moves) from one plan to the next while the free blocks, their options and the tie weight stay the
// same, compared bit for bit: the same input, so the same plan as preparing it again.
//
// solve(): (1) every item at its least value; done when that reaches the need. (2) The linear
// relaxation: each item's moves along the lower convex hull of its options, taken in order of value
// per weight until the need is met; the move that meets it (the split) is found by bucketing the moves
// by efficiency, then a weighted selection (nth_element) in the split's bucket, O(n). Its efficiency is
// the Lagrange multiplier. (3) An incumbent: the
// moves before the split and the split itself. (4) The Lagrangian bound L and reduced-cost fixing: an
// option whose reduced cost exceeds UB - L cannot be in a plan better than the incumbent; items left
// with one option are fixed. (5) The core, the items with two or more options left, by a Pareto
// dynamic programme over (weight, value), the items nearest the multiplier first, pruned by dominance
// and by the relaxation of the items still to come with its two slopes (above and below their best
// options), which tightens as the items near the multiplier are used up.
#include "sp/loss_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace sp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A double's representation: what the remembered input is compared by (NaN equal to the same NaN, -0
// not to +0), and what orders positive efficiencies (narrow_by_buckets).
std::uint64_t bits(double v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

double bytes_in(const BudgetBlock& b, Precision p) {
    return b.bytes_bf16 * bytes_per_element(p) / 2.0;
}

// A block's estimated loss change in `p`: 0 for BF16, the estimate for the others (NaN: unknown).
double cost_in(const BudgetBlock& b, Precision p) {
    return p == Precision::bf16 ? 0.0 : b.loss_pct[std::size_t(p)];
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
    std::array<Option, kPrecisionCount> listed{};
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
        Option& o = listed[count++];
        o.format = p;
        o.weight = q == Question::budget ? saved : -cost;
        o.value = q == Question::budget ? cost / held : -saved * held;
    }
    // Weight ascending; among equal weights the dearest first. An insertion sort: five options at most.
    const auto before = [](const Option& x, const Option& y) {
        if (x.weight != y.weight) return x.weight < y.weight;
        return x.value != y.value ? x.value > y.value : x.format > y.format;
    };
    for (std::size_t i = 1; i < count; ++i)
        for (std::size_t j = i; j > 0 && before(listed[j], listed[j - 1]); --j)
            std::swap(listed[j], listed[j - 1]);
    // From the heaviest down (the cheapest first among equal weights): an option is kept when its value
    // is below every heavier one's.
    std::array<Option, kPrecisionCount> front{};
    std::size_t kept = 0;
    double best = kInf;
    for (std::size_t i = count; i-- > 0;) {
        if (listed[i].value < best) {
            front[kept++] = listed[i];
            best = listed[i].value;
        }
    }
    for (std::size_t i = kept; i-- > 0;) out[kept - 1 - i] = front[i];
    count_out = std::uint8_t(kept);
    return part;
}

// Equal bit for bit: NaN to the same NaN, -0 not to +0 (what the remembered options depend on).
bool LossPlanner::same_key(const Key& x, const Key& y) {
    for (std::size_t p = 0; p < x.loss_pct.size(); ++p)
        if (bits(x.loss_pct[p]) != bits(y.loss_pct[p])) return false;
    return bits(x.bytes_bf16) == bits(y.bytes_bf16) && x.admissible == y.admissible &&
           x.current == y.current && x.known == y.known;
}

// Lists a block's options again unless nothing they depend on changed since it was last listed (its
// estimates, formats, size and current format, compared bit for bit, the question and the hysteresis,
// checked by plan): the estimates change only when they are profiled. True when nothing changed.
bool LossPlanner::remember(const BudgetBlock& b, std::size_t block, Question q, double hysteresis) {
    const Key key{b.loss_pct, b.bytes_bf16, b.admissible, b.current, true};
    if (same_key(keys_[block], key)) return true;
    keys_[block] = key;
    ties_[block] = list_options(b, q, hysteresis, listed_[block].data(), listed_count_[block]);
    return false;
}

// Tolerance: among plans that save the same, the one that costs the least. Each option's value carries its
// cost times a weight small enough that all the free blocks' costs together weigh a millionth of the
// smallest saving any of them can make: it decides between equal savings and never against a saving.
// The blocks' parts come with their options (plan sums them), the term `tie` is added here. Where two
// options' values differ by less than the term (hysteresis near 0.5), it can leave a lighter option no
// cheaper than a heavier one: such options are dropped, as a front on the full values drops them.
void LossPlanner::weigh_ties(double tie) {
    bool dominated = false;
    for (std::size_t i = 0; i + 1 < option_start_.size(); ++i) {
        for (std::uint32_t j = option_start_[i]; j < option_start_[i + 1]; ++j) {
            options_[j].value -= tie * options_[j].weight;  // + tie * cost: the weight is minus the cost
            dominated |= j > option_start_[i] && !(options_[j - 1].value < options_[j].value);
        }
    }
    if (dominated) drop_dominated();
}

// Keeps of each item's options (weight ascending) only those cheaper than every heavier one, in place.
void LossPlanner::drop_dominated() {
    std::uint32_t out = 0;
    for (std::size_t i = 0; i + 1 < option_start_.size(); ++i) {
        const std::uint32_t start = option_start_[i], end = option_start_[i + 1];
        std::array<Option, kPrecisionCount> front{};
        std::size_t kept = 0;
        double best = kInf;
        for (std::uint32_t j = end; j-- > start;) {
            if (options_[j].value < best) {
                front[kept++] = options_[j];
                best = options_[j].value;
            }
        }
        option_start_[i] = out;
        for (std::size_t k = kept; k-- > 0;) options_[out++] = front[k];
    }
    option_start_.back() = out;
    options_.resize(out);
}

LossPlan LossPlanner::plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct,
                                  double hysteresis) {
    return plan(blocks, Question::budget, target_pct, hysteresis);
}

LossPlan LossPlanner::plan_tolerance(const std::vector<BudgetBlock>& blocks, double tolerance_pct,
                                     double hysteresis) {
    return plan(blocks, Question::tolerance, tolerance_pct, hysteresis);
}

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
    // The solver's input is prepared again only when an item or its options changed: the free blocks as
    // item_block_ holds them from the last plan, each block's key as it was.
    bool same = prepared_;
    std::size_t items = 0;
    double total_bf16 = 0, fixed_saved = 0, fixed_cost = 0, smallest_saving = kInf, costs = 0;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        const BudgetBlock& block = blocks[b];
        total_bf16 += block.bytes_bf16;
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
        same = remember(block, b, q, hysteresis) && same;
        smallest_saving = std::min(smallest_saving, ties_[b].smallest_saving);
        costs += ties_[b].dearest;
    }
    same = same && items == item_block_.size();
    item_block_.resize(items);
    const bool weigh = q == Question::tolerance && std::isfinite(smallest_saving) && costs > 0;
    const double tie = weigh ? 1e-6 * smallest_saving / costs : 0.0;
    if (!same || weigh != prepared_weigh_ || bits(tie) != bits(prepared_tie_)) prepare(weigh, tie);
    const double need =
        q == Question::budget ? limit_pct / 100.0 * total_bf16 - fixed_saved : -(limit_pct - fixed_cost);
    out.feasible = solve(need);
    out.core = core_.size();
    double saved = fixed_saved, cost = fixed_cost;
    for (std::size_t i = 0; i < item_block_.size(); ++i) {
        const std::size_t b = item_block_[i];
        const Precision p = options_[option_start_[i] + choice_[i]].format;
        out.precision[b] = p;
        saved += blocks[b].bytes_bf16 - bytes_in(blocks[b], p);
        cost += cost_in(blocks[b], p);
    }
    out.saving_pct = total_bf16 > 0 ? 100.0 * saved / total_bf16 : 0.0;
    out.loss_pct = cost;
    return out;
}

// The solver's input from the items' remembered options: the tie term (tolerance), then each item's
// weights less its lightest (so that every item starts at 0 and the need moves by their sum), and its
// moves along the lower convex hull of its options, efficiencies rising (the relaxation's, relax).
void LossPlanner::prepare(bool weigh, double tie) {
    options_.clear();
    option_start_.clear();
    for (std::uint32_t b : item_block_) {
        option_start_.push_back(std::uint32_t(options_.size()));
        options_.insert(options_.end(), listed_[b].begin(), listed_[b].begin() + listed_count_[b]);
    }
    option_start_.push_back(std::uint32_t(options_.size()));
    if (weigh) weigh_ties(tie);
    normalize_and_hull();
    prepared_ = true;
    prepared_weigh_ = weigh;
    prepared_tie_ = tie;
}

void LossPlanner::normalize_and_hull() {
    const std::size_t n = item_block_.size();
    lightest_.resize(n);
    heaviest_ = 0;
    base_ = 0;
    hull_.clear();
    for (std::uint32_t i = 0; i < n; ++i) {
        Option* o = &options_[option_start_[i]];
        const std::size_t count = option_start_[i + 1] - option_start_[i];
        lightest_[i] = o[0].weight;
        for (std::size_t j = count; j-- > 0;) o[j].weight -= o[0].weight;
        heaviest_ += o[count - 1].weight;
        base_ += o[0].value;
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
            hull_.push_back(
                {slope, o[to].weight - o[from].weight, o[to].value - o[from].value, i, std::uint8_t(to)});
            from = to;
        }
    }
}

bool LossPlanner::solve(double need) {
    const std::size_t n = item_block_.size();
    choice_.assign(n, 0);
    core_.clear();
    const double span = std::fabs(need);
    for (std::size_t i = 0; i < n; ++i) need -= lightest_[i];
    const double eps = 1e-12 * (span + heaviest_ + 1e-300);
    if (need <= eps) return true;  // every item at its least value already reaches it
    if (heaviest_ < need - eps) {  // out of reach: the nearest plan, every item at its heaviest
        for (std::size_t i = 0; i < n; ++i)
            choice_[i] = std::uint8_t(option_start_[i + 1] - option_start_[i] - 1);
        return false;
    }
    const Relaxation r = relax(need);
    const double upper = incumbent(need, r.split);
    if (upper - r.bound <= 1e-12 * (std::fabs(upper) + std::fabs(r.bound))) return true;
    fix_by_bound(r.lambda, r.bound, upper);
    if (!core_.empty()) search_core(need, r.lambda, upper);
    return true;
}

// The linear relaxation: each item's moves along the lower convex hull of its options (hull_, from
// prepare; efficiencies rising), and the move at which the moves taken in order of efficiency first reach
// `need` (> 0, and reachable): a weighted selection, so that the order is never fully sorted. On return
// moves_[0, split) are the moves before it, moves_[split] the split.
LossPlanner::Relaxation LossPlanner::relax(double need) {
    moves_.assign(hull_.begin(), hull_.end());
    const double base = base_;
    const auto before = [](const Move& x, const Move& y) {
        if (x.efficiency != y.efficiency) return x.efficiency < y.efficiency;
        return x.item != y.item ? x.item < y.item : x.to < y.to;
    };
    std::size_t lo = 0, hi = moves_.size();
    double left = need, taken = base;
    narrow_by_buckets(lo, hi, left, taken);
    while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        std::nth_element(moves_.begin() + std::ptrdiff_t(lo), moves_.begin() + std::ptrdiff_t(mid),
                         moves_.begin() + std::ptrdiff_t(hi), before);
        double weight = 0, value = 0;
        for (std::size_t m = lo; m < mid; ++m) {
            weight += moves_[m].weight;
            value += moves_[m].value;
        }
        if (weight >= left) {
            hi = mid;
        } else {
            left -= weight;
            taken += value;
            lo = mid;
        }
    }
    const Move& split = moves_[lo];
    return {lo, split.efficiency, taken + std::min(left / split.weight, 1.0) * split.value};
}

// Narrows the selection to one bucket of moves. A move's bucket is the high bits of its efficiency's
// representation above the least one's: efficiencies are positive (heavier options cost more), and for
// positive doubles the representation orders as the value does, on a scale close to the logarithm's,
// so the long tails of efficiencies (an option barely dearer than the next) do not crowd the rest into
// one bucket. The bucket where the need is met is found from the buckets' sums in one pass, and the
// moves before it are partitioned to the front: the weighted selection is left with one bucket's moves.
void LossPlanner::narrow_by_buckets(std::size_t& lo, std::size_t& hi, double& left, double& taken) {
    const std::size_t m = hi - lo;
    if (m < 64) return;
    double least = kInf, most = 0;
    for (std::size_t k = lo; k < hi; ++k) {
        least = std::min(least, moves_[k].efficiency);
        most = std::max(most, moves_[k].efficiency);
    }
    if (!(least >= 0) || !(most > least) || !std::isfinite(most)) return;
    const std::uint64_t base = bits(least), range = bits(most) - base;
    unsigned shift = 0;
    while ((range >> shift) >= m / 8) ++shift;
    const std::size_t buckets = std::size_t(range >> shift) + 1;
    const auto bucket_of = [&](const Move& mv) { return std::size_t((bits(mv.efficiency) - base) >> shift); };
    bucket_sums_.assign(2 * buckets, 0.0);  // weight, value
    for (std::size_t k = lo; k < hi; ++k) {
        const std::size_t b = bucket_of(moves_[k]);
        bucket_sums_[2 * b] += moves_[k].weight;
        bucket_sums_[2 * b + 1] += moves_[k].value;
    }
    std::size_t split = 0;
    while (split + 1 < buckets && bucket_sums_[2 * split] < left) {
        left -= bucket_sums_[2 * split];
        taken += bucket_sums_[2 * split + 1];
        ++split;
    }
    const auto first = moves_.begin() + std::ptrdiff_t(lo), last = moves_.begin() + std::ptrdiff_t(hi);
    const auto middle = std::partition(first, last, [&](const Move& mv) { return bucket_of(mv) < split; });
    const auto end = std::partition(middle, last, [&](const Move& mv) { return bucket_of(mv) == split; });
    lo = std::size_t(middle - moves_.begin());
    hi = std::size_t(end - moves_.begin());
}

// A good feasible plan to bound the search with (the tighter, the smaller the core), into choice_; returns
// its value. From the moves before the split (short of the need by `left`), the best of: one item moved
// up to any heavier option that covers `left` (the split's own move is one of them); or the split taken,
// then one item moved down as far as the surplus allows, the largest value given back.
double LossPlanner::incumbent(double need, std::size_t split) {
    const std::size_t n = item_block_.size();
    for (std::size_t m = 0; m < split; ++m)
        choice_[moves_[m].item] = std::max(choice_[moves_[m].item], moves_[m].to);
    least_at_ = choice_;  // the relaxation's point: each item's option of least reduced cost
    double weight = 0, value = 0;
    for (std::size_t i = 0; i < n; ++i) {
        weight += options_[option_start_[i] + choice_[i]].weight;
        value += options_[option_start_[i] + choice_[i]].value;
    }
    lp_weight_ = weight;
    lp_value_ = value;
    const double left = need - weight;
    struct Change {
        double delta = kInf;
        std::size_t item = 0;
        std::uint8_t to = 0;
    };
    // In one pass over the items: the cheapest single move up that covers `left`; and, with the split
    // taken, the surplus it leaves given back where it is worth the most.
    const Move& s = moves_[split];
    const double surplus = s.weight - left;
    Change up, down{0.0, 0, 0};
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t start = option_start_[i];
        const Option& at = options_[start + choice_[i]];
        for (std::uint32_t j = start + choice_[i] + 1; j < option_start_[i + 1]; ++j)
            if (options_[j].weight - at.weight >= left && options_[j].value - at.value < up.delta)
                up = {options_[j].value - at.value, i, std::uint8_t(j - start)};
        const std::uint8_t from = i == s.item ? s.to : choice_[i];
        const Option& taken = options_[start + from];
        for (std::uint32_t j = start; j < start + from; ++j)
            if (taken.weight - options_[j].weight <= surplus && options_[j].value - taken.value < down.delta)
                down = {options_[j].value - taken.value, i, std::uint8_t(j - start)};
    }
    if (up.delta <= s.value + down.delta) {
        choice_[up.item] = up.to;
        return value + up.delta;
    }
    choice_[s.item] = s.to;
    if (down.delta < 0) choice_[down.item] = down.to;
    return value + s.value + down.delta;
}

// Reduced-cost fixing at multiplier `lambda`: an option whose reduced cost exceeds the gap between the
// incumbent's value `upper` and the Lagrangian bound `lower` (the relaxation's value) is dropped; items
// left with one option take it, the others are the core (core_, their options marked in kept_). An item
// has one option left when its margin (its second least reduced cost less its least, the relaxation's
// point) exceeds the gap: then it is its least, which is also the incumbent's (the incumbent's options are
// all within the gap). One pass over the options for the margins, back to the options only for the core.
void LossPlanner::fix_by_bound(double lambda, double lower, double upper) {
    const std::size_t n = item_block_.size();
    const double gap = upper - lower + 1e-9 * (std::fabs(upper) + std::fabs(lower) + 1e-300);
    margin_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t least = option_start_[i] + least_at_[i];
        double margin = kInf;
        for (std::uint32_t j = option_start_[i]; j < option_start_[i + 1]; ++j)
            if (j != least)
                margin = std::min(margin, options_[j].value - options_[least].value -
                                              lambda * (options_[j].weight - options_[least].weight));
        margin_[i] = margin;
    }
    kept_.resize(options_.size());  // read for the core's items only
    fixed_weight_ = lp_weight_;
    fixed_value_ = lp_value_;
    for (std::size_t i = 0; i < n; ++i) {
        if (!(margin_[i] <= gap)) {
            choice_[i] = least_at_[i];
            continue;
        }
        core_.push_back(std::uint32_t(i));
        const Option& at = options_[option_start_[i] + least_at_[i]];
        fixed_weight_ -= at.weight;
        fixed_value_ -= at.value;
        for (std::uint32_t j = option_start_[i]; j < option_start_[i + 1]; ++j)
            kept_[j] =
                options_[j].value - at.value - lambda * (options_[j].weight - at.weight) <= gap ? 1 : 0;
    }
}

// The core's order and the bound on what the items after each stage can do. Each core item stands at
// its best option at the multiplier (the least reduced cost); from there the restricted relaxation of
// the items still to come is convex in the weight they must make up, with a slope of at least the least
// efficiency of their moves up (when they must weigh more than at their best options) and at most the
// largest of their moves down (when less). The items whose moves lie nearest the multiplier come first,
// so that the slopes of those left move away from it stage by stage and the bound tightens.
void LossPlanner::order_core(double lambda) {
    ranked_.clear();
    for (std::uint32_t i : core_) {
        Ranked r{0, 0, 0, kInf, 0.0, i};
        const std::uint32_t best = option_start_[i] + least_at_[i];
        r.weight = options_[best].weight;
        r.value = options_[best].value;
        for (std::uint32_t j = option_start_[i]; j < option_start_[i + 1]; ++j) {
            if (!kept_[j] || j == best) continue;
            const double slope = (options_[j].value - r.value) / (options_[j].weight - r.weight);
            if (j > best)
                r.up = std::min(r.up, slope);
            else
                r.down = std::max(r.down, slope);
        }
        r.key = std::min(r.up - lambda, lambda - r.down);
        ranked_.push_back(r);
    }
    std::sort(ranked_.begin(), ranked_.end(), [](const Ranked& x, const Ranked& y) {
        return x.key != y.key ? x.key < y.key : x.item < y.item;
    });
    const std::size_t m = ranked_.size();
    rest_.assign(m + 1, Rest{0.0, 0.0, kInf, 0.0});
    for (std::size_t k = m; k-- > 0;) {
        core_[k] = ranked_[k].item;
        rest_[k] = {rest_[k + 1].weight + ranked_[k].weight, rest_[k + 1].value + ranked_[k].value,
                    std::min(rest_[k + 1].up, ranked_[k].up), std::max(rest_[k + 1].down, ranked_[k].down)};
    }
}

// The least value the items from stage k on can add when they must weigh `left` (their relaxation's
// bound, from the two slopes order_core gave them); infinite when they cannot.
double LossPlanner::rest_bound(std::size_t k, double left) const {
    const Rest& r = rest_[k];
    const double extra = left - r.weight;
    if (extra <= 0) return r.value + r.down * extra;
    return std::isfinite(r.up) ? r.value + r.up * extra : kInf;
}

// The core's exact programme. Items outside it keep the option fix_by_bound gave them (the incumbent's);
// the core's states are (weight, value) pairs, the weight capped at the need (more is no better), kept
// when no other state of the stage is at least as heavy and cheaper, and when the bound of the items
// still to come (rest_bound) does not put them above the incumbent.
void LossPlanner::search_core(double need, double lambda, double upper) {
    need -= fixed_weight_;  // what the items outside the core weigh and cost
    upper -= fixed_value_;
    order_core(lambda);
    const double tolerance = 1e-9 * (std::fabs(upper) + 1e-300);
    constexpr std::uint32_t kRoot = std::numeric_limits<std::uint32_t>::max();
    states_.assign(1, State{0.0, 0.0, kRoot, 0});
    stage_start_.assign({0, 1});
    for (std::size_t k = 0; k < core_.size(); ++k) {
        const std::uint32_t item = core_[k];
        // The stage's states are sorted by weight, heaviest first, and so is each option's shift of them
        // (the cap keeps the order): their merge is sorted too, and dominance is one pass over it.
        std::array<std::uint32_t, kPrecisionCount> option{}, cursor{};
        std::size_t count = 0;
        for (std::uint32_t j = option_start_[item]; j < option_start_[item + 1]; ++j)
            if (kept_[j]) {
                option[count] = j;
                cursor[count++] = stage_start_[k];
            }
        const std::uint32_t end = stage_start_[k + 1];
        double cheapest = kInf;
        while (true) {
            std::size_t pick = count;
            double weight = 0, value = 0;
            for (std::size_t c = 0; c < count; ++c) {
                if (cursor[c] == end) continue;
                const double w = std::min(states_[cursor[c]].weight + options_[option[c]].weight, need);
                const double v = states_[cursor[c]].value + options_[option[c]].value;
                if (pick == count || w > weight || (w == weight && v < value)) {
                    pick = c;
                    weight = w;
                    value = v;
                }
            }
            if (pick == count) break;
            const std::uint32_t parent = cursor[pick]++;
            if (!(value < cheapest)) continue;  // a heavier state costs no more
            cheapest = value;
            if (value + rest_bound(k + 1, need - weight) > upper + tolerance) continue;
            states_.push_back({weight, value, parent, std::uint8_t(option[pick] - option_start_[item])});
        }
        stage_start_.push_back(std::uint32_t(states_.size()));
    }
    const double eps = 1e-12 * (std::fabs(need) + 1e-300);
    std::uint32_t best = kRoot;
    for (std::uint32_t s = stage_start_[core_.size()]; s < stage_start_[core_.size() + 1]; ++s)
        if (states_[s].weight >= need - eps && (best == kRoot || states_[s].value < states_[best].value))
            best = s;
    if (best == kRoot) return;  // not reached (rounding): the incumbent stands
    for (std::size_t k = core_.size(); k-- > 0;) {
        choice_[core_[k]] = states_[best].option;
        best = states_[best].parent;
    }
}

}  // namespace sp
