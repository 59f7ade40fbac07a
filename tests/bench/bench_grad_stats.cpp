// Gradient statistics throughput: the CPU collector against what the same gradients cost otherwise.
//
// Gradients of 8 transformer-like blocks (d_model 512: qkv 512x1536, out 512x512, fc1 512x2048,
// fc2 2048x512, their biases and two layer norms), ~101 MB in fp32, ~50 MB in bf16 or fp16, set as
// .grad() of leaf parameters. Rows, each the median of N runs after warm-up:
//   collector   make_cpu_grad_stats_collector(): collect() + results(), every statistic of every block
//   sum         t.sum() over every gradient: one plain reduction, the floor for a single read
//   naive       per tensor norm(), abs().max(), var(), isfinite().logical_not().sum(), as a user would
// GB/s = gradient bytes read once / time. The ratios are time / time of `sum` at the same thread count;
// the aim is collector <= 1.5x. Each case runs at LibTorch's default thread count and, when different,
// at the hardware thread count. The collector runs its chunks in parallel only when sp_agent's
// cpu_grad_stats.cpp is compiled with -fopenmp (see there). SP_GRAD_STATS_PORTABLE=1 in the
// environment measures the portable pass instead of the AVX2 one.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "sp/agent/grad_stats_collector.h"

namespace {

constexpr int kWarmup = 3;
constexpr int kRuns = 15;

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

std::vector<sp::agent::AgentBlock> make_blocks(at::ScalarType dtype) {
    constexpr int kBlocks = 8;
    constexpr std::int64_t d = 512;
    const std::vector<std::vector<std::int64_t>> shapes = {
        {3 * d, d}, {3 * d}, {d, d}, {d}, {4 * d, d}, {4 * d}, {d, 4 * d}, {d}, {d}, {d}, {d}, {d}};
    std::vector<sp::agent::AgentBlock> blocks;
    for (int b = 0; b < kBlocks; ++b) {
        sp::agent::AgentBlock block;
        block.id = b;
        block.name = "blocks." + std::to_string(b);
        for (std::size_t i = 0; i < shapes.size(); ++i) {
            at::Tensor p = at::zeros(shapes[i], at::TensorOptions().dtype(dtype)).requires_grad_(true);
            p.mutable_grad() = (at::randn(shapes[i]) * 1e-3).to(dtype);
            block.param_names.push_back("p" + std::to_string(i));
            block.params.push_back(p);
        }
        blocks.push_back(std::move(block));
    }
    return blocks;
}

// Runs the methods round-robin, warm-up rounds first, and returns each one's median in ms. Interleaving
// makes every method see the same background load (on a shared machine), so the ratios hold even
// when absolute times drift.
std::vector<double> median_ms(const std::vector<std::function<void()>>& methods, int warmup, int runs) {
    std::vector<std::vector<double>> ms(methods.size());
    for (int r = 0; r < warmup + runs; ++r) {
        for (std::size_t m = 0; m < methods.size(); ++m) {
            const auto t0 = Clock::now();
            methods[m]();
            const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            if (r >= warmup) ms[m].push_back(t);
        }
    }
    std::vector<double> medians;
    medians.reserve(ms.size());
    for (auto& v : ms) medians.push_back(median(v));
    return medians;
}

void run_case(const char* label, at::ScalarType dtype, int threads) {
    at::set_num_threads(threads);
    const auto blocks = make_blocks(dtype);
    std::vector<at::Tensor> grads;
    double bytes = 0;
    for (const auto& b : blocks) {
        for (const auto& p : b.params) {
            grads.push_back(p.grad());
            bytes += double(p.grad().nbytes());
        }
    }

    auto collector = sp::agent::make_cpu_grad_stats_collector();
    collector->prepare(blocks);
    volatile double sink = 0;
    const auto collect = [&] {
        collector->collect();
        sink = sink + collector->results().front().l2_norm;
    };
    const auto sum = [&] {
        for (const auto& g : grads) sink = sink + g.sum().item<double>();
    };
    const auto naive = [&] {
        for (const auto& g : grads) {
            sink = sink + g.norm().item<double>();
            sink = sink + g.abs().max().item<double>();
            sink = sink + g.var().item<double>();
            sink = sink + double(g.isfinite().logical_not().sum().item<std::int64_t>());
        }
    };
    const std::vector<double> t = median_ms({collect, sum, naive}, kWarmup, kRuns);

    const double gb = bytes / 1e9;
    std::printf("%-5s %7d %9.1f  %-10s %9.2f %8.2f %8.2fx\n", label, threads, bytes / 1e6, "collector", t[0],
                gb / (t[0] / 1e3), t[0] / t[1]);
    std::printf("%-5s %7d %9.1f  %-10s %9.2f %8.2f %8.2fx\n", label, threads, bytes / 1e6, "sum", t[1],
                gb / (t[1] / 1e3), 1.0);
    std::printf("%-5s %7d %9.1f  %-10s %9.2f %8.2f %8.2fx\n", label, threads, bytes / 1e6, "naive", t[2],
                gb / (t[2] / 1e3), t[2] / t[1]);
}

}  // namespace

int main() {
    // LibTorch's default is one thread per physical core (1 on a 2-vCPU hyperthreaded VM); the
    // hardware thread count is measured too when it differs.
    const int default_threads = at::get_num_threads();
    const int hw_threads = std::max(1, int(std::thread::hardware_concurrency()));
    std::printf("gradient statistics, 8 blocks x 12 tensors; median of 15 runs after 3 warm-up\n");
    std::printf(
        "ratio = time / time of `sum` in the same dtype and thread count (collector aim: <= 1.5x)\n\n");
    std::printf("%-5s %7s %9s  %-10s %9s %8s %9s\n", "dtype", "threads", "MB", "method", "ms", "GB/s",
                "ratio");
    std::vector<int> thread_counts = {default_threads};
    if (hw_threads != default_threads) thread_counts.push_back(hw_threads);
    for (int threads : thread_counts) {
        run_case("fp32", at::kFloat, threads);
        run_case("bf16", at::kBFloat16, threads);
        run_case("fp16", at::kHalf, threads);
    }
    at::set_num_threads(default_threads);
    return 0;
}
