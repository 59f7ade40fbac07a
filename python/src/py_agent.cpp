#include "py_agent.h"

#include <chrono>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "sp/agent/cuda_grad_stats_collector.h"
#include "sp/agent/process_group_link.h"
#include "sp/command.h"
#include "sp/json_input.h"
#include "sp/protocol.h"
#include "sp/rank_file.h"

namespace sp::python {
namespace {

int world_size_of(const PyAgentOptions& o) {
    return o.process_group ? o.process_group->getSize() : 1;
}

int rank_of(const PyAgentOptions& o) {
    return o.process_group ? o.process_group->getRank() : 0;
}

sp::Config make_config(const PyAgentOptions& o) {
    sp::Config c;
    if (o.config_json) c = sp::parse_config(*o.config_json);
    if (o.config_path) c = sp::load_config_file(*o.config_path);
    // The file is the constructor's argument alone: a config shared with sp-trainer may name one.
    c.telemetry_enabled = o.telemetry.has_value();
    if (o.telemetry) c.telemetry_file = *o.telemetry;
    if (o.telemetry && world_size_of(o) > 1) c.telemetry_file = sp::rank_file_name(*o.telemetry, rank_of(o));
    c.telemetry_every_step = o.every_step_stats;
    return c;
}

// Rank R of a job serves on the base endpoints + 2·R, as sp-trainer's ranks do; rank 0's control
// endpoint is the one the others name when they refuse a command.
void join_job(const PyAgentOptions& o, const sp::Config& config, sp::agent::AgentOptions& options) {
    if (world_size_of(o) <= 1) return;
    const int rank = rank_of(o);
    std::string leader;
    if (options.server) {
        leader = options.server->control_endpoint;
        options.server->telemetry_endpoint =
            sp::protocol::rank_endpoint(options.server->telemetry_endpoint, rank);
        options.server->control_endpoint =
            sp::protocol::rank_endpoint(options.server->control_endpoint, rank);
    }
    const auto timeout = std::chrono::milliseconds(std::int64_t(config.process_group_timeout_s * 1000.0));
    options.data_parallel = std::make_shared<sp::agent::ProcessGroupLink>(o.process_group, leader, timeout);
}

}  // namespace

PyAgent::PyAgent(const PyAgentOptions& o) {
    sp::agent::AgentOptions options;
    options.run_id = o.run_id;
    options.producer = "selective_precision (python) " SP_VERSION;
    options.model_identity = o.model_identity;
    options.log = [this](const std::string& line) {
        const std::lock_guard<std::mutex> lock(log_mutex_);
        log_.push_back(line);
    };
    if (o.network) {
        sp::transport::ServerOptions server;
        if (!o.telemetry_endpoint.empty()) server.telemetry_endpoint = o.telemetry_endpoint;
        if (!o.control_endpoint.empty()) server.control_endpoint = o.control_endpoint;
        server.server_secret_key_file = o.server_key;
        server.allowed_clients_file = o.allowed_clients;
        server.log = [this](const std::string& line) {
            const std::lock_guard<std::mutex> lock(log_mutex_);
            log_.push_back(line);
        };
        options.server = std::move(server);
    }
    sp::Config config = make_config(o);
    join_job(o, config, options);  // std::invalid_argument: an endpoint without a port to offset
    rank_ = rank_of(o);
    world_size_ = world_size_of(o);
    agent_ = std::make_unique<sp::agent::Agent>(std::move(config), std::move(options));
    config_ = agent_->config();
    run_id_ = agent_->run_id();
}

PyAgent::~PyAgent() = default;

std::string statistics_device(const std::vector<std::pair<std::string, c10::Device>>& params) {
    if (params.empty()) return "cpu";
    const auto& [first_what, first] = params.front();
    for (const auto& [what, device] : params) {
        if (!device.is_cpu() && !device.is_cuda())
            throw std::invalid_argument(what + " is on " + device.str() +
                                        ": the gradient statistics are read on the CPU or on CUDA");
        if (device != first)
            throw std::invalid_argument(what + " is on " + device.str() + " but " + first_what + " is on " +
                                        first.str() + ": the registered blocks must share one device");
    }
    if (first.is_cpu()) return "cpu";
#if SP_AGENT_HAVE_CUDA
    return "cuda";
#else
    throw std::invalid_argument(first_what + " is on " + first.str() +
                                ", but this selective_precision was built without CUDA: build it against "
                                "a LibTorch with CUDA and with -DSP_ENABLE_CUDA=ON (python/README.md, "
                                "\"Devices and dtypes\")");
#endif
}

void PyAgent::register_blocks(std::vector<BlockSpec> specs) {
    std::vector<std::pair<std::string, c10::Device>> devices;
    for (const BlockSpec& s : specs)
        for (std::size_t k = 0; k < s.params.size(); ++k)
            devices.emplace_back("block '" + s.name + "' parameter '" +
                                     (k < s.param_names.size() ? s.param_names[k] : std::to_string(k)) + "'",
                                 s.params[k].device());
    if (statistics_device(devices) == "cuda") {
#if SP_AGENT_HAVE_CUDA
        agent_->use_grad_stats_collector(sp::agent::make_cuda_grad_stats_collector());
#endif
    }
    std::vector<sp::agent::AgentBlock> blocks;
    blocks.reserve(specs.size());
    for (BlockSpec& s : specs) {
        sp::agent::AgentBlock b;
        b.id = int(blocks.size());
        b.name = std::move(s.name);
        b.param_names = std::move(s.param_names);
        b.params = std::move(s.params);
        b.transposed = std::move(s.transposed);
        blocks.push_back(std::move(b));
    }
    agent_->register_blocks(std::move(blocks));
    set_precisions(agent_->policy().precisions());
    for (const auto& b : agent_->blocks()) names_.push_back(b.name);
}

void PyAgent::set_precisions(const std::vector<Precision>& map) {
    if (map == precisions_) return;
    precisions_ = map;
    ++map_version_;
}

void PyAgent::attach_runtime(const std::vector<std::vector<bool>>& as_is) {
    if (runtime_) throw std::logic_error("the precision runtime is already attached");
    if (step_ > 0 || open_) throw std::logic_error("attach the precision runtime before the first step");
    std::vector<sp::agent::AgentBlock> blocks = agent_->blocks();
    if (!as_is.empty() && as_is.size() != blocks.size())
        throw std::invalid_argument("attach_runtime: " + std::to_string(as_is.size()) + " as_is lists for " +
                                    std::to_string(blocks.size()) + " blocks");
    for (std::size_t b = 0; b < as_is.size(); ++b) {
        if (as_is[b].size() != blocks[b].streamed().size())
            throw std::invalid_argument("attach_runtime: block '" + blocks[b].name + "' has " +
                                        std::to_string(blocks[b].streamed().size()) + " parameters, not " +
                                        std::to_string(as_is[b].size()));
        blocks[b].as_is = as_is[b];
    }
    runtime_ = std::make_unique<sp::agent::ReferencePrecisionRuntime>(
        std::move(blocks), std::size_t(agent_->config().int4_group_size));
    agent_->add_hint_sink(runtime_.get());
    params_hold_ = ParamsHold::compute_copies;
    remember_compute_versions();
}

void PyAgent::remember_compute_versions() {
    compute_versions_.clear();
    for (const auto& block : agent_->blocks())
        for (const at::Tensor& p : block.streamed()) compute_versions_.push_back(p._version());
}

void PyAgent::check_compute_copies_untouched(const char* at) const {
    std::size_t i = 0;
    for (const auto& block : agent_->blocks())
        for (std::size_t k = 0; k < block.streamed().size(); ++k, ++i) {
            if (block.streamed()[k]._version() == compute_versions_.at(i)) continue;
            const std::string name = k < block.param_names.size() ? block.param_names[k] : std::to_string(k);
            throw std::runtime_error(
                std::string("selective_precision: at ") + at + ", block '" + block.name + "' parameter '" +
                name + "' was written in place while it held its " +
                std::string(sp::to_string(runtime_->precisions().at(std::size_t(block.id)))) +
                " compute copy, not its master: an optimizer.step() before agent.step(loss) would be "
                "thrown away. Pass the optimizer to sp.torch.apply(model, agent, optimizer=opt) (then any "
                "call order works), or call agent.step(loss) before optimizer.step()");
        }
}

void PyAgent::restore_masters() {
    runtime_->before_optimizer_step();
    params_hold_ = ParamsHold::masters;
}

void PyAgent::materialize_pending() {
    if (!runtime_ || params_hold_ != ParamsHold::masters || ended_) return;
    // A rollback in end_step changed the map after compute_hints: deliver the final one.
    runtime_->on_hints(agent_->hints());
    runtime_->after_optimizer_step();
    params_hold_ = ParamsHold::compute_copies;
    remember_compute_versions();
}

void PyAgent::begin_step() {
    if (open_) return;
    if (!agent_) throw std::logic_error("the run has ended (close() was called)");
    agent_->begin_step(step_);
    open_ = true;
    stats_collected_ = false;
    set_precisions(agent_->hints().precision);
    for (std::size_t b = 0; b < precisions_.size(); ++b) {
        ++block_steps_[std::size_t(precisions_[b])];
        if (!previous_step_map_.empty() && previous_step_map_[b] != precisions_[b]) ++switches_;
    }
    previous_step_map_ = precisions_;
    // A command applied at this boundary changes the map before this step's forward.
    if (runtime_ && params_hold_ == ParamsHold::compute_copies) {
        check_compute_copies_untouched("the step's start");
        runtime_->on_hints(agent_->hints());
        remember_compute_versions();
    }
}

bool PyAgent::wants_layer_inputs() const {
    return open_ && agent_ && agent_->wants_layer_inputs(step_);
}

void PyAgent::observe_layer_input(int block, int layer, const at::Tensor& input) {
    agent_->observe_layer_input(block, layer, input);
}

void PyAgent::observe_layer_output_grad(int block, int layer, const at::Tensor& grad) {
    agent_->observe_layer_output_grad(block, layer, grad);
}

void PyAgent::set_precision_scope(const std::string& scope) {
    agent_->set_precision_scope(scope);
}

std::string PyAgent::precision_scope() const {
    return agent_->config().precision_scope;
}

void PyAgent::before_optimizer_step() {
    if (!agent_) return;
    if (open_ && !stats_collected_) {
        agent_->collect_block_grad_stats();
        stats_collected_ = true;
    }
    if (runtime_ && params_hold_ == ParamsHold::compute_copies) {
        check_compute_copies_untouched("optimizer.step()");
        restore_masters();
    }
}

void PyAgent::end_step(double loss) {
    if (!agent_) throw std::logic_error("the run has ended (close() was called)");
    if (runtime_ && params_hold_ == ParamsHold::compute_copies)
        check_compute_copies_untouched("agent.step()");
    begin_step();  // a loop without apply() opens its step here
    if (!stats_collected_) agent_->collect_block_grad_stats();
    stats_collected_ = false;
    // The masters for the optimizer (and for the weights' profiling in compute_hints), unless the
    // optimizer's hook already put them there, or there was no forward since the last step.
    if (runtime_ && params_hold_ == ParamsHold::compute_copies) restore_masters();
    agent_->compute_hints(step_);
    // The bytes this step's forward computed with: the last materialization the runtime completed.
    if (runtime_) agent_->record_transfer(runtime_->step_bytes().copied, runtime_->step_bytes().bf16);
    agent_->end_step(loss);
    set_precisions(agent_->hints().precision);
    open_ = false;
    ++step_;
}

const sp::agent::CalibrationResult& PyAgent::calibrate(const sp::agent::CalibrationHooks& hooks,
                                                       const std::string& model_identity) {
    if (!agent_) throw std::logic_error("the run has ended (close() was called)");
    if (step_ > 0 || open_) throw std::logic_error("calibrate before the first step");
    // Calibration measures the masters, as sp-trainer's does the fp32 weights, not a compute copy.
    const bool rematerialize = runtime_ && params_hold_ == ParamsHold::compute_copies;
    if (rematerialize) {
        check_compute_copies_untouched("calibrate()");
        restore_masters();
    }
    calibrating_ = true;
    const auto done = [this, rematerialize] {
        calibrating_ = false;
        if (!rematerialize) return;
        runtime_->after_optimizer_step();  // the same map as before: the same compute copies
        params_hold_ = ParamsHold::compute_copies;
        remember_compute_versions();
    };
    try {
        const auto& result = agent_->calibrate(hooks, model_identity);
        done();
        return result;
    } catch (...) {
        done();
        throw;
    }
}

bool PyAgent::before_forward(bool training) {
    if (calibrating_) return false;
    if (runtime_ && params_hold_ == ParamsHold::compute_copies && !ended_)
        check_compute_copies_untouched("a block's forward");
    materialize_pending();
    if (!training || ended_ || open_) return false;
    begin_step();
    return true;
}

void PyAgent::reload_masters() {
    if (!runtime_ || ended_) return;
    runtime_->reload_masters();
    if (params_hold_ == ParamsHold::compute_copies) remember_compute_versions();
}

at::Tensor PyAgent::checkpoint_value(int block, int k) const {
    if (!runtime_ || params_hold_ == ParamsHold::masters) return {};
    const at::Tensor* master = runtime_->master(std::size_t(block), std::size_t(k));
    return master ? master->detach() : at::Tensor{};
}

void PyAgent::record_eval_loss(double loss, std::optional<std::int64_t> step) {
    if (step)
        agent_->record_eval_loss(loss, *step);
    else
        agent_->record_eval_loss(loss);
}

std::int64_t PyAgent::enqueue(const std::string& command_json) {
    if (!agent_) throw std::logic_error("the run has ended (close() was called)");
    nlohmann::json j;
    sp::JsonError bad;
    if (!sp::parse_json(command_json, j, bad)) throw std::invalid_argument("command: " + bad.message());
    sp::Command command;
    std::string error;
    if (!sp::parse_command(j, command, error)) throw std::invalid_argument(error);
    if (std::string why = agent_->check_command(command); !why.empty()) throw std::invalid_argument(why);
    return agent_->enqueue(std::move(command));
}

void PyAgent::end_run(const std::string& reason) {
    if (ended_) return;
    ended_ = true;
    // The model ends holding its masters (the optimizer's latest), never a quantized copy: a
    // checkpoint saved after the run must not lose precision. An optimizer step that ran on the
    // compute copies is kept rather than overwritten (and said in the log).
    if (runtime_ && params_hold_ == ParamsHold::compute_copies) {
        try {
            check_compute_copies_untouched("the run's end");
            restore_masters();
        } catch (const std::runtime_error& e) {
            const std::lock_guard<std::mutex> lock(log_mutex_);
            log_.push_back(std::string(e.what()) + " (the parameters keep those values)");
        }
    }
    agent_->end_run(reason);
    final_telemetry_loss_ = agent_->telemetry_loss();  // waits until the file holds every record
    final_overhead_ = agent_->overhead();
    agent_.reset();  // joins the I/O thread after it flushed the last records to the subscribers
}

sp::agent::Agent::Overhead PyAgent::overhead() const {
    return agent_ ? agent_->overhead() : final_overhead_;
}

sp::agent::Agent::TelemetryLoss PyAgent::telemetry_loss() const {
    return agent_ ? agent_->telemetry_loss() : final_telemetry_loss_;
}

sp::agent::TransferBytes PyAgent::total_bytes() const {
    return runtime_ ? runtime_->total_bytes() : sp::agent::TransferBytes{};
}

std::vector<std::string> PyAgent::take_log() {
    const std::lock_guard<std::mutex> lock(log_mutex_);
    return std::exchange(log_, {});
}

}  // namespace sp::python
