// The agent's ZeroMQ server end to end over real sockets: telemetry topics and seq, every control
// reply class with DEALER and REQ framing, the per-client rate limit, a seeded fuzz of 10,000
// requests, a stalled subscriber that must not slow the producer, and queue-drop accounting.
// CURVE/ZAP admission and endpoint refusal are in test_agent_server_security.cpp.
// Every wait is a poll loop with a deadline of seconds, never a sleep used as synchronisation.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "../common/qtest_std_string.h"
#include "agent_server.h"
#include "agent_server_fixtures.h"

using nlohmann::json;
using namespace std::chrono_literals;
namespace proto = sp::protocol;
namespace tr = sp::transport;
using Clock = std::chrono::steady_clock;
using namespace sp::test::agent_server_fixtures;

namespace {

zmq::socket_t make_sub(zmq::context_t& ctx, const std::string& ep) {
    zmq::socket_t sub(ctx, zmq::socket_type::sub);
    sub.set(zmq::sockopt::linger, 0);
    sub.set(zmq::sockopt::subscribe, "");
    sub.connect(ep);
    return sub;
}

zmq::socket_t make_dealer(zmq::context_t& ctx, const std::string& ep) {
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    d.set(zmq::sockopt::sndtimeo, 5000);
    d.connect(ep);
    return d;
}

sp::UpdateRecord make_update(std::int64_t step, int blocks) {
    sp::UpdateRecord r;
    r.step_id = step;
    r.timestamp = 1717243260.25;
    r.blocks_bf16 = blocks;
    for (int i = 0; i < blocks; ++i) {
        sp::BlockDetail d;
        d.id = i;
        d.sensitivity = 0.5;
        r.block_details.push_back(d);
    }
    return r;
}

sp::EventRecord make_event(std::int64_t step, const std::string& kind = "warning") {
    return sp::event_from_json_text(kind, step, 1717243270.0, "{\"message\":\"test\"}");
}

}  // namespace

class TestAgentServer : public QObject {
    Q_OBJECT

  private slots:
    void telemetry_topics_and_seq() {
        QTemporaryDir dir;
        FakeBackend backend;
        auto opts = ipc_options(dir);
        tr::AgentServer server(opts, backend);
        server.set_run("run-1", sp::uniform_layout(4, 100), "{\"mode\":\"dynamic\"}");
        zmq::context_t ctx;
        auto sub = make_sub(ctx, opts.telemetry_endpoint);
        // Slow joiner: hello repeats, so the first one proves the subscription is live.
        auto hello = wait_topic(sub, "hello");
        QCOMPARE(hello.size(), std::size_t(2));
        QCOMPARE(json::parse(hello[1])["run_id"].get<std::string>(), std::string("run-1"));

        sp::StepStatsRecord stats;
        stats.step = 7;
        QVERIFY(server.publish(make_update(5, 4)));
        QVERIFY(server.publish(make_event(6)));
        QVERIFY(server.publish(stats));
        QVERIFY(server.publish(sp::RunHeader{}));  // accepted, not published
        std::vector<std::string> want = {"update", "event", "stats"};
        std::vector<std::string> got;
        std::uint64_t last = 0;
        bool heartbeat = false;
        const auto end = Clock::now() + kDeadline;
        while ((got.size() < 3 || !heartbeat) && Clock::now() < end) {
            auto msg = recv_multipart(sub, 100ms);
            if (msg.size() != 2) continue;
            auto seq = proto::seq_of(msg[1]);
            QVERIFY(seq.has_value());
            QVERIFY2(*seq > last, "seq must increase");
            last = *seq;
            if (msg[0] == "heartbeat") heartbeat = true;
            if (msg[0] == "update" || msg[0] == "event" || msg[0] == "stats") got.push_back(msg[0]);
        }
        QCOMPARE(got, want);
        QVERIFY(heartbeat);
        QCOMPARE(server.published(), std::uint64_t(3));
    }

