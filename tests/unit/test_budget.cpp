// The budget allocator (POLICY.md rule 18) on hand-computed cases: four blocks of 100 bytes at BF16
// are 25 bytes each at INT4 and 50 at 8 bits, so each INT4 -> INT8 move costs 6.25 points of saving.
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "budget_reference.h"
#include "descending_buckets.h"
#include "sp/budget.h"
#include "sp/stats.h"

using namespace sp;

namespace {

std::vector<BudgetBlock> blocks_with(const std::vector<double>& sensitivities, double bytes = 100) {
    std::vector<BudgetBlock> out;
    for (double s : sensitivities) {
        BudgetBlock b;
        b.bytes_bf16 = bytes;
        b.sensitivity = s;
        b.snr_db = kNoSnr;  // unknown: the nominal SNRs decide
        out.push_back(b);
    }
    return out;
}

std::vector<Precision> all(Precision p, std::size_t n) {
    return std::vector<Precision>(n, p);
}

std::uint64_t bits_of(double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return bits;
}

// A random layout that exercises every branch of the planner: equal blocks (ties in gain), blocks with
// no 8-bit or no INT4 format, fixed blocks, known and unknown SNRs, SNRs that make a second move worth
// more per byte than the first, and blocks standing anywhere.
std::vector<BudgetBlock> random_layout(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> count(1, 300), pick(0, 9);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const double shared_sensitivity = unit(rng);
    std::vector<BudgetBlock> blocks(std::size_t(count(rng)));
    for (BudgetBlock& b : blocks) {
        b.bytes_bf16 = pick(rng) < 5 ? 1024.0 : double(1 + pick(rng)) * 100.0 * unit(rng);
        b.sensitivity = pick(rng) < 3 ? shared_sensitivity : pick(rng) == 0 ? 0.0 : unit(rng);
        for (Precision p : kLowFormatsCheapestFirst)
            b.snr_db[std::size_t(p)] =
                pick(rng) < 3 ? std::numeric_limits<double>::quiet_NaN() : 5.0 + 50.0 * unit(rng);
        b.admissible = FormatMask(std::uniform_int_distribution<int>(0, 31)(rng));
        b.current = kAllPrecisions[std::size_t(pick(rng)) % kAllPrecisions.size()];
        if (pick(rng) == 0) b.fixed = kAllPrecisions[std::size_t(pick(rng)) % kAllPrecisions.size()];
    }
    return blocks;
}

}  // namespace

class TestBudget : public QObject {
    Q_OBJECT
  private slots:
    void starts_at_the_cheapest_and_moves_up_while_the_target_holds() {
        // From 75% (all INT4), four moves to INT8 reach exactly 50%; every move to BF16 would break it.
        const BudgetPlan plan = plan_budget(blocks_with({0.9, 0.1, 0.5, 0.0}), 50.0, 0.0);
        QCOMPARE(plan.precision, all(Precision::int8, 4));
        QCOMPARE(plan.saving_pct, 50.0);
        QCOMPARE(plan.moves_up, 4);
    }

    void most_sensitive_blocks_move_up_first() {
        // Room for two moves only: the blocks whose sensitivity falls most per extra byte (0 and 2).
        // With QSync's published sign the least sensitive blocks (3 and 1) would move instead.
        const BudgetPlan plan = plan_budget(blocks_with({0.9, 0.1, 0.5, 0.0}), 60.0, 0.0);
        QCOMPARE(plan.precision, (std::vector<Precision>{Precision::int8, Precision::int4, Precision::int8,
                                                         Precision::int4}));
        QCOMPARE(plan.saving_pct, 62.5);
        QVERIFY(plan.saving_pct >= 60.0);
    }

