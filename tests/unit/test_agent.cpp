// sp::agent::Agent: lifecycle, commands at step boundaries, hints, telemetry, re-simulation.
// LibTorch before Qt: Qt's `slots` macro breaks LibTorch's headers when it comes first.
#include <torch/torch.h>

#include <QtTest>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "sp/agent/agent.h"
#include "sp/format_gate.h"
#include "sp/reason_text.h"
#include "sp/simulator.h"

using namespace sp;
using namespace sp::agent;

namespace {

struct Model {
    std::vector<torch::nn::Linear> blocks;
    explicit Model(int n) {
        torch::manual_seed(3);
        for (int i = 0; i < n; ++i) blocks.emplace_back(torch::nn::LinearOptions(8, 8));
    }
    std::vector<NamedModule> named() const {
        std::vector<NamedModule> out;
        for (std::size_t i = 0; i < blocks.size(); ++i)
            out.emplace_back("blocks." + std::to_string(i), blocks[i].get());
        return out;
    }
    // Gradients whose size grows with the block index: early blocks quiet, late blocks loud.
    void set_grads(int step) {
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            for (auto& p : blocks[i]->parameters()) {
                const double scale = 0.05 * double(i * i + 1) * (1.0 + 0.1 * double(step % 3));
                p.mutable_grad() = torch::randn_like(p) * scale;
            }
        }
    }
};

Config small_config(const QString& telemetry) {
    Config c;
    c.warmup_steps = 2;
    c.update_interval_steps = 2;
    c.min_steps_between_switches = 4;
    c.run_calibration = false;
    c.log_decisions = false;
    c.telemetry_enabled = !telemetry.isEmpty();
    c.telemetry_file = telemetry.toStdString();
    c.telemetry_every_step = true;
    return c;
}

AgentOptions fixed_clock() {
    AgentOptions o;
    auto t = std::make_shared<double>(1000.0);
    o.clock = [t] { return *t += 0.5; };
    o.run_id = "test-run";
    return o;
}

class CountingSink : public HintSink {
  public:
    void on_hints(const PrecisionHints& h) override {
        ++calls;
        last = h;
    }
    int calls = 0;
    PrecisionHints last;
};

void run_steps(Agent& agent, Model& model, int from, int to) {
    for (int step = from; step < to; ++step) {
        agent.begin_step(step);
        model.set_grads(step);
        agent.collect_block_grad_stats();
        agent.compute_hints(step);
        agent.record_transfer(700, 1000);
        if (step % 4 == 0) agent.record_eval_loss(2.0 - 0.01 * step);
        agent.end_step(3.0 - 0.01 * step);
    }
}

std::vector<nlohmann::json> read_lines(const QString& path) {
    std::ifstream in(path.toStdString());
    std::vector<nlohmann::json> out;
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
}

Command pin(std::vector<int> blocks, Precision p) {
    Command c;
    c.kind = Command::Kind::pin;
    c.blocks = std::move(blocks);
    c.precision = p;
    return c;
}

}  // namespace

// A runtime that cannot materialize FP8 E5M2.
class NoE5m2Sink : public CountingSink {
  public:
    FormatMask formats() const override { return kAllFormats & FormatMask(~format_bit(Precision::fp8_e5m2)); }
};

// A runtime that names fp32 masters (HintSink::master) and, like the reference runtime, puts other
// values into the parameters for the forward pass (scramble) and the masters back before
// compute_hints (restore).
class MasterSink : public CountingSink {
  public:
    explicit MasterSink(const std::vector<AgentBlock>& blocks) {
        for (const AgentBlock& b : blocks) {
            masters_.emplace_back();
            for (const torch::Tensor& p : b.streamed()) {
                params_.push_back(p);
                masters_.back().push_back(p.detach().clone());
            }
        }
    }
    const at::Tensor* master(std::size_t block, std::size_t k) const override {
        return block < masters_.size() && k < masters_[block].size() ? &masters_[block][k] : nullptr;
    }
    void scramble() {
        torch::NoGradGuard no_grad;
        for (torch::Tensor& p : params_)
            p.copy_(torch::arange(p.numel()).reshape(p.sizes()).to(torch::kFloat));
    }
    void restore() {
        torch::NoGradGuard no_grad;
        std::size_t i = 0;
        for (const auto& block : masters_)
            for (const torch::Tensor& m : block) params_[i++].copy_(m);
    }