    void stream_sends_the_shared_line() {
        // The agent gives one record to its file and to this server: the message carries the record's
        // one serialization (RecordLine), the same bytes the file's writer writes.
        QTemporaryDir dir;
        FakeBackend backend;
        auto opts = ipc_options(dir);
        tr::AgentServer server(opts, backend);
        server.set_run("run-1", sp::uniform_layout(4, 100), "{\"mode\":\"dynamic\"}");
        zmq::context_t ctx;
        auto sub = make_sub(ctx, opts.telemetry_endpoint);
        QVERIFY(!wait_topic(sub, "hello").empty());
        const sp::SharedRecord record = sp::share_record(make_update(9, 4));
        QVERIFY(server.publish(record));
        const auto update = wait_topic(sub, "update");
        QCOMPARE(update.size(), std::size_t(2));
        QVERIFY(record->serialized());  // into the shared record, for the file's writer to reuse
        QCOMPARE(update[1], proto::with_seq(record->line(), *proto::seq_of(update[1])));
    }

    void control_replies() {
        QTemporaryDir dir;
        FakeBackend backend;
        auto opts = ipc_options(dir);
        tr::AgentServer server(opts, backend);
        server.set_run("run-1", sp::uniform_layout(4, 100), "{}");
        server.set_step(17);
        zmq::context_t ctx;
        auto dealer = make_dealer(ctx, opts.control_endpoint);

        auto pong = request(dealer, R"({"id":"p1","cmd":"ping"})");
        QVERIFY(pong);
        QCOMPARE((*pong)["id"].get<std::string>(), std::string("p1"));
        QVERIFY((*pong)["ok"].get<bool>());
        QCOMPARE((*pong)["step"].get<int>(), 17);

        auto snap = request(dealer, R"({"id":"s1","cmd":"snapshot"})");
        QVERIFY(snap);
        QVERIFY(!(*snap)["ok"].get<bool>());
        QVERIFY((*snap)["error"].get<std::string>().find("no snapshot yet") != std::string::npos);

        proto::Snapshot s;
        s.run_id = "run-1";
        s.step = 17;
        s.layout = sp::uniform_layout(4, 100);
        s.precision.assign(4, sp::Precision::bf16);
        s.pins.assign(4, std::nullopt);
        QVERIFY(server.publish(make_event(1)));
        server.update_snapshot(s);
        std::optional<json> snap2;
        // The snapshot is swapped in by the I/O thread; poll until it answers with one.
        for (int i = 0; i < 100 && !(snap2 && (*snap2)["ok"].get<bool>()); ++i)
            snap2 = request(dealer, R"({"id":"s2","cmd":"snapshot"})");
        QVERIFY(snap2 && (*snap2)["ok"].get<bool>());
        QCOMPARE((*snap2)["snapshot"]["run_id"].get<std::string>(), std::string("run-1"));
        // The event queued before the snapshot has seq 1 or later (after hellos): it is included.
        QVERIFY((*snap2)["snapshot"]["seq"].get<std::uint64_t>() >= 1);

        auto ack = request(dealer, R"({"id":"c1","cmd":"pin","blocks":[1,2],"precision":"int8"})");
        QVERIFY(ack);
        QVERIFY((*ack)["ok"].get<bool>());
        QCOMPARE((*ack)["effective_step"].get<int>(), 42);
        {
            std::lock_guard lock(backend.mutex);
            QCOMPARE(backend.ids.size(), std::size_t(1));
            QCOMPARE(backend.ids[0], std::string("c1"));
            QVERIFY(backend.commands[0].kind == sp::Command::Kind::pin);
            QCOMPARE(backend.commands[0].blocks, (std::vector<int>{1, 2}));
        }

        const std::vector<std::string> bad = {
            "",
            "{\"id\":\"a\"",
            "[1,2]",
            R"({"cmd":"ping"})",
            R"({"id":"a"})",
            R"({"id":"a","cmd":"explode"})",
            R"({"id":"a","cmd":"pin","blocks":[12],"precision":"int8"})",
            R"({"id":"a","cmd":"pin","blocks":[1],"precision":"fp4"})",
            R"({"id":"a","cmd":"set_mode","mode":"fast"})",
            std::string(70 * 1024, 'x'),
        };
        for (const auto& b : bad) {
            auto r = request(dealer, b);
            QVERIFY2(r, b.substr(0, 60).c_str());
            QVERIFY(!(*r)["ok"].get<bool>());
            QVERIFY(!(*r)["error"].get<std::string>().empty());
        }
        // A command the agent would reject when applying it is rejected in the reply, with its id.
        auto refused = request(dealer, R"({"id":"c2","cmd":"pin","blocks":[1],"precision":"int4"})");
        QVERIFY(refused && !(*refused)["ok"].get<bool>());
        QCOMPARE((*refused)["id"].get<std::string>(), std::string("c2"));
        QVERIFY((*refused)["error"].get<std::string>().find("cannot be materialized") != std::string::npos);
        // Two payload frames: one rejection.
        dealer.send(zmq::str_buffer("{\"id\":\"m\",\"cmd\":\"ping\"}"), zmq::send_flags::sndmore);
        dealer.send(zmq::str_buffer("{}"), zmq::send_flags::none);
        auto multi = recv_multipart(dealer, 5000ms);
        QCOMPARE(multi.size(), std::size_t(1));
        QVERIFY(json::parse(multi[0])["error"].get<std::string>().find("expected one frame") !=
                std::string::npos);
        {
            std::lock_guard lock(backend.mutex);
            QCOMPARE(backend.ids.size(), std::size_t(1));  // rejected requests changed nothing
        }

        // REQ framing: the socket adds and strips the empty delimiter itself.
        zmq::socket_t req(ctx, zmq::socket_type::req);
        req.set(zmq::sockopt::linger, 0);
        req.set(zmq::sockopt::sndtimeo, 5000);
        req.connect(opts.control_endpoint);
        auto r1 = request(req, R"({"id":"q1","cmd":"ping"})");
        QVERIFY(r1 && (*r1)["ok"].get<bool>());
        auto r2 = request(req, R"({"id":"q2","cmd":"release_all"})");
        QVERIFY(r2 && (*r2)["ok"].get<bool>());
        QCOMPARE((*r2)["effective_step"].get<int>(), 42);
    }