    void gain_is_per_extra_byte() {
        // Equal sensitivity, sizes 100 and 300: the small block removes three times as much
        // sensitivity per extra byte, so it moves first (75% -> 68.75%); the large one's move
        // (-> 50%) would then break a 65% target.
        std::vector<BudgetBlock> b = blocks_with({0.5, 0.5});
        b[1].bytes_bf16 = 300;
        const BudgetPlan plan = plan_budget(b, 65.0, 0.0);
        QCOMPARE(plan.precision, (std::vector<Precision>{Precision::int8, Precision::int4}));
        QCOMPARE(plan.saving_pct, 100.0 * (1.0 - (50.0 + 75.0) / 400.0));
        QCOMPARE(sensitivity_in(b[0], Precision::int4), sensitivity_in(b[1], Precision::int4));
    }

    void a_move_that_breaks_the_target_is_skipped_not_the_rest() {
        // Block 0 (most sensitive, 300 bytes) cannot move without breaking 60%; block 1 (100 bytes) can.
        std::vector<BudgetBlock> b = blocks_with({0.9, 0.2});
        b[0].bytes_bf16 = 300;
        const BudgetPlan plan = plan_budget(b, 60.0, 0.0);
        QCOMPARE(plan.precision, (std::vector<Precision>{Precision::int4, Precision::int8}));
        QCOMPARE(plan.saving_pct, 100.0 * (1.0 - (75.0 + 50.0) / 400.0));
    }

    void fixed_blocks_count_but_do_not_move() {
        std::vector<BudgetBlock> b = blocks_with({0.9, 0.1, 0.5, 0.0});
        b[0].fixed = Precision::bf16;  // pinned: 100 bytes, saves nothing
        // The others start at INT4 (56.25%); one move to INT8 (block 2) keeps 50%.
        const BudgetPlan plan = plan_budget(b, 50.0, 0.0);
        QCOMPARE(plan.precision, (std::vector<Precision>{Precision::bf16, Precision::int4, Precision::int8,
                                                         Precision::int4}));
        QCOMPARE(plan.saving_pct, 50.0);
    }

    void admissibility_chooses_the_levels() {
        std::vector<BudgetBlock> b = blocks_with({0.5, 0.5});
        b[0].admissible = kAllFormats & FormatMask(~format_bit(Precision::int4));  // 8 bits at best
        b[1].admissible = format_bit(Precision::bf16);                             // nothing below BF16
        const BudgetPlan plan = plan_budget(b, 0.0, 0.0);
        QCOMPARE(plan.precision, all(Precision::bf16, 2));  // a 0% target lets everything go back up
        const BudgetPlan tight = plan_budget(b, 90.0, 0.0);
        QCOMPARE(tight.precision, (std::vector<Precision>{Precision::int8, Precision::bf16}));
        QCOMPARE(tight.saving_pct, 25.0);  // below the unreachable target, as cheap as allowed
    }

    void the_eight_bit_level_takes_the_best_snr() {
        std::vector<BudgetBlock> b = blocks_with({0.5});
        b[0].admissible =
            format_bit(Precision::fp8_e4m3) | format_bit(Precision::int8) | format_bit(Precision::fp8_e5m2);
        QCOMPARE(plan_budget(b, 50.0, 0.0).precision, all(Precision::int8, 1));  // nominal: INT8 43.3 dB
        b[0].snr_db[std::size_t(Precision::int8)] = 20.0;                        // outliers: INT8 loses
        b[0].snr_db[std::size_t(Precision::fp8_e4m3)] = 31.0;
        QCOMPARE(plan_budget(b, 50.0, 0.0).precision, all(Precision::fp8_e4m3, 1));
    }

    void hysteresis_favours_where_blocks_stand() {
        // Two equal blocks, room for one move: without hysteresis the lower id wins the tie; with it,
        // the block already at INT8 keeps its place.
        std::vector<BudgetBlock> b = blocks_with({0.5, 0.5});
        QCOMPARE(plan_budget(b, 60.0, 0.1).precision,
                 (std::vector<Precision>{Precision::int8, Precision::int4}));
        b[1].current = Precision::int8;
        QCOMPARE(plan_budget(b, 60.0, 0.1).precision,
                 (std::vector<Precision>{Precision::int4, Precision::int8}));
    }

