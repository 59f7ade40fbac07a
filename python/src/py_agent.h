#pragma once
// The agent as the Python package drives it: one sp::agent::Agent, optionally the reference
// precision runtime, and the step bookkeeping a Python loop needs (a step opens at the first
// training forward or at step(), and closes at step()). Nothing here knows of Python: module.cpp
// binds it, and releases the GIL around every call that may take long.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sp/agent/agent.h"
#include "sp/agent/precision_runtime.h"

namespace sp::python {

struct PyAgentOptions {
    // Exactly one of: nothing (the defaults), a JSON text (a Python dict, dumped), a file path.
    std::optional<std::string> config_json;
    std::optional<std::string> config_path;
    std::optional<std::string> telemetry;  // the JSONL file; none: no file, whatever the config says
    bool every_step_stats = true;          // the statistics lines `sp-ctl simulate --stats` replays
    bool network = true;
    std::string telemetry_endpoint, control_endpoint;  // "" -> the defaults (agent/PROTOCOL.md)
    std::string server_key, allowed_clients;
    std::string run_id;
    std::string model_identity;
    // A data-parallel job (torch.distributed's group; agent/PROTOCOL.md §11): with two ranks or more,
    // rank 0 decides, every rank applies its map at the same step, this rank's endpoints are the
    // base ones + 2·rank (sp::protocol::rank_endpoint) and its file NAME.rankR.jsonl. Null: one process.
    c10::intrusive_ptr<c10d::ProcessGroup> process_group;
};

// The device whose collector reads the gradients of `params` ("cpu" or "cuda"; `what` names each
// tensor in messages). std::invalid_argument for mixed devices, another device type, or CUDA in a
// build without the CUDA collector (the message names the build option).
std::string statistics_device(const std::vector<std::pair<std::string, c10::Device>>& params);

// One registered block as Python hands it over: the tensors are the parameters themselves.
struct BlockSpec {
    std::string name;
    std::vector<std::string> param_names;
    std::vector<at::Tensor> params;
    std::vector<bool> transposed;  // per parameter: stored [in, out] (AgentBlock::transposed); empty: none
};

class PyAgent {
  public:
    // Throws sp::ConfigError for a bad config (ValueError in Python), std::runtime_error when the
    // telemetry file, an endpoint or a key file is refused (OSError).
    explicit PyAgent(const PyAgentOptions& options);
    ~PyAgent();
    PyAgent(const PyAgent&) = delete;
    PyAgent& operator=(const PyAgent&) = delete;

    // Picks the gradient-statistics collector from the parameters' device (statistics_device), then
    // registers. std::invalid_argument for a device this build cannot read (ValueError in Python).
    void register_blocks(std::vector<BlockSpec> blocks);
    // The reference runtime becomes the agent's hint sink: every block's weights are materialized in
    // its routed format (python's sp.torch.apply). Before the first step, once. `as_is`: per block,
    // per parameter, those the runtime leaves as they are (AgentBlock::as_is); empty: none.
    void attach_runtime(const std::vector<std::vector<bool>>& as_is = {});
    bool has_runtime() const { return runtime_ != nullptr; }

    // The optimizer is about to step (sp.torch.apply's hook on optimizer.step, in whatever order the
    // loop calls it): an open step's statistics are read now, while its gradients are final, and the
    // parameters get the masters, so that the update lands on them. Without the runtime: statistics only.
    void before_optimizer_step();
    // A checkpoint was loaded into the parameters (load_state_dict): their values become the masters.
    void reload_masters();
    // What a checkpoint holds for block `block`'s parameter `k`: the master while the parameters hold
    // the compute copies; undefined when the parameter itself holds the master (or no runtime).
    at::Tensor checkpoint_value(int block, int k) const;

    // sp-trainer's INT8 output-error calibration (sp::agent::Agent::calibrate) through the caller's
    // hooks, before the first step, with `model_identity` in the cache's fingerprint. The blocks'
    // parameters are restored exactly; the runtime's hooks are quiet while it runs.
    const sp::agent::CalibrationResult& calibrate(const sp::agent::CalibrationHooks& hooks,
                                                  const std::string& model_identity);

