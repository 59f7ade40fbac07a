#include "command_watch.h"

#include <charconv>
#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "sp/json_input.h"
#include "sp/run_end.h"

namespace sp::ctl {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A field of a message from the network, read without throwing on a type other than expected.
std::string string_field(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::int64_t integer_field(const nlohmann::json& j, const char* key, std::int64_t fallback) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

}  // namespace

std::optional<std::string> telemetry_beside(const std::string& control_endpoint) {
    const std::string_view tcp = "tcp://";
    const std::size_t colon = control_endpoint.rfind(':');
    if (control_endpoint.rfind(tcp, 0) != 0 || colon == std::string::npos || colon < tcp.size())
        return std::nullopt;
    const char* first = control_endpoint.data() + colon + 1;
    const char* last = control_endpoint.data() + control_endpoint.size();
    int port = 0;
    const auto [ptr, ec] = std::from_chars(first, last, port);
    if (ec != std::errc() || ptr != last || port < 2 || port > 65535) return std::nullopt;
    return control_endpoint.substr(0, colon + 1) + std::to_string(port - 1);
}

bool CommandWatch::open(const Connection& telemetry, std::string& error) {
    HandshakeMonitor monitor;
    try {
        sub_.emplace(open_socket(ctx_, zmq::socket_type::sub, telemetry, &monitor));
        sub_->set(zmq::sockopt::subscribe, protocol::to_string(protocol::Topic::event));
        sub_->set(zmq::sockopt::subscribe, protocol::to_string(protocol::Topic::heartbeat));
    } catch (const zmq::error_t& e) {
        error = "cannot connect to the telemetry endpoint '" + telemetry.endpoint + "': " + e.what();
        return false;
    }
    const auto deadline = after(*telemetry.timeout_s);
    while (Clock::now() < deadline) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        zmq_pollitem_t items[] = {{sub_->handle(), 0, ZMQ_POLLIN, 0}, monitor.poll_item()};
        if (zmq_poll(items, 2, long(std::max<long long>(left.count(), 1))) <= 0) continue;
        if (items[1].revents & ZMQ_POLLIN) {
            const std::string refusal = monitor.read(telemetry.endpoint);
            if (!refusal.empty()) {
                error = refusal;
                return false;
            }
        }
        if (items[0].revents & ZMQ_POLLIN) return true;  // subscribed: what follows cannot be missed
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", *telemetry.timeout_s);
    error = "nothing from the telemetry endpoint " + telemetry.endpoint + " within " + seconds +
            " s, so the command's outcome cannot be followed (" +
            (monitor.hint().empty() ? std::string("check --telemetry-endpoint") : monitor.hint()) +
            "; --no-wait sends it without following)";
    return false;
}

std::optional<std::string> CommandWatch::next(Clock::time_point deadline, std::string& topic) {
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return std::nullopt;
        zmq_pollitem_t item = {sub_->handle(), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, long(left.count())) <= 0) continue;
        std::vector<zmq::message_t> frames;
        do {
            frames.emplace_back();
            if (!sub_->recv(frames.back(), zmq::recv_flags::dontwait)) break;
        } while (frames.back().more());
        if (frames.size() != 2) continue;  // not a topic and a body: noise
        topic = frames[0].to_string();
        return frames[1].to_string();
    }
}

CommandWatch::Outcome CommandWatch::wait(const std::string& id, double seconds) {
    const auto deadline = after(seconds);
    std::string topic;
    while (const std::optional<std::string> body = next(deadline, topic)) {
        if (topic != protocol::to_string(protocol::Topic::event)) continue;
        nlohmann::json e;
        JsonError bad;
        if (!parse_json(*body, e, bad) || !e.is_object()) continue;
        const std::string kind = string_field(e, "kind");
        Outcome out;
        out.step = integer_field(e, "step", -1);
        out.event = *body;
        if (kind == kRunEndKind) {
            out.kind = Outcome::Kind::run_ended;
            out.error = string_field(e, "reason");
            return out;
        }
        if (kind != "command" || string_field(e, "id") != id) continue;
        const auto ok = e.find("ok");
        if (ok != e.end() && ok->is_boolean() && ok->get<bool>()) {
            out.kind = Outcome::Kind::applied;
            out.changes = integer_field(e, "changes", 0);
        } else {
            out.kind = Outcome::Kind::rejected;
            out.error = string_field(e, "error");
            if (out.error.empty()) out.error = "no reason given";
        }
        return out;
    }
    return Outcome{};
}

}  // namespace sp::ctl
