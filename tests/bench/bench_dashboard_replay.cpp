// Dashboard replay throughput and memory: generates (once, deterministic) a JSONL telemetry file
// of N blocks x M updates with full block_details, then measures in the same process:
//   (a) baseline - sp::JsonlReader alone reading the file (the parser's ceiling)
//   (b) replay   - ReplaySource + RunSession loading the file into the TelemetryStore, end to end
//                  (worker-thread parsing, batches to the GUI thread, store appends)
//   (c) memory   - store.memoryBytes(), bytes per block-update, and the process's max RSS growth
//   (d) store    - TelemetryStore::append alone on parsed records (the store's own cost, shown as
//                  the file throughput it would allow: file MB / append seconds)
//   (e) table    - the block table's refresh at the last update, against reading its cells alone
// (a) runs again after (b) so a noisy machine shows up as two different baselines.
// Usage: bench_dashboard_replay [--blocks N] [--updates M] [--file PATH] [--keep]
//   Default 1000 x 10000 (about 3.8 GB in the temp dir; a generated file is removed afterwards
//   unless --keep, and an existing --file is reused as it is). The goal size is
//   --updates 100000 (about 38 GB; --replay-only skips the two (a) passes over it).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <QCoreApplication>
#include <QEventLoop>

#include "sp/jsonl.h"
#include "sp/ui/block_table_model.h"
#include "sp/ui/replay_source.h"
#include "sp/ui/run_session.h"
#include "synthetic_records.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// User + system CPU seconds of the whole process (all threads).
double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long max_rss_kib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

// (d): `updates` appends of a few distinct parsed records (parsing kept out), into a store sized
// like a replay's (the header's layout, reserved from the file size).
void store_append_alone(const std::string& path, int blocks, int updates, double mb) {
    std::vector<sp::UpdateRecord> records;
    {
        sp::JsonlReader reader(path);
        sp::TelemetryRecord rec;
        while (records.size() < 16 && reader.next(rec))
            if (auto* u = std::get_if<sp::UpdateRecord>(&rec)) records.push_back(*u);
    }
    if (records.empty()) return;
    sp::ui::TelemetryStore store;
    store.reset(sp::uniform_layout(blocks, 8u << 20));
    store.reserve(std::size_t(updates));
    const auto t0 = Clock::now();
    const double cpu0 = cpu_seconds();
    for (int u = 0; u < updates; ++u) {
        sp::UpdateRecord& r = records[std::size_t(u) % records.size()];
        r.step_id = 10 * std::int64_t(u);
        if (store.append(r)) return;
    }
    const double s = seconds_since(t0);
    const double cpu = cpu_seconds() - cpu0;
    std::printf(
        "(d) %-22s %8.2f s  %7.1f MB/s of file; cpu %6.2f s = %7.1f MB/s, %5.2f ns per block-update "
        "(%.2f bytes per block-update)\n",
        "store append alone:", s, mb / s, cpu, mb / cpu, cpu * 1e9 / (double(blocks) * updates),
        double(store.memoryBytes()) / (double(blocks) * updates));
}

struct Args {
    int blocks = 1000;
    int updates = 10000;
    std::string path;
    bool keep = false;
    bool replay_only = false;  // --replay-only: no (a) baselines (the goal-size file takes minutes per pass)
};

// nullopt after printing the usage or the problem.
std::optional<Args> parse_args(int argc, char** argv) {
    Args args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--blocks" && i + 1 < argc) {
            args.blocks = std::atoi(argv[++i]);
        } else if (a == "--updates" && i + 1 < argc) {
            args.updates = std::atoi(argv[++i]);
        } else if (a == "--file" && i + 1 < argc) {
            args.path = argv[++i];
        } else if (a == "--keep") {
            args.keep = true;
        } else if (a == "--replay-only") {
            args.replay_only = true;
        } else {
            std::fprintf(stderr,
                         "usage: %s [--blocks N] [--updates M] [--file PATH] [--keep] [--replay-only]\n",
                         argv[0]);
            return std::nullopt;
        }
    }
    if (args.blocks <= 0 || args.updates <= 0) {
        std::fprintf(stderr, "--blocks and --updates must be positive\n");
        return std::nullopt;
    }
    return args;
}

}  // namespace

