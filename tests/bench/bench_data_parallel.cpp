// What a data-parallel job pays the agent per step (agent/PROTOCOL.md §11), against the plain
// all-reduce of the gradients every data-parallel step does anyway: 2 ranks on one machine, as two
// threads of this process on a real Gloo process group over loopback TCP.
//
// For 48 and 1,000 blocks of the demo's block size (49,984 fp32 parameters each, 200 KB):
//   all-reduce   ProcessGroupLink::average_gradients: one flat all-reduce of every gradient (baseline)
//   commands     the step boundary's header broadcast (3 int64: step, command bytes, checksum)
//   map          the map packet broadcast (2 + blocks int64)
//   loss         the loss all-reduce (1 double)
//   statistics   sharded mode only: the all-gather of 7 doubles per block and rank, and the merge
// Each row: the median over the runs of rank 0's time, and its ratio to the all-reduce. The agent's
// per-step total is commands + map + loss (replicated) or + statistics (sharded).
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "sp/agent/process_group_link.h"
#include "sp/distributed.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kBlockParams = 49984;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Timings {
    double all_reduce = 0, commands = 0, map = 0, loss = 0, statistics = 0;  // seconds, medians
};

// Runs `op` `runs` times on both ranks in step; returns this rank's median.
double time_op(int runs, const std::function<void(int)>& op) {
    std::vector<double> t;
    for (int i = -2; i < runs; ++i) {  // two warm-up rounds
        const auto t0 = Clock::now();
        op(i);
        if (i >= 0) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return median(t);
}

void rank_main(int rank, const c10::intrusive_ptr<c10d::Store>& store, int blocks, int runs, Timings& out) {
    auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(120));
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    sp::agent::ProcessGroupLink link(c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, options));
    std::vector<at::Tensor> params;
    for (int b = 0; b < blocks; ++b) {
        at::Tensor p = at::zeros({kBlockParams});
        p.mutable_grad() = at::randn({kBlockParams});
        params.push_back(p);
    }
    out.all_reduce = time_op(runs, [&](int i) { link.average_gradients(params, i); });
    std::vector<std::int64_t> header(3, rank == 0 ? 7 : 0);
    out.commands = time_op(runs, [&](int i) { link.broadcast(header, "commands", i); });
    sp::MapPacket packet;
    packet.precision.assign(std::size_t(blocks), sp::Precision::int8);
    packet.reason.assign(std::size_t(blocks), sp::Reason::hold);
    packet.checksum = sp::map_checksum(packet.precision);
    out.map = time_op(runs, [&](int i) {
        std::vector<std::int64_t> words = sp::encode_map_packet(packet);
        link.broadcast(words, "map", i);
        (void)sp::decode_map_packet(words, blocks);
    });
    out.loss = time_op(runs, [&](int i) { (void)link.all_reduce_mean(2.5, "loss", i); });
    std::vector<sp::BlockGradStats> local(static_cast<std::size_t>(blocks));
    for (int b = 0; b < blocks; ++b) {
        local[std::size_t(b)].block_id = b;
        local[std::size_t(b)].numel = std::uint64_t(kBlockParams / 2);
        local[std::size_t(b)].l2_norm = 1.0 + b;
        local[std::size_t(b)].variance = 0.5;
    }
    out.statistics = time_op(runs, [&](int i) {
        const std::vector<double> all = link.all_gather(sp::pack_shard_stats(local, blocks), "statistics", i);
        (void)sp::merge_shard_stats(all, 2, blocks);
    });
}

void report(int blocks, int runs) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    Timings t0, t1;
    std::thread other(rank_main, 1, store, blocks, runs, std::ref(t1));
    rank_main(0, store, blocks, runs, t0);
    other.join();
    const double base = t0.all_reduce;
    std::printf("\n%d blocks (%.1f MB of fp32 gradients), 2 ranks, median of %d runs (rank 0):\n", blocks,
                double(blocks) * double(kBlockParams) * 4.0 / 1e6, runs);
    const auto row = [&](const char* name, double s) {
        std::printf("  %-34s %9.3f ms  %8.4fx the all-reduce\n", name, s * 1e3, s / base);
    };
    row("all-reduce of the gradients", base);
    row("commands header broadcast", t0.commands);
    row("map broadcast", t0.map);
    row("loss all-reduce", t0.loss);
    row("statistics all-gather + merge", t0.statistics);
    const double replicated = t0.commands + t0.map + t0.loss;
    const double sharded = replicated + t0.statistics;
    row("agent per step, replicated", replicated);
    row("agent per step, sharded", sharded);
    std::printf(
        "  share of a step that is at least the all-reduce: replicated <= %.2f%%, sharded <= %.2f%%\n",
        100.0 * replicated / (base + replicated), 100.0 * sharded / (base + sharded));
}

}  // namespace

int main() {
    at::set_num_threads(1);  // two ranks on two cores, as `sp-trainer --spawn 2 --threads 1`
    report(48, 41);
    report(1000, 11);
    return 0;
}
