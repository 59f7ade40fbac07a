// The exact plans on the loss estimate (sp/loss_plan.h, POLICY.md rule 23): the solver. Its input,
// remembered from plan to plan, is made in loss_plan_prepare.cpp.
//
// Both questions are put in one form: each item (a free block) takes one of its options; minimise the
// sum of the options' values subject to the sum of their weights reaching `need`. Budget: weight =
// bytes saved, value = estimated loss change. Tolerance: weight = minus the loss change, value = minus
// the bytes saved, need = minus the tolerance.
//
// solve(): (1) every item at its least value; done when that reaches the need. (2) The linear
// relaxation: each item's moves along the lower convex hull of its options, taken in order of value
// per weight until the need is met; the move that meets it (the split) is found by bucketing the moves
// by efficiency, then a weighted selection (nth_element) in the split's bucket, O(n). Its efficiency is
// the Lagrange multiplier. (3) An incumbent: the moves before the split and the split itself. (4) The
// Lagrangian bound L and reduced-cost fixing: an option whose reduced cost exceeds UB - L cannot be in a
// plan better than the incumbent; items left with one option are fixed. (5) The core, the items with
// two or more options left, by a Pareto dynamic programme over (weight, value), the items nearest the
// multiplier first, pruned by dominance and by the relaxation of the items still to come with its two
// slopes (above and below their best options), which tightens as the items near the multiplier are
// used up. (4) and (5) are first tried with a fraction of the gap UB - L (solve): the optimum is often
// far nearer L than the incumbent is, and the core shrinks with the gap.
#include "sp/loss_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "loss_plan_detail.h"

