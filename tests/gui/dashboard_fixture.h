#pragma once
// A small but complete telemetry file for window-level tests: a header with `blocks` blocks,
// `updates` update records (one every `every` steps, 10 unless given) with known sensitivities (block b at
// update u:
// ((b * 7 + u) % 10) / 10), block 1 pinned INT8 from update 5 on, block `blocks - 1` forced BF16
// by config, losses, and a few events. With `budget`, the run is in mode budget (target 50 %) and the
// header carries a config with the policy's thresholds (bf16 0.6, int8 0.3, hysteresis 0.1). Without
// `record_mode` the updates carry no mode (as the original tool's files; with no config, no mode is
// known).
#include <cstdint>
#include <string>

#include "sp/jsonl.h"

namespace sp::test {

inline double fixtureSensitivity(int block, std::size_t update) {
    return ((block * 7 + static_cast<int>(update)) % 10) / 10.0;
}

inline void writeDashboardFixture(const std::string& path, int blocks, int updates, bool budget = false,
                                  int every = 10, bool record_mode = true) {
    sp::JsonlWriter out(path, sp::JsonlWriter::OpenMode::truncate);
    sp::RunHeader header;
    header.run_id = "fixture-run";
    header.producer = "dashboard test";
    if (budget)
        header.config_json =
            R"({"mode":"budget","budget_target_pct":50.0,"bf16_threshold":0.6,"int8_threshold":0.3,)"
            R"("hysteresis_margin":0.1})";
    for (int b = 0; b < blocks; ++b) header.blocks.push_back({b, "blocks." + std::to_string(b), 1u << 20});
    out.write(header);
    std::vector<sp::Precision> previous(blocks, sp::Precision::bf16);
    for (int u = 0; u < updates; ++u) {
        sp::UpdateRecord r;
        r.step_id = std::int64_t(every) * (u + 1);
        r.timestamp = 1.7e9 + u;
        if (record_mode) r.mode = budget ? sp::Mode::budget : sp::Mode::dynamic;
        if (budget) r.budget_target_pct = 50.0;
        r.train_loss = 4.0 - 0.05 * u;
        if (u % 5 == 4) r.eval_loss = 4.1 - 0.05 * u;
        for (int b = 0; b < blocks; ++b) {
            sp::BlockDetail d;
            d.id = b;
            d.sensitivity = fixtureSensitivity(b, static_cast<std::size_t>(u));
            d.grad_score = d.sensitivity;
            d.relative_magnitude = 1.0 + 0.1 * b;
            d.l2_norm = 0.5 + 0.01 * u;
            d.precision = d.sensitivity < 0.45 ? sp::Precision::int8 : sp::Precision::bf16;
            if (b == 1 && u >= 5) {
                d.precision = sp::Precision::int8;
                d.forced = sp::ForcedBy::pin;
                d.reason = sp::Reason::pin;
            }
            if (b == blocks - 1) {
                d.precision = sp::Precision::bf16;
                d.forced = sp::ForcedBy::config;
                d.reason = sp::Reason::config;
            }
            d.changed = d.precision != previous[b];
            previous[b] = d.precision;
            (d.precision == sp::Precision::bf16 ? r.blocks_bf16 : r.blocks_int8)++;
            r.block_details.push_back(d);
        }
        r.estimated_bandwidth_saving_pct = 50.0 * r.blocks_int8 / blocks;
        r.measured_bandwidth_saving_pct = r.estimated_bandwidth_saving_pct - 1.0;
        out.write(r);
        if (u == 5) {
            out.write(sp::event_from_json_text(
                "command", r.step_id, r.timestamp,
                R"({"command":{"cmd":"pin","blocks":[1],"precision":"int8"},"ok":true,"changes":1})"));
        }
    }
}

}  // namespace sp::test
