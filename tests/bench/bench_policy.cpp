// Policy update cost for 48, 1,000 and 10,000 blocks.
//
// Each measured iteration is one step: observe() every block, then update(). Every step is an update
// step (warmup 0, interval 1), so this is the worst case; in a real run updates come every
// update_interval_steps. The baseline, measured in the same process, is the least any update must do:
// write n BlockDetail into a reused vector (what a record holds). Output: median microseconds, ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sp/policy.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Timing {
    double observe_us, update_us, baseline_us;
};

Timing measure(int blocks, int iterations) {
    sp::Config config;
    config.warmup_steps = 0;
    config.update_interval_steps = 1;
    std::vector<double> calibration(static_cast<std::size_t>(blocks));
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    for (double& e : calibration) e = 0.1 * uni(rng);
    sp::Policy policy(config, sp::uniform_layout(blocks, 1 << 20), calibration);

    std::vector<sp::BlockGradStats> stats(static_cast<std::size_t>(blocks));
    std::vector<sp::BlockDetail> details(static_cast<std::size_t>(blocks));
    std::vector<double> observe_us, update_us, baseline_us;
    volatile double sink = 0;
    for (int it = 0; it < iterations; ++it) {
        for (int b = 0; b < blocks; ++b) {
            sp::BlockGradStats& s = stats[std::size_t(b)];
            s.block_id = b;
            s.l2_norm = 0.1 + uni(rng) * (1.0 + b % 7);
            s.max_abs = s.l2_norm / 10;
            s.variance = s.l2_norm * 1e-6;
            s.numel = 1 << 19;
        }
        const auto t0 = Clock::now();
        for (const auto& s : stats) policy.observe(it, s);
        const auto t1 = Clock::now();
        const auto rec = policy.update(it, 0.0);
        const auto t2 = Clock::now();
        sink = sink + rec->mean_sensitivity;

        const auto b0 = Clock::now();
        for (int b = 0; b < blocks; ++b) {
            details[std::size_t(b)] = sp::BlockDetail{};
            details[std::size_t(b)].sensitivity = stats[std::size_t(b)].l2_norm;
        }
        const auto b1 = Clock::now();
        sink = sink + details.back().sensitivity;

        using Micros = std::chrono::duration<double, std::micro>;
        observe_us.push_back(Micros(t1 - t0).count());
        update_us.push_back(Micros(t2 - t1).count());
        baseline_us.push_back(Micros(b1 - b0).count());
    }
    return {median(observe_us), median(update_us), median(baseline_us)};
}

}  // namespace

int main() {
    std::printf("policy update cost (median of N steps; every step an update step)\n");
    std::printf("%8s %6s %14s %14s %16s %10s\n", "blocks", "N", "observe us", "update us", "baseline us",
                "update/baseline");
    for (int blocks : {48, 1000, 10000}) {
        const int iterations = blocks >= 10000 ? 200 : 2000;
        const Timing t = measure(blocks, iterations);
        std::printf("%8d %6d %14.2f %14.2f %16.2f %10.1fx\n", blocks, iterations, t.observe_us, t.update_us,
                    t.baseline_us, t.update_us / t.baseline_us);
    }
    return 0;
}
