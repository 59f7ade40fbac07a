// Data-parallel sp-trainer on c10d with Gloo, two ranks on localhost (agent/PROTOCOL.md §11):
// sharded statistics equal one process's over the same gradients, both ranks write the same map
// at every update, a pin sent to rank 0 lands on both ranks at the same step, rank 1 refuses
// commands naming rank 0's endpoint, and killing rank 1 stops rank 0 with a clear error.
#include <QtTest>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "../common/loopback_port.h"
#include "../common/small_model.h"
#include "run_process.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

using sp::test::loopback_port_free;

// A base port with `count` free ports from it (a job's ranks take base + 0..2·ranks-1).
int free_ports(int count) {
    std::mt19937 rng(std::random_device{}());
    for (int attempt = 0; attempt < 200; ++attempt) {
        const int base = 20000 + int(rng() % 30000);
        bool all = true;
        for (int i = 0; i < count && all; ++i) all = loopback_port_free(base + i);
        if (all) return base;
    }
    qFatal("no free ports");
}

std::vector<json> read_jsonl(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    std::vector<json> out;
    for (const QByteArray& line : f.readAll().split('\n'))
        if (!line.trimmed().isEmpty()) out.push_back(json::parse(line.toStdString()));
    return out;
}

// step_id -> the block precisions of that update record.
std::map<std::int64_t, std::vector<std::string>> maps_by_update(const std::vector<json>& records) {
    std::map<std::int64_t, std::vector<std::string>> out;
    for (const json& r : records) {
        if (!r.contains("step_id")) continue;
        std::vector<std::string>& map = out[r["step_id"].get<std::int64_t>()];
        for (const json& d : r["block_details"]) map.push_back(d["precision"].get<std::string>());
    }
    return out;
}

// step -> that step's statistics line.
std::map<std::int64_t, json> stats_by_step(const std::vector<json>& records) {
    std::map<std::int64_t, json> out;
    for (const json& r : records)
        if (!r.contains("type") && r.contains("blocks") && r.contains("step"))
            out[r["step"].get<std::int64_t>()] = r;
    return out;
}

QString write_config(const QTemporaryDir& dir, const QString& name, const json& config) {
    QFile f(dir.filePath(name));
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write the config");
    f.write(QByteArray::fromStdString(config.dump()));
    return f.fileName();
}

// Two ranks through the launcher, to completion; returns the launcher's run.
sp::test::Run run_job(const QTemporaryDir& dir, const QString& name, const json& config) {
    const QStringList args = QStringList{"--spawn",
                                         "2",
                                         "--steps",
                                         "30",
                                         "--seed",
                                         "7",
                                         "--eval-every",
                                         "1000",
                                         "--threads",
                                         "1",
                                         "--every-step-stats",
                                         "--no-network",
                                         "--quiet",
                                         "--config",
                                         write_config(dir, name + ".json", config),
                                         "--telemetry",
                                         dir.filePath(name + ".jsonl")} +
                             sp::test::small_model_args();
    return sp::test::run(SP_TRAINER_PATH, args, dir.path(), 240000);
}

double relative_difference(double a, double b) {
    return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-30});
}

}  // namespace

class TestDataParallel : public QObject {
    Q_OBJECT
  private slots:
    void shardedStatisticsMatchOneProcessAndMapsAgree();
    void pinReachesBothRanksAndKillingRank1StopsRank0();
    void launcherStopsAStalledRankAfterAFailure();
};