    void plans_as_the_first_greedy_did_bit_for_bit() {
        // The planner sorts every move once and stops when nothing fits; the reference pops a max-heap
        // to the end. Same plans, same saving, same move count, on layouts of every shape, with one
        // planner reused across plans (its remembered 10^(-snr/10) must never go stale).
        std::mt19937_64 rng(20261127);
        BudgetPlanner planner;
        int with_moves = 0, dropped_first = 0;
        for (int trial = 0; trial < 3000; ++trial) {
            std::vector<BudgetBlock> blocks = random_layout(rng);
            const double target = std::uniform_real_distribution<double>(0.0, 80.0)(rng);
            const double hysteresis = trial % 3 == 0 ? 0.0 : 0.25 * (trial % 3);
            if (trial % 7 == 0) {  // the same layout again with new SNRs for some blocks
                (void)planner.plan(blocks, target, hysteresis);
                blocks[0].snr_db[std::size_t(Precision::int8)] += 1.0;
            }
            const BudgetPlan want = test::reference_plan_budget(blocks, target, hysteresis);
            const BudgetPlan got = planner.plan(blocks, target, hysteresis);
            QCOMPARE(got.precision, want.precision);
            QCOMPARE(got.moves_up, want.moves_up);
            QCOMPARE(bits_of(got.saving_pct), bits_of(want.saving_pct));
            with_moves += want.moves_up > 0 ? 1 : 0;
            dropped_first += got.saving_pct < 75.0 && got.moves_up > 0 ? 1 : 0;
        }
        QVERIFY(with_moves > 1000);  // the comparisons were not all trivial
        QVERIFY(dropped_first > 500);
    }

    // The moves' order, against a full stable sort: values far apart (the tail bucket), equal values
    // (index order), -0 and +0 (equal), infinities, negatives; and a visit that stops early.
    void buckets_give_the_stable_descending_order() {
        std::mt19937_64 rng(11);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        sp::detail::DescendingBuckets buckets;  // reused, as the planner does
        for (int round = 0; round < 200; ++round) {
            std::vector<double> values(std::size_t(rng() % 3000));
            for (double& v : values) {
                switch (rng() % 6) {
                    case 0:
                        v = std::ldexp(unit(rng), int(rng() % 200) - 100);
                        break;  // 60 binades
                    case 1:
                        v = -unit(rng) * 1e-6;
                        break;
                    case 2:
                        v = double(rng() % 4) * 1e-8;
                        break;  // repeated
                    case 3:
                        v = rng() % 2 ? 0.0 : -0.0;
                        break;
                    case 4:
                        v = rng() % 2 ? std::numeric_limits<double>::infinity() : 1e300;
                        break;
                    default:
                        v = 1e-8 + unit(rng) * 1e-9;
                        break;
                }
            }
            std::vector<std::uint32_t> want(values.size());
            for (std::size_t i = 0; i < want.size(); ++i) want[i] = std::uint32_t(i);
            std::stable_sort(want.begin(), want.end(),
                             [&](std::uint32_t a, std::uint32_t b) { return values[a] > values[b]; });
            sp::detail::assign_buckets(buckets, values, values.size(), [](double v) { return v; });
            const std::size_t stop = values.empty() ? 0 : std::size_t(rng() % (values.size() + 1));
            std::vector<std::uint32_t> got;
            sp::detail::visit_descending(buckets, [&](std::uint32_t i) {
                if (got.size() == stop) return false;
                got.push_back(i);
                return true;
            });
            want.resize(stop);
            QCOMPARE(got, want);
        }
    }
};

QTEST_APPLESS_MAIN(TestBudget)
#include "test_budget.moc"