namespace sp {
using loss_plan_detail::bits;
using loss_plan_detail::kInf;

namespace {
constexpr std::size_t kSmallCore = 64;  // a core this small is searched with the whole gap at once
}  // namespace

bool LossPlanner::solve(double need) {
    const std::size_t n = item_block_.size();
    choice_.assign(n, 0);
    core_.clear();
    const double span = std::fabs(need);
    for (std::size_t i = 0; i < n; ++i) need -= lightest_[i];
    const double eps = 1e-12 * (span + heaviest_ + 1e-300);
    if (need <= eps) return true;  // every item at its least value already reaches it
    if (heaviest_ < need - eps) {  // out of reach: the nearest plan, every item at its heaviest
        for (std::size_t i = 0; i < n; ++i) choice_[i] = std::uint8_t(option_end_[i] - option_start_[i] - 1);
        return false;
    }
    const Relaxation r = relax(need);
    const double upper = incumbent(need, r);
    if (upper - r.bound <= 1e-12 * (std::fabs(upper) + std::fabs(r.bound))) return true;
    const double gap = upper - r.bound + 1e-9 * (std::fabs(upper) + std::fabs(r.bound) + 1e-300);
    // Any plan's value is at least L plus its options' reduced costs, so a plan within L + g uses only
    // options within g: the programme over them, pruned at L + g, finds the optimum whenever it lies
    // there, whatever g. Tried at a sixteenth, an eighth, a quarter and a half of the gap first, where
    // the core is a fraction of the full one; else with the whole gap and the incumbent, as always.
    // An item outside the core at the whole gap is outside it at any part of it: the parts are fixed
    // over the whole gap's core only (candidates_), and choice_ of the items outside it stays as the
    // whole gap's fixing left it (a failed search writes no choice).
    incumbent_ = choice_;
    fix_by_bound(r.lambda, gap, nullptr);
    if (core_.size() > kSmallCore) {
        candidates_ = core_;
        for (const double part : {1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2}) {
            fix_by_bound(r.lambda, part * gap, &candidates_);
            if (!core_.empty() && search_core(need, r.lambda, r.bound + part * gap)) return true;
        }
        for (std::uint32_t i : candidates_) choice_[i] = incumbent_[i];  // if the last search fails too
        fix_by_bound(r.lambda, gap, &candidates_);
    }
    if (!core_.empty()) search_core(need, r.lambda, upper);
    return true;
}

// The linear relaxation: each item's moves along the lower convex hull of its options (hull_, from
// prepare; efficiencies rising), and the move at which the moves taken in order of efficiency first reach
// `need` (> 0, and reachable): a weighted selection, so that the order is never fully sorted. The moves
// before the split are taken into choice_; moves_[split] is the split.
LossPlanner::Relaxation LossPlanner::relax(double need) {
    const auto before = [](const Move& x, const Move& y) {
        if (x.efficiency != y.efficiency) return x.efficiency < y.efficiency;
        return x.item != y.item ? x.item < y.item : x.to < y.to;
    };
    double left = need, taken = base_;
    if (!narrow_by_buckets(left, taken))
        moves_.assign(hull_.begin(), hull_.begin() + std::ptrdiff_t(hull_size_));  // select among all
    std::size_t lo = 0, hi = moves_.size();
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
    for (std::size_t m = 0; m < lo; ++m)
        choice_[moves_[m].item] = std::max(choice_[moves_[m].item], moves_[m].to);
    const Move& split = moves_[lo];
    return {lo, split.efficiency, taken + std::min(left / split.weight, 1.0) * split.value, left, taken};
}

// Narrows the selection to one bucket of moves. A move's bucket is the high bits of its efficiency's
// representation above the least one's: efficiencies are positive (heavier options cost more), and for
// positive doubles the representation orders as the value does, on a scale close to the logarithm's,
// so the long tails of efficiencies (an option barely dearer than the next) do not crowd the rest into
// one bucket. The bucket where the need is met is found from the buckets' sums in one pass over hull_;
// in a second, the moves of the buckets before it are taken into choice_ and the bucket's own are copied
// to moves_, for the weighted selection. False (nothing done) when there are too few moves to bucket.
bool LossPlanner::narrow_by_buckets(double& left, double& taken) {
    const std::size_t m = hull_size_;
    if (m < 64) return false;
    const double least = hull_least_, most = hull_most_;
    if (!(least >= 0) || !(most > least) || !std::isfinite(most)) return false;
    const std::uint64_t base = bits(least), range = bits(most) - base;
    unsigned shift = 0;
    while ((range >> shift) >= m / 8) ++shift;
    const std::size_t buckets = std::size_t(range >> shift) + 1;
    const auto bucket_of = [&](const Move& mv) { return std::size_t((bits(mv.efficiency) - base) >> shift); };
    bucket_sums_.assign(2 * buckets, 0.0);  // weight, value
    const Move* hull = hull_.data();
    for (std::size_t k = 0; k < m; ++k) {
        const std::size_t b = bucket_of(hull[k]);
        bucket_sums_[2 * b] += hull[k].weight;
        bucket_sums_[2 * b + 1] += hull[k].value;
    }
    std::size_t split = 0;
    while (split + 1 < buckets && bucket_sums_[2 * split] < left) {
        left -= bucket_sums_[2 * split];
        taken += bucket_sums_[2 * split + 1];
        ++split;
    }
    moves_.clear();
    for (std::size_t k = 0; k < m; ++k) {
        const std::size_t b = bucket_of(hull[k]);
        if (b < split)
            choice_[hull[k].item] = std::max(choice_[hull[k].item], hull[k].to);
        else if (b == split)
            moves_.push_back(hull[k]);
    }
    return true;
}

// A good feasible plan to bound the search with (the tighter, the smaller the core), into choice_; returns
// its value. From the moves before the split, which relax took into choice_ (short of the need by r.left),
// the best of: one item moved up to any heavier option that covers r.left (the split's own move is one of
// them); or the split taken, then one item moved down as far as the surplus allows, the largest value given
// back. In the same pass over the items, each item's margin at the multiplier (fix_by_bound): its second
// least reduced cost less its least, at the relaxation's point (least_at_). That point's weight and value are
// the relaxation's own sums (one pass over the options less).
double LossPlanner::incumbent(double need, const Relaxation& r) {
    const std::size_t n = item_block_.size();
    least_at_ = choice_;  // the relaxation's point: each item's option of least reduced cost
    const double lambda = r.lambda, left = r.left;
    lp_weight_ = need - left;
    lp_value_ = r.taken;
    struct Change {
        double delta = kInf;
        std::size_t item = 0;
        std::uint8_t to = 0;
    };
    // The cheapest single move up that covers `left`; and, with the split taken, the surplus it leaves
    // given back where it is worth the most.
    const Move& s = moves_[r.split];
    const double surplus = s.weight - left;
    Change up, down{0.0, 0, 0};
    margin_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const Option* o = options_.data() + option_start_[i];
        const std::size_t count = option_end_[i] - option_start_[i], at = choice_[i];
        const double at_weight = o[at].weight, at_value = o[at].value;
        double margin = kInf;  // its second least reduced cost at `lambda` less its least (at)
        for (std::size_t j = 0; j < count; ++j) {
            const double dw = o[j].weight - at_weight, dv = o[j].value - at_value;
            if (j != at) margin = std::min(margin, dv - lambda * dw);
            if (j > at && dw >= left && dv < up.delta) up = {dv, i, std::uint8_t(j)};
        }
        margin_[i] = margin;
        const std::size_t from = i == s.item ? s.to : at;
        for (std::size_t j = 0; j < from; ++j) {
            const double given = o[j].value - o[from].value;
            if (o[from].weight - o[j].weight <= surplus && given < down.delta)
                down = {given, i, std::uint8_t(j)};
        }
    }
    if (up.delta <= s.value + down.delta) {
        choice_[up.item] = up.to;
        return lp_value_ + up.delta;
    }
    choice_[s.item] = s.to;
    if (down.delta < 0) choice_[down.item] = down.to;
    return lp_value_ + s.value + down.delta;
}

