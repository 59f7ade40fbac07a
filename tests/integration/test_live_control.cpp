// Live telemetry and control against a real sp-trainer: subscribe, see hello/update/heartbeat, pin a
// block and watch the next update show it pinned, release it, and have bad commands rejected with
// reasons while training goes on.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include <chrono>
#include <optional>

#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "../common/small_model.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Message {
    std::string topic;
    json body;
};

// Next message on `sub` within `seconds`, or nothing.
std::optional<Message> receive(zmq::socket_t& sub, double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
        zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(100));
        if (!(item.revents & ZMQ_POLLIN)) continue;
        zmq::message_t topic, body;
        if (!sub.recv(topic) || !topic.more() || !sub.recv(body)) return std::nullopt;
        return Message{topic.to_string(), json::parse(body.to_string())};
    }
    return std::nullopt;
}

// The first message of `topic` (optionally matching `pred`) within `seconds`.
template <typename Pred>
std::optional<Message> wait_for(zmq::socket_t& sub, const std::string& topic, double seconds, Pred pred) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
        auto m = receive(sub, std::chrono::duration<double>(deadline - Clock::now()).count());
        if (m && m->topic == topic && pred(m->body)) return m;
    }
    return std::nullopt;
}

json request(zmq::socket_t& dealer, const json& req, double seconds = 10.0) {
    dealer.send(zmq::buffer(req.dump()), zmq::send_flags::none);
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(int(seconds * 1000)));
    if (!(item.revents & ZMQ_POLLIN)) return json();
    zmq::message_t reply;
    if (!dealer.recv(reply)) return json();
    return json::parse(reply.to_string());
}

// A small model training for long enough, live on ipc endpoints in `dir`, killed (with its
// children's leftovers) when the test ends.
struct LiveTrainer {
    std::string pub, ctl;
    QProcess process;

    LiveTrainer(const QTemporaryDir& dir, const QStringList& telemetry)
        : pub("ipc://" + dir.filePath("pub").toStdString()),
          ctl("ipc://" + dir.filePath("ctl").toStdString()) {
        process.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        const QStringList args = QStringList{"--steps", "100000"} + sp::test::small_model_args() +
                                 QStringList{"--eval-every",
                                             "1000",
                                             "--quiet",
                                             "--telemetry-endpoint",
                                             QString::fromStdString(pub),
                                             "--control-endpoint",
                                             QString::fromStdString(ctl)};
        process.start(QStringLiteral(SP_TRAINER_PATH), args + telemetry);
    }
    ~LiveTrainer() {
        process.kill();
        process.waitForFinished(10000);
    }
};

}  // namespace

class TestLiveControl : public QObject {
    Q_OBJECT
  private slots:
    void pin_release_and_reject_while_training() {
        QTemporaryDir dir;
        LiveTrainer live(dir, {"--no-telemetry"});
        QProcess& trainer = live.process;
        QVERIFY(trainer.waitForStarted(10000));
        const std::string& pub = live.pub;
        const std::string& ctl = live.ctl;

        zmq::context_t ctx;
        zmq::socket_t sub(ctx, zmq::socket_type::sub);
        sub.set(zmq::sockopt::subscribe, "");
        sub.connect(pub);
        zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
        dealer.set(zmq::sockopt::linger, 0);
        dealer.connect(ctl);

        const auto any = [](const json&) { return true; };
        QVERIFY2(wait_for(sub, "hello", 60, any), "no hello");
        auto update = wait_for(sub, "update", 60, any);
        QVERIFY2(update, "no update");
        QVERIFY(update->body.contains("seq"));
        QVERIFY(update->body.contains("block_details"));
        QVERIFY2(wait_for(sub, "heartbeat", 30, any), "no heartbeat");

        // Pin block 1 to int8: acked at once with the step it takes effect at.
        const json ack =
            request(dealer, {{"id", "t1"}, {"cmd", "pin"}, {"blocks", {1}}, {"precision", "int8"}});
        QVERIFY2(ack.value("ok", false), ack.dump().c_str());
        QCOMPARE(ack["id"].get<std::string>(), std::string("t1"));
        const std::int64_t effective = ack["effective_step"].get<std::int64_t>();
        // Applied at exactly that step boundary, and announced with the request's id.
        const auto applied = wait_for(sub, "event", 60, [](const json& e) {
            return e.value("kind", "") == "command" && e.value("id", "") == "t1";
        });
        QVERIFY2(applied, "no command event for t1");
        QCOMPARE(applied->body["step"].get<std::int64_t>(), effective);
        QVERIFY(applied->body["ok"].get<bool>());
        const auto pinned = wait_for(
            sub, "update", 60, [&](const json& u) { return u["step_id"].get<std::int64_t>() >= effective; });
        QVERIFY2(pinned, "no update after the pin");
        QCOMPARE(pinned->body["block_details"]["1"]["precision"].get<std::string>(), std::string("int8"));
        QCOMPARE(pinned->body["block_details"]["1"]["forced"].get<std::string>(), std::string("pin"));

        // Release: the next update no longer shows the pin.
        const json released = request(dealer, {{"id", "t2"}, {"cmd", "release"}, {"blocks", {1}}});
        QVERIFY2(released.value("ok", false), released.dump().c_str());
        const std::int64_t after = released["effective_step"].get<std::int64_t>();
        const auto free = wait_for(sub, "update", 60,
                                   [&](const json& u) { return u["step_id"].get<std::int64_t>() >= after; });
        QVERIFY2(free, "no update after the release");
        QVERIFY(free->body["block_details"]["1"]["forced"].is_null());

        // Bad commands: rejected with reasons; training goes on.
        const json unknown_block =
            request(dealer, {{"id", "b1"}, {"cmd", "pin"}, {"blocks", {9}}, {"precision", "int8"}});
        QCOMPARE(unknown_block.value("ok", true), false);
        QVERIFY2(unknown_block["error"].get<std::string>().find("9") != std::string::npos,
                 unknown_block.dump().c_str());
        const json bad_cmd = request(dealer, {{"id", "b2"}, {"cmd", "explode"}});
        QCOMPARE(bad_cmd.value("ok", true), false);
        QVERIFY(bad_cmd["error"].get<std::string>().find("explode") != std::string::npos);
        dealer.send(zmq::buffer(std::string("{not json")), zmq::send_flags::none);
        zmq::message_t garbage_reply;
        zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(10000));
        QVERIFY(item.revents & ZMQ_POLLIN);
        QVERIFY(dealer.recv(garbage_reply));
        QCOMPARE(json::parse(garbage_reply.to_string()).value("ok", true), false);
        // A number beyond double range: rejected under the request's id, naming the key.
        dealer.send(
            zmq::buffer(std::string(R"({"id":"huge","cmd":"pin","blocks":[1e309],"precision":"int8"})")),
            zmq::send_flags::none);
        QCOMPARE(zmq::poll(&item, 1, std::chrono::milliseconds(10000)), 1);
        QVERIFY(dealer.recv(garbage_reply));
        const json huge = json::parse(garbage_reply.to_string());
        QCOMPARE(huge.value("id", ""), std::string("huge"));
        QCOMPARE(huge.value("error", ""),
                 std::string("not valid JSON: column 36, key 'blocks[0]': number beyond "
                             "the range of a double: 1e309"));

