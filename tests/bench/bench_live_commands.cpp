// Command round trip against a real agent (sp::agent::Agent with its ZeroMQ server on ipc://):
// request -> ack (the I/O thread answers at once) and request -> applied (the `command` event the
// agent publishes when the next step boundary applies it). A training thread runs steps of a fixed
// emulated duration, so "applied" includes the wait for the next boundary. Each request here is sent
// right after the previous one was applied, i.e. just after a boundary, so "applied" is about one
// step: the worst case. Printed: median and p99 in microseconds, per emulated step time.
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "sp/agent/agent.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double us_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, std::size_t(p * double(v.size())))];
}

void measure(double step_ms, int requests) {
    const std::string dir =
        std::filesystem::temp_directory_path() / ("sp-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    sp::Config config;
    config.telemetry_enabled = false;
    config.log_decisions = false;
    config.run_calibration = false;
    sp::agent::AgentOptions options;
    sp::transport::ServerOptions server;
    server.telemetry_endpoint = "ipc://" + dir + "/pub";
    server.control_endpoint = "ipc://" + dir + "/ctl";
    options.server = server;
    sp::agent::Agent agent(config, std::move(options));
    std::vector<torch::nn::Linear> blocks;
    std::vector<sp::agent::NamedModule> named;
    blocks.reserve(4);
    named.reserve(4);
    for (int i = 0; i < 4; ++i) blocks.emplace_back(torch::nn::LinearOptions(16, 16));
    for (int i = 0; i < 4; ++i)
        named.emplace_back("blocks." + std::to_string(i), blocks[std::size_t(i)].get());
    agent.register_blocks(named);

    std::atomic<bool> stop{false};
    std::thread training([&] {
        for (std::int64_t step = 0; !stop; ++step) {
            const auto t0 = Clock::now();
            agent.begin_step(step);
            for (auto& b : blocks)
                for (auto& p : b->parameters()) p.mutable_grad() = torch::ones_like(p);
            agent.collect_block_grad_stats();
            agent.compute_hints(step);
            agent.end_step(1.0);
            std::this_thread::sleep_until(t0 + std::chrono::duration<double, std::milli>(step_ms));
        }
    });

    zmq::context_t ctx;
    zmq::socket_t sub(ctx, zmq::socket_type::sub);
    sub.set(zmq::sockopt::subscribe, "event");
    sub.connect(server.telemetry_endpoint);
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(server.control_endpoint);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the SUB join before measuring

    std::vector<double> ack_us, applied_us;
    for (int i = 0; i < requests; ++i) {
        const std::string id = "b" + std::to_string(i);
        const json req = i % 2 ? json{{"id", id}, {"cmd", "release"}, {"blocks", {1}}}
                               : json{{"id", id}, {"cmd", "pin"}, {"blocks", {1}}, {"precision", "int8"}};
        const auto t0 = Clock::now();
        dealer.send(zmq::buffer(req.dump()), zmq::send_flags::none);
        zmq::message_t reply;
        zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
        if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) == 0 || !dealer.recv(reply)) break;
        ack_us.push_back(us_since(t0));
        for (;;) {
            zmq::pollitem_t ev{sub.handle(), 0, ZMQ_POLLIN, 0};
            if (zmq::poll(&ev, 1, std::chrono::milliseconds(5000)) == 0) break;
            zmq::message_t topic, body;
            if (!sub.recv(topic) || !sub.recv(body)) break;
            const json e = json::parse(body.to_string());
            if (e.value("kind", "") == "command" && e.value("id", "") == id) {
                applied_us.push_back(us_since(t0));
                break;
            }
        }
    }
    stop = true;
    training.join();
    std::filesystem::remove_all(dir);
    if (ack_us.empty() || applied_us.empty()) {
        std::printf("%8.1f  no replies\n", step_ms);
        return;
    }
    std::printf("%8.1f %6zu %12.0f %10.0f %14.0f %10.0f\n", step_ms, ack_us.size(), percentile(ack_us, 0.5),
                percentile(ack_us, 0.99), percentile(applied_us, 0.5), percentile(applied_us, 0.99));
}

}  // namespace

int main() {
    std::printf("command round trip on ipc:// against a real agent (microseconds)\n");
    std::printf("%8s %6s %12s %10s %14s %10s\n", "step ms", "n", "ack median", "ack p99", "applied median",
                "applied p99");
    measure(1.0, 400);
    measure(10.0, 200);
    return 0;
}
