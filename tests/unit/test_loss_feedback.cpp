// Loss feedback (core/POLICY.md, "Loss feedback"): the spike detector on its own, and the policy's
// rollback of recent switches with its cooldown.
#include <QtTest>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"
#include "sp/loss_monitor.h"
#include "sp/policy.h"
#include "sp/simulator.h"

using namespace sp;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Gradient-only routing, one observation per window, an update every step from `warmup` on: blocks
// 0 and 1 (quiet gradients) go to INT8 at the first update, blocks 2 and 3 (loud) stay BF16.
Config feedback_config(std::int64_t warmup = 30) {
    Config c;
    c.warmup_steps = warmup;
    c.update_interval_steps = 1;
    c.history_window = 1;
    c.min_steps_between_switches = 0;
    c.grad_weight = 1.0;
    c.error_weight = 0.0;
    c.rollback_enabled = true;
    c.loss_min_history = 20;
    c.rollback_window_steps = 10;
    c.rollback_cooldown_steps = 50;
    return c;
}

const std::vector<double> kQuietQuietLoudLoud = {1.0, 1.0, 10.0, 10.0};

BlockGradStats stat(int id, double l2) {
    BlockGradStats s;
    s.block_id = id;
    s.l2_norm = l2;
    s.max_abs = l2 / 2;
    s.variance = l2 * l2;
    s.numel = 100;
    return s;
}

// One training step as the agent drives it: statistics, update, then the step's loss.
const LossFeedback& step(Policy& p, std::int64_t s, double loss,
                         const std::vector<double>& l2 = kQuietQuietLoudLoud) {
    for (std::size_t i = 0; i < l2.size(); ++i) p.observe(s, stat(int(i), l2[i]));
    p.update(s, 1000.0 + double(s));
    return p.observe_loss(s, loss);
}

// A noisy but stationary loss: 3 + N(0, 0.05) from a fixed generator.
struct NoisyLoss {
    std::mt19937_64 rng;
    std::normal_distribution<double> noise{0.0, 0.05};
    explicit NoisyLoss(std::uint64_t seed) : rng(seed) {}
    double operator()() { return 3.0 + noise(rng); }
};

Precision int8 = Precision::int8, bf16 = Precision::bf16;

}  // namespace

class TestLossFeedback : public QObject {
    Q_OBJECT
  private slots:
    void monitor_follows_the_ema_and_variance_it_documents() {
        Config c;
        c.loss_ema_alpha = 0.5;
        c.loss_min_history = 2;
        c.loss_spike_zscore = 3.0;
        LossMonitor m(c);
        QCOMPARE(int(m.observe(4.0).kind), int(LossVerdict::Kind::learning));
        QCOMPARE(m.ema(), 4.0);
        // diff 2: ema 4 + 0.5*2 = 5; variance (1-0.5)*(0 + 0.5*4) = 1.
        const LossVerdict second = m.observe(6.0);
        QCOMPARE(int(second.kind), int(LossVerdict::Kind::learning));
        QCOMPARE(m.ema(), 5.0);
        QCOMPARE(m.variance(), 1.0);
        // Armed now: 7 is z = (7 - 5) / 1 = 2, below 3.
        const LossVerdict third = m.observe(7.0);
        QCOMPARE(int(third.kind), int(LossVerdict::Kind::normal));
        QCOMPARE(third.z, 2.0);
        QCOMPARE(third.ema, 5.0);
        QCOMPARE(third.history, 2);
    }

    void monitor_clips_a_spike_before_absorbing_it() {
        Config c;
        c.loss_ema_alpha = 0.5;
        c.loss_min_history = 2;
        c.loss_spike_zscore = 3.0;
        LossMonitor m(c);
        m.observe(4.0);
        m.observe(6.0);  // ema 5, variance 1
        const LossVerdict spike = m.observe(105.0);
        QCOMPARE(int(spike.kind), int(LossVerdict::Kind::spike));
        QCOMPARE(spike.z, 100.0);
        // Absorbed as 5 + 3*1 = 8, not 105: ema 6.5, variance 0.5 * (1 + 0.5 * 9) = 2.75.
        QCOMPARE(m.ema(), 6.5);
        QCOMPARE(m.variance(), 2.75);
    }

    void monitor_ignores_nonfinite_losses() {
        LossMonitor m(Config{});
        m.observe(3.0);
        for (double bad : {kNaN, std::numeric_limits<double>::infinity()}) {
            const LossVerdict v = m.observe(bad);
            QCOMPARE(int(v.kind), int(LossVerdict::Kind::nonfinite));
        }
        QCOMPARE(m.history(), 1);
        QCOMPARE(m.ema(), 3.0);
    }

    void false_alarms_on_a_noisy_stationary_loss_are_rare() {
        // With the default settings Gaussian noise looks like a spike about once in 15,000 steps
        // (the EMA variance is an estimate, so its tails are heavier than the Gaussian's);
        // and an alarm only rolls back when a switch happened in the window just before it.
        int spikes = 0;
        for (std::uint64_t seed : {1u, 2u, 3u}) {
            LossMonitor m(Config{});
            NoisyLoss loss(seed);
            for (int i = 0; i < 5000; ++i) spikes += m.observe(loss()).kind == LossVerdict::Kind::spike;
        }
        QVERIFY2(spikes <= 3, qPrintable(QString("%1 false alarms in 15000 steps").arg(spikes)));
    }

