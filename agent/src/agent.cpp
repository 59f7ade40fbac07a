#include "sp/agent/agent.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "agent_server.h"
#include "command_queue.h"
#include "distribution_profiler.h"
#include "sp/format_gate.h"
#include "sp/output_path.h"
#include "sp/run_end.h"
#include "telemetry_sink.h"

namespace sp::agent {
namespace {

// What the detector judged, as the rollback, loss_spike and pin_release events carry it.
LossEvidence alarm_evidence(const LossFeedback& fb, const Config& config) {
    LossEvidence e;
    e.loss = fb.verdict.loss;
    e.ema = fb.verdict.ema;
    e.stddev = fb.verdict.stddev;
    e.z = fb.verdict.z;
    e.history = fb.verdict.history;
    e.threshold = config.loss_spike_zscore;
    e.window_steps = config.rollback_window_steps;
    return e;
}

EventTrigger alarm_trigger(const LossFeedback& fb) {
    return fb.verdict.kind == LossVerdict::Kind::nonfinite ? EventTrigger::nonfinite : EventTrigger::spike;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double system_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string make_run_id(double now) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "run-%.0f-%04x", now * 1000.0, unsigned(std::random_device{}() & 0xffffu));
    return buf;
}

}  // namespace

// Commands from the control socket (I/O thread) enter the same queue as everyone else's.
class Agent::ServerAdapter : public transport::ServerBackend {
  public:
    explicit ServerAdapter(Agent& agent) : agent_(agent) {}
    std::int64_t submit(const Command& command, const std::string& request_id) override {
        return agent_.enqueue(command, {}, request_id);
    }
    std::string check(const Command& command) const override { return agent_.check_command(command); }

  private:
    Agent& agent_;
};

