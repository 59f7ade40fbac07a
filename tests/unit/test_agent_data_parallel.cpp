// The agent in a data-parallel job (agent/PROTOCOL.md §11), two ranks as two threads of this process
// on a real Gloo process group: sharded statistics equal one collector's over the whole gradients,
// a follower whose own policy decides otherwise adopts rank 0's map (event and record) and its file
// re-simulates to what it recorded, followers
// refuse commands naming rank 0's endpoint, and the loss is the ranks' mean.
// LibTorch before Qt: Qt's `slots` macro breaks LibTorch's headers when it comes first.
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <QtTest>

#include <QTemporaryDir>

#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "../common/jsonl_lines.h"

#include "sp/agent/agent.h"
#include "sp/agent/process_group_link.h"
#include "sp/reason_text.h"
#include "sp/simulator.h"

using namespace sp;
using namespace sp::agent;

namespace {

constexpr int kBlocks = 4;
constexpr int kSteps = 6;

// Gradients that are the same on both ranks (as after DDP's all-reduce), quiet in early blocks.
struct Model {
    std::vector<torch::nn::Linear> blocks;
    Model() {
        static std::mutex seeding;  // the default generator is shared by the ranks' threads
        const std::lock_guard<std::mutex> lock(seeding);
        torch::manual_seed(11);
        for (int i = 0; i < kBlocks; ++i) blocks.emplace_back(torch::nn::LinearOptions(16, 16));
    }
    std::vector<NamedModule> named() const {
        std::vector<NamedModule> out;
        out.reserve(kBlocks);
        for (int i = 0; i < kBlocks; ++i)
            out.emplace_back("blocks." + std::to_string(i), blocks[std::size_t(i)].get());
        return out;
    }
    // Deterministic without a random generator: LibTorch's default one is shared by the two ranks'
    // threads, so drawing from it would race.
    void set_grads(int step) {
        for (int i = 0; i < kBlocks; ++i)
            for (auto& p : blocks[std::size_t(i)]->parameters()) {
                const at::Tensor phase =
                    torch::arange(p.numel(), torch::kFloat).view_as(p) * (0.37f * float(step + 1));
                p.mutable_grad() =
                    torch::sin(phase + float(i)) * (0.01 * double(i * i + 1)) + 0.001 * double(i);
            }
    }
};

Config job_config(const std::string& telemetry, const std::string& mode) {
    Config c;
    c.warmup_steps = 2;
    c.update_interval_steps = 2;
    c.min_steps_between_switches = 0;
    c.run_calibration = false;
    c.log_decisions = false;
    c.telemetry_file = telemetry;
    c.telemetry_every_step = true;
    c.distributed_stats_mode = mode;
    c.process_group_timeout_s = 30;
    return c;
}

struct RankResult {
    std::vector<std::vector<BlockGradStats>> stats;  // per step
    std::vector<std::vector<Precision>> maps;        // per step, after compute_hints
    std::string refusal;
    std::string error;
};

// One rank: its own Model copy (the same weights and gradients on both ranks), its own agent.
// `first_step`: where this rank's steps start (a rank out of step with the other: defect 7's test);
// `command`: queued on this rank before its first step.
void run_rank(int rank, const c10::intrusive_ptr<c10d::Store>& store, const Config& config, RankResult& out,
              const std::vector<double>& losses, int first_step = 0, std::optional<Command> command = {}) {
    try {
        const auto timeout = std::chrono::milliseconds(std::int64_t(1000 * config.process_group_timeout_s));
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, options);
        Model model;
        AgentOptions agent_options;
        agent_options.run_id = "job";
        agent_options.data_parallel = std::make_shared<ProcessGroupLink>(group, "tcp://leader:5557", timeout);
        if (config.distributed_stats_mode == "sharded")
            agent_options.collector = make_cpu_grad_stats_collector({rank, 2});
        Agent agent(config, std::move(agent_options));
        agent.register_blocks(model.named());
        Command pin;
        pin.kind = Command::Kind::pin;
        pin.blocks = {0};
        pin.precision = Precision::bf16;
        out.refusal = agent.check_command(pin);
        if (command) agent.enqueue(*command);
        for (int step = first_step; step < first_step + kSteps; ++step) {
            agent.begin_step(step);
            model.set_grads(step);
            agent.collect_block_grad_stats();
            agent.compute_hints(step);
            out.stats.push_back(agent.last_stats());
            out.maps.push_back(agent.hints().precision);
            agent.end_step(losses[std::size_t(rank)] + double(step));
        }
        agent.end_run("completed");
    } catch (const std::exception& e) {
        out.error = e.what();
    }
}

