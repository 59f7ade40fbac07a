// The control socket under a flood: the real sp-trainer's step rate while 50 clients each send
// pin/release requests as fast as they are answered, as a ratio to the quiet rate measured just
// before in the same trainer. Twice: with the per-client rate limit at its default (10 requests per
// second) and with it lifted (control_requests_per_second 1000000); the server's cap on requests read
// per second (1000, all clients together) holds in both.
//
//   bench_control_flood [--clients N] [--seconds S]      (run it on an otherwise idle machine)
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>

#include <sys/prctl.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Heartbeats {
    zmq::socket_t sub;
    std::int64_t step = -1;
    Heartbeats(zmq::context_t& ctx, const std::string& endpoint) : sub(ctx, zmq::socket_type::sub) {
        sub.set(zmq::sockopt::subscribe, "heartbeat");
        sub.connect(endpoint);
    }
    void read() {
        zmq::message_t topic, body;
        while (sub.recv(topic, zmq::recv_flags::dontwait)) {
            if (!topic.more() || !sub.recv(body)) return;
            const json j = json::parse(body.to_string_view(), nullptr, false);
            if (j.is_object() && j.contains("step")) step = j["step"].get<std::int64_t>();
        }
    }
};

// Steps per second over `seconds`, read from heartbeats; `during` runs in the loop meanwhile.
template <typename F>
double step_rate(Heartbeats& hb, double seconds, F&& during) {
    const auto start = Clock::now();
    hb.read();
    const std::int64_t first = hb.step;
    while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
        during();
        hb.read();
    }
    return double(hb.step - first) / seconds;
}

struct Flood {
    std::vector<zmq::socket_t> clients;
    std::uint64_t sent = 0, answered = 0, limited = 0;
    Flood(zmq::context_t& ctx, const std::string& endpoint, int n) {
        for (int i = 0; i < n; ++i) {
            clients.emplace_back(ctx, zmq::socket_type::dealer);
            clients.back().set(zmq::sockopt::linger, 0);
            clients.back().connect(endpoint);
        }
        for (auto& c : clients) send(c);
    }
    void send(zmq::socket_t& c) {
        const std::string req = sent % 2 == 0 ? R"({"id":"f","cmd":"pin","blocks":[1],"precision":"int8"})"
                                              : R"({"id":"f","cmd":"release","blocks":[1]})";
        c.send(zmq::buffer(req), zmq::send_flags::dontwait);
        ++sent;
    }
    // Every answered client sends its next request at once (a closed loop per client).
    void pump() {
        std::vector<zmq::pollitem_t> items;
        for (auto& c : clients) items.push_back({c.handle(), 0, ZMQ_POLLIN, 0});
        zmq::poll(items, std::chrono::milliseconds(10));
        for (std::size_t i = 0; i < clients.size(); ++i) {
            if (!(items[i].revents & ZMQ_POLLIN)) continue;
            zmq::message_t reply;
            while (clients[i].recv(reply, zmq::recv_flags::dontwait)) {
                ++answered;
                if (reply.to_string_view().find("rate_limited") != std::string_view::npos) ++limited;
                send(clients[i]);
            }
        }
    }
};

struct Result {
    double quiet = 0, flooded = 0;
    std::uint64_t sent = 0, answered = 0, limited = 0;
};

Result measure(const QString& trainer_path, double limit, int clients, double seconds) {
    QTemporaryDir dir;
    const std::string pub = "ipc://" + dir.filePath("pub").toStdString();
    const std::string ctl = "ipc://" + dir.filePath("ctl").toStdString();
    const QString config = dir.filePath("config.json");
    {
        QFile f(config);
        f.open(QIODevice::WriteOnly);
        f.write(QByteArray::fromStdString(
            json{{"control_requests_per_second", limit}, {"log_decisions", false}}.dump()));
    }
    QProcess trainer;
    trainer.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
    trainer.setStandardOutputFile(QProcess::nullDevice());
    trainer.start(trainer_path,
                  {"--steps", "100000000", "--quiet", "--config", config, "--telemetry",
                   dir.filePath("run.jsonl"), "--telemetry-endpoint", QString::fromStdString(pub),
                   "--control-endpoint", QString::fromStdString(ctl)});
    trainer.waitForStarted();
    zmq::context_t ctx;
    Heartbeats hb(ctx, pub);
    while (hb.step < 20) {  // past start-up and calibration
        hb.read();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Result r;
    r.quiet = step_rate(hb, seconds, [] { std::this_thread::sleep_for(std::chrono::milliseconds(10)); });
    Flood flood(ctx, ctl, clients);
    r.flooded = step_rate(hb, seconds, [&] { flood.pump(); });
    r.sent = flood.sent;
    r.answered = flood.answered;
    r.limited = flood.limited;
    trainer.kill();
    trainer.waitForFinished();
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    int clients = 50;
    double seconds = 15;
    const QStringList args = app.arguments();
    for (int i = 1; i + 1 < args.size(); i += 2) {
        if (args[i] == "--clients") clients = args[i + 1].toInt();
        if (args[i] == "--seconds") seconds = args[i + 1].toDouble();
    }
    const QString trainer = QStringLiteral(SP_TRAINER_PATH);
    std::printf(
        "%d clients, %.0f s windows; step rate flooded / quiet (same trainer, measured just before)\n",
        clients, seconds);
    std::printf("%-22s %10s %10s %8s %10s %10s %10s\n", "limit (req/s/client)", "quiet/s", "flooded/s",
                "ratio", "requests", "answered", "limited");
    for (const double limit : {10.0, 1e6}) {
        const Result r = measure(trainer, limit, clients, seconds);
        std::printf("%-22g %10.2f %10.2f %8.2f %10llu %10llu %10llu\n", limit, r.quiet, r.flooded,
                    r.quiet > 0 ? r.flooded / r.quiet : 0.0, static_cast<unsigned long long>(r.sent),
                    static_cast<unsigned long long>(r.answered), static_cast<unsigned long long>(r.limited));
        std::fflush(stdout);
    }
    return 0;
}