  private:
    std::vector<torch::Tensor> params_;
    std::vector<std::vector<torch::Tensor>> masters_;
};

// A gate file admitting INT8 and INT4 for the 8-column matrices (and vectors) of the test model.
QString write_gate(const QString& path) {
    FormatGatePolicy g;
    g.producer = "test";
    g.device = "test";
    g.link = "test";
    for (Precision p : {Precision::int8, Precision::int4})
        for (LayerKind k : {LayerKind::matrix, LayerKind::vector}) {
            GateRule r;
            r.kind = k;
            r.cols = 8;
            r.format = p;
            r.min_rows = 1;
            r.measured_speedup = r.min_speedup = 1.5;
            r.max_rows = 64;
            g.rules.push_back(r);
        }
    std::ofstream(path.toStdString()) << to_json_text(g);
    return path;
}

class TestAgent : public QObject {
    Q_OBJECT
  private slots:
    // The "sample" estimator measures a layer's output from its input and its weight. With a runtime
    // that names the masters it does so on the profiler's worker, from the master, as the input is
    // seen; without, in compute_hints on the parameters. The two runs record the same SNR, although
    // the parameters held other values in the second run until its hints were computed.
    void output_snr_off_the_training_thread_reads_the_masters() {
        std::vector<std::string> snr[2];
        for (int run = 0; run < 2; ++run) {
            QTemporaryDir dir;
            const QString path = dir.filePath("run.jsonl");
            Config c = small_config(path);
            c.distribution_interval_steps = 4;
            c.snr_estimator = "sample";
            Model model(3);
            {
                Agent agent(c, fixed_clock());
                agent.register_blocks(model.named());
                CountingSink plain;
                MasterSink masters(agent.blocks());
                agent.add_hint_sink(run == 0 ? static_cast<HintSink*>(&plain) : &masters);
                torch::manual_seed(5);
                for (int step = 0; step < 9; ++step) {
                    agent.begin_step(step);
                    if (run == 1) masters.scramble();
                    if (agent.wants_layer_inputs(step))
                        for (int b = 0; b < 3; ++b) agent.observe_layer_input(b, 0, torch::randn({16, 8}));
                    model.set_grads(step);
                    agent.collect_block_grad_stats();
                    agent.compute_hints(step);  // still scrambled: only the masters give run 0's SNR
                    if (run == 1) masters.restore();
                    agent.end_step(2.0);
                }
            }
            for (const auto& j : read_lines(path))
                if (j.contains("snr")) snr[run].push_back(j["snr"].dump());
        }
        QCOMPARE(snr[0].size(), std::size_t(3));  // steps 0, 4, 8
        QCOMPARE(snr[1], snr[0]);
    }