    // Beyond its budget a client is answered at once with rate_limited, under its request's id, and
    // the backend never sees the request; another client keeps its own budget.
    void rate_limit_is_per_client() {
        QTemporaryDir dir;
        FakeBackend backend;
        auto opts = ipc_options(dir);
        opts.client_requests_per_second = 5;
        tr::AgentServer server(opts, backend);
        server.set_run("run-1", sp::uniform_layout(4, 100), "{}");
        zmq::context_t ctx;
        auto flooder = make_dealer(ctx, opts.control_endpoint);
        constexpr int kBurst = 50;
        for (int i = 0; i < kBurst; ++i) {
            const std::string req = "{\"id\":\"r" + std::to_string(i) +
                                    "\",\"cmd\":\"pin\",\"blocks\":[1],\"precision\":\"int8\"}";
            flooder.send(zmq::buffer(req), zmq::send_flags::none);
        }
        int ok = 0, limited = 0;
        for (int i = 0; i < kBurst; ++i) {
            zmq::pollitem_t item{flooder.handle(), 0, ZMQ_POLLIN, 0};
            QVERIFY(zmq::poll(&item, 1, std::chrono::milliseconds(10000)) == 1);
            zmq::message_t reply;
            QVERIFY(flooder.recv(reply));
            const json j = json::parse(reply.to_string());
            QCOMPARE(j["id"].get<std::string>(), "r" + std::to_string(i));  // in order, each under its id
            if (j["ok"].get<bool>()) {
                ++ok;
            } else {
                QVERIFY2(j["error"].get<std::string>().rfind("rate_limited: more than 5 requests per second",
                                                             0) == 0,
                         j.dump().c_str());
                ++limited;
            }
        }
        // A burst of at most one second's budget (plus what refilled while it was read) gets through.
        QVERIFY2(ok >= 5 && ok <= 10, qPrintable(QString::number(ok)));
        QCOMPARE(ok + limited, kBurst);
        {
            std::lock_guard lock(backend.mutex);
            QCOMPARE(int(backend.commands.size()), ok);
        }

        auto other = make_dealer(ctx, opts.control_endpoint);
        const auto pong = request(other, R"({"id":"p","cmd":"ping"})");
        QVERIFY(pong && (*pong)["ok"].get<bool>());
    }