// (e) The block table's refresh at the last update: every row (cells, values, the Why column's hold
// history and cooldown), against reading each block's cell there, the least a refresh reads. The
// Why column's history comes from the store's event lists: a refresh costs O(blocks), not
// O(blocks x updates) (before: a scan back through a block's updates for each row).
void block_table_refresh(sp::ui::RunSession& session) {
    sp::ui::BlockTableModel table(&session);
    const sp::ui::TelemetryStore& store = session.store();
    const std::size_t last = store.updateCount() - 1;
    constexpr int kRounds = 5;
    const auto t0 = Clock::now();
    for (int i = 0; i < kRounds; ++i) table.refresh();
    const double refresh_s = seconds_since(t0) / kRounds;
    volatile int present = 0;  // read, so the loop is not optimized away
    const auto b0 = Clock::now();
    for (int i = 0; i < kRounds; ++i)
        for (int b = 0; b < store.blockCount(); ++b)
            present = present + (store.cell(b, last).present ? 1 : 0);
    const double cells_s = seconds_since(b0) / kRounds;
    std::printf("(e) block table refresh:   %8.3f ms  (reading the %d cells alone: %.3f ms; x%.0f)\n",
                refresh_s * 1e3, store.blockCount(), cells_s * 1e3, refresh_s / std::max(cells_s, 1e-9));
}

int main(int argc, char** argv) {
    const std::optional<Args> args = parse_args(argc, argv);
    if (!args) return 2;
    const int blocks = args->blocks;
    const int updates = args->updates;
    const bool keep = args->keep;
    const bool replay_only = args->replay_only;
    std::string path = args->path;
    if (path.empty()) {
        path = (std::filesystem::temp_directory_path() /
                ("sp_bench_dashboard_" + std::to_string(blocks) + "x" + std::to_string(updates) + ".jsonl"))
                   .string();
    }
    const bool generated = !std::filesystem::exists(path);
    if (generated) {
        const auto t0 = Clock::now();
        sp::test::write_dashboard_file(path, blocks, updates, "bench-dashboard-replay");
        std::printf("generated %s in %.1f s\n", path.c_str(), seconds_since(t0));
    }
    const double mb = double(std::filesystem::file_size(path)) / 1e6;
    std::printf("file: %s, %.1f MB, %d blocks x %d updates (%.0f bytes per update line)\n", path.c_str(), mb,
                blocks, updates, mb * 1e6 / updates);

    double cpu_base = 1e300;  // the cheaper baseline's CPU seconds
    const auto baseline = [&](const char* label) {
        const auto t0 = Clock::now();
        const double cpu0 = cpu_seconds();
        sp::JsonlReader reader(path);
        sp::TelemetryRecord rec;
        std::uint64_t n = 0;
        while (reader.next(rec)) ++n;
        const double s = seconds_since(t0);
        cpu_base = std::min(cpu_base, cpu_seconds() - cpu0);
        std::printf("(a) %-22s %8.2f s  %7.1f MB/s  cpu %6.2f s  (%llu records, %llu bad)\n", label, s,
                    mb / s, cpu_seconds() - cpu0, static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(reader.problem_count()));
        return mb / s;
    };
    const double base1 = replay_only ? 0.0 : baseline("JsonlReader alone:");

    QCoreApplication app(argc, argv);
    const long rss_before = max_rss_kib();
    sp::ui::RunSession session(std::make_unique<sp::ui::ReplaySource>(QString::fromStdString(path)));
    QEventLoop loop;
    QObject::connect(&session, &sp::ui::RunSession::loadFinished, &loop, &QEventLoop::quit);
    const auto t0 = Clock::now();
    const double cpu0 = cpu_seconds();
    session.start();
    loop.exec();
    const double s = seconds_since(t0);
    const double cpu = cpu_seconds() - cpu0;
    const long rss_after = max_rss_kib();
    const auto& store = session.store();
    const double replay_mbs = mb / s;

    const double base2 = replay_only ? 0.0 : baseline("JsonlReader again:");
    const double base = std::max(base1, base2);
    std::printf(
        "(b) %-22s %8.2f s  %7.1f MB/s  cpu %6.2f s (both threads) = %7.1f MB per cpu s  (%zu updates, "
        "%d blocks)\n",
        "ReplaySource+session:", s, replay_mbs, cpu, mb / cpu, store.updateCount(), store.blockCount());
    if (!replay_only)
        std::printf("    ratio (b)/(a) against the faster baseline: %.2f wall, %.2f cpu per MB\n",
                    replay_mbs / base, cpu_base / cpu);
    const double cells = double(store.updateCount()) * store.blockCount();
    std::printf("(c) store.memoryBytes() %.1f MB = %.2f bytes per block-update (kBytesPerBlockUpdate %zu)\n",
                double(store.memoryBytes()) / 1e6, double(store.memoryBytes()) / cells,
                sp::ui::TelemetryStore::kBytesPerBlockUpdate);
    std::printf(
        "    max RSS growth during (b): %.1f MB (%.2f bytes per block-update); process max RSS %.1f MB\n",
        double(rss_after - rss_before) / 1024.0, double(rss_after - rss_before) * 1024.0 / cells,
        double(rss_after) / 1024.0);
    store_append_alone(path, blocks, updates, mb);
    block_table_refresh(session);
    if (generated && !keep) std::filesystem::remove(path);  // a file we were given stays
    return store.updateCount() == std::size_t(updates) ? 0 : 1;
}
