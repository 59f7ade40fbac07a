// The live sp-ctl commands (ping, pin, snapshot, tail, keygen) end to end against the fake agent of
// tests/common: a ROUTER and a PUB on ipc:// endpoints that answer with core's protocol layer, so
// these tests do not depend on the real agent's transport.
#include <sys/stat.h>

#include <QtTest>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_agent.h"
#include "run_process.h"
#include "sp/jsonl.h"
#include "sp/protocol.h"

namespace {

namespace protocol = sp::protocol;

constexpr int kBlocks = 4;
constexpr std::int64_t kStep = 120;

using sp::test::FakeAgent;
using sp::test::Run;
using sp::test::sp_ctl;

// The update the fake publishes: step 120, half the blocks INT8, one change.
sp::UpdateRecord update_record() {
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
    return r;
}

// The fake agent (tests/common) at step 120 of run "fake-run", publishing hello, update, event and
// heartbeat in turn, one every 10 ms, until it is destroyed. With skip_every > 0 every
// skip_every-th seq is never sent (a loss on the wire). With curve_secret (Z85) its sockets are
// CURVE servers; without a ZAP handler libzmq then admits any client key, which is enough to
// check that sp-ctl speaks CURVE.
std::unique_ptr<FakeAgent> cycling_agent(const QTemporaryDir& dir, int skip_every = 0,
                                         const std::string& curve_secret = {}) {
    FakeAgent::Options o;
    o.blocks = kBlocks;
    o.heartbeat_ms = 0;
    o.hello_at_start = false;
    o.curve_secret_key = curve_secret;
    o.tick_ms = 10;
    const std::string event =
        R"({"type":"event","kind":"precision_change","step":120,"timestamp":1717243270.0,"block":3,"from":"bf16","to":"int8","reason":"policy"})";
    o.on_tick = [event, skip_every, sent = std::uint64_t(0)](FakeAgent& a) mutable {
        if (skip_every > 0 && (a.last_seq() + 1) % std::uint64_t(skip_every) == 0) a.skip_seqs(1);
        switch (sent++ % 4) {
            case 0:
                a.publish_hello();
                break;
            case 1:
                a.publish_update(update_record());
                break;
            case 2:
                a.publish_raw("event", event, true);
                break;
            default:
                a.publish_heartbeat();
                break;
        }
    };
    auto agent = std::make_unique<FakeAgent>(dir.path().toStdString(), std::move(o));
    agent->start("fake-run");
    agent->publish_update(update_record());  // the step that pongs, acks and snapshots report
    return agent;
}

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
    // Generous: a loaded CI machine; a live fake answers in milliseconds.
    args << "--endpoint" << QString::fromStdString(endpoint) << "--timeout"
         << "30";
    return args;
}

// A routing command: the control endpoint, and the telemetry endpoint it is followed on.
QStringList routed(const FakeAgent& agent, QStringList args) {
    args << "--telemetry-endpoint" << QString::fromStdString(agent.telemetry_endpoint());
    return at(agent.control_endpoint(), args);
}

}  // namespace

class TestSpCtlLive : public QObject {
    Q_OBJECT
  private slots:
    void ping_answers() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const Run r = sp_ctl(at(agent->control_endpoint(), {"ping"}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY2(r.out.startsWith("pong: step 120, protocol 1, "), r.out.constData());
    }

    void pin_is_sent_and_acked() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const Run r = sp_ctl(routed(*agent, {"pin", "--blocks", "3,4", "--precision", "int8"}));
        // Block 4 does not exist on the fake's 4-block model: the agent's own check rejects it.
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("rejected: field 'blocks': unknown block 4 (the model has 4 blocks: 0..3)"),
                 r.err.constData());
        QCOMPARE(agent->requests().size(), std::size_t(1));  // it arrived, and did not parse
        QVERIFY(agent->parsed_requests().empty());