    void fuzz() {
        QTemporaryDir dir;
        FakeBackend backend;
        auto opts = ipc_options(dir);
        tr::AgentServer server(opts, backend);
        server.set_run("run-1", sp::uniform_layout(8, 100), "{}");
        zmq::context_t ctx;
        auto dealer = make_dealer(ctx, opts.control_endpoint);
        dealer.set(zmq::sockopt::sndhwm, 0);
        dealer.set(zmq::sockopt::rcvhwm, 0);
        const std::vector<std::string> valid = {
            R"({"id":"f","cmd":"ping"})",
            R"({"id":"f","cmd":"snapshot"})",
            R"({"id":"f","cmd":"pin","blocks":[1,2],"precision":"int8"})",
            R"({"id":"f","cmd":"release","blocks":[3]})",
            R"({"id":"f","cmd":"set_mode","mode":"static"})",
        };
        std::mt19937_64 rng(20240601);
        auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
        constexpr int kRequests = 10000;
        constexpr int kBatch = 200;  // bounded in flight: neither side's queue overflows
        int expected = 0, replies = 0, multi = 0;
        for (int sent = 0; sent < kRequests;) {
            int batch_expected = 0;
            for (int i = 0; i < kBatch && sent < kRequests; ++i, ++sent) {
                std::string frame;
                const auto kind = pick(10);
                if (kind < 3) {
                    frame.resize(pick(200));
                    for (char& c : frame) c = static_cast<char>(rng());
                } else if (kind < 8) {
                    frame = valid[pick(valid.size())];
                    for (std::size_t m = 0, n = 1 + pick(4); m < n && !frame.empty(); ++m) {
                        const auto at = pick(frame.size());
                        switch (pick(3)) {
                            case 0:
                                frame[at] = static_cast<char>(rng());
                                break;
                            case 1:
                                frame.erase(at, 1);
                                break;
                            default:
                                frame.insert(at, 1, "{}[]\",:0a"[pick(9)]);
                        }
                    }
                } else if (kind < 9) {
                    frame.assign(70 * 1024, static_cast<char>('a' + pick(26)));
                } else {
                    frame = valid[pick(valid.size())];
                    dealer.send(zmq::buffer(frame), zmq::send_flags::sndmore);
                    ++multi;
                }
                dealer.send(zmq::buffer(frame), zmq::send_flags::none);
                ++batch_expected;  // a multi-frame message gets exactly one rejection too
            }
            expected += batch_expected;
            const auto end = Clock::now() + kDeadline;
            while (replies < expected && Clock::now() < end) {
                auto r = recv_multipart(dealer, 100ms);
                if (r.empty()) continue;
                QCOMPARE(r.size(), std::size_t(1));
                std::string error;
                QVERIFY2(proto::parse_reply(r[0], error), error.c_str());
                ++replies;
            }
            QCOMPARE(replies, expected);
        }
        QVERIFY(multi > 0);
        // Nothing extra arrives, and the server is still alive.
        QVERIFY(recv_multipart(dealer, 200ms).empty());
        auto pong = request(dealer, R"({"id":"end","cmd":"ping"})");
        QVERIFY(pong && (*pong)["ok"].get<bool>());
    }