// Both ranks to the end; fails the test when either threw.
std::array<RankResult, 2> run_job(const Config& rank0, const Config& rank1) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::array<RankResult, 2> results;
    const std::vector<double> losses = {2.0, 4.0};
    std::thread other(run_rank, 1, store, rank1, std::ref(results[1]), std::cref(losses), 0,
                      std::optional<Command>{});
    run_rank(0, store, rank0, results[0], losses);
    other.join();
    return results;
}

}  // namespace

class TestAgentDataParallel : public QObject {
    Q_OBJECT
  private slots:
    void sharded_statistics_equal_one_collectors();
    void a_follower_adopts_rank_0s_map_and_refuses_commands();
    void a_follower_out_of_step_takes_rank_0s_commands_before_it_stops();
};

// Issue 30, defect 7: rank 1 is a step ahead while rank 0 sends a command. Rank 1 receives the
// command's bytes before it judges the step (and stops, naming the mismatch), so rank 0 gets past the
// commands' broadcast and fails later, at the next collective rank 1 no longer joins, instead of
// waiting out its timeout in the second broadcast of the commands.
void TestAgentDataParallel::a_follower_out_of_step_takes_rank_0s_commands_before_it_stops() {
    QTemporaryDir dir;
    Config leader = job_config(dir.filePath("r0.jsonl").toStdString(), "replicated");
    Config follower = job_config(dir.filePath("r1.jsonl").toStdString(), "replicated");
    leader.process_group_timeout_s = follower.process_group_timeout_s = 3;
    Command pin;
    pin.kind = Command::Kind::pin;
    pin.blocks = {1};
    pin.precision = Precision::int8;
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::array<RankResult, 2> results;
    const std::vector<double> losses = {2.0, 4.0};
    std::thread other(run_rank, 1, store, std::cref(follower), std::ref(results[1]), std::cref(losses), 1,
                      std::optional<Command>{});
    run_rank(0, store, leader, results[0], losses, 0, pin);
    other.join();
    QVERIFY2(results[1].error.find("rank 1 is at step 1 but rank 0 at step 0") != std::string::npos,
             results[1].error.c_str());
    QVERIFY2(!results[0].error.empty(), "rank 0 ran on without rank 1");
    QVERIFY2(results[0].error.find("operator's commands") == std::string::npos, results[0].error.c_str());
}

void TestAgentDataParallel::sharded_statistics_equal_one_collectors() {
    QTemporaryDir dir;
    const auto results = run_job(job_config(dir.filePath("r0.jsonl").toStdString(), "sharded"),
                                 job_config(dir.filePath("r1.jsonl").toStdString(), "sharded"));
    QVERIFY2(results[0].error.empty() && results[1].error.empty(),
             (results[0].error + results[1].error).c_str());
    Model model;
    auto whole = make_cpu_grad_stats_collector();
    whole->prepare(blocks_from_modules(model.named()));
    for (int step = 0; step < kSteps; ++step) {
        model.set_grads(step);
        whole->collect();
        const std::vector<BlockGradStats>& want = whole->results();
        for (const RankResult& r : results) {
            const std::vector<BlockGradStats>& got = r.stats[std::size_t(step)];
            QCOMPARE(got.size(), want.size());
            for (std::size_t b = 0; b < want.size(); ++b) {
                QCOMPARE(got[b].numel, want[b].numel);
                QCOMPARE(got[b].max_abs, want[b].max_abs);
                QVERIFY(std::abs(got[b].l2_norm - want[b].l2_norm) <= 1e-12 * want[b].l2_norm);
                QVERIFY(std::abs(got[b].variance - want[b].variance) <= 1e-9 * want[b].variance);
                QVERIFY(std::abs(got[b].mean - want[b].mean) <= 1e-9 * std::sqrt(want[b].variance));
            }
        }
        QCOMPARE(results[0].stats[std::size_t(step)].front().l2_norm,
                 results[1].stats[std::size_t(step)].front().l2_norm);
    }
    // The loss feedback and the records judge the mean loss of the ranks (2 and 4 at step 0).
    for (const char* file : {"r0.jsonl", "r1.jsonl"}) {
        bool seen = false;
        for (const auto& r : sp::test::read_jsonl(dir.filePath(file).toStdString()))
            if (r.contains("step_id") && r["step_id"] == 2) {
                QCOMPARE(r["train_loss"].get<double>(), 5.0);  // (2 + 2) and (4 + 2), averaged
                seen = true;
            }
        QVERIFY2(seen, file);
    }
}