    void no_false_rollback_after_a_switch_on_a_noisy_stationary_loss() {
        Policy p(feedback_config(), uniform_layout(4));
        NoisyLoss loss(11);
        int alarms = 0;
        for (std::int64_t s = 0; s < 200; ++s) alarms += step(p, s, loss()).alarm();
        QCOMPARE(alarms, 0);
        QCOMPARE(p.precisions()[0], int8);  // routed at step 30 and never rolled back
        QCOMPARE(p.precisions()[1], int8);
    }

    void spike_after_a_switch_rolls_the_switched_blocks_back() {
        Policy p(feedback_config(), uniform_layout(4));
        NoisyLoss loss(5);
        for (std::int64_t s = 0; s <= 33; ++s) QVERIFY(!step(p, s, loss()).alarm());
        QCOMPARE(p.precisions()[0], int8);  // since step 30
        const LossFeedback& fb = step(p, 34, 4.0);
        QCOMPARE(int(fb.verdict.kind), int(LossVerdict::Kind::spike));
        QVERIFY2(fb.verdict.z > 5.0, qPrintable(QString::number(fb.verdict.z)));
        QVERIFY(std::fabs(fb.verdict.ema - 3.0) < 0.05);
        QCOMPARE(fb.suspects, (std::vector<int>{0, 1}));
        QCOMPARE(fb.changes.size(), std::size_t(2));
        for (const PrecisionChange& c : fb.changes) {
            QCOMPARE(c.from, int8);
            QCOMPARE(c.to, bf16);
            QCOMPARE(int(c.reason), int(Reason::rollback));
        }
        QCOMPARE(fb.cooldown_until, std::int64_t(34 + 50));
        QCOMPARE(p.precisions(), (std::vector<Precision>{bf16, bf16, bf16, bf16}));
    }

    void rolled_back_blocks_stay_bf16_for_the_rollback_cooldown() {
        Policy p(feedback_config(), uniform_layout(4));
        NoisyLoss loss(5);
        for (std::int64_t s = 0; s <= 33; ++s) step(p, s, loss());
        QVERIFY(step(p, 34, 4.0).rolled_back());
        // The gradients still say INT8 (min_steps_between_switches is 0): only the rollback's own
        // cooldown holds the blocks, until step 84.
        for (std::int64_t s = 35; s < 84; ++s) {
            step(p, s, loss());
            QCOMPARE(p.precisions()[0], bf16);
            QCOMPARE(int(p.last_update_step().value()), int(s));
        }
        step(p, 84, loss());
        QCOMPARE(p.precisions()[0], int8);
        QCOMPARE(p.precisions()[1], int8);
    }

    void held_block_reports_cooldown_as_its_reason() {
        Policy p(feedback_config(), uniform_layout(4));
        NoisyLoss loss(5);
        for (std::int64_t s = 0; s <= 33; ++s) step(p, s, loss());
        step(p, 34, 4.0);
        for (int b = 0; b < 4; ++b) p.observe(35, stat(b, kQuietQuietLoudLoud[std::size_t(b)]));
        const UpdateRecord* rec = p.update(35, 0.0);
        QVERIFY(rec);
        QCOMPARE(int(rec->block_details[0].reason), int(Reason::cooldown));
        QVERIFY(rec->block_details[0].changed);  // int8 in the previous record, bf16 now
    }

    void spike_without_a_recent_switch_only_reports() {
        Policy p(feedback_config(), uniform_layout(4));
        NoisyLoss loss(5);
        // Routed at step 30; the window (10 steps) has passed by step 45.
        for (std::int64_t s = 0; s < 45; ++s) step(p, s, loss());
        const LossFeedback& fb = step(p, 45, 4.0);
        QCOMPARE(int(fb.verdict.kind), int(LossVerdict::Kind::spike));
        QVERIFY(fb.suspects.empty());
        QVERIFY(!fb.rolled_back());
        QCOMPARE(p.precisions()[0], int8);
    }

    void spike_before_any_switch_only_reports() {
        Policy p(feedback_config(/*warmup=*/1000), uniform_layout(4));
        NoisyLoss loss(5);
        for (std::int64_t s = 0; s < 40; ++s) step(p, s, loss());
        const LossFeedback& fb = step(p, 40, 5.0);
        QVERIFY(fb.alarm());
        QVERIFY(!fb.rolled_back());
    }

    void block_switched_at_the_spike_step_is_not_blamed() {
        // The loss of step 30 came from the map of step 29: the switch made at step 30 is innocent.
        Policy p(feedback_config(), uniform_layout(4));
        NoisyLoss loss(5);
        for (std::int64_t s = 0; s < 30; ++s) step(p, s, loss());
        const LossFeedback& fb = step(p, 30, 4.0);
        QVERIFY(fb.alarm());
        QVERIFY(fb.suspects.empty());
        QCOMPARE(p.precisions()[0], int8);
    }