    void stalled_subscriber_does_not_block_producer() {
        QTemporaryDir dir;
        FakeBackend backend;
        auto opts = ipc_options(dir);
        opts.queue_capacity = 1 << 16;
        tr::AgentServer server(opts, backend);
        server.set_run("run-1", sp::uniform_layout(16, 100), "{}");
        zmq::context_t ctx;
        zmq::socket_t stalled(ctx, zmq::socket_type::sub);
        stalled.set(zmq::sockopt::linger, 0);
        stalled.set(zmq::sockopt::rcvhwm, 10);
        stalled.set(zmq::sockopt::subscribe, "");
        stalled.connect(opts.telemetry_endpoint);
        auto reader = make_sub(ctx, opts.telemetry_endpoint);
        QVERIFY(!wait_topic(stalled, "hello").empty());
        QVERIFY(!wait_topic(reader, "hello").empty());

        std::atomic<bool> stop{false};
        std::atomic<int> received{0};
        std::atomic<bool> saw_end{false};
        std::atomic<std::uint64_t> reader_last{0};
        std::thread reading([&] {
            const auto end = Clock::now() + 30s;
            while (!stop.load() && Clock::now() < end) {
                auto msg = recv_multipart(reader, 50ms);
                if (msg.size() != 2) continue;
                reader_last = proto::seq_of(msg[1]).value_or(0);
                if (msg[0] == "update") ++received;
                if (msg[0] == "event" && msg[1].find("end-marker") != std::string::npos) saw_end = true;
            }
        });

        constexpr int kRecords = 20000;
        std::vector<double> us;
        us.reserve(kRecords);
        for (int i = 0; i < kRecords; ++i) {
            auto rec = make_update(i, 16);
            const auto t0 = Clock::now();
            QVERIFY(server.publish(std::move(rec)));
            us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        std::sort(us.begin(), us.end());
        qInfo("publish(): median %.2f us, max %.1f us over %d calls", us[us.size() / 2], us.back(), kRecords);
        // Blocking on the network would take seconds; 250 ms leaves room for a descheduled thread.
        QVERIFY(us.back() < 250000.0);

        const auto end = Clock::now() + kDeadline;
        while (!saw_end.load() && Clock::now() < end) {
            sp::EventRecord marker = make_event(kRecords, "end-marker");
            server.publish(marker);
            for (int i = 0; i < 10 && !saw_end.load(); ++i) std::this_thread::sleep_for(10ms);
        }
        stop = true;
        reading.join();
        QVERIFY(saw_end.load());
        QVERIFY(received.load() > 0);
        qInfo("reading subscriber: %d of %d updates", received.load(), kRecords);

        // The stalled subscriber now reads: its high-water mark dropped messages, visible as seq gaps.
        std::uint64_t last = 0, gaps = 0, missed = 0, got = 0;
        const auto drain_end = Clock::now() + kDeadline;
        while (Clock::now() < drain_end) {
            auto msg = recv_multipart(stalled, 500ms);
            if (msg.size() != 2) break;
            auto seq = proto::seq_of(msg[1]);
            QVERIFY(seq.has_value());
            if (last != 0 && *seq > last + 1) {
                ++gaps;
                missed += *seq - last - 1;
            }
            last = *seq;
            ++got;
            // Hello and heartbeat never stop: stop once caught up with what the reader saw.
            if (last >= reader_last.load()) break;
        }
        qInfo("stalled subscriber: %llu messages, %llu gaps, %llu missed", (unsigned long long)got,
              (unsigned long long)gaps, (unsigned long long)missed);
        QVERIFY(gaps > 0);
    }

    void full_queue_counts_drops() {
        QTemporaryDir dir;
        FakeBackend backend;
        auto opts = ipc_options(dir);
        opts.queue_capacity = 1;
        tr::AgentServer server(opts, backend);
        zmq::context_t ctx;
        auto sub = make_sub(ctx, opts.telemetry_endpoint);
        sub.set(zmq::sockopt::rcvhwm, 0);
        QVERIFY(!wait_topic(sub, "hello").empty());
        std::atomic<bool> stop{false};
        std::atomic<std::uint64_t> announced_total{0};
        std::thread reading([&] {
            const auto end = Clock::now() + 30s;
            while (!stop.load() && Clock::now() < end) {
                auto msg = recv_multipart(sub, 50ms);
                if (msg.size() == 2 && msg[0] == "event" && msg[1].find("\"dropped\"") != std::string::npos) {
                    const auto j = json::parse(msg[1]);
                    announced_total = std::max(announced_total.load(), j["total"].get<std::uint64_t>());
                }
            }
        });
        constexpr std::uint64_t kPushes = 100000;
        std::uint64_t refused = 0;
        for (std::uint64_t i = 0; i < kPushes; ++i)
            if (!server.publish(make_event(static_cast<std::int64_t>(i)))) ++refused;
        const auto end = Clock::now() + kDeadline;
        while (server.published() + server.dropped() < kPushes && Clock::now() < end)
            std::this_thread::sleep_for(5ms);  // polling a counter with a deadline
        QCOMPARE(server.published() + server.dropped(), kPushes);
        QCOMPARE(server.dropped(), refused);
        QVERIFY(refused > 0);  // capacity 1 against a tight loop: practically certain
        while (announced_total.load() < refused && Clock::now() < end) std::this_thread::sleep_for(5ms);
        stop = true;
        reading.join();
        QCOMPARE(announced_total.load(), refused);
        qInfo("pushed %llu, published %llu, dropped %llu", (unsigned long long)kPushes,
              (unsigned long long)server.published(), (unsigned long long)refused);
    }
};

QTEST_APPLESS_MAIN(TestAgentServer)
#include "test_agent_server.moc"
