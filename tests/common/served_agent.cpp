#include "served_agent.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "agent_server.h"
#include "fake_agent.h"  // make_update

namespace sp::test {

// The server's view of the training loop: accepted commands wait for the next step boundary.
class ServedAgent::Backend : public sp::transport::ServerBackend {
  public:
    explicit Backend(ServedAgent& agent) : agent_(agent) {}
    std::int64_t submit(const sp::Command& command, const std::string& request_id) override {
        std::lock_guard<std::mutex> lock(agent_.mutex_);
        const std::int64_t effective = agent_.state_.step + 1;
        agent_.pending_.push_back({request_id, command, effective});
        agent_.submitted_.emplace_back(request_id, command);
        return effective;
    }

  private:
    ServedAgent& agent_;
};

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

ServedAgent::ServedAgent(const std::string& dir, Options options)
    : telemetry_("ipc://" + dir + "/served-tel"),
      control_("ipc://" + dir + "/served-ctl"),
      options_(std::move(options)) {}

ServedAgent::~ServedAgent() {
    stop();
}

void ServedAgent::start(const std::string& run_id) {
    stop();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        state_ = {};
        state_.run_id = run_id;
        state_.rank = options_.rank;
        for (int i = 0; i < options_.blocks; ++i)
            state_.layout.push_back({i, "blocks." + std::to_string(i), std::uint64_t(1) << 20});
        const auto n = std::size_t(options_.blocks);
        state_.precision.assign(n, sp::Precision::bf16);
        state_.pins.assign(n, std::nullopt);
        state_.pin_until.assign(n, std::nullopt);
        state_.pin_release_on_spike.assign(n, false);
        state_.config_json = "{\"mode\":\"dynamic\"}";
        state_.budget_target_pct = 50.0;
        pending_.clear();
        submitted_.clear();
    }
    sp::transport::ServerOptions so;
    so.telemetry_endpoint = telemetry_;
    so.control_endpoint = control_;
    so.server_secret_key_file = options_.server_secret_key_file;
    so.allowed_clients_file = options_.allowed_clients_file;
    so.heartbeat_interval_s = options_.heartbeat_interval_s;
    so.hello_interval_s = options_.hello_interval_s;
    so.rank = options_.rank;
    so.log = [](const std::string&) {};
    backend_ = std::make_unique<Backend>(*this);
    server_ = std::make_unique<sp::transport::AgentServer>(so, *backend_);
    std::lock_guard<std::mutex> lock(mutex_);
    server_->set_run(run_id, state_.layout, state_.config_json);
    server_->update_snapshot(state_);
}

void ServedAgent::stop() {
    server_.reset();  // joins the I/O thread, which is the only caller of the backend
    backend_.reset();
}

bool ServedAgent::running() const {
    return server_ != nullptr;
}

void ServedAgent::publish_update(std::int64_t step) {
    publish_update(make_update(options_.blocks, step));
}

void ServedAgent::publish_update(sp::UpdateRecord r) {
    std::lock_guard<std::mutex> lock(mutex_);
    apply_pending();
    state_.step = r.step_id;
    for (const sp::BlockDetail& d : r.block_details)
        if (d.id >= 0 && std::size_t(d.id) < state_.precision.size())
            state_.precision[std::size_t(d.id)] = d.precision;
    state_.last_update = r;
    server_->set_step(state_.step);
    server_->publish(std::move(r));
    server_->update_snapshot(state_);
}

void ServedAgent::publish_event(const sp::EventRecord& e) {
    server_->publish(e);
}

void ServedAgent::set_calibration(std::vector<double> errors) {
    server_->set_calibration(std::move(errors));
}

std::optional<sp::Precision> ServedAgent::pin_of(int block) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_.pins.at(std::size_t(block));
}

std::vector<std::pair<std::string, sp::Command>> ServedAgent::submitted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return submitted_;
}

void ServedAgent::apply_pending() {
    for (const auto& [id, c, step] : pending_) {
        int changes = 0;
        for (int b : c.blocks) {
            const auto i = std::size_t(b);
            if (c.kind == sp::Command::Kind::pin) {
                state_.pins[i] = c.precision;
                state_.pin_until[i] =
                    c.for_steps > 0 ? std::optional<std::int64_t>(step + c.for_steps) : std::nullopt;
                state_.pin_release_on_spike[i] = c.release_on_spike;
                ++changes;
            } else if (c.kind == sp::Command::Kind::release && state_.pins[i]) {
                state_.pins[i].reset();
                ++changes;
            }
        }
        if (c.kind == sp::Command::Kind::release_all) {
            for (auto& p : state_.pins) {
                if (p) ++changes;
                p.reset();
            }
        }
        server_->publish(sp::make_event(
            step, now(), sp::CommandEventPayload{c, true, id, std::uint64_t(changes), std::nullopt}));
    }
    pending_.clear();
}

}  // namespace sp::test