void TestDataParallel::shardedStatisticsMatchOneProcessAndMapsAgree() {
    QTemporaryDir dir;
    const json base = {{"update_interval_steps", 5}, {"warmup_steps", 5}, {"process_group_timeout_s", 30}};
    json sharded = base;
    sharded["distributed_stats_mode"] = "sharded";
    const sp::test::Run replicated_run = run_job(dir, "replicated", base);
    QVERIFY2(replicated_run.exit_code == 0, replicated_run.out.constData());
    const sp::test::Run sharded_run = run_job(dir, "sharded", sharded);
    QVERIFY2(sharded_run.exit_code == 0, sharded_run.out.constData());
    QVERIFY2(sharded_run.out.contains("[rank 0] ") && sharded_run.out.contains("[rank 1] "),
             "the launcher prefixes each rank's output");

    const auto r0 = read_jsonl(dir.filePath("replicated.rank0.jsonl"));
    const auto s0 = read_jsonl(dir.filePath("sharded.rank0.jsonl"));
    const auto s1 = read_jsonl(dir.filePath("sharded.rank1.jsonl"));
    // Rank 0 of the replicated job reads the whole all-reduced gradients: one process over the same
    // gradients the sharded job's ranks read half of each. Before the first switch both jobs train
    // identically, so their steps' statistics must agree.
    const auto one_process = stats_by_step(r0), merged = stats_by_step(s0), merged_1 = stats_by_step(s1);
    QCOMPARE(int(merged.size()), 30);
    int compared = 0;
    for (std::int64_t step = 0; step < 5; ++step) {
        const json& a = one_process.at(step)["blocks"];
        const json& b = merged.at(step)["blocks"];
        QCOMPARE(a.size(), b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            QCOMPARE(a[i]["numel"].get<std::uint64_t>(), b[i]["numel"].get<std::uint64_t>());
            for (const char* key : {"l2_norm", "max_abs", "variance"}) {
                const double x = a[i][key].get<double>(), y = b[i][key].get<double>();
                QVERIFY2(
                    relative_difference(x, y) < 1e-9,
                    qPrintable(
                        QString("step %1 block %2 %3: %4 vs %5").arg(step).arg(i).arg(key).arg(x).arg(y)));
            }
            QVERIFY(std::abs(a[i]["mean"].get<double>() - b[i]["mean"].get<double>()) < 1e-12);
            ++compared;
        }
    }
    QVERIFY(compared >= 15);
    // Every rank merges the same packs in the same order: identical statistics, to the bit.
    for (const auto& [step, line] : merged)
        QCOMPARE(line["blocks"].dump(), merged_1.at(step)["blocks"].dump());

    // Both ranks of both jobs: the same updates with the same maps.
    for (const char* job : {"replicated", "sharded"}) {
        const auto maps0 = maps_by_update(read_jsonl(dir.filePath(QString(job) + ".rank0.jsonl")));
        const auto maps1 = maps_by_update(read_jsonl(dir.filePath(QString(job) + ".rank1.jsonl")));
        QVERIFY2(maps0.size() >= 5, job);
        QVERIFY(maps0 == maps1);
    }
}

namespace {

struct Message {
    std::string topic;
    json body;
};

// The first message of `topic` on `sub` that `pred` accepts, within `seconds`.
template <typename Pred>
std::optional<Message> wait_for(zmq::socket_t& sub, const std::string& topic, double seconds, Pred pred) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
        zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(100));
        if (!(item.revents & ZMQ_POLLIN)) continue;
        zmq::message_t t, body;
        if (!sub.recv(t) || !t.more() || !sub.recv(body)) return std::nullopt;
        Message m{t.to_string(), json::parse(body.to_string())};
        if (m.topic == topic && pred(m.body)) return m;
    }
    return std::nullopt;
}

json request(zmq::context_t& ctx, const std::string& endpoint, const json& req) {
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(endpoint);
    dealer.send(zmq::buffer(req.dump()), zmq::send_flags::none);
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(20000));
    zmq::message_t reply;
    if (!(item.revents & ZMQ_POLLIN) || !dealer.recv(reply)) return json();
    return json::parse(reply.to_string());
}

std::string endpoint(int port) {
    return "tcp://127.0.0.1:" + std::to_string(port);
}

// One rank of a live job, killed when the test ends.
struct RankProcess {
    QProcess process;
    RankProcess(const QStringList& common, int rank) {
        process.start(QStringLiteral(SP_TRAINER_PATH), common + QStringList{"--rank", QString::number(rank)});
    }
    ~RankProcess() {
        process.kill();
        process.waitForFinished(10000);
    }
};

}  // namespace

