// Soak: a real sp-trainer routing every step, with the live dashboard connected, a subscriber too
// slow to keep up, a fast one that counts every message, and a client sending commands ten times a
// second. Runs for SP_SOAK_SECONDS (CTest: `soak_short` 20 s in the default run, `soak` 30 min
// under its own label) and reports the trainer's and the dashboard's memory (RSS at the start and
// the end, growth per thousand updates), the messages lost on the wire and in the file, and the
// commands answered. The figures are printed and written to soak_report.json in the build tree.
#include <QtTest>

#include <QFile>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>

#include <sys/prctl.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "../common/small_model.h"
#include "sp/jsonl.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Resident set size of a process in KiB (from /proc), or -1 when it is gone.
long rss_kib(qint64 pid) {
    QFile f(QStringLiteral("/proc/%1/status").arg(pid));
    if (!f.open(QIODevice::ReadOnly)) return -1;
    for (const QByteArray& line : f.readAll().split('\n')) {
        if (line.startsWith("VmRSS:")) return line.mid(6).trimmed().split(' ').value(0).toLong();
    }
    return -1;
}

struct Subscriber {
    zmq::socket_t socket;
    std::uint64_t messages = 0, updates = 0, lost = 0;  // lost: seq gaps
    std::uint64_t last_seq = 0;                         // seqs start at 1 (agent/PROTOCOL.md)

    Subscriber(zmq::context_t& ctx, const std::string& endpoint, int hwm)
        : socket(ctx, zmq::socket_type::sub) {
        socket.set(zmq::sockopt::rcvhwm, hwm);
        socket.set(zmq::sockopt::subscribe, "");
        socket.connect(endpoint);
    }
    // Reads at most `max` messages without waiting.
    void read(int max) {
        for (int i = 0; i < max; ++i) {
            zmq::message_t topic, body;
            if (!socket.recv(topic, zmq::recv_flags::dontwait)) return;
            if (!topic.more() || !socket.recv(body)) return;
            ++messages;
            if (topic.to_string_view() == "update") ++updates;
            const json j = json::parse(body.to_string_view(), nullptr, false);
            if (!j.is_object() || !j.contains("seq")) continue;
            const std::uint64_t seq = j["seq"].get<std::uint64_t>();
            if (last_seq > 0 && seq > last_seq + 1) lost += seq - last_seq - 1;
            last_seq = seq;
        }
    }
};

// Pins and releases block 1 in turn, one request per call; counts the replies.
struct CommandClient {
    zmq::socket_t socket;
    std::uint64_t sent = 0, answered = 0, accepted = 0;

    CommandClient(zmq::context_t& ctx, const std::string& endpoint) : socket(ctx, zmq::socket_type::dealer) {
        socket.set(zmq::sockopt::linger, 0);
        socket.connect(endpoint);
    }
    void send() {
        const std::string id = "soak-" + std::to_string(sent);
        const json request = sent % 2 == 0
                                 ? json{{"id", id}, {"cmd", "pin"}, {"blocks", {1}}, {"precision", "int8"}}
                                 : json{{"id", id}, {"cmd", "release"}, {"blocks", {1}}};
        if (socket.send(zmq::buffer(request.dump()), zmq::send_flags::dontwait)) ++sent;
    }
    void read() {
        zmq::message_t reply;
        while (socket.recv(reply, zmq::recv_flags::dontwait)) {
            ++answered;
            const json j = json::parse(reply.to_string_view(), nullptr, false);
            if (j.is_object() && j.value("ok", false)) ++accepted;
        }
    }
};

// RSS at the start, the end and every tenth of the run: a leak grows steadily, a warm-up levels off.
struct Memory {
    qint64 pid = 0;
    std::vector<long> samples;
    void sample() { samples.push_back(rss_kib(pid)); }
    json report(std::uint64_t updates) const {
        const long start = samples.front(), end = samples.back();
        const double per_thousand = updates > 0 ? double(end - start) * 1000.0 / double(updates) : 0.0;
        return {{"rss_start_kib", start},
                {"rss_end_kib", end},
                {"growth_kib_per_1000_updates", per_thousand},
                {"rss_kib_every_tenth", samples}};
    }
};

