// The live sp-ctl commands (ping, pin, snapshot, tail, keygen) end to end against a fake agent: a
// ROUTER and a PUB on ipc:// endpoints that answer with core's protocol layer, so these tests do
// not depend on the real agent's transport.
#include <sys/stat.h>

#include <QtTest>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>

#include <atomic>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "run_process.h"
#include "sp/jsonl.h"
#include "sp/protocol.h"

namespace {

namespace protocol = sp::protocol;

constexpr int kBlocks = 4;
constexpr std::int64_t kStep = 120;

using sp::test::Run;
using sp::test::sp_ctl;

protocol::Snapshot fixed_snapshot() {
    protocol::Snapshot s;
    s.seq = 7;
    s.step = kStep;
    s.run_id = "fake-run";
    s.layout = sp::uniform_layout(kBlocks, 1024);
    s.precision = {sp::Precision::bf16, sp::Precision::int8, sp::Precision::bf16, sp::Precision::int8};
    s.pins = {std::nullopt, std::nullopt, std::nullopt, sp::Precision::int8};
    return s;
}

std::string update_line() {
    sp::UpdateRecord r;
    r.step_id = kStep;
    r.timestamp = 1717243260.25;
    r.blocks_bf16 = 2;
    r.blocks_int8 = 2;
    r.precision_changes = 1;
    r.estimated_bandwidth_saving_pct = 25.0;
    for (int i = 0; i < kBlocks; ++i) {
        sp::BlockDetail d;
        d.id = i;
        d.precision = i % 2 ? sp::Precision::int8 : sp::Precision::bf16;
        r.block_details.push_back(d);
    }
    return sp::to_json_line(r);
}

// The agent's two sockets on a thread. Publishes hello, update, event, heartbeat in a loop (every
// ~10 ms) until destroyed; with skip_every > 0 every skip_every-th seq is never sent, a wire loss.
class FakeAgent {
  public:
    // With curve_secret (Z85) the control socket is a CURVE server; without a ZAP handler libzmq
    // then admits any client key, which is enough to check that sp-ctl speaks CURVE.
    explicit FakeAgent(const QTemporaryDir& dir, int skip_every = 0, const std::string& curve_secret = {})
        : control_("ipc://" + dir.filePath("control").toStdString()),
          telemetry_("ipc://" + dir.filePath("telemetry").toStdString()),
          skip_every_(skip_every) {
        if (!curve_secret.empty()) {
            router_.set(zmq::sockopt::curve_server, 1);
            router_.set(zmq::sockopt::curve_secretkey, curve_secret);
        }
        router_.bind(control_);
        pub_.bind(telemetry_);
        thread_ = std::thread([this] { loop(); });
    }
    ~FakeAgent() {
        stop_ = true;
        thread_.join();
    }
    const std::string& control() const { return control_; }
    const std::string& telemetry() const { return telemetry_; }
    std::vector<protocol::Request> requests() {
        std::lock_guard<std::mutex> lock(mutex_);
        return requests_;
    }
    std::size_t frames() {
        std::lock_guard<std::mutex> lock(mutex_);
        return frames_;
    }

  private:
    void loop() {
        const std::string update = update_line();
        const std::string event =
            R"({"type":"event","kind":"precision_change","step":120,"timestamp":1717243270.0,"block":3,"from":"bf16","to":"int8","reason":"policy"})";
        std::uint64_t seq = 0;
        int phase = 0;
        while (!stop_) {
            zmq_pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
            if (zmq_poll(&item, 1, 10) > 0 && (item.revents & ZMQ_POLLIN)) answer();
            ++seq;
            if (skip_every_ > 0 && seq % std::uint64_t(skip_every_) == 0) ++seq;
            std::string topic, body;
            switch (phase++ % 4) {
                case 0:
                    topic = "hello";
                    body = protocol::hello(seq, "fake-run", 0, sp::uniform_layout(kBlocks, 1024), "{}", 1.0);
                    break;
                case 1:
                    topic = "update", body = protocol::with_seq(update, seq);
                    break;
                case 2:
                    topic = "event", body = protocol::with_seq(event, seq);
                    break;
                default:
                    topic = "heartbeat", body = protocol::heartbeat(seq, kStep, 2.0);
                    break;
            }
            pub_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
            pub_.send(zmq::buffer(body), zmq::send_flags::none);
        }
    }

