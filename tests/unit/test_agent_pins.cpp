// The agent's side of pins that end by themselves (core/POLICY.md rule 20): the pin_release event
// for an expiry and for a loss spike, the map handed to the runtime, and the replay of both.
// LibTorch before Qt: Qt's `slots` macro breaks LibTorch's headers when it comes first.
#include <torch/torch.h>

#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "../common/commands.h"
#include "sp/agent/agent.h"
#include "sp/simulator.h"

using namespace sp;
using sp::test::pin;
using namespace sp::agent;

namespace {

// Four blocks whose gradients grow with the index: blocks 0 and 1 quiet (the policy routes them
// low), 2 and 3 loud (BF16).
struct Model {
    std::vector<torch::nn::Linear> blocks;
    Model() {
        torch::manual_seed(5);
        for (int i = 0; i < 4; ++i) blocks.emplace_back(torch::nn::LinearOptions(8, 8));
    }
    std::vector<NamedModule> named() const {
        std::vector<NamedModule> out;
        for (std::size_t i = 0; i < blocks.size(); ++i)
            out.emplace_back("blocks." + std::to_string(i), blocks[i].get());
        return out;
    }
    void set_grads() {
        for (std::size_t i = 0; i < blocks.size(); ++i)
            for (auto& p : blocks[i]->parameters())
                p.mutable_grad() = torch::randn_like(p) * double(i * i + 1);
    }
};

class LastHints : public HintSink {
  public:
    void on_hints(const PrecisionHints& h) override { last = h; }
    PrecisionHints last;
};

std::vector<nlohmann::json> events_of(const QString& path, const std::string& kind) {
    std::ifstream in(path.toStdString());
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j.value("kind", "") == kind) out.push_back(j);
    }
    return out;
}

}  // namespace

class TestAgentPins : public QObject {
    Q_OBJECT
  private slots:
    // Rollback off, as by default: the lifetime and the spike release work without it.
    void pins_end_by_expiry_and_by_a_spike_and_replay() {
        QTemporaryDir dir;
        const QString path = dir.filePath("run.jsonl");
        Config c;
        c.warmup_steps = 4;
        c.update_interval_steps = 2;
        c.min_steps_between_switches = 0;
        c.run_calibration = false;
        c.log_decisions = false;
        c.telemetry_enabled = true;
        c.telemetry_file = path.toStdString();
        c.telemetry_every_step = true;
        c.rollback_enabled = false;
        c.loss_min_history = 5;
        c.rollback_cooldown_steps = 10;
        Model model;
        Precision at_spike = Precision::bf16, after_spike = Precision::bf16;
        std::vector<std::optional<Precision>> pins_after_expiry;
        {
            Agent agent(c, AgentOptions{});
            agent.register_blocks(model.named());
            LastHints hints;
            agent.add_hint_sink(&hints);
            agent.enqueue(pin({2}, Precision::fp8_e4m3, 0, true));  // from step 0 until the spike at 20
            for (int step = 0; step < 30; ++step) {
                agent.begin_step(step);
                if (step == 14) pins_after_expiry = agent.policy().pins();
                model.set_grads();
                agent.collect_block_grad_stats();
                agent.compute_hints(step);
                if (step == 20) at_spike = hints.last.precision[2];
                agent.end_step(step == 20 ? 9.0 : 3.0 + 0.01 * double(step % 3));
                if (step == 20) after_spike = hints.last.precision[2];
                if (step == 7) {
                    // Queued now, applied at step 8's boundary.
                    agent.enqueue(pin({3}, Precision::int8, 6, false));
                }
            }
            agent.end_run("completed");
        }
        QVERIFY(!pins_after_expiry[3]);
        QCOMPARE(at_spike, Precision::fp8_e4m3);
        QCOMPARE(after_spike, Precision::bf16);  // the runtime had it before step 21

        const std::vector<nlohmann::json> releases = events_of(path, "pin_release");
        QCOMPARE(releases.size(), std::size_t(2));
        const nlohmann::json& expired = releases[0];
        QCOMPARE(expired["step"].get<int>(), 14);
        QCOMPARE(expired["trigger"].get<std::string>(), std::string("expired"));
        QCOMPARE(expired["blocks"], nlohmann::json::parse("[3]"));
        QCOMPARE(expired["names"], nlohmann::json::parse(R"(["blocks.3"])"));
        const nlohmann::json& spike = releases[1];
        QCOMPARE(spike["step"].get<int>(), 20);
        QCOMPARE(spike["trigger"].get<std::string>(), std::string("spike"));
        QCOMPARE(spike["blocks"], nlohmann::json::parse("[2]"));
        QCOMPARE(spike["loss"].get<double>(), 9.0);
        QCOMPARE(spike["cooldown_until"].get<int>(), 30);
        QVERIFY(events_of(path, "rollback").empty());    // rollback is off
        QVERIFY(events_of(path, "loss_spike").empty());  // the release says what the alarm did
        bool rolled = false;
        for (const auto& e : events_of(path, "precision_change"))
            rolled |= e["step"] == 20 && e["block"] == 2 && e["reason"] == "rollback";
        QVERIFY(rolled);

        std::ifstream in(path.toStdString());
        const SimulationResult sim = simulate(in, "run.jsonl", SimulationOptions{});
        QCOMPARE(sim.pin_releases.size(), std::size_t(2));
        QCOMPARE(sim.pin_releases[0].step, std::int64_t(14));
        QCOMPARE(sim.pin_releases[1].step, std::int64_t(20));
        QCOMPARE(sim.pin_releases[1].blocks, std::vector<int>{2});
    }
};

QTEST_APPLESS_MAIN(TestAgentPins)
#include "test_agent_pins.moc"
