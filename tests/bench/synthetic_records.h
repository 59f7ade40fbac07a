#pragma once
// The benchmarks' synthetic telemetry: a block's gradient statistics with realistic values (every
// field set, doubles with full-length decimal forms), drawn from the benchmark's fixed-seed stream.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sp/jsonl.h"
#include "sp/telemetry.h"

namespace sp::test {

// Fills the scores and gradient statistics of `d` (not its mean, precision or routing fields); six
// draws from `rng`, in the order the fields are listed.
inline void random_block_statistics(sp::BlockDetail& d, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    d.grad_score = unit(rng);
    d.error_score = unit(rng) * 0.1;
    d.sensitivity = 0.7 * d.grad_score + 0.3 * d.error_score;
    d.relative_magnitude = unit(rng) * 3.0;
    d.l2_norm = unit(rng) * 50.0;
    d.max_abs = unit(rng) * 2.0;
    d.variance = unit(rng) * 1e-4;
}

// A dashboard replay file of `blocks` x `updates` (bench_dashboard_replay, bench_dashboard_app):
// realistic values, every detail field set, doubles with full-length decimal forms.
inline void write_dashboard_file(const std::string& path, int blocks, int updates,
                                 const std::string& run_id) {
    std::mt19937_64 rng(20261121);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    sp::JsonlWriter writer(path, sp::JsonlWriter::OpenMode::truncate);
    sp::RunHeader h;
    h.run_id = run_id;
    h.producer = run_id;
    h.blocks = sp::uniform_layout(blocks, 8u << 20);
    writer.write(h);
    sp::UpdateRecord r;
    r.mode = sp::Mode::dynamic;
    r.block_details.resize(std::size_t(blocks));
    std::vector<int> switches(std::size_t(blocks), 0);
    std::vector<std::int64_t> last_change(std::size_t(blocks), -1);
    for (int u = 0; u < updates; ++u) {
        r.step_id = 10 * std::int64_t(u);
        r.timestamp = 1.7e9 + 1.37 * u;
        r.blocks_bf16 = r.blocks_int8 = r.precision_changes = 0;
        double sum = 0.0, lo = 1.0, hi = 0.0;
        for (int b = 0; b < blocks; ++b) {
            sp::BlockDetail& d = r.block_details[std::size_t(b)];
            const sp::Precision before = d.precision;
            d.id = b;
            random_block_statistics(d, rng);
            d.mean = (unit(rng) - 0.5) * 1e-3;
            // Routing is sticky, as the policy's hysteresis and cooldown make it: ~1% switch per update.
            if (u == 0) {
                d.precision = d.sensitivity < 0.35 ? sp::Precision::int8 : sp::Precision::bf16;
            } else if (unit(rng) < 0.01) {
                d.precision = before == sp::Precision::bf16 ? sp::Precision::int8 : sp::Precision::bf16;
            }
            d.changed = u > 0 && d.precision != before;
            d.reason = d.changed ? sp::Reason::policy : sp::Reason::hold;
            d.window = 5;
            if (d.changed) {
                ++switches[std::size_t(b)];
                last_change[std::size_t(b)] = r.step_id;
            }
            d.switches = switches[std::size_t(b)];
            d.last_change_step = last_change[std::size_t(b)];
            (d.precision == sp::Precision::bf16 ? r.blocks_bf16 : r.blocks_int8) += 1;
            r.precision_changes += d.changed;
            sum += d.sensitivity;
            lo = std::min(lo, d.sensitivity);
            hi = std::max(hi, d.sensitivity);
        }
        r.mean_sensitivity = sum / blocks;
        r.min_sensitivity = lo;
        r.max_sensitivity = hi;
        r.estimated_bandwidth_saving_pct = 50.0 * r.blocks_int8 / blocks;
        writer.write(r);
    }
}

}  // namespace sp::test