    void tiers_gate_and_runtime_formats_are_recorded_and_replayed() {
        QTemporaryDir dir;
        const QString path = dir.filePath("run.jsonl");
        Config c = small_config(path);
        c.snr_tiers = true;
        c.distribution_interval_steps = 4;
        c.format_gate_file = write_gate(dir.filePath("gate.json")).toStdString();
        Model model(4);
        NoE5m2Sink sink;
        {
            Agent agent(c, fixed_clock());
            agent.register_blocks(model.named());
            agent.add_hint_sink(&sink);
            // Pins are the operator's: any format the runtime can materialize, gate or not.
            QCOMPARE(agent.check_command(pin({1}, Precision::fp8_e4m3)), std::string());
            QVERIFY(agent.check_command(pin({1}, Precision::fp8_e5m2)).find("cannot be materialized") !=
                    std::string::npos);
            QVERIFY(agent.check_command(pin({9}, Precision::int8)).find("unknown block 9") !=
                    std::string::npos);
            QVERIFY(agent.wants_layer_inputs(0) && !agent.wants_layer_inputs(1) &&
                    agent.wants_layer_inputs(8));
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                     agent.observe_layer_input(0, 1, torch::ones({2, 8})));
            for (int step = 0; step < 16; ++step) {
                agent.begin_step(step);
                if (agent.wants_layer_inputs(step))
                    for (int b = 0; b < 4; ++b) agent.observe_layer_input(b, 0, torch::randn({16, 8}));
                model.set_grads(step);
                agent.collect_block_grad_stats();
                agent.compute_hints(step);
                agent.end_step(2.0);
            }
            // Only the gate's formats below BF16; E5M2, which the runtime lacks, never.
            for (Precision p : sink.last.precision)
                QVERIFY(p == Precision::bf16 || p == Precision::int8 || p == Precision::int4);
        }
        const auto lines = read_lines(path);
        const nlohmann::json admitted = lines[0]["admitted_formats"];
        QCOMPARE(admitted.size(), std::size_t(4));
        QCOMPARE(admitted[0], nlohmann::json::parse(R"(["bf16","int8","int4"])"));
        int snr_lines = 0;
        for (const auto& j : lines) {
            if (j.contains("snr")) {
                ++snr_lines;
                QVERIFY(j["step"].get<int>() % 4 == 0);
                QCOMPARE(j["snr"].size(), std::size_t(4));
                QVERIFY(j["snr"][0]["snr_db"]["int8"].get<double>() >
                        j["snr"][0]["snr_db"]["int4"].get<double>());
            }
            if (j.contains("step_id") && j["step_id"].get<int>() >= 4) {
                QVERIFY(j["block_details"]["0"].contains("snr_db"));
                QVERIFY(!j["block_details"]["0"]["reason_text"].get<std::string>().empty());
            }
        }
        QCOMPARE(snr_lines, 4);  // steps 0, 4, 8, 12