// Reduced-cost fixing at multiplier `lambda`: an option whose reduced cost exceeds `gap` cannot be in a
// plan within `gap` of the Lagrangian bound (the relaxation's value) and is dropped; items left with one
// option take it, the others are the core (core_, their options marked in kept_). An item has one option
// left when its margin exceeds the gap: then it is its least. With the gap to the incumbent, that is also
// the incumbent's option (the incumbent's options are all within that gap). Back to the options only for
// the core. `among`: only these items are looked at (a larger gap's core), the others are left as a
// larger gap's fixing left them; null: every item.
void LossPlanner::fix_by_bound(double lambda, double gap, const std::vector<std::uint32_t>* among) {
    const std::size_t n = among ? among->size() : item_block_.size();
    core_.clear();
    kept_.resize(options_.size());  // read for the core's items only
    fixed_weight_ = lp_weight_;
    fixed_value_ = lp_value_;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = among ? (*among)[k] : k;
        if (!(margin_[i] <= gap)) {
            choice_[i] = least_at_[i];
            continue;
        }
        core_.push_back(std::uint32_t(i));
        const Option& at = options_[option_start_[i] + least_at_[i]];
        fixed_weight_ -= at.weight;
        fixed_value_ -= at.value;
        for (std::uint32_t j = option_start_[i]; j < option_end_[i]; ++j)
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
        for (std::uint32_t j = option_start_[i]; j < option_end_[i]; ++j) {
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

// The core's exact programme. Items outside it keep the option fix_by_bound gave them;
// the core's states are (weight, value) pairs, the weight capped at the need (more is no better), kept
// when no other state of the stage is at least as heavy and cheaper, and when the bound of the items
// still to come (rest_bound) does not put them above the incumbent.
bool LossPlanner::search_core(double need, double lambda, double upper) {
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
        for (std::uint32_t j = option_start_[item]; j < option_end_[item]; ++j)
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
    if (best == kRoot) return false;  // none within `upper` (or not reached, rounding): the caller's stands
    for (std::size_t k = core_.size(); k-- > 0;) {
        choice_[core_[k]] = states_[best].option;
        best = states_[best].parent;
    }
    return true;
}

}  // namespace sp