    void nonfinite_loss_rolls_back_every_recent_switch_even_without_history() {
        Config c = feedback_config(/*warmup=*/2);
        Policy p(c, uniform_layout(4));
        for (std::int64_t s = 0; s < 5; ++s) step(p, s, 3.0);
        QCOMPARE(p.precisions()[0], int8);  // since step 2; history 5 < loss_min_history
        for (double bad : {kNaN, std::numeric_limits<double>::infinity()}) {
            Policy q(c, uniform_layout(4));
            for (std::int64_t s = 0; s < 5; ++s) step(q, s, 3.0);
            const LossFeedback& fb = step(q, 5, bad);
            QCOMPARE(int(fb.verdict.kind), int(LossVerdict::Kind::nonfinite));
            QCOMPARE(fb.suspects, (std::vector<int>{0, 1}));
            QCOMPARE(q.precisions()[0], bf16);
            QCOMPARE(q.precisions()[1], bf16);
        }
    }

    void forced_and_pinned_blocks_are_never_rolled_back() {
        Config c = feedback_config();
        c.force_int8_blocks = {0};
        Policy p(c, uniform_layout(4));
        NoisyLoss loss(5);
        for (std::int64_t s = 0; s <= 33; ++s) step(p, s, loss());
        Command pin;
        pin.kind = Command::Kind::pin;
        pin.blocks = {1};
        pin.precision = int8;
        QVERIFY(p.apply(pin, 34).ok);
        const LossFeedback& fb = step(p, 34, 4.0);
        QVERIFY(fb.alarm());
        QVERIFY(fb.suspects.empty());
        QCOMPARE(p.precisions()[0], int8);
        QCOMPARE(p.precisions()[1], int8);
    }

    void disabled_feedback_does_nothing() {
        Config c = feedback_config();
        c.rollback_enabled = false;
        Policy p(c, uniform_layout(4));
        for (std::int64_t s = 0; s <= 33; ++s) step(p, s, 3.0);
        const LossFeedback& fb = step(p, 34, kNaN);
        QVERIFY(fb.alarm());  // judged (a pin given release_on_spike listens), but nothing rolled back
        QVERIFY(!fb.rolled_back());
        QVERIFY(fb.changes.empty());
        QCOMPARE(p.precisions()[0], int8);
    }

    void step_stats_carry_the_loss_through_jsonl() {
        StepStatsRecord r;
        r.step = 7;
        r.blocks = {stat(0, 1.0)};
        for (std::optional<double> loss :
             {std::optional<double>(), std::optional<double>(2.5), std::optional<double>(kNaN)}) {
            r.loss = loss;
            const std::string line = to_json_line(r);
            TelemetryRecord back;
            std::string error;
            QCOMPARE(int(parse_record(line, back, error)), int(ParseStatus::ok));
            const auto& got = std::get<StepStatsRecord>(back);
            QCOMPARE(got.loss.has_value(), loss.has_value());
            if (loss && std::isfinite(*loss)) QCOMPARE(*got.loss, *loss);
            if (loss && !std::isfinite(*loss)) QVERIFY(std::isnan(*got.loss));
        }
    }

    void simulator_replays_the_rollback_from_recorded_losses() {
        const Config c = feedback_config();
        Policy live(c, uniform_layout(4));
        std::ostringstream file;
        file << "{\"type\":\"header\",\"schema_version\":1,\"blocks\":[{\"id\":0},{\"id\":1},{\"id\":2},{"
                "\"id\":3}],"
             << "\"config\":" << to_json(c).dump() << "}\n";
        NoisyLoss loss(5);
        std::vector<std::int64_t> live_rollbacks;
        for (std::int64_t s = 0; s < 120; ++s) {
            const double l = s == 34 || s == 93 ? 4.5 : loss();
            StepStatsRecord r;
            r.step = s;
            for (int b = 0; b < 4; ++b) r.blocks.push_back(stat(b, kQuietQuietLoudLoud[std::size_t(b)]));
            r.loss = l;
            file << to_json_line(r) << '\n';
            if (step(live, s, l).rolled_back()) live_rollbacks.push_back(s);
        }
        QCOMPARE(live_rollbacks,
                 (std::vector<std::int64_t>{34, 93}));  // 93: switched again at 84, after the cooldown
        std::istringstream in(file.str());
        const SimulationResult sim = simulate(in, "test", {});
        QCOMPARE(sim.rollbacks.size(), std::size_t(2));
        QCOMPARE(sim.rollbacks[0].step, std::int64_t(34));
        QCOMPARE(sim.rollbacks[1].step, std::int64_t(93));
        QCOMPARE(sim.rollbacks[0].blocks, (std::vector<int>{0, 1}));
        QCOMPARE(sim.records.back().block_details[0].precision, live.precisions()[0]);
    }
};

QTEST_APPLESS_MAIN(TestLossFeedback)
#include "test_loss_feedback.moc"
