// LiveSource's commands against an in-test fake agent (tests/common/fake_agent.h) on ipc:// sockets:
// a pin's reply, a rejection's reason, an unanswered command's timeout, CURVE keys, and the
// RunSession on top (pending -> applied, a rejection's reason in the event log).
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
#include "sp/keys/curve_key_file.h"
#include "sp/ui/live_source.h"
#include "sp/ui/run_session.h"

using sp::test::FakeAgent;
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
    FakeAgent agent(path());
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
    // The exact request the agent's ROUTER received (after the snapshot request).
    const auto requests = agent.requests();
    QCOMPARE(requests.size(), std::size_t(2));
    QVERIFY(requests[0].find("\"cmd\":\"snapshot\"") != std::string::npos);
    QCOMPARE(QString::fromStdString(requests[1]),
             QString(R"({"id":"t-pin-1","cmd":"pin","blocks":[1,2],"precision":"int8"})"));
    // The agent announces the applied command with the request id. It acknowledges before it
    // applies (as the real agent does, at the next step boundary), so its pins are read once the
    // event has come: comparing them at the reply raced the agent's thread.
    QTRY_COMPARE_WITH_TIMEOUT(rec.events.size(), std::size_t(1), 5000);
    QCOMPARE(agent.pin_of(1), std::optional<sp::Precision>(sp::Precision::int8));
    QCOMPARE(rec.events[0].kind, std::string("command"));
    QVERIFY(rec.events[0].payload_json.find("\"id\":\"t-pin-1\"") != std::string::npos);
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
    char server_public[41], server_secret[41], client_public[41], client_secret[41];
    QCOMPARE(zmq_curve_keypair(server_public, server_secret), 0);
    QCOMPARE(zmq_curve_keypair(client_public, client_secret), 0);
    FakeAgent::Options ao;
    ao.curve_secret_key = server_secret;
    FakeAgent agent(path(), ao);
    agent.start("run-curve");

    LiveEndpoints e = *parseEndpointSpec(QString::fromStdString(agent.spec()), nullptr);
    e.server_public_key = server_public;
    e.client_public_key = client_public;
    e.client_secret_key = client_secret;
    LiveSource source(e, fastOptions());
    Recorder rec(source);
    join(source, rec);
    QVERIFY(source.sendCommand("t-curve-1", pin({0}, sp::Precision::int8)));
    QTRY_VERIFY_WITH_TIMEOUT(rec.replyTo("t-curve-1"), 5000);
    QVERIFY(rec.replyTo("t-curve-1")->ok);
    source.stop();

    // Without the keys the encrypted agent is never heard.
    LiveEndpoints plain = *parseEndpointSpec(QString::fromStdString(agent.spec()), nullptr);
    LiveSource deaf(plain, fastOptions());
    Recorder deaf_rec(deaf);
    deaf.start();
    QTest::qWait(600);
    QCOMPARE(deaf.counters().messages, std::uint64_t(0));
    QCOMPARE(toString(deaf_rec.states.back()), toString(SourceState::connecting));
    deaf.stop();
}

void TestLiveSourceCommands::sessionPinGoesPendingToApplied() {
    FakeAgent agent(path());
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
    QTRY_COMPARE_WITH_TIMEOUT(toString(session.events().at(*entry).state), toString(CommandState::applied),
                              5000);
    const auto requests = agent.requests();
    QVERIFY(!requests.empty());
    QCOMPARE(QString::fromStdString(requests.back()),
             QString(R"({"id":"%1","cmd":"pin","blocks":[1,3],"precision":"int8"})").arg(id));
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
