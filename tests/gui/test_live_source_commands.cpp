// LiveSource's commands on ipc:// sockets: a pin's reply and CURVE keys against the agent's real
// server (tests/common/served_agent.h); a rejection's reason and an unanswered command's timeout
// against a fake agent that misbehaves on purpose (tests/common/fake_agent.h); and the RunSession
// on top (pending -> applied on the real server, a rejection's reason in the event log).
#include <atomic>
#include <memory>
#include <thread>
#include <variant>

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <limits>

#include <zmq.h>

#include "fake_agent.h"
#include "live_source_recorder.h"
#include "served_agent.h"
#include "sp/keys/curve_key_file.h"
#include "sp/ui/live_source.h"
#include "sp/ui/run_session.h"

using sp::test::FakeAgent;
using sp::test::ServedAgent;
using namespace sp::ui;
using namespace sp::test::live;
using namespace std::chrono_literals;

class TestLiveSourceCommands : public QObject {
    Q_OBJECT

  private:
    QTemporaryDir dir_{QDir::tempPath() + "/sp-live-XXXXXX"};
    std::string path() const { return dir_.path().toStdString(); }

  private slots:
    void pinReachesTheAgentAndTheReplyComesBack();
    void rejectionCarriesTheAgentsReason();
    void unansweredCommandTimesOut();
    void curveKeysAreUsed();
    void sessionPinGoesPendingToApplied();
    void sessionRejectionShowsReason();
};

void TestLiveSourceCommands::pinReachesTheAgentAndTheReplyComesBack() {
    ServedAgent agent(path());
    agent.start("run-pin");
    auto source = makeSource(agent);
    Recorder rec(*source);
    join(*source, rec);
    agent.publish_update(41);
    QTRY_COMPARE_WITH_TIMEOUT(rec.updates.size(), std::size_t(1), 5000);

    QVERIFY(source->sendCommand("t-pin-1", pin({1, 2}, sp::Precision::int8)));
    QTRY_VERIFY_WITH_TIMEOUT(rec.replyTo("t-pin-1"), 5000);
    const auto* r = rec.replyTo("t-pin-1");
    QVERIFY2(r->ok, qPrintable(r->error));
    QCOMPARE(r->step, qint64(42));
    // What the server handed to the training loop: the request's id and command, whole.
    const auto submitted = agent.submitted();
    QCOMPARE(submitted.size(), std::size_t(1));
    QCOMPARE(submitted[0].first, std::string("t-pin-1"));
    QCOMPARE(submitted[0].second.blocks, (std::vector<int>{1, 2}));
    QCOMPARE(submitted[0].second.precision, sp::Precision::int8);
    // Applied at the next step boundary, announced by a "command" event with the request id.
    agent.publish_update(42);
    QTRY_COMPARE_WITH_TIMEOUT(rec.events.size(), std::size_t(1), 5000);
    QCOMPARE(agent.pin_of(1), std::optional<sp::Precision>(sp::Precision::int8));
    QCOMPARE(rec.events[0].kind, std::string("command"));
    QCOMPARE(std::get<sp::CommandEventPayload>(rec.events[0].payload).id,
             std::optional<std::string>("t-pin-1"));
    source->stop();
}

void TestLiveSourceCommands::rejectionCarriesTheAgentsReason() {
    FakeAgent agent(path());
    agent.start("run-reject");
    const std::string reason = "field 'blocks': unknown block 12 (the model has 4 blocks: 0..3)";
    agent.set_command_behaviour(FakeAgent::CommandBehaviour::reject, reason);
    auto source = makeSource(agent);
    Recorder rec(*source);
    join(*source, rec);
    QVERIFY(source->sendCommand("t-rej-1", pin({3}, sp::Precision::bf16)));
    QTRY_VERIFY_WITH_TIMEOUT(rec.replyTo("t-rej-1"), 5000);
    const auto* r = rec.replyTo("t-rej-1");
    QVERIFY(!r->ok);
    QCOMPARE(r->error, QString::fromStdString(reason));
    QCOMPARE(r->step, qint64(-1));
    source->stop();
}

void TestLiveSourceCommands::unansweredCommandTimesOut() {
    FakeAgent agent(path());
    agent.start("run-silent");
    agent.set_command_behaviour(FakeAgent::CommandBehaviour::silent);
    LiveOptions o = fastOptions();
    o.command_timeout = 500ms;
    auto source = makeSource(agent, o);
    Recorder rec(*source);
    join(*source, rec);
    QElapsedTimer timer;
    timer.start();
    QVERIFY(source->sendCommand("t-silent-1", pin({0}, sp::Precision::int8)));
    QTRY_VERIFY_WITH_TIMEOUT(rec.replyTo("t-silent-1"), 5000);
    QVERIFY(timer.elapsed() >= 450);
    const auto* r = rec.replyTo("t-silent-1");
    QVERIFY(!r->ok);
    QCOMPARE(r->error, QString("no answer within 0.5 s"));
    // Exactly one answer per request: a second request's own timeout comes after any second
    // answer to the first could have.
    QVERIFY(source->sendCommand("t-silent-2", pin({0}, sp::Precision::int8)));
    QTRY_VERIFY_WITH_TIMEOUT(rec.replyTo("t-silent-2"), 5000);
    QCOMPARE(std::count_if(rec.replies.begin(), rec.replies.end(),
                           [](const Recorder::Reply& x) { return x.id == "t-silent-1"; }),
             std::ptrdiff_t(1));
    source->stop();
}