Agent::Agent(Config config, AgentOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      commands_(std::make_unique<detail::CommandQueue>()) {
    if (auto problems = validate(config_); !problems.empty()) throw ConfigError(std::move(problems));
    // Announced in the header, hello and every snapshot. A telemetry_file need not be UTF-8 (a Linux
    // file name is bytes): each invalid byte reads as U+FFFD there instead of failing the run.
    config_json_ = to_json(config_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (!options_.clock) options_.clock = system_seconds;
    if (!options_.collector) options_.collector = make_cpu_grad_stats_collector();
    if (!options_.log && config_.log_decisions) {
        options_.log = [](const std::string& line) { std::fprintf(stderr, "[sp] %s\n", line.c_str()); };
    }
    // Before anything binds or opens: a FIFO would block the open below for good (sp/output_path.h).
    if (config_.telemetry_enabled)
        if (std::string problem = output_path_problem(config_.telemetry_file, "telemetry"); !problem.empty())
            throw std::runtime_error("telemetry: " + problem);
    run_id_ = options_.run_id.empty() ? make_run_id(now()) : options_.run_id;
    configure_data_parallel();
    // Sockets first: a refused bind must fail before the telemetry file is created.
    if (options_.server) {
        options_.server->client_requests_per_second = config_.control_requests_per_second;
        server_backend_ = std::make_unique<ServerAdapter>(*this);
        server_ = std::make_unique<transport::AgentServer>(*options_.server, *server_backend_);
    }
    if (config_.telemetry_enabled) {
        sink_ = std::make_unique<TelemetrySink>(config_.telemetry_file, options_.telemetry_queue_capacity);
    }
}

Agent::~Agent() {
    server_.reset();  // stop the I/O thread before the backend it calls goes away
}

double Agent::now() const {
    return options_.clock();
}

void Agent::use_grad_stats_collector(std::unique_ptr<GradStatsCollector> collector) {
    if (policy_) throw std::logic_error("Agent::use_grad_stats_collector: after register_blocks");
    if (!collector) throw std::invalid_argument("Agent::use_grad_stats_collector: no collector");
    options_.collector = std::move(collector);
}

void Agent::register_blocks(const std::vector<NamedModule>& modules) {
    register_blocks(blocks_from_modules(modules));
}

void Agent::register_blocks(std::vector<AgentBlock> blocks) {
    if (policy_) throw std::logic_error("Agent::register_blocks: blocks are already registered");
    blocks_ = std::move(blocks);
    policy_ = std::make_unique<Policy>(config_, layout_of(blocks_));  // ConfigError: force ids vs. layout
    stepper_ = std::make_unique<PolicyStepper>(*policy_);
    admitted_ = admitted_by_gate();
    configure_policy();
    // The runtimes' masters (HintSink::master), asked when a layer's input is seen: sinks may be added
    // after the blocks.
    profiler_ = std::make_unique<detail::DistributionProfiler>(
        config_, blocks_, [this](std::size_t block, std::size_t k) -> const at::Tensor* {
            for (const HintSink* sink : hint_sinks_)
                if (const at::Tensor* m = sink->master(block, k)) return m;
            return nullptr;
        });
    commands_->set_block_count(int(blocks_.size()));
    options_.collector->prepare(blocks_);
    if (server_) server_->set_run(run_id_, policy_->layout(), config_json_);
    hints_.precision = policy_->precisions();
    hints_.reason.assign(blocks_.size(), Reason::hold);
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        if (hints_.precision[b] != Precision::bf16) hints_.reason[b] = Reason::config;
    }
}

const CalibrationResult& Agent::calibrate(const CalibrationHooks& hooks) {
    return calibrate(hooks, options_.model_identity);
}

const CalibrationResult& Agent::calibrate(const CalibrationHooks& hooks, const std::string& model_identity) {
    if (!policy_) throw std::logic_error("Agent::calibrate: register_blocks first");
    if (step_ >= 0) throw std::logic_error("Agent::calibrate: call it before the first step");
    if (!config_.run_calibration) return calibration_;
    const std::string dir = config_.calibration_cache_dir.empty() ? default_calibration_cache_dir()
                                                                  : config_.calibration_cache_dir;
    calibration_ = sp::agent::calibrate(blocks_, hooks, config_.calibration_samples, model_identity, dir);
    policy_ = std::make_unique<Policy>(config_, layout_of(blocks_), calibration_.errors);
    stepper_ = std::make_unique<PolicyStepper>(*policy_);
    configure_policy();
    if (server_) server_->set_calibration(calibration_.errors);  // live clients learn it from `hello`
    return calibration_;
}

std::vector<FormatMask> Agent::admitted_by_gate() const {
    if (config_.format_gate_file.empty()) return {};
    const FormatGatePolicy gate = load_gate_policy(config_.format_gate_file);  // ConfigError naming the file
    std::vector<FormatMask> out;
    for (const AgentBlock& b : blocks_) {
        std::vector<TensorShape> shapes;
        for (std::size_t k = 0; k < b.params.size(); ++k) {
            const at::Tensor p = output_rows(b.params[k], b.stored_transposed(k));
            const auto n = std::uint64_t(p.numel());
            const std::uint64_t rows = p.dim() >= 2 ? std::uint64_t(p.size(0)) : 1;
            shapes.push_back({rows, rows == 0 ? 0 : n / rows});
        }
        FormatMask m = format_bit(Precision::bf16);
        for (Precision p : kLowFormatsCheapestFirst)
            if (admits_block(gate, p, shapes)) m |= format_bit(p);
        out.push_back(m);
    }
    return out;
}

void Agent::configure_policy() {
    if (!admitted_.empty()) policy_->set_admitted_formats(admitted_);
    FormatMask formats = kAllFormats;
    for (const HintSink* s : hint_sinks_) formats &= s->formats();
    policy_->set_materializable(formats);
    commands_->set_materializable(policy_->materializable());
}

void Agent::add_hint_sink(HintSink* sink) {
    if (!sink) return;
    hint_sinks_.push_back(sink);
    if (policy_) configure_policy();
}

std::string Agent::check_command(const Command& command) const {
    return commands_->check(command);
}

bool Agent::wants_layer_inputs(std::int64_t step) const {
    return profiler_ && profiler_->due(step);
}

void Agent::observe_layer_input(int block, int layer, const at::Tensor& input) {
    if (!profiler_) throw std::logic_error("Agent::observe_layer_input: register_blocks first");
    const auto t0 = Clock::now();
    profiler_->observe_input(step_, block, layer, input);
    overhead_.distribution_s += seconds_since(t0);
}

void Agent::set_precision_scope(const std::string& scope) {
    if (step_ >= 0 || header_written_)
        throw std::logic_error("Agent::set_precision_scope: set the scope before the first step");
    Config changed = config_;
    changed.precision_scope = scope;
    if (std::vector<std::string> problems = validate(changed); !problems.empty()) throw ConfigError(problems);
    config_ = std::move(changed);
    config_json_ = to_json(config_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (profiler_) profiler_->set_quantize_inputs(!config_.weights_scope());
    if (server_ && policy_) server_->set_run(run_id_, policy_->layout(), config_json_);
}

void Agent::observe_layer_output_grad(int block, int layer, const at::Tensor& grad) {
    if (!profiler_) throw std::logic_error("Agent::observe_layer_output_grad: register_blocks first");
    const auto t0 = Clock::now();
    profiler_->observe_output_grad(step_, block, layer, grad);
    overhead_.distribution_s += seconds_since(t0);
}

std::int64_t Agent::enqueue(Command command, CommandDone done, std::string request_id) {
    return commands_->push({std::move(command), std::move(done), std::move(request_id)});
}

// Every record goes to the JSONL file and, when live, to the sockets: one shared record, so one
// serialization for both.
void Agent::emit_record(SharedRecord record) {
    if (server_) server_->publish(record);
    if (sink_) sink_->push(std::move(record));
}

void Agent::publish_snapshot() {
    if (!server_) return;
    protocol::Snapshot s;
    s.step = step_;
    s.run_id = run_id_;
    s.rank = options_.server->rank;
    s.mode = policy_->mode();
    s.budget_target_pct = policy_->budget_target_pct();
    s.loss_tolerance_pct = policy_->loss_tolerance_pct();
    s.layout = policy_->layout();
    s.precision = policy_->precisions();
    s.pins = policy_->pins();
    for (int b = 0; b < policy_->block_count(); ++b) {
        s.pin_until.push_back(policy_->pin_expires_at(b));
        s.pin_release_on_spike.push_back(policy_->pin_releases_on_spike(b));
    }
    s.config_json = config_json_;
    server_->update_snapshot(std::move(s), last_record_);  // its line, as published
}

void Agent::write_header_once() {
    if (header_written_) return;
    header_written_ = true;
    if (!sink_) return;  // the sockets announce the run in `hello` instead
    RunHeader h;
    h.run_id = run_id_;
    h.producer = options_.producer;
    h.blocks = policy_->layout();
    h.config_json = config_json_;
    h.calibration_errors = calibration_.errors;
    // What bounds the routing besides the policy, so that a re-simulation bounds it alike.
    if (!admitted_.empty() || policy_->materializable() != kAllFormats) {
        for (std::size_t b = 0; b < blocks_.size(); ++b)
            h.admitted_formats.push_back(policy_->admitted_formats()[b] & policy_->materializable());
    }
    sink_->push(std::move(h));
}

void Agent::emit_event(std::int64_t step, EventPayload payload) {
    if (!sink_ && !server_) return;
    emit_record(make_event(step, now(), std::move(payload)));
}

void Agent::log_change(std::int64_t step, const PrecisionChange& c) {
    emit_event(step, PrecisionChangePayload{c.block_id, blocks_[std::size_t(c.block_id)].name, c.from, c.to,
                                            std::string(to_string(c.reason))});
    hints_.reason[std::size_t(c.block_id)] = c.reason;
    if (options_.log) {
        options_.log("step " + std::to_string(step) + ": " + blocks_[std::size_t(c.block_id)].name + " " +
                     std::string(to_string(c.from)) + " -> " + std::string(to_string(c.to)) + " (" +
                     std::string(to_string(c.reason)) + ")");
    }
}

void Agent::begin_step(std::int64_t step) {
    if (!policy_) throw std::logic_error("Agent::begin_step: register_blocks first");
    if (ended_) throw std::logic_error("Agent::begin_step: the run has ended (end_run was called)");
    const auto t0 = Clock::now();
    write_header_once();
    step_ = step;
    if (server_) server_->set_step(step);
    publish_telemetry_health();
    const bool pins_expired = expire_pins(step);
    const double collectives_before = overhead_.collectives_s;
    // Data-parallel: rank 0's commands, on every rank at this boundary (a follower's own are refused).
    const std::vector<CommandItem> applying = exchange_commands(step, commands_->take_at_boundary(step));
    for (const auto& [command, done, request_id] : applying) {
        const CommandOutcome outcome = stepper_->apply(command);
        CommandEventPayload payload;
        payload.command = command;
        payload.ok = outcome.ok;
        if (!request_id.empty()) payload.id = request_id;  // the control request's id (PROTOCOL.md 4.3)
        if (outcome.ok) {
            payload.changes = outcome.changes.size();
        } else {
            payload.error = outcome.error;
        }
        emit_event(step, std::move(payload));
        for (const PrecisionChange& c : outcome.changes) log_change(step, c);
        if (!outcome.ok && options_.log)
            options_.log("step " + std::to_string(step) + ": command rejected: " + outcome.error);
        if (done) done(outcome, step);
    }
    const bool commands_applied = !applying.empty() || pins_expired;
    hints_.precision = policy_->precisions();
    if (commands_applied || !last_record_) publish_snapshot();  // late joiners see the run from its start
    overhead_.step_bookkeeping_s += seconds_since(t0) - (overhead_.collectives_s - collectives_before);
}

void Agent::collect_block_grad_stats() {
    const auto t0 = Clock::now();
    options_.collector->collect();
    overhead_.collect_s += seconds_since(t0);
}

const PrecisionHints& Agent::compute_hints(std::int64_t step) {
    const auto t0 = Clock::now();
    const double collectives_before = overhead_.collectives_s;
    if (!policy_) throw std::logic_error("Agent::compute_hints: register_blocks first");
    // Checked before anything runs (the collector, a collective): a refused call changes nothing.
    if (!stepper_->in_step() || stepper_->step() != step || stepper_->updated())
        throw std::logic_error("Agent::compute_hints(" + std::to_string(step) + "): call begin_step(" +
                               std::to_string(step) + ") first, and compute_hints once per step");
    stats_ = options_.collector->results();  // a GPU collector waits for its event here, not earlier
    share_statistics(step);                  // sharded: every rank's slices, merged
    for (const BlockGradStats& s : stats_) stepper_->observe(s);
    step_snr_.clear();
    step_loss_estimates_.clear();
    double profiling_s = 0;
    if (profiler_->due(step)) {
        const auto td = Clock::now();
        step_snr_ = profiler_->finish(step);
        step_loss_estimates_ = profiler_->loss_estimates();
        for (const BlockSnr& s : step_snr_) stepper_->observe_snr(s);
        for (const BlockLossEstimate& e : step_loss_estimates_) stepper_->observe_loss_estimate(e);
        profiling_s = seconds_since(td);
        overhead_.distribution_s += profiling_s;
    }
    step_timestamp_ = now();
    stats_pending_ = (sink_ || server_) && config_.telemetry_every_step;
    const UpdateRecord* rec = stepper_->update(step_timestamp_);
    hints_.step = step;
    hints_.updated = rec != nullptr;
    if (rec) {
        for (const BlockDetail& d : rec->block_details) hints_.reason[std::size_t(d.id)] = d.reason;
        for (const PrecisionChange& c : policy_->last_changes()) log_change(step, c);
    }
    exchange_map(step);  // data-parallel: rank 0's map on every rank (a follower's record amended)
    if (rec) pending_record_ = *rec;
    hints_.precision = policy_->precisions();
    overhead_.hints_s += seconds_since(t0) - profiling_s - (overhead_.collectives_s - collectives_before);
    for (HintSink* sink : hint_sinks_) sink->on_hints(hints_);  // the runtime's time is not the agent's
    return hints_;
}

void Agent::record_transfer(std::uint64_t bytes_copied, std::uint64_t bytes_bf16) {
    transfer_ = std::make_pair(bytes_copied, bytes_bf16);
}

void Agent::record_eval_loss(double loss) {
    eval_loss_ = loss;
    eval_step_.reset();  // telemetry then reads it as the record's own step
}

void Agent::record_eval_loss(double loss, std::int64_t step) {
    eval_loss_ = loss;
    eval_step_ = step;
}

void Agent::end_step(double loss) {
    // Checked before anything is written or reduced: a refused call changes nothing.
    if (policy_ && step_ >= 0 && !stepper_->updated())
        throw std::logic_error("Agent::end_step at step " + std::to_string(step_) +
                               ": compute_hints first (once per step, after begin_step)");
    const auto t0 = Clock::now();
    const double collectives_before = overhead_.collectives_s;
    loss = reduce_loss(loss);  // data-parallel: the job's loss, the same on every rank
    // The step's statistics line carries its loss, so a re-simulation replays the loss feedback too.
    // Written before the update record, as the policy saw them: statistics first.
    if (stats_pending_)
        emit_record(StepStatsRecord{step_, step_timestamp_, stats_, loss, step_snr_, step_loss_estimates_});
    stats_pending_ = false;
    if (pending_record_) {
        UpdateRecord& r = *pending_record_;
        r.train_loss = loss;
        r.eval_loss = eval_loss_;  // the held-out loss measured since the previous record, if any
        r.eval_step = eval_loss_ ? eval_step_ : std::nullopt;
        eval_loss_.reset();
        eval_step_.reset();
        if (transfer_ && transfer_->second > 0) {
            r.measured_bandwidth_saving_pct =
                100.0 * (1.0 - double(transfer_->first) / double(transfer_->second));
        }
        last_record_ = share_record(std::move(r));
        emit_record(last_record_);
        pending_record_.reset();
        publish_snapshot();
    }
    transfer_.reset();
    apply_loss_feedback(loss);
    ++overhead_.steps;
    overhead_.step_bookkeeping_s += seconds_since(t0) - (overhead_.collectives_s - collectives_before);
}

void Agent::end_run(std::string reason) {
    if (ended_) throw std::logic_error("Agent::end_run: called twice");
    ended_ = true;
    if (policy_) write_header_once();  // a run that ended before its first step still says so
    emit_record(make_run_end_event({step_, std::move(reason)}, now()));
}

// A pin's for_steps ran out (POLICY.md rule 20): a pin_release event, before the step's commands.
bool Agent::expire_pins(std::int64_t step) {
    const PinExpiry& expiry = stepper_->begin(step);
    if (expiry.blocks.empty()) return false;
    emit_pin_release(step, expiry.blocks, nullptr);
    for (const PrecisionChange& c : expiry.changes) log_change(step, c);
    return true;
}

void Agent::emit_pin_release(std::int64_t step, const std::vector<int>& released, const LossFeedback* alarm) {
    PinReleasePayload payload;
    if (alarm) {
        payload.trigger = alarm_trigger(*alarm);
        payload.evidence = alarm_evidence(*alarm, config_);
        payload.cooldown_until = alarm->cooldown_until;
    }
    payload.blocks = released;
    for (int b : released) payload.names.push_back(blocks_[std::size_t(b)].name);
    const std::string_view trigger = to_string(payload.trigger);
    emit_event(step, std::move(payload));
    if (options_.log) {
        options_.log("step " + std::to_string(step) + ": " + std::to_string(released.size()) +
                     " pin(s) released (" + std::string(trigger) + ")");
    }
}

// After the step's record: a rollback changes the map the *next* step runs with, and its
// precision_change events, like those of a command, fall between two update records.
void Agent::apply_loss_feedback(double loss) {
    if (step_ < 0) return;
    // Judged even with rollback off: a pin given release_on_spike listens to the same detector.
    const LossFeedback& fb = stepper_->end(loss);
    if (!fb.alarm()) return;
    const bool nonfinite = fb.verdict.kind == LossVerdict::Kind::nonfinite;
    std::string what = nonfinite ? "non-finite loss" : "loss spike";
    what += " (loss " + std::to_string(fb.verdict.loss) + ", EMA " + std::to_string(fb.verdict.ema) + ", z " +
            std::to_string(fb.verdict.z) + ")";
    if (!fb.released_pins.empty()) emit_pin_release(step_, fb.released_pins, &fb);
    if (!config_.rollback_enabled || (!fb.rolled_back() && !fb.released_pins.empty())) {
        // The released pins' event says what the alarm did; with rollback off nothing else happens.
        if (!fb.released_pins.empty()) publish_loss_feedback(fb);
        return;
    }
    if (!fb.rolled_back()) {
        // No recent switch to blame: the spike is the data's or the optimizer's, not the routing's.
        emit_event(step_, LossSpikePayload{alarm_trigger(fb), alarm_evidence(fb, config_)});
        if (options_.log)
            options_.log("step " + std::to_string(step_) + ": " + what +
                         ", no recent switch: nothing rolled back");
        return;
    }
    RollbackPayload payload{
        alarm_trigger(fb), alarm_evidence(fb, config_), fb.suspects, {}, fb.cooldown_until};
    for (int b : fb.suspects) payload.names.push_back(blocks_[std::size_t(b)].name);
    ++rollbacks_;
    emit_event(step_, std::move(payload));
    if (options_.log)
        options_.log("step " + std::to_string(step_) + ": " + what + ": rolling back " +
                     std::to_string(fb.suspects.size()) + " block(s) to bf16 until step " +
                     std::to_string(fb.cooldown_until));
    publish_loss_feedback(fb);
}

// The map a rollback or a spike release changed, to the runtime before the next step.
void Agent::publish_loss_feedback(const LossFeedback& fb) {
    for (const PrecisionChange& c : fb.changes) log_change(step_, c);
    hints_.precision = policy_->precisions();
    hints_.updated = false;
    for (HintSink* sink : hint_sinks_) sink->on_hints(hints_);  // materialized before the next step
    publish_snapshot();
}

std::string Agent::telemetry_file() const {
    return sink_ ? sink_->path() : std::string();
}

Agent::TelemetryLoss Agent::telemetry_loss() const {
    if (!sink_) return {};
    sink_->drain();
    const TelemetrySink::Health h = sink_->health();
    return TelemetryLoss{h.offered, h.lost, h.lost_to_errors, sink_->error()};
}

// The file cannot say that it is failing, so the wire does: a telemetry_loss event when writes
// start failing, again every few seconds while they fail (for clients that join later), and when
// they work again (agent/PROTOCOL.md).
void Agent::publish_telemetry_health() {
    if (!server_ || !sink_) return;
    constexpr double kRepeatSeconds = 5.0;
    const TelemetrySink::Health h = sink_->health();
    const double t = now();
    const bool repeat = h.failing && t - sink_failing_published_at_ >= kRepeatSeconds;
    if (h.failing == sink_failing_published_ && !repeat) return;
    sink_failing_published_ = h.failing;
    sink_failing_published_at_ = t;
    TelemetryLossPayload payload{sink_->path(), h.failing, h.lost, h.lost_to_errors, h.offered, std::nullopt};
    if (h.failing) payload.error = h.error;
    server_->publish(make_event(step_, t, std::move(payload)));
}

}  // namespace sp::agent