void TestAgentDataParallel::a_follower_adopts_rank_0s_map_and_refuses_commands() {
    QTemporaryDir dir;
    Config leader = job_config(dir.filePath("r0.jsonl").toStdString(), "replicated");
    Config follower = job_config(dir.filePath("r1.jsonl").toStdString(), "replicated");
    leader.mode = Mode::off;  // rank 0 keeps every block in BF16; rank 1's own policy would not
    const auto results = run_job(leader, follower);
    QVERIFY2(results[0].error.empty() && results[1].error.empty(),
             (results[0].error + results[1].error).c_str());
    for (int step = 0; step < kSteps; ++step)
        QVERIFY(results[1].maps[std::size_t(step)] == results[0].maps[std::size_t(step)]);
    QVERIFY(results[0].refusal.empty());
    QCOMPARE(
        QString::fromStdString(results[1].refusal),
        "not_leader: rank 1 takes no commands; rank 0 decides for the whole job: send commands to rank 0 at "
        "tcp://leader:5557");
    // Rank 1's own decision differed: it says so, and its records hold rank 0's map.
    int adopted = 0;
    for (const auto& r : sp::test::read_jsonl(dir.filePath("r1.jsonl").toStdString())) {
        if (r.value("kind", "") == "map_adopted") {
            ++adopted;
            QVERIFY(r["difference"].get<std::string>().find("bf16 on rank 0") != std::string::npos);
        }
        if (r.contains("step_id"))
            for (const auto& [id, d] : r["block_details"].items())
                QCOMPARE(d["precision"].get<std::string>(), "bf16");
    }
    QVERIFY(adopted >= 1);

    // Every rank's file re-simulates to what that rank recorded: the follower's adoptions replayed
    // after its own update, as the agent took them (sp::PolicyStepper in both).
    for (const char* file : {"r0.jsonl", "r1.jsonl"}) {
        const std::string path = dir.filePath(file).toStdString();
        std::ifstream in(path);
        const SimulationResult sim = simulate(in, file, SimulationOptions{});
        QVERIFY2(sim.warnings.empty(), file);
        std::size_t u = 0;
        for (const auto& r : sp::test::read_jsonl(path)) {
            if (!r.contains("step_id")) continue;
            QVERIFY2(u < sim.records.size(), file);
            for (const BlockDetail& d : sim.records[u].block_details) {
                const auto& recorded = r["block_details"][std::to_string(d.id)];
                const std::string where = std::string(file) + ", step " + r["step_id"].dump() + ", block " +
                                          std::to_string(d.id) + ": " + recorded.dump();
                QVERIFY2(to_string(d.precision) == recorded["precision"].get<std::string>(), where.c_str());
                QVERIFY2(to_string(d.reason) == recorded["reason"].get<std::string>(), where.c_str());
                QVERIFY2(reason_text(d) == recorded["reason_text"].get<std::string>(), where.c_str());
            }
            ++u;
        }
        QCOMPARE(u, sim.records.size());
    }
}

QTEST_GUILESS_MAIN(TestAgentDataParallel)
#include "test_agent_data_parallel.moc"