void TestLiveSourceCommands::curveKeysAreUsed() {
    if (!zmq_has("curve")) QSKIP("libzmq without CURVE");
    // The real server with CURVE and an allow-list that admits `ops` only.
    const std::string server = path() + "/agent", ops = path() + "/ops", stranger = path() + "/stranger";
    const std::string server_public = sp::keys::write_key_pair(server, sp::keys::Replace::no);
    sp::keys::write_key_pair(ops, sp::keys::Replace::no);
    sp::keys::write_key_pair(stranger, sp::keys::Replace::no);
    QVERIFY(QFile::copy(QString::fromStdString(ops + ".pub"), QString::fromStdString(path() + "/allowed")));
    ServedAgent::Options ao;
    ao.server_secret_key_file = server + ".key";
    ao.allowed_clients_file = path() + "/allowed";
    ServedAgent agent(path(), ao);
    agent.start("run-curve");

    auto endpoints_with = [&](const std::string& client) {
        LiveEndpoints e = *parseEndpointSpec(QString::fromStdString(agent.spec()), nullptr);
        if (client.empty()) return e;
        const sp::keys::SecretKey key = sp::keys::read_secret_key(client + ".key");
        e.server_public_key = QByteArray::fromStdString(server_public);
        e.client_public_key = QByteArray::fromStdString(key.public_z85);
        e.client_secret_key = QByteArray::fromStdString(key.secret_z85);
        return e;
    };
    LiveSource source(endpoints_with(ops), fastOptions());
    Recorder rec(source);
    join(source, rec);
    QVERIFY(source.sendCommand("t-curve-1", pin({0}, sp::Precision::int8)));
    QTRY_VERIFY_WITH_TIMEOUT(rec.replyTo("t-curve-1"), 5000);
    QVERIFY(rec.replyTo("t-curve-1")->ok);
    source.stop();

    // A client the agent cannot admit hears nothing; the source says so (an event, not a wait).
    // A key outside the allow-list is refused by the agent in the handshake, which the socket's
    // monitor reports at once. A plain client's refusal may look like a closed connection instead
    // (whichever side reads the other's greeting first), so it is judged by the silence alone.
    const std::pair<std::string, QString> refused[] = {
        {stranger, "refused this client's key (authentication failed)"}, {std::string(), QString()}};
    for (const auto& [client, why] : refused) {
        LiveSource deaf(endpoints_with(client), fastOptions());
        Recorder deaf_rec(deaf);
        deaf.start();
        QTRY_VERIFY_WITH_TIMEOUT(
            !deaf_rec.states.empty() && deaf_rec.states.back() == SourceState::disconnected, 5000);
        QVERIFY2(deaf_rec.state_details.back().contains(why),
                 qPrintable(QString::fromStdString(client) + ": " + deaf_rec.state_details.join(" | ")));
        QCOMPARE(deaf.counters().messages, std::uint64_t(0));
        deaf.stop();
    }
}

void TestLiveSourceCommands::sessionPinGoesPendingToApplied() {
    ServedAgent agent(path());
    agent.start("run-session");
    RunSession session(makeSource(agent));
    session.start();
    QTRY_VERIFY_WITH_TIMEOUT(session.canControl() && session.header().run_id == "run-session", 10000);
    agent.publish_update(10);
    QTRY_VERIFY_WITH_TIMEOUT(session.store().updateCount() >= 1, 5000);

    const QString id = session.pin({1, 3}, sp::Precision::int8);
    QVERIFY(!id.isEmpty());
    auto entry = session.events().findCommand(id);
    QVERIFY(entry);
    QCOMPARE(toString(session.events().at(*entry).state), toString(CommandState::pending));
    // Acknowledged by the server, applied at the agent's next step boundary.
    QTRY_VERIFY_WITH_TIMEOUT(!agent.submitted().empty(), 5000);
    QCOMPARE(QString::fromStdString(agent.submitted().back().first), id);
    QCOMPARE(agent.submitted().back().second.blocks, (std::vector<int>{1, 3}));
    agent.publish_update(11);
    QTRY_COMPARE_WITH_TIMEOUT(toString(session.events().at(*entry).state), toString(CommandState::applied),
                              5000);
    session.stop();
}

void TestLiveSourceCommands::sessionRejectionShowsReason() {
    FakeAgent agent(path());
    agent.start("run-session-rej");
    const QString reason =
        "field 'precision': unknown precision \"fp4\"; valid: bf16, int8, fp8_e4m3, fp8_e5m2";
    agent.set_command_behaviour(FakeAgent::CommandBehaviour::reject, reason.toStdString());
    RunSession session(makeSource(agent));
    session.start();
    QTRY_VERIFY_WITH_TIMEOUT(session.canControl(), 10000);
    const QString id = session.pin({0}, sp::Precision::int8);
    QVERIFY(!id.isEmpty());
    auto entry = session.events().findCommand(id);
    QVERIFY(entry);
    QTRY_COMPARE_WITH_TIMEOUT(toString(session.events().at(*entry).state), toString(CommandState::rejected),
                              5000);
    QVERIFY2(session.events().at(*entry).detail.contains(reason),
             qPrintable(session.events().at(*entry).detail));
    session.stop();
}

QTEST_MAIN(TestLiveSourceCommands)
#include "test_live_source_commands.moc"