void TestDataParallel::pinReachesBothRanksAndKillingRank1StopsRank0() {
    QTemporaryDir dir;
    const int base = free_ports(4);
    const int master = free_ports(1);
    const QStringList common =
        QStringList{
            "--world-size",
            "2",
            "--master-port",
            QString::number(master),
            "--steps",
            "100000",
            "--eval-every",
            "100000",
            "--threads",
            "1",
            "--quiet",
            "--telemetry-endpoint",
            QString::fromStdString(endpoint(base)),
            "--control-endpoint",
            QString::fromStdString(endpoint(base + 1)),
            "--config",
            write_config(dir, "job.json", {{"update_interval_steps", 5}, {"process_group_timeout_s", 20}}),
            "--telemetry",
            dir.filePath("live.jsonl")} +
        sp::test::small_model_args();
    RankProcess rank0(common, 0), rank1(common, 1);

    zmq::context_t ctx;
    zmq::socket_t sub0(ctx, zmq::socket_type::sub), sub1(ctx, zmq::socket_type::sub);
    for (zmq::socket_t* s : {&sub0, &sub1}) s->set(zmq::sockopt::subscribe, "");
    sub0.connect(endpoint(base));
    sub1.connect(endpoint(base + 2));  // rank 1: base + 2
    const auto any = [](const json&) { return true; };
    const auto hello1 = wait_for(sub1, "hello", 90, any);
    QVERIFY2(hello1, "no hello from rank 1");
    QCOMPARE(hello1->body["rank"].get<int>(), 1);
    QVERIFY2(wait_for(sub0, "update", 90, any), "no update from rank 0");

    // Rank 1 refuses, naming rank 0's control endpoint.
    const json refused = request(ctx, endpoint(base + 3),
                                 {{"id", "r1"}, {"cmd", "pin"}, {"blocks", {1}}, {"precision", "int8"}});
    QVERIFY2(!refused.value("ok", true), refused.dump().c_str());
    const std::string why = refused.value("error", "");
    QVERIFY2(why.rfind("not_leader: rank 1", 0) == 0 && why.find(endpoint(base + 1)) != std::string::npos,
             why.c_str());

    // A pin sent to rank 0 is applied by both ranks at the step rank 0 announced.
    const json ack = request(ctx, endpoint(base + 1),
                             {{"id", "p0"}, {"cmd", "pin"}, {"blocks", {1}}, {"precision", "int8"}});
    QVERIFY2(ack.value("ok", false), ack.dump().c_str());
    const auto effective = ack["effective_step"].get<std::int64_t>();
    const auto is_pin = [](const json& e) {
        return e.value("kind", "") == "command" && e.value("id", "") == "p0";
    };
    const auto on0 = wait_for(sub0, "event", 60, is_pin);
    const auto on1 = wait_for(sub1, "event", 60, is_pin);
    QVERIFY2(on0 && on1, "the pin's command event is missing on a rank");
    QCOMPARE(on0->body["step"].get<std::int64_t>(), effective);
    QCOMPARE(on1->body["step"].get<std::int64_t>(), effective);
    QVERIFY(on1->body.value("ok", false));
    const auto pinned = [](const json& u) {
        return u["block_details"]["1"].value("precision", "") == "int8";
    };
    const auto u0 = wait_for(sub0, "update", 60, pinned);
    const auto u1 = wait_for(sub1, "update", 60, pinned);
    QVERIFY2(u0 && u1, "no update with the pinned block on a rank");

    // Rank 1 dies: rank 0 stops within the timeout, says which rank and collective, and exits non-zero.
    const auto killed_at = Clock::now();
    rank1.process.kill();
    QVERIFY(rank1.process.waitForFinished(10000));
    QVERIFY2(rank0.process.waitForFinished(60000), "rank 0 did not stop after rank 1 died");
    const double stopped_after = std::chrono::duration<double>(Clock::now() - killed_at).count();
    QVERIFY2(stopped_after < 20 + 10, qPrintable(QString("rank 0 took %1 s").arg(stopped_after)));
    QCOMPARE(rank0.process.exitStatus(), QProcess::NormalExit);
    QCOMPARE(rank0.process.exitCode(), 1);
    const QString err = QString::fromUtf8(rank0.process.readAllStandardError());
    QVERIFY2(err.contains("rank 0 of 2: the ") && err.contains("rank 1 died or stopped answering"),
             qPrintable(err));
    // Its telemetry file ends with the run's end, saying why.
    const auto records = read_jsonl(dir.filePath("live.rank0.jsonl"));
    QVERIFY(!records.empty());
    QCOMPARE(records.back().value("kind", ""), std::string("run_end"));
    QVERIFY2(records.back().value("reason", "").rfind("error: rank 0 of 2", 0) == 0,
             records.back().dump().c_str());
}

