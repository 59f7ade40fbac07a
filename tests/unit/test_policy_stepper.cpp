// The one per-step sequence (sp::PolicyStepper): calls out of order are refused; and, as a property
// over random runs, an agent's telemetry file re-simulates (sp::simulate, the same stepper) to
// exactly the decisions the agent recorded: random operator commands (pins with and without a
// lifetime or a spike release, releases, mode and budget changes, commands the policy rejects),
// NaN gradients, loss spikes and non-finite losses with rollback on.
// LibTorch before Qt: Qt's `slots` macro breaks LibTorch's headers when it comes first.
#include <torch/torch.h>

#include <QtTest>

#include <QTemporaryDir>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/jsonl_lines.h"

#include "sp/agent/agent.h"
#include "sp/layout.h"
#include "sp/policy_stepper.h"
#include "sp/reason_text.h"
#include "sp/simulator.h"

using namespace sp;
using namespace sp::agent;

namespace {

constexpr int kBlocks = 6;

struct Model {
    std::vector<torch::nn::Linear> blocks;
    Model() {
        torch::manual_seed(3);
        for (int i = 0; i < kBlocks; ++i) blocks.emplace_back(torch::nn::LinearOptions(8, 8));
    }
    std::vector<NamedModule> named() const {
        std::vector<NamedModule> out;
        out.reserve(kBlocks);
        for (int i = 0; i < kBlocks; ++i)
            out.emplace_back("blocks." + std::to_string(i), blocks[std::size_t(i)].get());
        return out;
    }
    // Block i's gradients scale with i (quiet blocks go low, loud ones stay BF16), with noise so the
    // decisions move; now and then one block's gradients hold a NaN.
    void set_grads(std::mt19937_64& rng) {
        std::uniform_real_distribution<double> noise(0.5, 2.0);
        std::bernoulli_distribution nan_block(0.04);
        for (int i = 0; i < kBlocks; ++i) {
            const double scale = 1e-3 * double(i * i + 1) * noise(rng);
            for (auto& p : blocks[std::size_t(i)]->parameters()) {
                at::Tensor g =
                    torch::sin(torch::arange(p.numel(), torch::kFloat).view_as(p) * float(noise(rng))) *
                    scale;
                if (nan_block(rng)) g.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
                p.mutable_grad() = g;
            }
        }
    }
};

// A random operator command; block 9 does not exist, so some are rejected (and must not replay).
Command random_command(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> kind(0, 9), block(0, kBlocks), format(0, 4), steps(0, 12);
    Command c;
    const int k = kind(rng);
    const int b = block(rng);
    const int id = b == kBlocks ? 9 : b;
    if (k <= 4) {
        c.kind = Command::Kind::pin;
        c.blocks = {id};
        c.precision = static_cast<Precision>(format(rng));
        c.for_steps = k <= 2 ? steps(rng) : 0;
        c.release_on_spike = k % 2 == 0;
    } else if (k <= 6) {
        c.kind = Command::Kind::release;
        c.blocks = {id};
    } else if (k == 7) {
        c.kind = Command::Kind::release_all;
    } else if (k == 8) {
        c.kind = Command::Kind::set_mode;
        c.mode = b % 2 == 0 ? Mode::dynamic : Mode::budget;
    } else {
        c.kind = Command::Kind::set_budget;
        c.target_pct = 10.0 * double(b + 1);
    }
    return c;
}

Config run_config(const std::string& telemetry) {
    Config c;
    c.warmup_steps = 3;
    c.update_interval_steps = 2;
    c.min_steps_between_switches = 2;
    c.run_calibration = false;
    c.log_decisions = false;
    c.telemetry_file = telemetry;
    c.telemetry_every_step = true;
    c.rollback_enabled = true;
    c.loss_min_history = 4;
    c.rollback_cooldown_steps = 5;
    return c;
}

AgentOptions fixed_clock() {
    AgentOptions o;
    auto t = std::make_shared<double>(1000.0);
    o.clock = [t] { return *t += 0.25; };
    o.run_id = "property";
    return o;
}

// One random run of `steps` steps; returns how many commands were enqueued.
int run_agent(const std::string& path, std::uint64_t seed, int steps) {
    std::mt19937_64 rng(seed);
    std::bernoulli_distribution command_now(0.2), spike(0.05), nonfinite(0.01);
    Model model;
    Agent agent(run_config(path), fixed_clock());
    agent.register_blocks(model.named());
    int commands = 0;
    for (int step = 0; step < steps; ++step) {
        if (command_now(rng)) {
            agent.enqueue(random_command(rng));
            ++commands;
        }
        agent.begin_step(step);
        model.set_grads(rng);
        agent.collect_block_grad_stats();
        agent.compute_hints(step);
        double loss = 3.0 - 0.005 * double(step);
        if (spike(rng)) loss *= 8.0;
        if (nonfinite(rng)) loss = std::numeric_limits<double>::quiet_NaN();
        agent.end_step(loss);
    }
    agent.end_run("completed");
    return commands;
}

// "" when the simulation of the file holds exactly the file's decisions, otherwise the first
// difference.
std::string compare(const std::vector<nlohmann::json>& lines, const SimulationResult& sim) {
    std::size_t u = 0, rollbacks = 0, releases = 0;
    for (const nlohmann::json& j : lines) {
        if (j.contains("step_id")) {
            if (u >= sim.records.size()) return "the file has more update records than the simulation";
            const UpdateRecord& r = sim.records[u++];
            const std::string at = "update at step " + std::to_string(r.step_id);
            if (r.step_id != j["step_id"].get<std::int64_t>()) return at + ": the file's is at another step";
            for (const BlockDetail& d : r.block_details) {
                const nlohmann::json& f = j["block_details"][std::to_string(d.id)];
                if (to_string(d.precision) != f["precision"].get<std::string>() ||
                    to_string(d.reason) != f["reason"].get<std::string>() ||
                    reason_text(d) != f["reason_text"].get<std::string>())
                    return at + ", block " + std::to_string(d.id) + ": simulated " +
                           std::string(to_string(d.precision)) + " (" + reason_text(d) + "), recorded " +
                           f.dump();
            }
        } else if (j.value("kind", "") == "rollback") {
            if (rollbacks >= sim.rollbacks.size() ||
                sim.rollbacks[rollbacks].step != j["step"].get<std::int64_t>() ||
                nlohmann::json(sim.rollbacks[rollbacks].blocks) != j["blocks"])
                return "rollback at step " + j["step"].dump() + " not simulated alike";
            ++rollbacks;
        } else if (j.value("kind", "") == "pin_release") {
            if (releases >= sim.pin_releases.size())
                return "pin release at step " + j["step"].dump() + " not simulated";
            const SimulatedPinRelease& p = sim.pin_releases[releases++];
            if (p.step != j["step"].get<std::int64_t>() || p.trigger != j["trigger"].get<std::string>() ||
                nlohmann::json(p.blocks) != j["blocks"])
                return "pin release at step " + j["step"].dump() + " simulated as " + p.trigger +
                       " at step " + std::to_string(p.step);
        }
    }
    if (u != sim.records.size()) return "the simulation has more update records than the file";
    if (rollbacks != sim.rollbacks.size()) return "the simulation rolled back more often than the file";
    if (releases != sim.pin_releases.size()) return "the simulation released more pins than the file";
    return "";
}

}  // namespace

