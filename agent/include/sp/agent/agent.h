#pragma once
// sp::agent::Agent — Selective Precision inside a LibTorch trainer (the per-step lifecycle, call by
// call, is in docs/ARCHITECTURE.md, "The agent inside a training step"):
//
//   Agent agent(config);                      // validated config; opens the telemetry sink
//   agent.register_blocks(modules);           // names, parameters, bytes per precision
//   agent.calibrate(hooks);                   // optional; cached on disk by fingerprint
//   agent.add_hint_sink(&runtime);            // the trainer's runtime receives the map
//   for each step:
//     agent.begin_step(step);                 // applies queued operator commands
//     forward (if agent.wants_layer_inputs(step): agent.observe_layer_input(block, layer, x));
//     backward (on the same steps: agent.observe_layer_output_grad(block, layer, dL/dy));
//     agent.collect_block_grad_stats();       // one pass over every gradient
//     agent.compute_hints(step);              // policy update every update_interval_steps
//     optimizer.step() (with the runtime's before/after hooks)
//     agent.end_step(loss);                   // telemetry record; loss feedback (may roll back)
//   agent.end_run("completed");               // the run_end record: the run ended, it was not cut
//
// Every method but enqueue() belongs to the training thread. Telemetry never blocks training.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sp/agent/block.h"
#include "sp/agent/calibration.h"
#include "sp/agent/grad_stats_collector.h"
#include "sp/agent/hints.h"
#include "sp/command.h"
#include "sp/config.h"
#include "sp/event_payload.h"
#include "sp/policy.h"
#include "sp/policy_stepper.h"
#include "sp/record_line.h"
#include "sp/transport/server_options.h"

namespace sp::transport {
class AgentServer;
}

namespace sp::agent {

class ProcessGroupLink;  // sp/agent/process_group_link.h
class TelemetrySink;
namespace detail {
class CommandQueue;
struct CommandQueueItem;
class DistributionProfiler;
}  // namespace detail

struct AgentOptions {
    std::string run_id;  // "" -> generated from the clock
    std::string producer = "sp-agent " SP_VERSION;
    std::string model_identity;                     // part of the calibration fingerprint (model + weights)
    std::unique_ptr<GradStatsCollector> collector;  // null -> the CPU collector
    std::function<double()> clock;                  // wall-clock seconds; null -> system clock
    std::function<void(const std::string&)> log;    // decision log; null -> stderr when log_decisions
    std::size_t telemetry_queue_capacity = 1024;
    // Live telemetry and control over ZeroMQ (agent/PROTOCOL.md); none: no sockets.
    std::optional<transport::ServerOptions> server;
    // A data-parallel job (agent/PROTOCOL.md §11): rank 0 decides and every rank applies the same map
    // at the same step; the other ranks refuse commands. Null: a single process, nothing changes.
    // The server's rank is taken from it.
    std::shared_ptr<ProcessGroupLink> data_parallel;
};

// Called on the training thread when a queued command was applied (or rejected) at `step`.
using CommandDone = std::function<void(const CommandOutcome& outcome, std::int64_t step)>;

class Agent {
  public:
    // Throws ConfigError for an invalid config, std::runtime_error when the telemetry file cannot be opened.
    explicit Agent(Config config, AgentOptions options = {});
    ~Agent();
    Agent(const Agent&) = delete;
    Agent& operator=(const Agent&) = delete;

    // Once, before the first step. Throws std::logic_error when called twice, ConfigError when the
    // config's force lists name blocks the model lacks.
    void register_blocks(const std::vector<NamedModule>& modules);
    void register_blocks(std::vector<AgentBlock> blocks);

    // Replaces the gradient-statistics collector (AgentOptions::collector) before register_blocks
    // (std::logic_error after it): for a trainer that learns the model's device only from its blocks,
    // as the Python package does.
    void use_grad_stats_collector(std::unique_ptr<GradStatsCollector> collector);

    // Runs (or loads from the cache) calibration when the config's run_calibration is on; the errors
    // feed the error score. Call after register_blocks and before the first step.
    const CalibrationResult& calibrate(const CalibrationHooks& hooks);
    // The same with `model_identity` in the fingerprint in place of AgentOptions::model_identity: for
    // a trainer that knows the model only after constructing the agent (the Python package).
    const CalibrationResult& calibrate(const CalibrationHooks& hooks, const std::string& model_identity);

