#pragma once
// The exact plans on the loss estimate (POLICY.md rule 23). Each free block takes one format; its
// cost is the estimated loss change of that format (BudgetBlock::loss_pct, in whatever unit the caller
// uses, the tolerance in the same; BF16 costs 0) and its saving the bytes it saves against BF16. Two
// questions, each a multiple-choice knapsack solved exactly:
//   budget     minimise the summed cost subject to the saving reaching the target;
//   tolerance  maximise the saving subject to the summed cost staying within the tolerance.
// The method (loss_plan.cpp): the linear relaxation by a weighted selection of the blocks' moves,
// its Lagrangian bound, reduced-cost fixing of every option the bound rules out, and a Pareto
// dynamic programme over the blocks that are left (the core), nearest the multiplier first, bounded by
// the relaxation of the blocks still to come. It is exact, deterministic, and O(n) plus the core's
// programme: the core is empty or small for budgets; under hysteresis a tolerance plan's core can hold
// a tenth of the blocks, but its programme keeps a few states a block, and it is searched within
// fractions of the gap first. Its input (each block's options, their hull moves) is remembered by block
// from plan to plan while what each depends on stays the same.
// Hysteresis weighs the objective only, never the constraint: a block's current format counts its
// cost divided by (1 + hysteresis) (budget) or its saving multiplied by it (tolerance), so the plan
// does not flip between near-equal blocks from one update to the next, and a tolerance is never
// exceeded by it. Among tolerance plans that save the same, the plan costs the least.
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "sp/budget.h"

namespace sp {

struct LossPlan {
    std::vector<Precision> precision;  // by block
    double saving_pct = 0;             // the plan's saving against all-BF16
    double loss_pct = 0;   // the plan's summed estimated loss change (fixed blocks' included), in its unit
    bool feasible = true;  // false: the target (tolerance) cannot be met; the nearest plan
    std::size_t core = 0;  // blocks the exact programme had to search
};

class LossPlanner {
  public:
    // A free block with no estimate for a format cannot take it (its cost is unknown).
    LossPlan plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis);
    // `tolerance_pct`: the limit on the summed cost, in the costs' unit.
    LossPlan plan_tolerance(const std::vector<BudgetBlock>& blocks, double tolerance_pct, double hysteresis);

    // One option of a block in the solver's terms: minimise the sum of `value` subject to the sum of
    // `weight` reaching the need. Public for the tests' brute force.
    struct Option {
        double weight = 0, value = 0;
        Precision format = Precision::bf16;
    };

  private:
    enum class Question : std::uint8_t { budget, tolerance };
    LossPlan plan(const std::vector<BudgetBlock>& blocks, Question q, double limit_pct, double hysteresis);
    struct TiePart {  // a block's part in the tie weight: its least saving in a low format, its dearest cost
        double smallest_saving = std::numeric_limits<double>::infinity(), dearest = 0;
    };
    static TiePart list_options(const BudgetBlock& b, Question q, double hysteresis, Option* out,
                                std::uint8_t& count);
    bool remember(const BudgetBlock& b, std::size_t block, Question q, double hysteresis);
    void make_ready(std::size_t block, bool weigh, double tie);
    void prepare(bool weigh, double tie);
    void write_plan(LossPlan& out, double saved, double cost, double total_bf16) const;
    // Chooses one option per item and writes choice_; false when the need is out of reach.
    bool solve(double need);
    struct Relaxation {
        std::size_t split;   // moves_[split]: the move that meets the need (relax)
        double lambda;       // its efficiency: the multiplier
        double bound;        // the relaxation's value
        double left, taken;  // the moves before the split: the need they leave, the value they reach
    };
    Relaxation relax(double need);
    bool narrow_by_buckets(double& left, double& taken);
    double incumbent(double need, const Relaxation& r);
    void fix_by_bound(double lambda, double gap, const std::vector<std::uint32_t>* among);
    bool search_core(double need, double lambda, double upper);
    void order_core(double lambda);
    double rest_bound(std::size_t k, double left) const;

