// sp-ctl simulate --stats STATS.jsonl [--config CFG.json] [--calibration CAL.json] [--format F]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli_util.h"
#include "commands.h"
#include "option_checks.h"
#include "sp/config.h"
#include "sp/jsonl.h"
#include "sp/simulator.h"

namespace sp::ctl {
namespace {

constexpr const char* kDescription =
    "re-run the policy offline on recorded gradient statistics\n"
    "\n"
    "Re-runs the policy on recorded per-block gradient statistics and prints one per-update\n"
    "telemetry record per line on stdout (the telemetry file's schema); a summary goes to stderr.\n"
    "--format table prints one human-readable line per update instead.\n"
    "STATS may be '-' for stdin, or a telemetry file recorded with telemetry_every_step: its header\n"
    "gives the layout and, unless --config/--calibration are given, the run's config and calibration.\n"
    "Without --config (and no header config) the seed's defaults apply.\n"
    "The input format is described in core/SIMULATOR.md.";

struct SimulateArgs {
    std::string stats_path, config_path, calibration_path;
    std::string format = "jsonl";
};

double wall_clock_seconds() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string format_jsonl(const std::vector<sp::UpdateRecord>& records) {
    std::string out;
    for (const sp::UpdateRecord& rec : records) {
        out += sp::to_json_line(rec);
        out += '\n';
    }
    return out;
}

// Block ids that moved in this record with their new format, e.g. "3:int8,4:int4,17:bf16".
std::string moves(const sp::UpdateRecord& rec) {
    std::string ids;
    for (const sp::BlockDetail& d : rec.block_details) {
        if (d.changed)
            ids += (ids.empty() ? "" : ",") + std::to_string(d.id) + ":" +
                   std::string(sp::to_string(d.precision));
    }
    return ids.empty() ? "-" : ids;
}

std::string format_table(const std::vector<sp::UpdateRecord>& records) {
    std::string out =
        "  step  mode     bf16  int8   fp8  int4  changes  sens mean/min/max   saving%  moved\n";
    char line[1024];
    for (const sp::UpdateRecord& rec : records) {
        std::snprintf(
            line, sizeof line, "%6lld  %-7s  %4d  %4d  %4d  %4d  %7d  %.2f / %.2f / %.2f  %7.2f  %s\n",
            static_cast<long long>(rec.step_id),
            rec.mode ? std::string(sp::to_string(*rec.mode)).c_str() : "?", rec.blocks_bf16, rec.blocks_int8,
            rec.blocks_fp8, rec.blocks_int4, rec.precision_changes, rec.mean_sensitivity, rec.min_sensitivity,
            rec.max_sensitivity, rec.estimated_bandwidth_saving_pct, moves(rec).c_str());
        out += line;
    }
    return out;
}

int run_simulate(const SimulateArgs& args) {
    const std::string& stats_path = args.stats_path;
    const std::string& calibration_path = args.calibration_path;
    try {
        sp::SimulationOptions options;
        options.now = wall_clock_seconds;
        if (!args.config_path.empty()) options.config = sp::load_config_file(args.config_path);
        if (!calibration_path.empty()) {
            if (!check_not_special("simulate", calibration_path)) return 2;
            std::ifstream cal(calibration_path);
            if (!cal) {
                std::fprintf(stderr, "sp-ctl simulate: cannot open calibration file '%s'\n",
                             calibration_path.c_str());
                return 2;
            }
            options.calibration = sp::parse_calibration(cal, calibration_path);
        }
        std::ifstream file;
        if (stats_path != "-") {
            if (!check_not_special("simulate", stats_path)) return 2;
            file.open(stats_path);
            if (!file) {
                std::fprintf(stderr, "sp-ctl simulate: cannot open stats file '%s'\n", stats_path.c_str());
                return 2;
            }
        }
        std::istream& stats = stats_path == "-" ? std::cin : file;
        const sp::SimulationResult result = sp::simulate(stats, stats_path, options);
        const sp::Config& config = result.config;
        for (const std::string& w : result.warnings) std::fprintf(stderr, "sp-ctl simulate: %s\n", w.c_str());

        // Everything was checked before this point: print the whole result at once.
        const std::string out =
            args.format == "table" ? format_table(result.records) : format_jsonl(result.records);
        std::fwrite(out.data(), 1, out.size(), stdout);
        if (std::fflush(stdout) != 0) {
            std::perror("sp-ctl simulate: writing stdout");
            return 1;
        }
        if (result.records.empty()) {
            std::fprintf(stderr, "sp-ctl simulate: %llu steps, no update (warmup_steps is %lld)\n",
                         static_cast<unsigned long long>(result.steps),
                         static_cast<long long>(config.warmup_steps));
        } else {
            const sp::UpdateRecord& last = result.records.back();
            std::fprintf(stderr,
                         "sp-ctl simulate: %zu blocks, %llu steps, %zu updates, %llu commands, %zu "
                         "rollbacks, %zu pin releases; at "
                         "step %lld: %d bf16, %d int8, %d fp8, %d int4, estimated bandwidth saving %.2f%% "
                         "(from element "
                         "widths; a runtime's measured saving also counts its scales)\n",
                         result.layout.size(), static_cast<unsigned long long>(result.steps),
                         result.records.size(), static_cast<unsigned long long>(result.commands),
                         result.rollbacks.size(), result.pin_releases.size(),
                         static_cast<long long>(last.step_id), last.blocks_bf16, last.blocks_int8,
                         last.blocks_fp8, last.blocks_int4, last.estimated_bandwidth_saving_pct);
        }
        return 0;
    } catch (const sp::ConfigError& e) {
        std::fprintf(stderr, "sp-ctl simulate: %s\n", e.what());
    } catch (const sp::SimulationError& e) {
        std::fprintf(stderr, "sp-ctl simulate: %s\n", e.what());
    }
    return 2;
}

}  // namespace

Command add_simulate(CLI::App& root) {
    auto args = std::make_shared<SimulateArgs>();
    CLI::App* command = root.add_subcommand("simulate", kDescription);
    command
        ->add_option("--stats", args->stats_path, "the recorded statistics (or a telemetry file; '-': stdin)")
        ->required()
        ->type_name("STATS.jsonl")
        ->check(not_empty());
    command->add_option("--config", args->config_path, "the policy's config (core/CONFIG.md)")
        ->type_name("CFG.json");
    command
        ->add_option("--calibration", args->calibration_path,
                     "each block's relative INT8 output error (core/SIMULATOR.md)")
        ->type_name("CAL.json");
    command->add_option("--format", args->format, "what stdout gets: telemetry records, or a table")
        ->type_name("jsonl|table")
        ->check(one_of({"jsonl", "table"}))
        ->capture_default_str();
    command->footer("Exit codes: 0 ok, 2 bad usage or input.");
    return {command, [args] { return run_simulate(*args); }};
}

}  // namespace sp::ctl
