// Pins that end by themselves (core/POLICY.md rule 20): a lifetime in steps, and release on a loss
// spike, in the policy and replayed by the simulator from a recorded file.
#include <QtTest>

#include <sstream>

#include <nlohmann/json.hpp>

#include "../common/commands.h"
#include "sp/jsonl.h"
#include "sp/policy.h"
#include "sp/simulator.h"

using namespace sp;
using sp::test::pin;

namespace {

// Updates every step from step 30; blocks 0 and 1 have quiet gradients (INT8 at the first update),
// 2 and 3 loud ones (BF16). Rollback is off unless a test turns it on: spike release must not need it.
Config pin_config() {
    Config c;
    c.warmup_steps = 30;
    c.update_interval_steps = 1;
    c.history_window = 1;
    c.min_steps_between_switches = 0;
    c.grad_weight = 1.0;
    c.error_weight = 0.0;
    c.rollback_enabled = false;
    c.loss_min_history = 20;
    c.rollback_window_steps = 10;
    c.rollback_cooldown_steps = 50;
    return c;
}

const double kL2[4] = {1.0, 1.0, 10.0, 10.0};
constexpr Precision kInt8 = Precision::int8, kBf16 = Precision::bf16, kFp8 = Precision::fp8_e4m3;

// A loss that is flat but for a spike at the given step.
double loss_at(std::int64_t s, std::int64_t spike_at) {
    return s == spike_at ? 5.0 : 3.0 + 0.01 * double(s % 3);
}

BlockGradStats stat(int id, double l2) {
    BlockGradStats s;
    s.block_id = id;
    s.l2_norm = l2;
    s.max_abs = l2 / 2;
    s.variance = l2 * l2;
    s.numel = 100;
    return s;
}

// One step as the agent drives it: expiry and commands at the boundary, statistics, update, loss.
struct Driver {
    Policy policy;
    std::vector<std::int64_t> expired_at;  // steps at which some pin expired
    explicit Driver(const Config& c) : policy(c, uniform_layout(4)) {}
    const LossFeedback& step(std::int64_t s, double loss, const std::vector<Command>& commands = {}) {
        if (!policy.expire_pins(s).blocks.empty()) expired_at.push_back(s);
        for (const Command& c : commands) {
            const CommandOutcome out = policy.apply(c, s);
            if (!out.ok) qFatal("command rejected: %s", out.error.c_str());
        }
        for (int b = 0; b < 4; ++b) policy.observe(s, stat(b, kL2[b]));
        policy.update(s, 1000.0 + double(s));
        return policy.observe_loss(s, loss);
    }
};

}  // namespace

class TestPinLifetime : public QObject {
    Q_OBJECT
  private slots:
    void a_pin_for_n_steps_ends_at_the_boundary_n_steps_later() {
        Driver d(pin_config());
        for (std::int64_t s = 0; s < 40; ++s) d.step(s, 3.0);
        d.step(40, 3.0, {pin({2}, kFp8, 10)});
        QCOMPARE(d.policy.pin_expires_at(2), std::optional<std::int64_t>(50));
        for (std::int64_t s = 41; s < 50; ++s) {
            d.step(s, 3.0);
            QCOMPARE(d.policy.pins()[2], std::optional<Precision>(kFp8));  // steps 40..49 run pinned
        }
        const PinExpiry& expiry = d.policy.expire_pins(50);
        QCOMPARE(expiry.blocks, std::vector<int>{2});
        QVERIFY(expiry.changes.empty());  // no config force: it keeps FP8 until the update decides
        QVERIFY(!d.policy.pins()[2]);
        QVERIFY(!d.policy.pin_expires_at(2));
        d.step(50, 3.0);
        QCOMPARE(d.policy.precisions()[2], kBf16);  // loud gradients: the update sends it back
        QVERIFY(d.policy.expire_pins(51).blocks.empty());
    }

    void an_expired_pin_returns_a_forced_block_to_its_force_at_once() {
        Config c = pin_config();
        c.force_int8_blocks = {3};
        Driver d(c);
        for (std::int64_t s = 0; s < 40; ++s) d.step(s, 3.0);
        d.step(40, 3.0, {pin({3}, kBf16, 5)});
        QCOMPARE(d.policy.precisions()[3], kBf16);
        const PinExpiry& expiry = d.policy.expire_pins(45);
        QCOMPARE(expiry.blocks, std::vector<int>{3});
        QCOMPARE(expiry.changes.size(), std::size_t(1));
        QCOMPARE(expiry.changes[0].to, kInt8);
        QCOMPARE(int(expiry.changes[0].reason), int(Reason::config));
    }

    void a_new_pin_or_a_release_replaces_the_terms() {
        Driver d(pin_config());
        for (std::int64_t s = 0; s < 40; ++s) d.step(s, 3.0);
        d.step(40, 3.0, {pin({2}, kInt8, 5, true)});
        d.step(41, 3.0, {pin({2}, kInt8)});  // pinned again, until released
        QVERIFY(!d.policy.pin_expires_at(2));
        QVERIFY(!d.policy.pin_releases_on_spike(2));
        for (std::int64_t s = 42; s < 60; ++s) d.step(s, 3.0);
        QCOMPARE(d.policy.pins()[2], std::optional<Precision>(kInt8));
        QVERIFY(d.expired_at.empty());

        Command release;
        release.kind = Command::Kind::release;
        release.blocks = {2};
        d.step(60, 3.0, {pin({1}, kBf16, 3), release});
        QVERIFY(!d.policy.pins()[2]);
        for (std::int64_t s = 61; s < 70; ++s) d.step(s, 3.0);
        QCOMPARE(d.expired_at, std::vector<std::int64_t>{63});  // block 1's, and only once
    }

