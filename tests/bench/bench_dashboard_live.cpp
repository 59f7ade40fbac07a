// What following a live run costs the dashboard: an in-process fake agent (tests/common/fake_agent.h)
// publishes updates at 10/s plus heartbeats and hellos; a LiveSource feeding a RunSession (store,
// event log) consumes them for a while. Reported: the consumer's CPU time (the source's worker
// thread plus the thread running the event loop) over the wall time, and, as the baseline measured
// in this process, the CPU of just reading the same message bodies (seq_of + sp::parse_record).
//
//   bench_dashboard_live [SECONDS]   (default 10 per case)
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTemporaryDir>
#include <QTimer>

#include "fake_agent.h"
#include "sp/ui/live_source.h"
#include "sp/ui/run_session.h"

namespace {

double thread_cpu() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double process_cpu() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Result {
    double wall = 0, worker_cpu = 0, gui_cpu = 0, publisher_cpu = 0, process_cpu = 0;
    std::uint64_t published = 0, received = 0, lost = 0, messages = 0;
    double parse_cpu_per_update = 0;  // baseline: seconds to read one update body
};

// The baseline: the same bodies the agent sends, read the way the worker reads them.
double parse_cpu_per_update(int blocks) {
    std::vector<std::string> bodies;
    bodies.reserve(50);
    for (int i = 0; i < 50; ++i) {
        bodies.push_back(sp::protocol::with_seq(sp::to_json_line(sp::test::make_update(blocks, i)), 100 + i));
    }
    sp::TelemetryRecord rec;
    std::string error;
    const int rounds = blocks >= 1000 ? 4 : 100;
    std::uint64_t sink = 0;
    const double t0 = thread_cpu();
    for (int r = 0; r < rounds; ++r) {
        for (const std::string& b : bodies) {
            sink += sp::protocol::seq_of(b).value_or(0);
            if (sp::parse_record(b, rec, error) != sp::ParseStatus::ok) std::abort();
        }
    }
    const double t = thread_cpu() - t0;
    if (sink == 0) std::abort();
    return t / double(rounds * bodies.size());
}

Result run_case(int blocks, double seconds) {
    QTemporaryDir dir;
    sp::test::FakeAgent::Options ao;
    ao.blocks = blocks;
    ao.heartbeat_ms = 1000;
    ao.hello_ms = 2000;
    sp::test::FakeAgent agent(dir.path().toStdString(), ao);
    agent.start("bench-run");

    QString error;
    auto endpoints = sp::ui::parseEndpointSpec(QString::fromStdString(agent.spec()), &error);
    auto source = std::make_unique<sp::ui::LiveSource>(*endpoints);
    sp::ui::LiveSource* live = source.get();
    sp::ui::RunSession session(std::move(source));
    session.start();
    // Joined: the snapshot (taken on the first heartbeat) is in.
    QElapsedTimer join;
    join.start();
    while (live->counters().snapshots == 0 && join.elapsed() < 10000) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    }

    // Records built ahead of time: the publisher's own serialisation is not what we measure.
    std::vector<sp::UpdateRecord> records;
    records.reserve(20);
    for (int i = 0; i < 20; ++i) records.push_back(sp::test::make_update(blocks, i));

    Result res;
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> published{0};
    double publisher_cpu = 0;
    const double worker0 = live->workerCpuSeconds();
    const double gui0 = thread_cpu();
    const double process0 = process_cpu();
    QElapsedTimer wall;
    wall.start();
    std::thread publisher([&] {
        const double c0 = thread_cpu();
        auto next = std::chrono::steady_clock::now();
        for (std::int64_t step = 1; !done; ++step) {
            sp::UpdateRecord r = records[std::size_t(step) % records.size()];
            r.step_id = step;
            agent.publish_update(r);
            ++published;
            next += std::chrono::milliseconds(100);
            std::this_thread::sleep_until(next);
        }
        publisher_cpu = thread_cpu() - c0;
    });
    QEventLoop loop;
    QTimer::singleShot(int(seconds * 1000), &loop, &QEventLoop::quit);
    loop.exec();
    done = true;
    publisher.join();
    // Let the last messages arrive (not counted in the CPU figures).
    res.wall = double(wall.nsecsElapsed()) * 1e-9;
    res.gui_cpu = thread_cpu() - gui0;
    res.worker_cpu = live->workerCpuSeconds() - worker0;
    res.publisher_cpu = publisher_cpu;
    res.process_cpu = process_cpu() - process0;
    QElapsedTimer drain;
    drain.start();
    while (session.store().updateCount() < published && drain.elapsed() < 2000) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    }
    const sp::ui::LiveCounters c = live->counters();
    res.published = published;
    res.received = session.store().updateCount();
    res.lost = c.lost;
    res.messages = c.messages;
    session.stop();
    agent.stop();
    res.parse_cpu_per_update = parse_cpu_per_update(blocks);
    return res;
}

}  // namespace

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
    if (!(seconds > 0)) {
        std::fprintf(stderr, "usage: bench_dashboard_live [SECONDS]\n");
        return 2;
    }
    std::printf(
        "dashboard following a live run: updates at 10/s, heartbeat 1/s, hello every 2 s, %.0f s per case\n",
        seconds);
    for (int blocks : {48, 1000}) {
        const Result r = run_case(blocks, seconds);
        const double consumer = r.worker_cpu + r.gui_cpu;
        const double per_update = r.received ? consumer / double(r.received) : 0.0;
        std::printf("\n%d blocks: %llu updates published, %llu in the store, %llu lost, %llu messages\n",
                    blocks, (unsigned long long)r.published, (unsigned long long)r.received,
                    (unsigned long long)r.lost, (unsigned long long)r.messages);
        std::printf(
            "  consumer CPU: %.3f s over %.2f s wall = %.2f%% of one core "
            "(worker %.3f s, event-loop thread %.3f s)\n",
            consumer, r.wall, 100.0 * consumer / r.wall, r.worker_cpu, r.gui_cpu);
        std::printf(
            "  per update: %.1f us consumer CPU; baseline (seq_of + parse_record only): %.1f us "
            "-> %.2fx the bare parse\n",
            per_update * 1e6, r.parse_cpu_per_update * 1e6,
            r.parse_cpu_per_update > 0 ? per_update / r.parse_cpu_per_update : 0.0);
        std::printf(
            "  whole process minus the publisher thread: %.3f s = %.2f%% of one core (an upper bound: it\n"
            "  also holds the fake agent's thread and both sides' ZeroMQ I/O threads)\n",
            r.process_cpu - r.publisher_cpu, 100.0 * (r.process_cpu - r.publisher_cpu) / r.wall);
    }
    return 0;
}