namespace {

// The pid of the launcher's child that runs `--rank R` (its command line holds "--rank\0R\0"), or
// -1 while there is none.
pid_t rank_child(qint64 launcher, int rank) {
    const QByteArray wanted = QByteArray("--rank") + '\0' + QByteArray::number(rank) + '\0';
    for (const QString& entry : QDir("/proc").entryList(QDir::Dirs)) {
        bool numeric = false;
        const qint64 pid = entry.toLongLong(&numeric);
        if (!numeric) continue;
        QFile stat("/proc/" + entry + "/stat"), cmdline("/proc/" + entry + "/cmdline");
        if (!stat.open(QIODevice::ReadOnly) || !cmdline.open(QIODevice::ReadOnly)) continue;
        // "pid (comm) state ppid ...": the ppid is the second field after the closing parenthesis.
        const QByteArray text = stat.readAll();
        const QList<QByteArray> after = text.mid(text.lastIndexOf(')') + 2).split(' ');
        if (after.size() > 1 && after[1].toLongLong() == launcher && cmdline.readAll().contains(wanted))
            return pid_t(pid);
    }
    return -1;
}

}  // namespace

// One rank stalls (SIGSTOP) in the middle of a job: the other fails its collective within
// process_group_timeout_s, and the launcher then stops the stalled rank instead of waiting for it
// for good, and exits with the first failure.
void TestDataParallel::launcherStopsAStalledRankAfterAFailure() {
    QTemporaryDir dir;
    QProcess launcher;
    launcher.setProcessChannelMode(QProcess::MergedChannels);
    launcher.start(SP_TRAINER_PATH,
                   QStringList{"--spawn", "2", "--steps", "1000000", "--eval-every", "1000000", "--threads",
                               "1", "--no-network", "--no-telemetry", "--config",
                               write_config(dir, "stall.json", {{"process_group_timeout_s", 3}})} +
                       sp::test::small_model_args());
    QVERIFY(launcher.waitForStarted(10000));
    QByteArray out;
    // Both ranks train: each has printed a progress line.
    QElapsedTimer clock;
    clock.start();
    while (!(out.contains("[rank 0] step") && out.contains("[rank 1] step")) && clock.elapsed() < 120000) {
        launcher.waitForReadyRead(1000);
        out += launcher.readAll();
    }
    QVERIFY2(out.contains("[rank 1] step"), out.constData());
    const pid_t stalled = rank_child(launcher.processId(), 1);
    QVERIFY(stalled > 0);
    QCOMPARE(::kill(stalled, SIGSTOP), 0);
    // Rank 0 times out (3 s), the launcher stops rank 1 (SIGTERM + SIGCONT, SIGKILL after 10 s).
    const bool finished = launcher.waitForFinished(90000);
    out += launcher.readAll();
    if (!finished) {
        ::kill(stalled, SIGKILL);
        launcher.kill();
        launcher.waitForFinished();
    }
    QVERIFY2(finished, ("the launcher waited for the stalled rank: " + out.right(2000)).constData());
    QVERIFY2(launcher.exitCode() != 0, out.right(2000).constData());
    QVERIFY2(out.contains("[launcher] stopping the other ranks"), out.right(2000).constData());
}

QTEST_GUILESS_MAIN(TestDataParallel)
#include "test_data_parallel.moc"