class TestPolicyStepper : public QObject {
    Q_OBJECT

  private slots:
    void calls_out_of_order_are_refused() {
        Policy policy(Config{}, uniform_layout(3));
        PolicyStepper stepper(policy);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stepper.apply(Command{}));  // before begin
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stepper.update(0.0));
        stepper.begin(0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stepper.end(1.0));  // before the update
        QVERIFY_THROWS_EXCEPTION(std::logic_error,
                                 stepper.adopt(policy.precisions(), std::vector<Reason>(3, Reason::hold)));
        QVERIFY(stepper.apply(Command{}).ok);  // release_all
        BlockGradStats s;
        s.block_id = 0;
        s.l2_norm = s.max_abs = 1.0;
        s.variance = 0.1;
        s.numel = 4;
        stepper.observe(s);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stepper.apply(Command{}));  // after the statistics
        stepper.update(0.0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stepper.observe(s));   // after the update
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stepper.update(0.0));  // twice
        stepper.end(1.0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stepper.end(1.0));  // twice
        QVERIFY(!stepper.in_step());
        stepper.begin(1);  // and a step left without a loss is simply over at the next begin
        stepper.begin(2);
        QCOMPARE(stepper.step(), std::int64_t(2));
    }

    // The agent's calls follow the stepper: hints for a step it did not begin, or a loss before the
    // step's hints, are programming errors, not silently another sequence.
    void the_agent_refuses_calls_out_of_order() {
        QTemporaryDir dir;
        Model model;
        Agent agent(run_config(dir.filePath("run.jsonl").toStdString()), fixed_clock());
        agent.register_blocks(model.named());
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.compute_hints(0));  // no begin_step(0)
        agent.begin_step(0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.compute_hints(1));  // another step
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.end_step(1.0));     // before its hints
        agent.begin_step(1);
        std::mt19937_64 rng(1);
        model.set_grads(rng);
        agent.collect_block_grad_stats();
        agent.compute_hints(1);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.compute_hints(1));  // twice
        agent.end_step(1.0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.end_step(1.0));  // twice
        agent.begin_step(2);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.end_step(1.0));  // before the step's hints
        QCOMPARE(agent.overhead().steps, std::uint64_t(1));               // the refused calls did nothing
    }

    // The property: over random runs, simulate(file) == what the agent recorded.
    void random_runs_re_simulate_exactly() {
        QTemporaryDir dir;
        int commands = 0, rollbacks = 0, releases = 0;
        for (std::uint64_t seed = 1; seed <= 24; ++seed) {
            const std::string path = dir.filePath(QString("run%1.jsonl").arg(seed)).toStdString();
            commands += run_agent(path, seed, 80);
            std::ifstream in(path);
            const SimulationResult sim = simulate(in, path, SimulationOptions{});
            const std::string diff = compare(sp::test::read_jsonl(path), sim);
            QVERIFY2(diff.empty(), ("seed " + std::to_string(seed) + ": " + diff).c_str());
            rollbacks += int(sim.rollbacks.size());
            releases += int(sim.pin_releases.size());
        }
        // The runs reached what the property is about.
        QVERIFY(commands > 50);
        QVERIFY(rollbacks > 0);
        QVERIFY(releases > 0);
    }
};

QTEST_GUILESS_MAIN(TestPolicyStepper)
#include "test_policy_stepper.moc"
