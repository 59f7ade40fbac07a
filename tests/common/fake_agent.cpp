#include "fake_agent.h"

#include <chrono>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

namespace sp::test {
namespace protocol = sp::protocol;

sp::UpdateRecord make_update(int blocks, std::int64_t step, double timestamp) {
    sp::UpdateRecord r;
    r.step_id = step;
    r.timestamp = timestamp + double(step) * 0.1;
    for (int i = 0; i < blocks; ++i) {
        sp::BlockDetail d;
        d.id = i;
        d.precision = (i + step) % 2 == 0 ? sp::Precision::int8 : sp::Precision::bf16;
        d.sensitivity = 0.01 * double(i + 1) + 0.001 * double(step % 10);
        d.grad_score = d.sensitivity;
        d.error_score = 0.5;
        d.relative_magnitude = 1.0;
        d.l2_norm = 1.0 + 0.1 * i;
        d.max_abs = 0.02;
        d.variance = 1e-6;
        d.mean = 0.0;
        d.reason = sp::Reason::policy;
        d.window = 8;
        if (d.precision == sp::Precision::int8)
            ++r.blocks_int8;
        else
            ++r.blocks_bf16;
        r.block_details.push_back(d);
    }
    r.mean_sensitivity = 0.02;
    r.max_sensitivity = 0.04;
    r.min_sensitivity = 0.01;
    r.estimated_bandwidth_saving_pct = 25.0;
    r.mode = sp::Mode::dynamic;
    return r;
}

FakeAgent::FakeAgent(const std::string& dir, Options options)
    : telemetry_("ipc://" + dir + "/telemetry.sock"),
      control_("ipc://" + dir + "/control.sock"),
      options_(std::move(options)) {
    layout_ = sp::uniform_layout(options_.blocks, 4u << 20);
}

FakeAgent::~FakeAgent() {
    stop();
}

double FakeAgent::now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void FakeAgent::start(const std::string& run_id) {
    stop();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ctx_.emplace(1);
        pub_.emplace(*ctx_, zmq::socket_type::pub);
        router_.emplace(*ctx_, zmq::socket_type::router);
        for (zmq::socket_t* s : {&*pub_, &*router_}) {
            s->set(zmq::sockopt::linger, 0);
            if (!options_.curve_secret_key.empty()) {
                s->set(zmq::sockopt::curve_server, 1);
                s->set(zmq::sockopt::curve_secretkey, options_.curve_secret_key);
            }
        }
        pub_->bind(telemetry_);
        router_->bind(control_);
        run_id_ = run_id;
        seq_ = 0;
        step_ = 0;
        precision_.assign(layout_.size(), sp::Precision::bf16);
        pins_.assign(layout_.size(), std::nullopt);
        pin_until_.assign(layout_.size(), std::nullopt);
        pin_on_spike_.assign(layout_.size(), false);
        last_update_.reset();
        requests_.clear();
        parsed_requests_.clear();
    }
    snapshot_requests_ = 0;
    stop_ = false;
    if (options_.hello_at_start) publish_hello();
    thread_ = std::thread([this] { run(); });
}

void FakeAgent::stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    pub_.reset();
    router_.reset();
    ctx_.reset();
}

std::uint64_t FakeAgent::next_seq() {
    return ++seq_;
}

void FakeAgent::set_calibration(std::vector<double> errors) {
    std::lock_guard<std::mutex> lock(mutex_);
    calibration_errors_ = std::move(errors);
}

void FakeAgent::publish_hello() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pub_) return;
    const std::string body = protocol::hello(next_seq(), run_id_, 0, layout_, "{\"mode\":\"dynamic\"}", now(),
                                             calibration_errors_);
    pub_->send(zmq::buffer(std::string("hello")), zmq::send_flags::sndmore);
    pub_->send(zmq::buffer(body), zmq::send_flags::none);
}

void FakeAgent::publish_heartbeat() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pub_) return;
    const std::string body = protocol::heartbeat(next_seq(), step_, now());
    pub_->send(zmq::buffer(std::string("heartbeat")), zmq::send_flags::sndmore);
    pub_->send(zmq::buffer(body), zmq::send_flags::none);
}

void FakeAgent::publish_update(const sp::UpdateRecord& r) {
    const std::string line = sp::to_json_line(r);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pub_) return;
    last_update_ = r;
    step_ = r.step_id;
    for (const sp::BlockDetail& d : r.block_details) {
        if (d.id >= 0 && std::size_t(d.id) < precision_.size()) precision_[std::size_t(d.id)] = d.precision;
    }
    const std::string body = protocol::with_seq(line, next_seq());
    pub_->send(zmq::buffer(std::string("update")), zmq::send_flags::sndmore);
    pub_->send(zmq::buffer(body), zmq::send_flags::none);
}

void FakeAgent::publish_event(const sp::EventRecord& e) {
    const std::string line = sp::to_json_line(e);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pub_) return;
    const std::string body = protocol::with_seq(line, next_seq());
    pub_->send(zmq::buffer(std::string("event")), zmq::send_flags::sndmore);
    pub_->send(zmq::buffer(body), zmq::send_flags::none);
}

void FakeAgent::publish_raw(const std::string& topic, const std::string& body, bool takes_seq) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pub_) return;
    pub_->send(zmq::buffer(topic), zmq::send_flags::sndmore);
    pub_->send(zmq::buffer(takes_seq ? protocol::with_seq(body, next_seq()) : body), zmq::send_flags::none);
}

void FakeAgent::skip_seqs(std::uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    seq_ += n;
}

std::uint64_t FakeAgent::last_seq() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return seq_;
}