        // Followed to the command event that says it applied, at the step it names.
        const Run ok = sp_ctl(routed(*agent, {"pin", "--blocks", "2,3", "--precision", "int8"}));
        QVERIFY2(ok.exit_code == 0, ok.err.constData());
        QCOMPARE(ok.out, QByteArray("applied: pin blocks 2,3 -> int8 at step 121 (2 changes)\n"));
        const auto requests = agent->parsed_requests();
        QCOMPARE(requests.size(), std::size_t(1));
        QVERIFY(requests[0].kind == protocol::Request::Kind::command);
        QVERIFY(requests[0].command.kind == sp::Command::Kind::pin);
        QCOMPARE(requests[0].command.blocks, (std::vector<int>{2, 3}));
        QVERIFY(requests[0].command.precision == sp::Precision::int8);
        QVERIFY(requests[0].id.rfind("sp-ctl-", 0) == 0);
    }

    // POLICY.md rule 20: the terms travel with the pin and are said back.
    void a_pin_with_a_lifetime_and_spike_release() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const Run r = sp_ctl(routed(*agent, {"pin", "--blocks", "2", "--precision", "INT8", "--for-steps",
                                             "300", "--release-on-spike"}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(r.out,
                 QByteArray("applied: pin blocks 2 -> int8 for 300 steps (ends at a loss spike) at step "
                            "121 (1 change)\n"));
        const auto requests = agent->parsed_requests();
        QCOMPARE(requests.size(), std::size_t(1));
        QCOMPARE(requests[0].command.for_steps, std::int64_t(300));
        QVERIFY(requests[0].command.release_on_spike);
        // The snapshot says how the pin will end.
        const Run table = sp_ctl(at(agent->control_endpoint(), {"snapshot"}));
        QVERIFY2(table.out.contains("int8 (until step 421 or a loss spike)"), table.out.constData());
    }

    void other_routing_commands() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        // --json: the reply, then the command event.
        const Run release = sp_ctl(routed(*agent, {"release", "--blocks", "3", "--json"}));
        QVERIFY2(release.exit_code == 0, release.err.constData());
        const QList<QByteArray> lines = release.out.trimmed().split('\n');
        QCOMPARE(lines.size(), 2);
        QCOMPARE(nlohmann::json::parse(lines[0].toStdString())["cmd"], "release");
        const auto event = nlohmann::json::parse(lines[1].toStdString());
        QCOMPARE(event["kind"], "command");
        QCOMPARE(event["ok"], true);
        const Run all = sp_ctl(routed(*agent, {"release-all"}));
        QCOMPARE(all.out, QByteArray("applied: release all at step 121 (0 changes)\n"));
        // --no-wait: the acknowledgement alone.
        const Run mode = sp_ctl(at(agent->control_endpoint(), {"mode", "static", "--no-wait"}));
        QCOMPARE(mode.out, QByteArray("accepted: set mode static, queued for step 121\n"));
        // tolerance --pct X sends set_tolerance with the config key's name.
        const Run tolerance =
            sp_ctl(at(agent->control_endpoint(), {"tolerance", "--pct", "0.3", "--no-wait"}));
        QCOMPARE(tolerance.out, QByteArray("accepted: set loss tolerance 0.3%, queued for step 121\n"));
        const auto requests = agent->parsed_requests();
        QCOMPARE(requests.size(), std::size_t(4));
        QVERIFY(requests[2].command.kind == sp::Command::Kind::set_mode);
        QVERIFY(requests[2].command.mode == sp::Mode::static_);
        QVERIFY(requests[3].command.kind == sp::Command::Kind::set_tolerance);
        QCOMPARE(requests[3].command.tolerance_pct, 0.3);
    }

    // The ack only says "queued": a command the agent refuses when it applies it is a failure,
    // with the agent's reason; --no-wait reports the ack alone and cannot know.
    void a_command_refused_when_applied_exits_1() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const std::string why = "precision 'fp8_e4m3' cannot be materialized by this trainer's runtime";
        agent->set_command_behaviour(FakeAgent::CommandBehaviour::fail_at_apply, why);
        const Run r = sp_ctl(routed(*agent, {"pin", "--blocks", "1", "--precision", "fp8_e4m3"}));
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains(QByteArray("rejected by the agent at step 121: ") + why.c_str()),
                 r.err.constData());
        QVERIFY(r.out.isEmpty());
        const Run queued =
            sp_ctl(routed(*agent, {"pin", "--blocks", "1", "--precision", "fp8_e4m3", "--no-wait"}));
        QVERIFY2(queued.exit_code == 0, queued.err.constData());
        QCOMPARE(queued.out, QByteArray("accepted: pin blocks 1 -> fp8_e4m3, queued for step 121\n"));
    }

    // Without telemetry to follow, nothing is sent: the outcome could not be reported.
    void following_needs_the_telemetry_endpoint() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const Run ipc = sp_ctl(at(agent->control_endpoint(), {"release-all"}));
        QCOMPARE(ipc.exit_code, 2);
        QVERIFY2(ipc.err.contains("cannot tell the telemetry endpoint that goes with"), ipc.err.constData());
        const Run none = sp_ctl({"release-all", "--endpoint",
                                 QString::fromStdString(agent->control_endpoint()), "--timeout", "1",
                                 "--telemetry-endpoint", "ipc://" + dir.filePath("nobody-publishes-here")});
        QCOMPARE(none.exit_code, 3);
        QVERIFY2(none.err.contains("nothing from the telemetry endpoint"), none.err.constData());
        // The command was not sent: the agent was only asked whether it is there.
        for (const sp::protocol::Request& r : agent->parsed_requests())
            QVERIFY(r.kind == sp::protocol::Request::Kind::ping);
        // No agent at all: that is what the user hears, not a telemetry hint.
        const QString nobody = "ipc://" + dir.filePath("nobody-listens-here");
        const Run alone =
            sp_ctl({"pin", "--blocks", "1", "--precision", "int8", "--endpoint", nobody, "--timeout", "1",
                    "--telemetry-endpoint", "ipc://" + dir.filePath("nobody-publishes-here")});
        QCOMPARE(alone.exit_code, 3);
        QVERIFY2(alone.err.contains(QByteArray("no answer from ") + nobody.toUtf8()), alone.err.constData());
        QVERIFY2(!alone.err.contains("telemetry endpoint"), alone.err.constData());
    }

    void bad_local_flags_contact_nobody() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const QList<QStringList> bad = {
            {"pin", "--blocks", "3", "--precision", "fp4"},
            {"pin", "--blocks", "1,,2", "--precision", "int8"},
            {"pin", "--blocks", "1,-2", "--precision", "int8"},
            {"pin", "--precision", "int8"},
            {"pin", "--blocks", "3", "--precision", "int8", "--for-steps", "0"},
            {"pin", "--blocks", "3", "--precision", "int8", "--for-steps", "soon"},
            {"release", "--blocks", ""},
            {"mode", "fast"},
            {"ping", "--timeout", "-1"},
            {"ping", "--bogus"}};
        for (const QStringList& args : bad) {
            const Run r = sp_ctl(QStringList(args)
                                 << "--endpoint" << QString::fromStdString(agent->control_endpoint()));
            QVERIFY2(r.exit_code == 2, qPrintable(args.join(' ') + ": " + r.err));
            QVERIFY(!r.err.isEmpty());
        }
        QVERIFY(
            sp_ctl({"pin", "--blocks", "3", "--precision", "fp4"}).err.contains("unknown precision \"fp4\""));
        const Run zero = sp_ctl({"pin", "--blocks", "3", "--precision", "int8", "--for-steps", "0"});
        QVERIFY2(zero.err.contains("field 'for_steps': must be a positive integer"), zero.err.constData());
        QCOMPARE(agent->requests().size(), std::size_t(0));
    }

    // Blocks by name, as the dashboard shows them: resolved from the agent's snapshot; a name the
    // run does not have is bad usage (exit 2) and sends no command.
    void blocks_by_name() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const Run r = sp_ctl(routed(*agent, {"pin", "--blocks", "blocks.2,3", "--precision", "int8"}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto commands = [&agent] {
            std::vector<sp::protocol::Request> out;
            for (const auto& q : agent->parsed_requests())
                if (q.kind == sp::protocol::Request::Kind::command) out.push_back(q);
            return out;
        };
        QCOMPARE(commands().size(), std::size_t(1));
        QCOMPARE(commands().back().command.blocks, (std::vector<int>{2, 3}));
        QVERIFY(agent->snapshot_requests() >= 1);  // the names came from the agent's layout
        const Run unknown = sp_ctl(routed(*agent, {"release", "--blocks", "blocks.99"}));
        QCOMPARE(unknown.exit_code, 2);
        QVERIFY2(unknown.err.contains("has no block named 'blocks.99'"), unknown.err.constData());
        QCOMPARE(commands().size(), std::size_t(1));
    }

    void no_server_is_exit_3_within_the_timeout() {
        QTemporaryDir dir;
        const QString nowhere = "ipc://" + dir.filePath("nobody");
        for (const QStringList& cmd :
             {QStringList{"ping"}, QStringList{"pin", "--blocks", "1", "--precision", "int8", "--no-wait"}}) {
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
        const auto agent = cycling_agent(dir);
        const Run r = sp_ctl(at(agent->control_endpoint(), {"snapshot", "--json"}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(r.out.count('\n'), 1);
        const auto j = nlohmann::json::parse(r.out.toStdString());
        QVERIFY(j["ok"].get<bool>());
        QCOMPARE(j["snapshot"]["step"].get<std::int64_t>(), kStep);
        QCOMPARE(int(j["snapshot"]["blocks"].size()), kBlocks);

        const Run table = sp_ctl(at(agent->control_endpoint(), {"snapshot"}));
        QVERIFY2(table.exit_code == 0, table.err.constData());
        QVERIFY2(table.out.startsWith(
                     "step 120, mode dynamic (budget target 50.0%, used in mode budget only), run fake-run"),
                 table.out.constData());
        QVERIFY(table.out.contains("blocks.3"));
        QCOMPARE(table.out.count('\n'), 2 + kBlocks);
    }

    void tail_prints_count_messages() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir);
        const Run r = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent->telemetry_endpoint()),
                              "--count", "3", "--timeout", "30"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QList<QByteArray> lines = r.out.trimmed().split('\n');
        QCOMPARE(lines.size(), 3);
        QVERIFY2(r.out.contains("step 120: 2 bf16 / 2 int8, saving 25.00%, changes 1") ||
                     r.out.contains("step 120 event precision_change") ||
                     r.out.contains("heartbeat: step 120") || r.out.contains("hello: run fake-run"),
                 r.out.constData());

        // Four consecutive messages cover the fake's whole cycle: every human form appears.
        const Run cycle = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent->telemetry_endpoint()),
                                  "--count", "4", "--timeout", "30"});
        QVERIFY2(cycle.exit_code == 0, cycle.err.constData());
        QVERIFY2(cycle.out.contains("step 120: 2 bf16 / 2 int8, saving 25.00%, changes 1\n") &&
                     cycle.out.contains("hello: run fake-run, rank 0, 4 blocks, protocol 1\n") &&
                     cycle.out.contains("heartbeat: step 120\n") &&
                     cycle.out.contains(" bf16 -> int8 (policy)\n"),
                 cycle.out.constData());

        const Run events = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent->telemetry_endpoint()),
                                   "--topics", "hello,event", "--count", "2", "--timeout", "30"});
        QVERIFY2(events.exit_code == 0, events.err.constData());
        // The hello names the blocks, so an event after it can say "blocks.3".
        QVERIFY(events.out.contains("step 120 event precision_change block") &&
                events.out.contains("bf16 -> int8 (policy)"));

        const Run json = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent->telemetry_endpoint()),
                                 "--topics", "update", "--count", "2", "--json", "--timeout", "30"});
        QVERIFY2(json.exit_code == 0, json.err.constData());
        for (const QByteArray& line : json.out.trimmed().split('\n')) {
            const auto j = nlohmann::json::parse(line.toStdString());
            QCOMPARE(j["topic"], "update");
            QCOMPARE(j["message"]["step_id"].get<std::int64_t>(), kStep);
        }
    }

    void tail_notices_a_seq_gap() {
        QTemporaryDir dir;
        const auto agent = cycling_agent(dir, 5);  // seq 5, 10, 15, ... never go out
        const Run r = sp_ctl({"tail", "--endpoint", QString::fromStdString(agent->telemetry_endpoint()),
                              "--count", "12", "--timeout", "30"});
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
        const auto agent = cycling_agent(dir, 0, labelled(server + ".key", "secret-key").toStdString());
        const Run r = sp_ctl(
            at(agent->control_endpoint(), {"ping", "--server-key", server + ".pub", "--client-key", client}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(r.out.startsWith("pong: "));
        const Run named = sp_ctl(at(agent->control_endpoint(), {"ping", "--server-key", server + ".pub",
                                                                "--client-key", client + ".key"}));
        QVERIFY2(named.exit_code == 0, named.err.constData());
        // A plain client cannot complete the handshake with a CURVE server, and is told why at once.
        const Run plain = sp_ctl(
            {"ping", "--endpoint", QString::fromStdString(agent->control_endpoint()), "--timeout", "30"});
        QCOMPARE(plain.exit_code, 3);
        QCOMPARE(plain.err, "sp-ctl ping: the agent at " +
                                QByteArray::fromStdString(agent->control_endpoint()) +
                                " requires CURVE: pass --server-key AGENT.pub and --client-key NAME\n");
        // Only one of the two key options is a usage error.
        QCOMPARE(sp_ctl({"ping", "--server-key", server + ".pub"}).exit_code, 2);
    }

    void key_file_mistakes_are_refused() {
        QTemporaryDir dir;
        const QString server = dir.filePath("server"), client = dir.filePath("client");
        QCOMPARE(sp_ctl({"keygen", server}).exit_code, 0);
        QCOMPARE(sp_ctl({"keygen", client}).exit_code, 0);
        const auto agent = cycling_agent(dir, 0, labelled(server + ".key", "secret-key").toStdString());
        const auto ping = [&](const QString& server_key, const QString& client_key) {
            return sp_ctl(at(agent->control_endpoint(),
                             {"ping", "--server-key", server_key, "--client-key", client_key}));
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
        QCOMPARE(agent->requests().size(), std::size_t(0));
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

    // An empty NAME (or one ending in '/') used to write the hidden files .key and .pub.
    void keygen_refuses_a_name_that_is_no_file_name() {
        QTemporaryDir dir;
        const Run empty =
            sp::test::run(SP_CTL_PATH, {"keygen", ""}, dir.path());  // in dir: .key would land there
        QCOMPARE(empty.exit_code, 2);
        QVERIFY2(empty.err.startsWith("sp-ctl keygen: NAME is empty; give a file name such as 'agent'"),
                 empty.err.constData());
        const Run folder = sp_ctl({"keygen", dir.path() + "/"});
        QCOMPARE(folder.exit_code, 2);
        QVERIFY2(folder.err.contains("ends in '/'"), folder.err.constData());
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden | QDir::System), QStringList());
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