    void a_spike_releases_flagged_pins_and_rolls_them_back_even_with_rollback_off() {
        Driver d(pin_config());
        for (std::int64_t s = 0; s < 40; ++s) d.step(s, loss_at(s, -1));
        // Block 2 (loud) pinned to FP8 to try it, block 3 to BF16 to protect it, both flagged; block 0
        // (quiet, INT8 by the policy) pinned to FP8 without the flag.
        d.step(40, loss_at(40, -1), {pin({2, 3}, kFp8, 0, true), pin({3}, kBf16, 0, true), pin({0}, kFp8)});
        for (std::int64_t s = 41; s < 45; ++s) QVERIFY(!d.step(s, loss_at(s, 45)).alarm());
        const LossFeedback& fb = d.step(45, loss_at(45, 45));
        QCOMPARE(int(fb.verdict.kind), int(LossVerdict::Kind::spike));
        QCOMPARE(fb.released_pins, (std::vector<int>{2, 3}));
        QVERIFY(fb.suspects.empty());  // rollback is off: the policy's own moves stay
        QCOMPARE(fb.changes.size(), std::size_t(1));
        QCOMPARE(fb.changes[0].block_id, 2);
        QCOMPARE(fb.changes[0].from, kFp8);
        QCOMPARE(fb.changes[0].to, kBf16);
        QCOMPARE(int(fb.changes[0].reason), int(Reason::rollback));
        QCOMPARE(fb.cooldown_until, std::int64_t(95));
        QVERIFY(!d.policy.pins()[2]);
        QVERIFY(!d.policy.pins()[3]);
        QCOMPARE(d.policy.pins()[0], std::optional<Precision>(kFp8));  // not flagged: untouched
        QCOMPARE(d.policy.precisions()[3], kBf16);
    }

    void a_spike_released_block_is_held_at_bf16_for_the_rollback_cooldown() {
        Driver d(pin_config());
        for (std::int64_t s = 0; s < 40; ++s) d.step(s, loss_at(s, -1));
        d.step(40, 3.0, {pin({0}, kFp8, 0, true)});  // quiet: the policy would keep it low
        for (std::int64_t s = 41; s < 45; ++s) d.step(s, loss_at(s, 45));
        QCOMPARE(d.step(45, loss_at(45, 45)).released_pins, std::vector<int>{0});
        for (std::int64_t s = 46; s < 95; ++s) {
            d.step(s, loss_at(s, -1));
            QCOMPARE(d.policy.precisions()[0], kBf16);
        }
        d.step(95, 3.0);
        QCOMPARE(d.policy.precisions()[0], kInt8);  // the hold is over: back to what its gradients say
    }

    void the_simulator_replays_expiry_and_spike_release() {
        const Config c = pin_config();
        Driver live(c);
        std::ostringstream file;
        file << R"({"type":"header","schema_version":1,"blocks":[{"id":0},{"id":1},{"id":2},{"id":3}],)"
             << "\"config\":" << to_json(c).dump() << "}\n";
        const std::vector<Command> at40 = {pin({2}, kFp8, 20), pin({1}, kFp8, 0, true)};
        for (std::int64_t s = 0; s < 120; ++s) {
            const double l = loss_at(s, 80);
            const std::vector<Command> commands = s == 40 ? at40 : std::vector<Command>{};
            for (const Command& command : commands) {
                nlohmann::json e = {{"type", "event"},  {"kind", "command"},           {"step", s},
                                    {"timestamp", 1.0}, {"command", to_json(command)}, {"ok", true}};
                file << e.dump() << '\n';
            }
            StepStatsRecord r;
            r.step = s;
            for (int b = 0; b < 4; ++b) r.blocks.push_back(stat(b, kL2[b]));
            r.loss = l;
            file << to_json_line(r) << '\n';
            live.step(s, l, commands);
        }
        std::istringstream in(file.str());
        const SimulationResult sim = simulate(in, "test", {});
        QCOMPARE(sim.pin_releases.size(), std::size_t(2));
        QCOMPARE(sim.pin_releases[0].step, std::int64_t(60));
        QCOMPARE(sim.pin_releases[0].trigger, std::string("expired"));
        QCOMPARE(sim.pin_releases[0].blocks, std::vector<int>{2});
        QCOMPARE(sim.pin_releases[1].step, std::int64_t(80));
        QCOMPARE(sim.pin_releases[1].trigger, std::string("spike"));
        QCOMPARE(sim.pin_releases[1].blocks, std::vector<int>{1});
        for (int b = 0; b < 4; ++b)
            QCOMPARE(sim.records.back().block_details[std::size_t(b)].precision, live.policy.precisions()[b]);
    }
};

QTEST_APPLESS_MAIN(TestPinLifetime)
#include "test_pin_lifetime.moc"