    // The config's precision_scope ("compute" or "weights", POLICY.md rule 22) for a trainer that learns
    // it only after constructing the agent (the Python package's apply(scope=...)): the header, the
    // snapshots and the profiling take it. Before the first step (std::logic_error after it);
    // ConfigError for another name.
    void set_precision_scope(const std::string& scope);

    // The runtime that receives the map. The formats it can materialize (HintSink::formats()) bound
    // what the policy routes to and which pins are accepted.
    void add_hint_sink(HintSink* sink);

    // Distribution statistics (POLICY.md rule 17): true when `step` profiles weights and inputs, so
    // the trainer's forward pass should hand the inputs of each block's linear layers to
    // observe_layer_input (layer = the index among the block's parameters of two or more dimensions).
    // The weights are profiled in compute_hints(): what the formats would do to the full-precision
    // weights, so the parameters should hold them then (the reference runtime's
    // before_optimizer_step() puts the fp32 masters back before it), not a copy already quantized.
    bool wants_layer_inputs(std::int64_t step) const;
    void observe_layer_input(int block, int layer, const at::Tensor& input);
    // The loss-change estimate (POLICY.md rule 23, cost_estimator "loss" and mode tolerance): on the same
    // steps, the backward pass hands over the gradient of the loss at each of those layers' outputs
    // ([..., out_features], the same tokens as the input). Pairs with the layer's input; a layer whose
    // input was not observed is skipped. Without it no estimate is made and the loss planners keep
    // every block in BF16. Throws std::invalid_argument for a block, layer or shape the model lacks.
    void observe_layer_output_grad(int block, int layer, const at::Tensor& grad);

    // Why `command` would be rejected at the next step boundary ("" when it would be applied).
    // Thread-safe: the control socket asks before acknowledging a request.
    std::string check_command(const Command& command) const;

    // Thread-safe: may be called from any thread. Applied at the next begin_step(), in order, and
    // announced as a "command" event (with `request_id` when one is given). Returns the step it will
    // be applied at (decided under the same lock begin_step takes, so it is exact).
    std::int64_t enqueue(Command command, CommandDone done = {}, std::string request_id = {});

    // The step's calls go in the order of the header's example, one sp::PolicyStepper sequence
    // (POLICY.md "Per step"), the one sp::simulate replays: compute_hints(step) throws
    // std::logic_error unless begin_step(step) began that step, and end_step judges its loss only
    // after compute_hints (an end_step without it is also a std::logic_error).
    void begin_step(std::int64_t step);
    void collect_block_grad_stats();
    const PrecisionHints& compute_hints(std::int64_t step);
    // Optional inputs to this step's record: the runtime's real bytes, the latest held-out loss.
    void record_transfer(std::uint64_t bytes_copied, std::uint64_t bytes_bf16);
    // `step`: when it was measured (0 for an evaluation before training), which may be earlier than
    // the update record that carries it; without it, the record's own step.
    void record_eval_loss(double loss);
    void record_eval_loss(double loss, std::int64_t step);
    // Writes the step's records and feeds the loss to the policy's loss feedback: a rollback (when
    // rollback_enabled) or a pin released by a spike (POLICY.md rule 20) is announced (events) and
    // delivered to the hint sinks at once, so the next step runs with it.
    void end_step(double loss);
    // Announces the end of the run: a `run_end` event with the last step and `reason` (one line, e.g.
    // "completed", "interrupted", "error: ..."), in the file and on the wire, so readers can tell a
    // finished run from a cut one (core/TELEMETRY.md, "Run end"). Last call of a run: the steps
    // after it throw std::logic_error, and so does a second call.
    void end_run(std::string reason);

    const Config& config() const { return config_; }
    const std::vector<AgentBlock>& blocks() const { return blocks_; }
    const Policy& policy() const { return *policy_; }
    const PrecisionHints& hints() const { return hints_; }
    const std::vector<BlockGradStats>& last_stats() const { return stats_; }
    const std::string& run_id() const { return run_id_; }
    // The last update record written (with loss and measured bytes); null before the first.
    const UpdateRecord* last_record() const {
        return last_record_ ? &std::get<UpdateRecord>(last_record_->record()) : nullptr;
    }
    // What the JSONL sink lost (all zero without a telemetry file). Waits until the records pushed
    // so far are written or counted: meant for the end-of-run summary.
    struct TelemetryLoss {
        std::uint64_t offered = 0, lost = 0, lost_to_errors = 0;
        std::string error;  // the first write error
    };
    TelemetryLoss telemetry_loss() const;
    // The telemetry file the agent opened (truncated) at construction, "" when telemetry is off.
    std::string telemetry_file() const;
    // Loss-feedback rollbacks so far (each may have moved several blocks).
    std::uint64_t rollbacks() const { return rollbacks_; }