    void answer() {
        zmq::message_t route, frame;
        if (!router_.recv(route, zmq::recv_flags::dontwait) ||
            !router_.recv(frame, zmq::recv_flags::dontwait))
            return;
        const auto parsed = protocol::parse_request(frame.to_string_view(), kBlocks);
        std::string reply;
        if (const auto* bad = std::get_if<protocol::RequestError>(&parsed)) {
            reply = protocol::reject(*bad);
        } else {
            const auto& r = std::get<protocol::Request>(parsed);
            if (r.kind == protocol::Request::Kind::ping)
                reply = protocol::pong(r, kStep, 3.0);
            else if (r.kind == protocol::Request::Kind::snapshot)
                reply = protocol::snapshot_reply(r, fixed_snapshot());
            else
                reply = protocol::ack(r, kStep + 1);
            std::lock_guard<std::mutex> lock(mutex_);
            requests_.push_back(r);
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ++frames_;
        }
        router_.send(route, zmq::send_flags::sndmore);
        router_.send(zmq::buffer(reply), zmq::send_flags::none);
    }

    zmq::context_t ctx_{1};
    zmq::socket_t router_{ctx_, zmq::socket_type::router};
    zmq::socket_t pub_{ctx_, zmq::socket_type::pub};
    std::string control_, telemetry_;
    int skip_every_;
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::vector<protocol::Request> requests_;
    std::size_t frames_ = 0;
    std::thread thread_;
};

QByteArray read_all(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// The value of a "LABEL = KEY" line of a key file as keygen writes it ("" when there is none).
QByteArray labelled(const QString& path, const QByteArray& label) {
    for (const QByteArray& line : read_all(path).split('\n'))
        if (line.startsWith(label + " = ")) return line.mid(label.size() + 3).trimmed();
    return {};
}

int mode_of(const QString& path) {
    struct stat st {};
    return ::lstat(qPrintable(path), &st) == 0 ? int(st.st_mode & 07777) : -1;
}

QStringList at(const std::string& endpoint, QStringList args) {
    // Generous: CI runs on a loaded 2-core machine; a live fake answers in milliseconds.
    args << "--endpoint" << QString::fromStdString(endpoint) << "--timeout"
         << "30";
    return args;
}

}  // namespace

class TestSpCtlLive : public QObject {
    Q_OBJECT
  private slots:
    void ping_answers() {
        QTemporaryDir dir;
        FakeAgent agent(dir);
        const Run r = sp_ctl(at(agent.control(), {"ping"}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY2(r.out.startsWith("pong: step 120, protocol 1, "), r.out.constData());
    }

    void pin_is_sent_and_acked() {
        QTemporaryDir dir;
        FakeAgent agent(dir);
        const Run r = sp_ctl(at(agent.control(), {"pin", "--blocks", "3,4", "--precision", "int8"}));
        // Block 4 does not exist on the fake's 4-block model: the agent's own check rejects it.
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("rejected: field 'blocks': unknown block 4 (the model has 4 blocks: 0..3)"),
                 r.err.constData());
        QVERIFY(agent.requests().empty());

        const Run ok = sp_ctl(at(agent.control(), {"pin", "--blocks", "2,3", "--precision", "int8"}));
        QVERIFY2(ok.exit_code == 0, ok.err.constData());
        QCOMPARE(ok.out, QByteArray("accepted: pin blocks 2,3 -> int8, applied at step 121\n"));
        const auto requests = agent.requests();
        QCOMPARE(requests.size(), std::size_t(1));
        QVERIFY(requests[0].kind == protocol::Request::Kind::command);
        QVERIFY(requests[0].command.kind == sp::Command::Kind::pin);
        QCOMPARE(requests[0].command.blocks, (std::vector<int>{2, 3}));
        QVERIFY(requests[0].command.precision == sp::Precision::int8);
        QVERIFY(requests[0].id.rfind("sp-ctl-", 0) == 0);
    }

    void other_routing_commands() {
        QTemporaryDir dir;
        FakeAgent agent(dir);
        const Run release = sp_ctl(at(agent.control(), {"release", "--blocks", "3", "--json"}));
        QVERIFY2(release.exit_code == 0, release.err.constData());
        QCOMPARE(nlohmann::json::parse(release.out.toStdString())["cmd"], "release");
        const Run all = sp_ctl(at(agent.control(), {"release-all"}));
        QCOMPARE(all.out, QByteArray("accepted: release all, applied at step 121\n"));
        const Run mode = sp_ctl(at(agent.control(), {"mode", "static"}));
        QCOMPARE(mode.out, QByteArray("accepted: set mode static, applied at step 121\n"));
        const auto requests = agent.requests();
        QCOMPARE(requests.size(), std::size_t(3));
        QVERIFY(requests[2].command.kind == sp::Command::Kind::set_mode);
        QVERIFY(requests[2].command.mode == sp::Mode::static_);
    }

    void bad_local_flags_contact_nobody() {
        QTemporaryDir dir;
        FakeAgent agent(dir);
        const QList<QStringList> bad = {{"pin", "--blocks", "3", "--precision", "fp4"},
                                        {"pin", "--blocks", "x", "--precision", "int8"},
                                        {"pin", "--blocks", "1,-2", "--precision", "int8"},
                                        {"pin", "--precision", "int8"},
                                        {"release", "--blocks", ""},
                                        {"mode", "fast"},
                                        {"ping", "--timeout", "-1"},
                                        {"ping", "--bogus"}};
        for (const QStringList& args : bad) {
            const Run r =
                sp_ctl(QStringList(args) << "--endpoint" << QString::fromStdString(agent.control()));
            QVERIFY2(r.exit_code == 2, qPrintable(args.join(' ') + ": " + r.err));
            QVERIFY(!r.err.isEmpty());
        }
        QVERIFY(
            sp_ctl({"pin", "--blocks", "3", "--precision", "fp4"}).err.contains("unknown precision \"fp4\""));
        QCOMPARE(agent.frames(), std::size_t(0));
    }

    void no_server_is_exit_3_within_the_timeout() {
        QTemporaryDir dir;
        const QString nowhere = "ipc://" + dir.filePath("nobody");
        for (const QStringList& cmd :
             {QStringList{"ping"}, QStringList{"pin", "--blocks", "1", "--precision", "int8"}}) {
            QElapsedTimer timer;
            timer.start();
            const Run r = sp_ctl(QStringList(cmd) << "--endpoint" << nowhere << "--timeout"
                                                  << "0.5");
            const qint64 ms = timer.elapsed();
            QCOMPARE(r.exit_code, 3);
            QVERIFY2(r.err.contains("no answer from " + nowhere.toUtf8() + " within 0.5 s"),
                     r.err.constData());
            QVERIFY(ms >= 450);
            QVERIFY2(ms < 500 + 20000, qPrintable(QString::number(ms)));  // slack for a loaded machine
        }
    }

    void snapshot_json_and_table() {
        QTemporaryDir dir;
        FakeAgent agent(dir);
        const Run r = sp_ctl(at(agent.control(), {"snapshot", "--json"}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(r.out.count('\n'), 1);
        const auto j = nlohmann::json::parse(r.out.toStdString());
        QVERIFY(j["ok"].get<bool>());
        QCOMPARE(j["snapshot"]["step"].get<std::int64_t>(), kStep);
        QCOMPARE(int(j["snapshot"]["blocks"].size()), kBlocks);

        const Run table = sp_ctl(at(agent.control(), {"snapshot"}));
        QVERIFY2(table.exit_code == 0, table.err.constData());
        QVERIFY(table.out.startsWith("step 120, mode dynamic, run fake-run"));
        QVERIFY(table.out.contains("blocks.3"));
        QCOMPARE(table.out.count('\n'), 2 + kBlocks);
    }

    void tail_prints_count_messages() {
        QTemporaryDir dir;
        FakeAgent agent(dir);
        const Run r = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent.telemetry()), "--count", "3",
                              "--timeout", "30"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QList<QByteArray> lines = r.out.trimmed().split('\n');
        QCOMPARE(lines.size(), 3);
        QVERIFY2(r.out.contains("step 120: 2 bf16 / 2 int8, saving 25.00%, changes 1") ||
                     r.out.contains("step 120 event precision_change") ||
                     r.out.contains("heartbeat: step 120") || r.out.contains("hello: run fake-run"),
                 r.out.constData());

        // Four consecutive messages cover the fake's whole cycle: every human form appears.
        const Run cycle = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent.telemetry()), "--count",
                                  "4", "--timeout", "30"});
        QVERIFY2(cycle.exit_code == 0, cycle.err.constData());
        QVERIFY2(cycle.out.contains("step 120: 2 bf16 / 2 int8, saving 25.00%, changes 1\n") &&
                     cycle.out.contains("hello: run fake-run, rank 0, 4 blocks, protocol 1\n") &&
                     cycle.out.contains("heartbeat: step 120\n") &&
                     cycle.out.contains(" bf16 -> int8 (policy)\n"),
                 cycle.out.constData());