        std::ifstream in(path.toStdString());
        const SimulationResult sim = simulate(in, "run.jsonl", SimulationOptions{});
        std::size_t u = 0;
        for (const auto& j : lines) {
            if (!j.contains("step_id")) continue;
            QVERIFY(u < sim.records.size());
            for (const BlockDetail& d : sim.records[u].block_details) {
                const auto& rd = j["block_details"][std::to_string(d.id)];
                QCOMPARE(std::string(to_string(d.precision)), rd["precision"].get<std::string>());
                QCOMPARE(reason_text(d), rd["reason_text"].get<std::string>());
            }
            ++u;
        }
        QCOMPARE(u, sim.records.size());
    }

    void lifecycle_routes_and_notifies_sinks() {
        Model model(4);
        Agent agent(small_config({}), fixed_clock());
        agent.register_blocks(model.named());
        QCOMPARE(int(agent.blocks().size()), 4);
        QCOMPARE(agent.policy().layout()[3].bytes_bf16, std::uint64_t(2 * (64 + 8)));
        CountingSink sink;
        agent.add_hint_sink(&sink);
        run_steps(agent, model, 0, 6);
        QCOMPARE(sink.calls, 6);
        QCOMPARE(sink.last.step, std::int64_t(5));
        QVERIFY(!sink.last.updated);  // updates at 2 and 4
        QVERIFY(agent.last_record());
        QCOMPARE(agent.last_record()->step_id, std::int64_t(4));
        QCOMPARE(sink.last.precision[0], Precision::int8);  // the quiet block
        QCOMPARE(sink.last.precision[3], Precision::bf16);  // the loud one
        QCOMPARE(sink.last.reason[0], Reason::hold);
        QCOMPARE(*agent.last_record()->train_loss, 3.0 - 0.04);
        QCOMPARE(*agent.last_record()->eval_loss, 2.0 - 0.04);
        QCOMPARE(*agent.last_record()->measured_bandwidth_saving_pct, 30.0);
        QCOMPARE(agent.last_stats().size(), std::size_t(4));
        QCOMPARE(agent.overhead().steps, std::uint64_t(6));
        QVERIFY(agent.overhead().total_s() > 0.0);
    }

    void commands_apply_only_at_a_step_boundary() {
        Model model(3);
        Agent agent(small_config({}), fixed_clock());
        agent.register_blocks(model.named());
        agent.begin_step(0);
        std::atomic<int> applied_at{-1};
        std::thread producer([&] {
            agent.enqueue(pin({1}, Precision::int8), [&](const CommandOutcome& o, std::int64_t step) {
                applied_at = o.ok ? int(step) : -2;
            });
        });
        producer.join();
        QCOMPARE(agent.policy().precisions()[1], Precision::bf16);  // queued, not applied
        QCOMPARE(applied_at.load(), -1);
        model.set_grads(0);
        agent.collect_block_grad_stats();
        agent.compute_hints(0);  // not a step boundary either
        QCOMPARE(agent.policy().precisions()[1], Precision::bf16);
        agent.begin_step(1);
        QCOMPARE(agent.policy().precisions()[1], Precision::int8);
        QCOMPARE(applied_at.load(), 1);
        QCOMPARE(agent.hints().precision[1], Precision::int8);

        std::string error;
        agent.enqueue(pin({9}, Precision::int8),
                      [&](const CommandOutcome& o, std::int64_t) { error = o.error; });
        agent.begin_step(2);
        QVERIFY2(error.find("unknown block 9") != std::string::npos, error.c_str());
    }

    void telemetry_file_and_exact_resimulation() {
        QTemporaryDir dir;
        const QString path = dir.filePath("run.jsonl");
        Model model(5);
        std::vector<UpdateRecord> recorded;
        {
            Agent agent(small_config(path), fixed_clock());
            agent.register_blocks(model.named());
            run_steps(agent, model, 0, 7);
            agent.enqueue(pin({0}, Precision::bf16));
            agent.enqueue(pin({7}, Precision::bf16));  // rejected: must not be replayed
            run_steps(agent, model, 7, 20);
            agent.end_run("completed");
            // The end is the end: no step after it, no second end.
            QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.begin_step(20));
            QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.end_run("again"));
            QCOMPARE(agent.telemetry_loss().lost, std::uint64_t(0));
        }  // the sink writes everything on destruction
        const auto lines = read_lines(path);
        QVERIFY(lines.size() > 20);
        // The last line says the run ended, at its last step, and why.
        QCOMPARE(lines.back()["kind"].get<std::string>(), std::string("run_end"));
        QCOMPARE(lines.back()["step"].get<int>(), 19);
        QCOMPARE(lines.back()["reason"].get<std::string>(), std::string("completed"));
        QCOMPARE(lines[0]["type"].get<std::string>(), std::string("header"));
        QCOMPARE(lines[0]["run_id"].get<std::string>(), std::string("test-run"));
        QCOMPARE(lines[0]["blocks"].size(), std::size_t(5));
        QCOMPARE(lines[0]["config"]["warmup_steps"].get<int>(), 2);
        int stats_lines = 0, updates = 0, commands = 0;
        for (const auto& j : lines) {
            if (j.contains("blocks") && j.contains("step")) ++stats_lines;
            if (j.contains("step_id")) {
                ++updates;
                QVERIFY(j.contains("train_loss"));
                QCOMPARE(j["measured_bandwidth_saving_pct"].get<double>(), 30.0);
            }
            if (j.value("kind", "") == "command") ++commands;
        }
        QCOMPARE(stats_lines, 20);
        QCOMPARE(updates, 9);  // steps 2, 4, ..., 18
        QCOMPARE(commands, 2);

        // sp-ctl simulate's engine on the recorded file reproduces every decision exactly.
        std::ifstream in(path.toStdString());
        const SimulationResult sim = simulate(in, "run.jsonl", SimulationOptions{});
        QVERIFY(sim.config_from_header);
        QCOMPARE(sim.commands, std::uint64_t(1));
        std::vector<nlohmann::json> recorded_updates;
        for (const auto& j : lines) {
            if (j.contains("step_id")) recorded_updates.push_back(j);
        }
        QCOMPARE(sim.records.size(), recorded_updates.size());
        for (std::size_t i = 0; i < sim.records.size(); ++i) {
            const UpdateRecord& s = sim.records[i];
            const auto& r = recorded_updates[i];
            QCOMPARE(s.step_id, r["step_id"].get<std::int64_t>());
            QCOMPARE(s.timestamp, r["timestamp"].get<double>());
            QCOMPARE(s.blocks_int8, r["blocks_int8"].get<int>());
            QCOMPARE(s.estimated_bandwidth_saving_pct, r["estimated_bandwidth_saving_pct"].get<double>());
            for (const BlockDetail& d : s.block_details) {
                const auto& rd = r["block_details"][std::to_string(d.id)];
                QCOMPARE(std::string(to_string(d.precision)), rd["precision"].get<std::string>());
                QVERIFY(d.sensitivity == rd["sensitivity"].get<double>());  // bit-exact
                QVERIFY(d.l2_norm == rd["l2_norm"].get<double>());
                QCOMPARE(std::string(to_string(d.reason)), rd["reason"].get<std::string>());
            }
        }
    }

    void loss_spike_after_a_switch_rolls_back_announces_and_replays() {
        QTemporaryDir dir;
        const QString path = dir.filePath("run.jsonl");
        Model model(4);
        Config c = small_config(path);
        c.warmup_steps = 10;
        c.rollback_enabled = true;
        c.loss_min_history = 5;
        c.rollback_window_steps = 6;
        c.rollback_cooldown_steps = 30;
        std::vector<int> lowered;
        std::vector<Precision> after_rollback;
        {
            Agent agent(c, fixed_clock());
            agent.register_blocks(model.named());
            CountingSink sink;
            agent.add_hint_sink(&sink);
            for (int step = 0; step < 40; ++step) {
                agent.begin_step(step);
                model.set_grads(step);
                agent.collect_block_grad_stats();
                agent.compute_hints(step);
                if (step == 10) {
                    for (int b = 0; b < 4; ++b)
                        if (agent.policy().precisions()[std::size_t(b)] == Precision::int8)
                            lowered.push_back(b);
                }
                // A steady loss with a little wobble, and one spike two steps after the first routing.
                agent.end_step(step == 12 ? 6.0 : 3.0 + 0.01 * double(step % 3));
                if (step == 12) after_rollback = sink.last.precision;
            }
            QCOMPARE(agent.rollbacks(), std::uint64_t(1));
        }
        QVERIFY2(!lowered.empty(), "the first update routed nothing: the test has no switch to roll back");
        for (int b : lowered) QCOMPARE(after_rollback[std::size_t(b)], Precision::bf16);  // delivered at once

        const auto lines = read_lines(path);
        int rollback_events = 0, rollback_changes = 0, stats_with_loss = 0;
        for (const auto& j : lines) {
            if (!j.contains("type") && j.contains("blocks") && j.contains("loss")) ++stats_with_loss;
            if (j.value("kind", "") == "precision_change" && j["reason"] == "rollback") ++rollback_changes;
            if (j.value("kind", "") != "rollback") continue;
            ++rollback_events;
            QCOMPARE(j["step"].get<int>(), 12);
            QCOMPARE(j["trigger"].get<std::string>(), std::string("spike"));
            QCOMPARE(j["loss"].get<double>(), 6.0);
            QVERIFY(j["z"].get<double>() > c.loss_spike_zscore);
            QVERIFY(std::fabs(j["ema"].get<double>() - 3.0) < 0.05);
            QCOMPARE(j["blocks"].get<std::vector<int>>(), lowered);
            QCOMPARE(j["cooldown_until"].get<int>(), 42);
        }
        QCOMPARE(rollback_events, 1);
        QCOMPARE(rollback_changes, int(lowered.size()));
        QCOMPARE(stats_with_loss, 40);

        // The recorded losses let the simulator reach the same rollback and the same decisions.
        std::ifstream in(path.toStdString());
        const SimulationResult sim = simulate(in, "run.jsonl", SimulationOptions{});
        QCOMPARE(sim.rollbacks.size(), std::size_t(1));
        QCOMPARE(sim.rollbacks[0].step, std::int64_t(12));
        QCOMPARE(sim.rollbacks[0].blocks, lowered);
        std::vector<nlohmann::json> recorded_updates;
        for (const auto& j : lines)
            if (j.contains("step_id")) recorded_updates.push_back(j);
        QCOMPARE(sim.records.size(), recorded_updates.size());
        for (std::size_t i = 0; i < sim.records.size(); ++i)
            for (const BlockDetail& d : sim.records[i].block_details) {
                const auto& rd = recorded_updates[i]["block_details"][std::to_string(d.id)];
                QCOMPARE(std::string(to_string(d.precision)), rd["precision"].get<std::string>());
                QCOMPARE(std::string(to_string(d.reason)), rd["reason"].get<std::string>());
            }
    }

    void calibration_off_is_a_no_op_and_misuse_throws() {
        Model model(2);
        Agent agent(small_config({}), fixed_clock());
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.begin_step(0));
        agent.register_blocks(model.named());
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.register_blocks(model.named()));
        int calls = 0;
        CalibrationHooks hooks;
        hooks.input = [&](int, int) {
            ++calls;
            return torch::ones({1, 8});
        };
        hooks.forward = [&](int b, const at::Tensor& x) { return model.blocks[std::size_t(b)]->forward(x); };
        QVERIFY(agent.calibrate(hooks).errors.empty());
        QCOMPARE(calls, 0);
        agent.begin_step(0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, agent.calibrate(hooks));

        Config forced = small_config({});
        forced.force_int8_blocks = {5};
        Agent bad(forced, fixed_clock());
        QVERIFY_THROWS_EXCEPTION(ConfigError, bad.register_blocks(model.named()));
        Config invalid = small_config({});
        invalid.int8_threshold = 0.9;
        QVERIFY_THROWS_EXCEPTION(ConfigError, Agent(invalid, fixed_clock()));
    }

    void calibration_feeds_the_error_score() {
        QTemporaryDir dir;
        Model model(2);
        Config c = small_config({});
        c.run_calibration = true;
        c.calibration_samples = 2;
        c.calibration_cache_dir = dir.path().toStdString();
        AgentOptions o = fixed_clock();
        o.model_identity = "test model";
        Agent agent(c, std::move(o));
        agent.register_blocks(model.named());
        CalibrationHooks hooks;
        hooks.input = [](int, int sample) { return torch::randn({4, 8}) * double(sample + 1); };
        hooks.forward = [&](int b, const at::Tensor& x) { return model.blocks[std::size_t(b)]->forward(x); };
        const CalibrationResult& cal = agent.calibrate(hooks);
        QCOMPARE(cal.errors.size(), std::size_t(2));
        QVERIFY(cal.errors[0] > 0.0);
        run_steps(agent, model, 0, 3);
        QVERIFY(agent.last_record()->block_details[0].error_score > 0.0);
    }
};

QTEST_APPLESS_MAIN(TestAgent)
#include "test_agent.moc"
