#include "py_agent.h"

#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "sp/command.h"
#include "sp/json_input.h"

namespace sp::python {
namespace {

sp::Config make_config(const PyAgentOptions& o) {
    sp::Config c;
    if (o.config_json) c = sp::parse_config(*o.config_json);
    if (o.config_path) c = sp::load_config_file(*o.config_path);
    // The file is the constructor's argument alone: a config shared with sp-trainer may name one.
    c.telemetry_enabled = o.telemetry.has_value();
    if (o.telemetry) c.telemetry_file = *o.telemetry;
    c.telemetry_every_step = o.every_step_stats;
    return c;
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
    agent_ = std::make_unique<sp::agent::Agent>(make_config(o), std::move(options));
    config_ = agent_->config();
    run_id_ = agent_->run_id();
}

PyAgent::~PyAgent() = default;

void PyAgent::register_blocks(std::vector<BlockSpec> specs) {
    std::vector<sp::agent::AgentBlock> blocks;
    blocks.reserve(specs.size());
    for (BlockSpec& s : specs) {
        sp::agent::AgentBlock b;
        b.id = int(blocks.size());
        b.name = std::move(s.name);
        b.param_names = std::move(s.param_names);
        b.params = std::move(s.params);
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

void PyAgent::attach_runtime() {
    if (runtime_) throw std::logic_error("the precision runtime is already attached");
    if (step_ > 0 || open_) throw std::logic_error("attach the precision runtime before the first step");
    runtime_ = std::make_unique<sp::agent::ReferencePrecisionRuntime>(
        agent_->blocks(), std::size_t(agent_->config().int4_group_size));
    agent_->add_hint_sink(runtime_.get());
}

void PyAgent::begin_step() {
    if (open_) return;
    if (!agent_) throw std::logic_error("the run has ended (close() was called)");
    agent_->begin_step(step_);
    open_ = true;
    set_precisions(agent_->hints().precision);
    for (std::size_t b = 0; b < precisions_.size(); ++b) {
        ++block_steps_[std::size_t(precisions_[b])];
        if (!previous_step_map_.empty() && previous_step_map_[b] != precisions_[b]) ++switches_;
    }
    previous_step_map_ = precisions_;
    // A command applied at this boundary changes the map before this step's forward.
    if (runtime_ && !masters_in_params_) runtime_->on_hints(agent_->hints());
}

bool PyAgent::wants_layer_inputs() const {
    return open_ && agent_ && agent_->wants_layer_inputs(step_);
}

void PyAgent::observe_layer_input(int block, int layer, const at::Tensor& input) {
    agent_->observe_layer_input(block, layer, input);
}

void PyAgent::end_step(double loss) {
    begin_step();  // a loop without apply() opens its step here
    agent_->collect_block_grad_stats();
    if (runtime_) {
        materialize_pending();  // two step() calls without a forward between them
        runtime_->before_optimizer_step();
        masters_in_params_ = true;
    }
    agent_->compute_hints(step_);
    // The bytes this step's forward computed with: the last materialization the runtime completed.
    if (runtime_) agent_->record_transfer(runtime_->step_bytes().copied, runtime_->step_bytes().bf16);
    agent_->end_step(loss);
    set_precisions(agent_->hints().precision);
    open_ = false;
    ++step_;
}

bool PyAgent::before_forward(bool training) {
    materialize_pending();
    if (!training || ended_ || open_) return false;
    begin_step();
    return true;
}

void PyAgent::materialize_pending() {
    if (!runtime_ || !masters_in_params_ || ended_) return;
    // A rollback in end_step changed the map after compute_hints: deliver the final one.
    runtime_->on_hints(agent_->hints());
    runtime_->after_optimizer_step();
    masters_in_params_ = false;
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
    // The model ends holding its fp32 weights (the optimizer's latest), never a quantized copy: a
    // checkpoint saved after the run must not lose precision.
    if (runtime_ && !masters_in_params_) runtime_->before_optimizer_step();
    masters_in_params_ = false;
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