        const Run events = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent.telemetry()),
                                   "--topics", "hello,event", "--count", "2", "--timeout", "30"});
        QVERIFY2(events.exit_code == 0, events.err.constData());
        // The hello names the blocks, so an event after it can say "blocks.3".
        QVERIFY(events.out.contains("step 120 event precision_change block") &&
                events.out.contains("bf16 -> int8 (policy)"));

        const Run json = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent.telemetry()), "--topics",
                                 "update", "--count", "2", "--json", "--timeout", "30"});
        QVERIFY2(json.exit_code == 0, json.err.constData());
        for (const QByteArray& line : json.out.trimmed().split('\n')) {
            const auto j = nlohmann::json::parse(line.toStdString());
            QCOMPARE(j["topic"], "update");
            QCOMPARE(j["message"]["step_id"].get<std::int64_t>(), kStep);
        }
    }

    void tail_notices_a_seq_gap() {
        QTemporaryDir dir;
        FakeAgent agent(dir, 5);  // seq 5, 10, 15, ... never go out
        const Run r = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent.telemetry()), "--count",
                              "12", "--timeout", "30"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY2(r.err.contains("missed 1 messages (seq "), r.err.constData());
    }

    void tail_times_out_without_a_publisher() {
        QTemporaryDir dir;
        const Run r = sp_ctl({"tail", "--endpoint", "ipc://" + dir.filePath("nobody"), "--timeout", "0.5"});
        QCOMPARE(r.exit_code, 3);
    }

    void ping_over_curve() {
        QTemporaryDir dir;
        const QString server = dir.filePath("server"), client = dir.filePath("client");
        QCOMPARE(sp_ctl({"keygen", server}).exit_code, 0);
        QCOMPARE(sp_ctl({"keygen", client}).exit_code, 0);
        FakeAgent agent(dir, 0, labelled(server + ".key", "secret-key").toStdString());
        const Run r =
            sp_ctl(at(agent.control(), {"ping", "--server-key", server + ".pub", "--client-key", client}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(r.out.startsWith("pong: "));
        const Run named = sp_ctl(
            at(agent.control(), {"ping", "--server-key", server + ".pub", "--client-key", client + ".key"}));
        QVERIFY2(named.exit_code == 0, named.err.constData());
        // A plain client cannot complete the handshake with a CURVE server, and is told why at once.
        const Run plain =
            sp_ctl({"ping", "--endpoint", QString::fromStdString(agent.control()), "--timeout", "30"});
        QCOMPARE(plain.exit_code, 3);
        QCOMPARE(plain.err, "sp-ctl ping: the agent at " + QByteArray::fromStdString(agent.control()) +
                                " requires CURVE: pass --server-key AGENT.pub and --client-key NAME\n");
        // Only one of the two key options is a usage error.
        QCOMPARE(sp_ctl({"ping", "--server-key", server + ".pub"}).exit_code, 2);
    }

    void key_file_mistakes_are_refused() {
        QTemporaryDir dir;
        const QString server = dir.filePath("server"), client = dir.filePath("client");
        QCOMPARE(sp_ctl({"keygen", server}).exit_code, 0);
        QCOMPARE(sp_ctl({"keygen", client}).exit_code, 0);
        FakeAgent agent(dir, 0, labelled(server + ".key", "secret-key").toStdString());
        const auto ping = [&](const QString& server_key, const QString& client_key) {
            return sp_ctl(
                at(agent.control(), {"ping", "--server-key", server_key, "--client-key", client_key}));
        };
        // Each refusal is a usage error (exit 2) that names the file and what to do; nothing is sent.
        const Run pub_as_secret = ping(server + ".pub", client + ".pub");
        QCOMPARE(pub_as_secret.exit_code, 2);
        QCOMPARE(pub_as_secret.err, "sp-ctl ping: CURVE key file '" + client.toUtf8() +
                                        ".pub' holds a public key, but a secret key is expected here (give "
                                        "the NAME.key file from sp-ctl keygen, not NAME.pub)\n");
        const Run secret_as_pub = ping(server + ".key", client);
        QCOMPARE(secret_as_pub.exit_code, 2);
        QCOMPARE(secret_as_pub.err, "sp-ctl ping: CURVE key file '" + server.toUtf8() +
                                        ".key' holds a secret key, but a public key is expected here (give "
                                        "the NAME.pub file from sp-ctl keygen; the NAME.key file must stay "
                                        "private)\n");
        QCOMPARE(::chmod(qPrintable(client + ".key"), 0644), 0);
        const Run too_open = ping(server + ".pub", client);
        QCOMPARE(too_open.exit_code, 2);
        QCOMPARE(too_open.err, "sp-ctl ping: permissions 0644 for '" + client.toUtf8() +
                                   ".key' are too open; the secret key must be readable by its owner only "
                                   "(chmod 600 " +
                                   client.toUtf8() + ".key)\n");
        QCOMPARE(agent.frames(), std::size_t(0));
    }

    void keygen_writes_a_key_pair_once() {
        QTemporaryDir dir;
        const QString base = dir.filePath("client");
        const Run r = sp_ctl({"keygen", base});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(mode_of(base + ".key"), 0600);
        QCOMPARE(mode_of(base + ".pub"), 0644);
        // Labelled lines: a public key file can never pass for a secret one, nor the reverse.
        const QByteArray public_key = labelled(base + ".pub", "public-key");
        QCOMPARE(public_key.size(), 40);
        QVERIFY(!read_all(base + ".pub").contains("secret-key"));
        QCOMPARE(labelled(base + ".key", "public-key"), public_key);
        QCOMPARE(labelled(base + ".key", "secret-key").size(), 40);
        QVERIFY(r.out.contains(public_key));

        const Run again = sp_ctl({"keygen", base});
        QCOMPARE(again.exit_code, 1);
        QCOMPARE(again.err,
                 "sp-ctl keygen: '" + base.toUtf8() + ".key' exists; not overwriting it (use --force)\n");
        QCOMPARE(labelled(base + ".pub", "public-key"), public_key);  // untouched

        QCOMPARE(sp_ctl({"keygen", base, "--force"}).exit_code, 0);
        QVERIFY(labelled(base + ".pub", "public-key") != public_key);
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden | QDir::System),
                 QStringList({"client.key", "client.pub"}));  // no temporary file left behind
    }

    // A hostile user plants symlinks where keygen will write, pointing at a file of theirs (to read
    // the secret) or of ours (to destroy it): keygen refuses without --force, and with --force
    // replaces the symlink itself; the file it pointed to keeps its content and mode.
    void keygen_never_writes_through_a_symlink() {
        QTemporaryDir dir;
        const QString victim = dir.filePath("victim"), base = dir.filePath("mine"),
                      nowhere = dir.filePath("nowhere");
        {
            QFile f(victim);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("someone else's file\n");
        }
        QCOMPARE(::chmod(qPrintable(victim), 0644), 0);
        QVERIFY(QFile::link(victim, base + ".key"));
        QVERIFY(QFile::link(nowhere, base + ".pub"));  // dangling: would create the file it names

        const Run refused = sp_ctl({"keygen", base});
        QCOMPARE(refused.exit_code, 1);
        QVERIFY2(refused.err.contains("exists; not overwriting it (use --force)"), refused.err.constData());

        const Run forced = sp_ctl({"keygen", base, "--force"});
        QVERIFY2(forced.exit_code == 0, forced.err.constData());
        QCOMPARE(read_all(victim), QByteArray("someone else's file\n"));
        QCOMPARE(mode_of(victim), 0644);
        QVERIFY(!QFile::exists(nowhere));
        QVERIFY(!QFileInfo(base + ".key").isSymLink() && !QFileInfo(base + ".pub").isSymLink());
        QCOMPARE(mode_of(base + ".key"), 0600);
        QCOMPARE(labelled(base + ".key", "public-key"), labelled(base + ".pub", "public-key"));
    }
};

QTEST_GUILESS_MAIN(TestSpCtlLive)
#include "test_sp_ctl_live.moc"