    // Time the agent spent on the training thread, summed over all steps (for overhead figures).
    struct Overhead {
        double collect_s = 0, hints_s = 0, step_bookkeeping_s = 0;
        // distribution_s, the profiling (distribution statistics, not in hints_s): observe_layer_input,
        // observe_layer_output_grad and compute_hints' profiling on due steps, waits for the
        // profiler's worker or device included (sp-trainer: profiling_s, and profiling_share of the
        // training steps' time).
        double distribution_s = 0;  // the profiling (above)
        double collectives_s = 0;   // data-parallel: commands, statistics, map and loss collectives
        std::uint64_t steps = 0;
        double total_s() const {
            return collect_s + hints_s + step_bookkeeping_s + distribution_s + collectives_s;
        }
    };
    const Overhead& overhead() const { return overhead_; }

  private:
    void emit_event(std::int64_t step, EventPayload payload);
    void log_change(std::int64_t step, const PrecisionChange& change);
    void write_header_once();
    void apply_loss_feedback(double loss);
    void publish_loss_feedback(const LossFeedback& fb);
    bool expire_pins(std::int64_t step);  // true when a pin ended
    // A pin_release event: `alarm` is the loss alarm that released them, null for an expiry.
    void emit_pin_release(std::int64_t step, const std::vector<int>& released, const LossFeedback* alarm);
    void publish_snapshot();
    void publish_telemetry_health();
    void configure_policy();  // the gate's admitted formats and the runtime's formats, after (re)creation
    std::vector<FormatMask> admitted_by_gate() const;
    // Serialized once, off the training thread, for the file and the sockets alike (RecordLine).
    void emit_record(SharedRecord record);
    void emit_record(TelemetryRecord record) { emit_record(share_record(std::move(record))); }
    double now() const;
    // Data-parallel steps (agent_data_parallel.cpp): no-ops without a process group.
    using CommandItem = detail::CommandQueueItem;
    void configure_data_parallel();  // in the constructor: rank, stats mode, timeout, refusals
    bool follower() const;
    std::vector<CommandItem> exchange_commands(std::int64_t step, std::vector<CommandItem> local);
    void share_statistics(std::int64_t step);
    void exchange_map(std::int64_t step);
    double reduce_loss(double loss);

    Config config_;
    AgentOptions options_;
    std::string run_id_;
    std::string config_json_;  // the effective config, serialized once
    std::vector<AgentBlock> blocks_;
    std::unique_ptr<Policy> policy_;
    std::unique_ptr<PolicyStepper> stepper_;  // the per-step sequence, as simulate() drives it
    std::vector<double> calibration_errors_;
    CalibrationResult calibration_;
    std::vector<HintSink*> hint_sinks_;
    std::unique_ptr<detail::DistributionProfiler> profiler_;
    std::vector<FormatMask> admitted_;  // by the gate file, per block; empty: no gate
    std::vector<BlockSnr> step_snr_;    // the SNR estimates of this step, for its statistics line
    std::vector<BlockLossEstimate> step_loss_estimates_;  // and its loss-change estimates
    std::unique_ptr<TelemetrySink> sink_;
    class ServerAdapter;
    std::unique_ptr<ServerAdapter> server_backend_;
    std::unique_ptr<transport::AgentServer> server_;
    bool header_written_ = false;
    bool sink_failing_published_ = false;   // the last telemetry_loss event said "failing"
    double sink_failing_published_at_ = 0;  // and when it was sent

    std::unique_ptr<detail::CommandQueue> commands_;  // shared with the transport's I/O thread
    bool sharded_stats_ = false;                      // data-parallel, distributed_stats_mode "sharded"

    std::int64_t step_ = -1;
    double step_timestamp_ = 0;
    bool stats_pending_ = false;   // compute_hints ran: end_step writes the statistics line
    bool ended_ = false;           // end_run was called
    std::uint64_t rollbacks_ = 0;  // loss-feedback rollbacks so far
    std::vector<BlockGradStats> stats_;
    PrecisionHints hints_;
    std::optional<UpdateRecord> pending_record_;
    SharedRecord last_record_;  // an UpdateRecord: the snapshot's last update, shared with the streams
    std::optional<double> eval_loss_;
    std::optional<std::int64_t> eval_step_;  // when eval_loss_ was measured, if the caller said
    std::optional<std::pair<std::uint64_t, std::uint64_t>> transfer_;
    Overhead overhead_;
};

}  // namespace sp::agent