// The children die with the test, even when it is aborted (a Qt Test timeout, a crash): a soak
// must not leave a trainer running for ever.
void die_with_parent(QProcess& p) {
    p.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
}

void stop(QProcess& p) {
    if (p.state() == QProcess::NotRunning) return;
    p.terminate();
    if (!p.waitForFinished(10000)) {
        p.kill();
        p.waitForFinished(10000);
    }
}

}  // namespace

class TestSoak : public QObject {
    Q_OBJECT
  private slots:
    void trainer_dashboard_slow_subscriber_and_commands() {
        const double seconds = qEnvironmentVariableIsSet("SP_SOAK_SECONDS")
                                   ? qEnvironmentVariable("SP_SOAK_SECONDS").toDouble()
                                   : 20.0;
        QVERIFY2(seconds > 0, "SP_SOAK_SECONDS must be a positive number");
        QTemporaryDir dir;
        const std::string pub = "ipc://" + dir.filePath("pub").toStdString();
        const std::string ctl = "ipc://" + dir.filePath("ctl").toStdString();
        const QString telemetry = dir.filePath("soak.jsonl");
        const QString config = dir.filePath("soak.json");
        {
            QFile f(config);
            QVERIFY(f.open(QIODevice::WriteOnly));
            // A fast cadence: an update record every step, so the run is compressed in time.
            f.write(R"({"warmup_steps": 5, "update_interval_steps": 1, "min_steps_between_switches": 5,
                        "run_calibration": false, "log_decisions": false})");
        }

        QProcess trainer;
        trainer.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        die_with_parent(trainer);
        trainer.setStandardOutputFile(QProcess::nullDevice());
        trainer.start(
            QStringLiteral(SP_TRAINER_PATH),
            QStringList{"--steps", "1000000000"} + sp::test::small_model_args() +
                QStringList{"--eval-every", "1000000", "--threads", "1", "--quiet", "--config", config,
                            "--telemetry", telemetry, "--every-step-stats", "--telemetry-endpoint",
                            QString::fromStdString(pub), "--control-endpoint", QString::fromStdString(ctl)});
        QVERIFY(trainer.waitForStarted(10000));
        const auto stop_trainer = qScopeGuard([&] { stop(trainer); });

        QProcess dashboard;
        dashboard.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        die_with_parent(dashboard);
        dashboard.setStandardOutputFile(QProcess::nullDevice());
        dashboard.start(QStringLiteral(SP_DASHBOARD_PATH),
                        {"-platform", "offscreen", "--connect", QString::fromStdString(pub + "," + ctl)});
        QVERIFY(dashboard.waitForStarted(10000));
        const auto stop_dashboard = qScopeGuard([&] { stop(dashboard); });

        zmq::context_t ctx;
        Subscriber fast(ctx, pub, 100000);
        Subscriber slow(ctx, pub, 50);  // reads 20 messages a second: the publisher must drop, not wait
        CommandClient client(ctx, ctl);

        // Wait for the first update, then let both processes warm up before the first RSS sample.
        const auto first_deadline = Clock::now() + std::chrono::seconds(60);
        while (fast.updates == 0 && Clock::now() < first_deadline) {
            fast.read(1000);
            QTest::qWait(10);
        }
        QVERIFY2(fast.updates > 0, "no update from the trainer");
        const double warmup = std::min(5.0, seconds / 4);
        const auto warm_until = Clock::now() + std::chrono::duration<double>(warmup);
        while (Clock::now() < warm_until) {
            fast.read(100000);
            QTest::qWait(10);
        }
        Memory trainer_mem{trainer.processId(), {}}, dashboard_mem{dashboard.processId(), {}};
        const std::uint64_t updates_at_start = fast.updates;