    // What a block's options depend on besides the question and the hysteresis (the planner's, below),
    // compared bit for bit (remember).
    struct Key {
        PerFormat loss_pct;
        double bytes_bf16;
        FormatMask admissible;
        Precision current;
        bool known;  // false: nothing remembered yet
    };
    // Remembered by block across plans, apart, so that checking the keys reads 56 bytes a block: the
    // keys, the parts in the tie weight, the options as list_options made them.
    std::vector<Key> keys_;
    std::vector<TiePart> ties_;
    std::vector<std::array<Option, kPrecisionCount>> listed_;
    std::vector<std::uint8_t> listed_count_;
    Question listed_question_ = Question::budget;
    double listed_hysteresis_ = std::numeric_limits<double>::quiet_NaN();  // no block listed yet
    // The solver's input as prepare() left it (options_, option_start_, lightest_, heaviest_, hull_,
    // base_): kept while the items and their parts (ready_) stay the same.
    bool prepared_ = false;

    struct Move {
        double efficiency, weight, value;
        std::uint32_t item;
        std::uint8_t to;  // the option it moves the item to
    };
    // By block: its part of the solver's input (make_ready), made for the tie weight ready_tie_ (and
    // ready_weigh_) and valid where ready_ok_: its options as the solver takes them (in options_), that
    // weight, its hull moves (item 0).
    struct Ready {  // what prepare reads of it first, in its first cache line with the first moves
        double lightest;
        std::uint8_t count, moves;
        std::array<Move, kPrecisionCount - 1> hull;
    };
    std::vector<Ready> ready_;
    std::vector<std::uint8_t> ready_ok_;
    bool ready_weigh_ = false;
    double ready_tie_ = std::numeric_limits<double>::quiet_NaN();

    // By block, kPrecisionCount apart (make_ready): its Pareto options, weight ascending (value ascending
    // with it), the tie term in their values and their lightest weight taken from every weight. The
    // solver reads the free blocks' in place, so a change of the free set copies none of them.
    std::vector<Option> options_;
    std::vector<double> lightest_;             // by item: the weight taken from its options
    double heaviest_ = 0;                      // every item at its heaviest option (lightest_ taken)
    std::vector<std::uint32_t> option_start_;  // item i's options: [start[i], end[i]) of options_
    std::vector<std::uint32_t> option_end_;
    std::vector<std::uint32_t> item_block_;  // the block each item is
    std::vector<std::uint8_t> choice_;       // by item: the chosen option, relative to its start
    std::vector<std::uint8_t> incumbent_;    // by item: the incumbent's option (solve)
    std::vector<Move> hull_;                 // every item's hull moves, in item order (prepare): hull_size_
    std::size_t hull_size_ = 0;
    double hull_least_ = 0, hull_most_ = 0;  // the least and largest efficiency of hull_'s moves
    double base_ = 0;                        // every item at its lightest option: the summed value
    std::vector<Move> moves_;  // the moves the relaxation's selection orders: the split's bucket, or all
    std::vector<double> bucket_sums_;        // by bucket of moves: their weight and value (narrow_by_buckets)
    std::vector<std::uint32_t> core_;        // items left with two or more options
    std::vector<std::uint32_t> candidates_;  // the core at the whole gap (solve)
    std::vector<double> margin_;             // by item: its second least reduced cost less its least
    std::vector<std::uint8_t> least_at_;     // by item: the option of its least reduced cost
    double lp_weight_ = 0, lp_value_ = 0;    // every item at its option of least reduced cost
    std::vector<std::uint8_t> kept_;         // by option of a core item: not ruled out by the bound
    double fixed_weight_ = 0, fixed_value_ = 0;  // the items outside the core, at their options
    struct Ranked {  // a core item at its best option, and its least move up and largest move down
        double key, weight, value, up, down;
        std::uint32_t item;
    };
    std::vector<Ranked> ranked_;
    struct Rest {  // the core items from a stage on: at their best options, and their slopes
        double weight, value, up, down;
    };
    std::vector<Rest> rest_;  // by core position
    struct State {
        double weight, value;
        std::uint32_t parent;
        std::uint8_t option;
    };
    std::vector<State> states_;               // the core programme's states, stage after stage
    std::vector<std::uint32_t> stage_start_;  // stage k's states: [stage_start_[k], stage_start_[k + 1])
    std::vector<State> scratch_;
};

}  // namespace sp