std::int64_t FakeAgent::step() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return step_;
}

void FakeAgent::set_command_behaviour(CommandBehaviour b, std::string reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    behaviour_ = b;
    reject_reason_ = std::move(reason);
}

void FakeAgent::set_snapshot_hooks(std::function<void()> before, std::function<void()> after) {
    std::lock_guard<std::mutex> lock(mutex_);
    before_snapshot_ = std::move(before);
    after_snapshot_ = std::move(after);
}

std::vector<std::string> FakeAgent::requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
}

std::vector<sp::protocol::Request> FakeAgent::parsed_requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return parsed_requests_;
}

std::optional<sp::Precision> FakeAgent::pin_of(int block) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return block >= 0 && std::size_t(block) < pins_.size() ? pins_[std::size_t(block)] : std::nullopt;
}

void FakeAgent::run() {
    using Clock = std::chrono::steady_clock;
    auto next_heartbeat = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
    auto next_hello = Clock::now() + std::chrono::milliseconds(options_.hello_ms);
    auto next_tick = Clock::now() + std::chrono::milliseconds(options_.tick_ms);
    while (!stop_) {
        zmq_pollitem_t item{router_->handle(), 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 5);
        if (item.revents & ZMQ_POLLIN) {
            std::vector<zmq::message_t> frames;
            do {
                frames.emplace_back();
                if (!router_->recv(frames.back(), zmq::recv_flags::dontwait)) break;
            } while (frames.back().more());
            if (frames.size() >= 2) handle(frames);
        }
        const auto t = Clock::now();
        if (options_.heartbeat_ms > 0 && t >= next_heartbeat) {
            publish_heartbeat();
            next_heartbeat = t + std::chrono::milliseconds(options_.heartbeat_ms);
        }
        if (options_.hello_ms > 0 && t >= next_hello) {
            publish_hello();
            next_hello = t + std::chrono::milliseconds(options_.hello_ms);
        }
        if (options_.tick_ms > 0 && options_.on_tick && t >= next_tick) {
            options_.on_tick(*this);
            next_tick = t + std::chrono::milliseconds(options_.tick_ms);
        }
    }
}

void FakeAgent::handle(std::vector<zmq::message_t>& frames) {
    const std::string text = frames.back().to_string();
    auto reply = [this, &frames](const std::string& body) {
        // The envelope (identity, and a REQ client's empty delimiter) goes back as it came.
        for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
            router_->send(zmq::buffer(frames[i].data(), frames[i].size()), zmq::send_flags::sndmore);
        }
        router_->send(zmq::buffer(body), zmq::send_flags::none);
    };
    {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(text);
    }
    auto parsed = protocol::parse_request(text, options_.blocks);
    if (auto* e = std::get_if<protocol::RequestError>(&parsed)) {
        reply(protocol::reject(*e));
        return;
    }
    const protocol::Request& r = std::get<protocol::Request>(parsed);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        parsed_requests_.push_back(r);
    }
    if (r.kind == protocol::Request::Kind::ping) {
        reply(protocol::pong(r, step(), now()));
        return;
    }
    if (r.kind == protocol::Request::Kind::snapshot) {
        ++snapshot_requests_;
        std::function<void()> before, after;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            before = before_snapshot_;
            after = after_snapshot_;
        }
        if (before) before();
        protocol::Snapshot s;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            s.seq = seq_;
            s.step = step_;
            s.run_id = run_id_;
            s.layout = layout_;
            s.precision = precision_;
            s.pins = pins_;
            s.pin_until = pin_until_;
            s.pin_release_on_spike = pin_on_spike_;
            s.config_json = "{\"mode\":\"dynamic\"}";
            s.budget_target_pct = 50.0;
            s.last_update = last_update_;
        }
        if (after) after();
        reply(protocol::snapshot_reply(r, s));
        return;
    }
    CommandBehaviour behaviour;
    std::string reason;
    std::int64_t step_now;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        behaviour = behaviour_;
        reason = reject_reason_;
        step_now = step_;
    }
    if (behaviour == CommandBehaviour::silent) return;
    if (behaviour == CommandBehaviour::reject) {
        reply(protocol::reject(r.id, reason));
        return;
    }
    reply(protocol::ack(r, step_now + 1));
    // Applied at the next boundary: the pins change and a "command" event names the request.
    sp::CommandEventPayload payload{r.command, true, r.id, std::nullopt, std::nullopt};
    if (behaviour == CommandBehaviour::fail_at_apply) {
        payload.ok = false;
        payload.error = reason;
        publish_event(sp::make_event(step_now + 1, now(), std::move(payload)));
        return;
    }
    int changes = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const sp::Command& c = r.command;
        for (int b : c.blocks) {
            if (c.kind == sp::Command::Kind::pin) {
                pins_[std::size_t(b)] = c.precision;
                // The terms as the real agent keeps them: a lifetime from the step it applied at.
                pin_until_[std::size_t(b)] =
                    c.for_steps > 0 ? std::optional<std::int64_t>(step_now + 1 + c.for_steps) : std::nullopt;
                pin_on_spike_[std::size_t(b)] = c.release_on_spike;
                ++changes;
            } else if (c.kind == sp::Command::Kind::release && pins_[std::size_t(b)]) {
                pins_[std::size_t(b)].reset();
                ++changes;
            }
        }
        if (c.kind == sp::Command::Kind::release_all) {
            for (auto& p : pins_) {
                if (p) ++changes;
                p.reset();
            }
        }
    }
    payload.changes = std::uint64_t(changes);
    publish_event(sp::make_event(step_now + 1, now(), std::move(payload)));
}

}  // namespace sp::test
