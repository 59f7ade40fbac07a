// Telemetry throughput and command latency of the agent's ZeroMQ server, in one process.
//
// Throughput: N UpdateRecords (48 or 1,000 blocks, full block_details) pushed by publish() while a
// SUB on another thread counts receipts; pushed/s is the producer's rate (queueing only), received/s
// covers serialisation + seq splice + the socket. Baseline: to_json_line of the same records alone,
// in the same process; the ratio says how close the wire path gets to bare serialisation.
// Latency: request -> reply over a DEALER, 1,000 pings and 1,000 pins against a fake backend.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>
#include <zmq.hpp>

#include "agent_server.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace tr = sp::transport;

struct Backend : tr::ServerBackend {
    std::int64_t submit(const sp::Command&, const std::string&) override { return 42; }
};

sp::UpdateRecord make_update(std::int64_t step, int blocks) {
    sp::UpdateRecord r;
    r.step_id = step;
    r.timestamp = 1717243260.25 + double(step);
    for (int i = 0; i < blocks; ++i) {
        sp::BlockDetail d;
        d.id = i;
        d.precision = i % 2 ? sp::Precision::int8 : sp::Precision::bf16;
        d.sensitivity = 0.001 * i;
        d.grad_score = 0.5;
        d.error_score = 0.25;
        d.relative_magnitude = 1.0 / (1 + i);
        d.l2_norm = 1.5;
        d.max_abs = 0.02;
        d.variance = 1e-6;
        d.mean = 0.0;
        r.block_details.push_back(d);
    }
    return r;
}

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

tr::ServerOptions options(const std::string& tel, const std::string& ctl) {
    tr::ServerOptions o;
    o.telemetry_endpoint = tel;
    o.control_endpoint = ctl;
    o.queue_capacity = 1 << 20;
    o.hello_interval_s = 0.05;
    o.log = [](const std::string&) {};
    return o;
}

void throughput(const char* name, const std::string& tel, const std::string& ctl, int blocks, int n) {
    std::vector<sp::UpdateRecord> records;
    records.reserve(std::size_t(n));
    for (int i = 0; i < n; ++i) records.push_back(make_update(i, blocks));
    const auto b0 = Clock::now();
    std::size_t bytes = 0;
    for (const auto& r : records) bytes += sp::to_json_line(r).size();
    const double baseline = n / seconds(Clock::now() - b0);

    Backend backend;
    tr::AgentServer server(options(tel, ctl), backend);
    zmq::context_t ctx;
    zmq::socket_t sub(ctx, zmq::socket_type::sub);
    sub.set(zmq::sockopt::linger, 0);
    sub.set(zmq::sockopt::rcvhwm, 0);
    sub.set(zmq::sockopt::subscribe, "");
    sub.connect(tel);
    std::atomic<int> received{0};
    std::atomic<bool> ready{false};
    Clock::time_point last_receipt{};
    std::thread reader([&] {
        const auto end = Clock::now() + std::chrono::seconds(60);
        auto idle_since = Clock::now();
        while (Clock::now() < end) {
            zmq::message_t topic, body;
            if (!sub.recv(topic, zmq::recv_flags::dontwait)) {
                if (received.load() > 0 && Clock::now() - idle_since > std::chrono::seconds(2)) break;
                std::vector<zmq::pollitem_t> items = {{sub.handle(), 0, ZMQ_POLLIN, 0}};
                zmq::poll(items, std::chrono::milliseconds(50));
                continue;
            }
            if (!topic.more() || !sub.recv(body, zmq::recv_flags::none)) continue;
            idle_since = Clock::now();
            if (topic.to_string_view() == "hello") ready = true;
            if (topic.to_string_view() == "update") {
                last_receipt = idle_since;
                if (received.fetch_add(1) + 1 == n) break;
            }
        }
    });
    const auto wait_end = Clock::now() + std::chrono::seconds(10);
    while (!ready.load() && Clock::now() < wait_end)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const auto t0 = Clock::now();
    for (auto& r : records) server.publish(std::move(r));
    const double pushed = n / seconds(Clock::now() - t0);
    reader.join();
    const double recv_rate = received.load() / seconds(last_receipt - t0);
    std::printf("%-6s %6d %7d %12.0f %12.0f %8d %12.0f %6.2f %8.1f\n", name, blocks, n, pushed, recv_rate,
                received.load(), baseline, recv_rate / baseline, double(bytes) / n / 1024.0);
}

void latency(const char* name, const std::string& tel, const std::string& ctl) {
    Backend backend;
    tr::AgentServer server(options(tel, ctl), backend);
    server.set_run("bench", sp::uniform_layout(48, 1 << 20), "{}");
    zmq::context_t ctx;
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::sndtimeo, 5000);
    dealer.set(zmq::sockopt::rcvtimeo, 5000);
    dealer.connect(ctl);
    for (const char* kind : {"ping", "pin"}) {
        std::vector<double> us;
        for (int i = 0; i < 1000; ++i) {
            const std::string id = std::to_string(i);
            const std::string req =
                std::string(kind) == "ping"
                    ? "{\"id\":\"" + id + "\",\"cmd\":\"ping\"}"
                    : "{\"id\":\"" + id + "\",\"cmd\":\"pin\",\"blocks\":[3],\"precision\":\"int8\"}";
            const auto t0 = Clock::now();
            zmq::message_t reply;
            if (!dealer.send(zmq::buffer(req)) || !dealer.recv(reply)) {
                std::printf("%s %s: timed out\n", name, kind);
                return;
            }
            us.push_back(seconds(Clock::now() - t0) * 1e6);
        }
        std::sort(us.begin(), us.end());
        std::printf("%-6s %-5s %10.1f %10.1f\n", name, kind, us[us.size() / 2], us[us.size() * 99 / 100]);
    }
}

}  // namespace

int main() {
    const std::string dir = "/tmp/sp_bench_transport_" + std::to_string(::getpid());
    const std::string ipc_tel = "ipc://" + dir + "-tel", ipc_ctl = "ipc://" + dir + "-ctl";
    // Two free loopback ports: probes held open together, then closed.
    std::string tcp[2];
    {
        zmq::context_t ctx;
        zmq::socket_t a(ctx, zmq::socket_type::rep), b(ctx, zmq::socket_type::rep);
        a.bind("tcp://127.0.0.1:*");
        b.bind("tcp://127.0.0.1:*");
        tcp[0] = a.get(zmq::sockopt::last_endpoint);
        tcp[1] = b.get(zmq::sockopt::last_endpoint);
    }
    const std::string tcp_tel = tcp[0], tcp_ctl = tcp[1];
    std::printf("%-6s %6s %7s %12s %12s %8s %12s %6s %8s\n", "trans", "blocks", "updates", "pushed/s",
                "received/s", "received", "to_json/s", "ratio", "KiB/msg");
    throughput("ipc", ipc_tel, ipc_ctl, 48, 20000);
    throughput("ipc", ipc_tel, ipc_ctl, 1000, 2000);
    throughput("tcp", tcp_tel, tcp_ctl, 48, 20000);
    throughput("tcp", tcp_tel, tcp_ctl, 1000, 2000);
    std::printf("\n%-6s %-5s %10s %10s   (request -> reply, 1,000 each)\n", "trans", "cmd", "median_us",
                "p99_us");
    latency("ipc", ipc_tel, ipc_ctl);
    latency("tcp", tcp_tel, tcp_ctl);
    return 0;
}