    // A step opens at most once (idempotent while open); the next step() closes it.
    void begin_step();
    bool step_open() const { return open_; }
    std::int64_t current_step() const { return step_; }  // the open step, or the next one to open
    bool wants_layer_inputs() const;
    void observe_layer_input(int block, int layer, const at::Tensor& input);
    void observe_layer_output_grad(int block, int layer, const at::Tensor& grad);
    void set_precision_scope(const std::string& scope);
    std::string precision_scope() const;
    // After backward: statistics (unless before_optimizer_step read them), the policy update, the
    // step's records and loss feedback. With the runtime, the parameters hold the masters afterwards
    // (for the optimizer) until the next forward materializes the blocks again.
    // std::runtime_error, before anything changes, when an optimizer stepped the compute copies.
    void end_step(double loss);
    // Before a registered block's forward: the blocks materialized, and a training forward
    // (`training`: autograd records) opens the step. True when it opened one (the map may differ).
    // std::runtime_error when an optimizer stepped the compute copies.
    bool before_forward(bool training);
    void record_eval_loss(double loss, std::optional<std::int64_t> step);

    // Parses and checks a command object (the control socket's JSON, core/command.h); throws
    // std::invalid_argument with the reason, or returns the step it will be applied at.
    std::int64_t enqueue(const std::string& command_json);
    // The run_end record, then the agent itself goes: its file is complete and its sockets have
    // flushed the last records (run_end among them) to the subscribers when this returns, whatever
    // Python does with the object afterwards. The accessors keep answering.
    void end_run(const std::string& reason);
    bool ended() const { return ended_; }

    const std::vector<Precision>& precisions() const { return precisions_; }
    // Bumped whenever precisions() changes: Python rebuilds its map only then, not at every step.
    std::uint64_t map_version() const { return map_version_; }
    const std::vector<std::string>& block_names() const { return names_; }
    const sp::Config& config() const { return config_; }
    const std::string& run_id() const { return run_id_; }
    int rank() const { return rank_; }
    int world_size() const { return world_size_; }
    // The agent's time on the training thread, and what its telemetry file lost (waits for the
    // writer): live while the run goes on, as they were at its end afterwards.
    sp::agent::Agent::Overhead overhead() const;
    sp::agent::Agent::TelemetryLoss telemetry_loss() const;
    // Block-steps per format (by Precision value), counted at each step's map as it began, and the
    // block precision changes between consecutive steps: the summary's figures.
    const std::array<std::int64_t, kPrecisionCount>& block_steps() const { return block_steps_; }
    std::int64_t switches() const { return switches_; }
    sp::agent::TransferBytes total_bytes() const;
    // Decision log lines since the last call (the agent writes them on the training thread).
    std::vector<std::string> take_log();

  private:
    std::unique_ptr<sp::agent::Agent> agent_;  // null once the run has ended
    sp::Config config_;
    std::string run_id_;
    int rank_ = 0, world_size_ = 1;
    std::vector<std::string> names_;
    sp::agent::Agent::Overhead final_overhead_;
    sp::agent::Agent::TelemetryLoss final_telemetry_loss_;
    std::unique_ptr<sp::agent::ReferencePrecisionRuntime> runtime_;
    void set_precisions(const std::vector<Precision>& map);

    // With the runtime the parameters hold either the compute copies (the blocks materialized in
    // their formats: a forward may run) or the masters (the optimizer may step them). An optimizer
    // step on the compute copies would be thrown away by the next restore of the masters, so each
    // parameter's version counter is remembered when it is materialized, and any in-place write to it
    // while it holds a compute copy is refused by name (check_compute_copies_untouched).
    enum class ParamsHold { compute_copies, masters };
    void restore_masters();      // compute copies -> masters
    void materialize_pending();  // masters -> compute copies (after the optimizer step)
    void remember_compute_versions();
    void check_compute_copies_untouched(const char* at) const;
    ParamsHold params_hold_ = ParamsHold::compute_copies;
    std::vector<std::int64_t> compute_versions_;  // per streamed parameter, blocks in order
    bool stats_collected_ = false;                // the open step's statistics were read
    bool calibrating_ = false;                    // calibration writes the parameters: no checks

    std::vector<Precision> precisions_;
    std::uint64_t map_version_ = 0;
    std::vector<Precision> previous_step_map_;
    std::array<std::int64_t, kPrecisionCount> block_steps_{};
    std::int64_t switches_ = 0;
    std::int64_t step_ = 0;
    bool open_ = false;
    bool ended_ = false;
    std::mutex log_mutex_;
    std::vector<std::string> log_;
};

}  // namespace sp::python