        const auto beat1 = wait_for(sub, "heartbeat", 30, any);
        const auto beat2 = wait_for(sub, "heartbeat", 30, any);
        QVERIFY(beat1 && beat2);
        QVERIFY2(beat2->body["step"].get<std::int64_t>() > beat1->body["step"].get<std::int64_t>(),
                 "training stalled");
        const json pong = request(dealer, {{"id", "p"}, {"cmd", "ping"}});
        QVERIFY2(pong.value("ok", false), pong.dump().c_str());
        QCOMPARE(trainer.state(), QProcess::Running);

        // SIGTERM ends the run between two steps; its run_end reaches the subscribers before the
        // sockets close, so a dashboard sees "finished", not a silence.
        ::kill(pid_t(trainer.processId()), SIGTERM);
        const auto end =
            wait_for(sub, "event", 60, [](const json& e) { return e.value("kind", "") == "run_end"; });
        QVERIFY2(end, "no run_end on the wire");
        QCOMPARE(end->body.value("reason", ""), std::string("interrupted"));
        QVERIFY(trainer.waitForFinished(30000));
        QCOMPARE(trainer.exitCode(), 128 + SIGTERM);
    }

    // The file cannot say it is failing; the wire does, once, and training goes on.
    void telemetry_file_failure_is_published() {
        if (::access("/dev/full", W_OK) != 0) QSKIP("/dev/full is not available");
        QTemporaryDir dir;
        LiveTrainer live(dir, {"--telemetry", "/dev/full"});
        QProcess& trainer = live.process;
        QVERIFY(trainer.waitForStarted(10000));
        const std::string& pub = live.pub;
        zmq::context_t ctx;
        zmq::socket_t sub(ctx, zmq::socket_type::sub);
        sub.set(zmq::sockopt::subscribe, "");
        sub.connect(pub);
        const auto loss =
            wait_for(sub, "event", 60, [](const json& e) { return e.value("kind", "") == "telemetry_loss"; });
        QVERIFY2(loss, "no telemetry_loss event");
        QCOMPARE(loss->body.value("state", ""), std::string("failing"));
        QCOMPARE(loss->body.value("file", ""), std::string("/dev/full"));
        QVERIFY2(loss->body.value("error", "").find("No space left on device") != std::string::npos,
                 loss->body.dump().c_str());
        QVERIFY(loss->body.value("lost_to_errors", 0) >= 1);
        QVERIFY2(wait_for(sub, "update", 60, [](const json&) { return true; }), "training stopped");
        QCOMPARE(trainer.state(), QProcess::Running);
    }
};

QTEST_GUILESS_MAIN(TestLiveControl)
#include "test_live_control.moc"