        const auto start = Clock::now();
        const auto end = start + std::chrono::duration<double>(seconds);
        const auto tenth =
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds / 10));
        auto next_command = start, next_slow = start, next_sample = start;
        while (Clock::now() < end && trainer.state() == QProcess::Running &&
               dashboard.state() == QProcess::Running) {
            if (Clock::now() >= next_sample) {
                trainer_mem.sample();
                dashboard_mem.sample();
                next_sample += tenth;
            }
            fast.read(100000);
            if (Clock::now() >= next_slow) {
                slow.read(1);
                next_slow += std::chrono::milliseconds(50);
            }
            if (Clock::now() >= next_command) {
                client.send();
                next_command += std::chrono::milliseconds(100);
            }
            client.read();
            QTest::qWait(5);
        }
        QCOMPARE(trainer.state(), QProcess::Running);
        QCOMPARE(dashboard.state(), QProcess::Running);
        trainer_mem.sample();
        dashboard_mem.sample();
        const std::uint64_t updates = fast.updates - updates_at_start;
        // Read the slow subscriber's backlog (the publisher's queue for it included) at full speed
        // until the first gap shows where the publisher dropped for it, or for at most 10 s.
        const auto drain_until = Clock::now() + std::chrono::seconds(10);
        while (slow.lost == 0 && Clock::now() < drain_until) {
            zmq::pollitem_t item{slow.socket.handle(), 0, ZMQ_POLLIN, 0};
            zmq::poll(&item, 1, std::chrono::milliseconds(100));
            slow.read(1000);
        }
        // The last requests' replies.
        const auto reply_deadline = Clock::now() + std::chrono::seconds(10);
        while (client.answered < client.sent && Clock::now() < reply_deadline) {
            client.read();
            QTest::qWait(10);
        }
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        stop(trainer);
        stop(dashboard);

        // The file: records the sink reported lost, and bad lines (a killed trainer may leave one).
        sp::JsonlReader reader(telemetry.toStdString());
        sp::TelemetryRecord rec;
        std::uint64_t file_updates = 0, file_lost = 0;
        while (reader.next(rec)) {
            if (std::holds_alternative<sp::UpdateRecord>(rec)) ++file_updates;
            if (const auto* e = std::get_if<sp::EventRecord>(&rec); e && e->kind == "dropped") {
                if (const auto* d = std::get_if<sp::DroppedPayload>(&e->payload)) file_lost += d->count;
            }
        }

        const json report = {
            {"seconds", seconds},
            {"updates", updates},
            {"updates_per_second", double(updates) / seconds},
            {"trainer", trainer_mem.report(updates)},
            {"dashboard", dashboard_mem.report(updates)},
            {"fast_subscriber", {{"messages", fast.messages}, {"lost", fast.lost}}},
            {"slow_subscriber", {{"messages", slow.messages}, {"lost", slow.lost}}},
            {"commands",
             {{"sent", client.sent}, {"answered", client.answered}, {"accepted", client.accepted}}},
            {"file", {{"updates", file_updates}, {"lost", file_lost}, {"bad_lines", reader.problem_count()}}},
            {"elapsed_s", elapsed}};
        qInfo("soak: %s", report.dump(2).c_str());
        QFile out(QStringLiteral(SP_BINARY_DIR "/soak_report.json"));
        if (out.open(QIODevice::WriteOnly)) out.write(QByteArray::fromStdString(report.dump(2) + "\n"));

        // Every command is answered; the fast subscriber and the file miss nothing; the slow
        // subscriber (20 messages a second) holds nobody up.
        QCOMPARE(client.answered, client.sent);
        QVERIFY(client.sent >= std::uint64_t(seconds * 5));
        QCOMPARE(fast.lost, std::uint64_t(0));
        QCOMPARE(file_lost, std::uint64_t(0));
        QVERIFY2(reader.problem_count() <= 1, "more than a torn last line in the telemetry file");
        QVERIFY(updates > 0);
        // The publisher queues up to 10,000 messages per subscriber (agent/PROTOCOL.md) before it
        // drops: a run that published more must have cost the slow one messages.
        if (fast.messages > 12000)
            QVERIFY2(slow.lost > 0, "the publisher queued without bound for the slow subscriber");
    }
};

QTEST_GUILESS_MAIN(TestSoak)
#include "test_soak.moc"
