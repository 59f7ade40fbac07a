// sp-ctl summarize FILE [--json]: what a run did, per block and in total.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "sp/jsonl.h"
#include "sp/run_end.h"

namespace sp::ctl {
namespace {

constexpr const char* kCommand = "summarize";
constexpr const char* kDescription =
    "per-block precision time, switches and savings of a telemetry file\n"
    "\n"
    "Summarizes a telemetry file (core/TELEMETRY.md): run id and producer (from the header), the\n"
    "steps the updates cover, and per block the steps spent in each precision, the switches between\n"
    "consecutive updates, the final precision and the mean sensitivity; then the step-weighted mean\n"
    "estimated (and measured) saving, the final losses and the events by kind.\n"
    "Time is counted in steps: an update's precision holds from its step up to the block's next\n"
    "update; the last one holds through the last step seen in the file (updates, step stats and\n"
    "events), that step included. Bad lines are skipped and counted on stderr.\n"
    "The end says how the run ended: its run_end record's reason and step, or that the file stops\n"
    "without one (the run was cut: killed, crashed, or the file truncated).";

struct SummarizeArgs {
    std::string path;
    bool json = false;
};

constexpr std::size_t kPrecisions = sp::kAllPrecisions.size();

struct Block {
    std::array<std::int64_t, kPrecisions> steps{};  // indexed by sp::Precision
    int switches = 0;
    sp::Precision precision = sp::Precision::bf16;  // at its latest update
    std::int64_t since = 0;                         // step of its latest update
    double sensitivity_sum = 0.0;
    std::uint64_t sensitivity_n = 0;  // finite sensitivities only (null means no value)
};

// A step-weighted mean: each update's value weighs the steps until the next update.
struct WeightedMean {
    double sum = 0.0;
    std::int64_t steps = 0;
    void add(double value, std::int64_t weight) {
        if (!std::isfinite(value) || weight <= 0) return;
        sum += value * double(weight);
        steps += weight;
    }
    std::optional<double> mean() const {
        return steps > 0 ? std::optional<double>(sum / double(steps)) : std::nullopt;
    }
};

struct Summary {
    std::optional<sp::RunHeader> header;
    std::map<int, Block> blocks;
    std::uint64_t updates = 0;
    std::int64_t first_step = 0, last_update_step = 0, last_step = 0;
    // The previous update's totals, weighed once the next update (or the end) fixes its duration.
    double prev_estimated = 0.0;
    std::optional<double> prev_measured;
    WeightedMean estimated, measured;
    std::optional<double> train_loss, eval_loss;
    std::map<std::string, std::uint64_t> events;
    std::uint64_t commands_rejected = 0, dropped_records = 0;
    sp::RunEndTracker run_end;  // how the run ended, or that it was cut

    void see_step(std::int64_t step) { last_step = std::max(last_step, step); }

    void update(const sp::UpdateRecord& r) {
        if (updates > 0) {
            const std::int64_t held = std::max<std::int64_t>(0, r.step_id - last_update_step);
            estimated.add(prev_estimated, held);
            if (prev_measured) measured.add(*prev_measured, held);
        } else {
            first_step = r.step_id;
        }
        ++updates;
        last_update_step = r.step_id;
        last_step = std::max(last_step, r.step_id);
        prev_estimated = r.estimated_bandwidth_saving_pct;
        prev_measured = r.measured_bandwidth_saving_pct;
        if (r.train_loss) train_loss = r.train_loss;
        if (r.eval_loss) eval_loss = r.eval_loss;
        for (const sp::BlockDetail& d : r.block_details) {
            const auto [it, is_new] = blocks.try_emplace(d.id);
            Block& b = it->second;
            if (!is_new) {
                b.steps[std::size_t(b.precision)] += std::max<std::int64_t>(0, r.step_id - b.since);
                if (d.precision != b.precision) ++b.switches;
            }
            b.precision = d.precision;
            b.since = r.step_id;
            if (std::isfinite(d.sensitivity)) {
                b.sensitivity_sum += d.sensitivity;
                ++b.sensitivity_n;
            }
        }
    }

    void event(const sp::EventRecord& e) {
        ++events[e.kind];
        // Only these two kinds carry totals worth reading.
        if (const auto* command = std::get_if<sp::CommandEventPayload>(&e.payload)) {
            if (command->ok.has_value() && !*command->ok) ++commands_rejected;
        } else if (const auto* dropped = std::get_if<sp::DroppedPayload>(&e.payload)) {
            dropped_records += dropped->count;
        }
    }

    // The last update, and every block's last precision, hold through the last step seen.
    void finish() {
        const std::int64_t end = last_step + 1;
        estimated.add(prev_estimated, end - last_update_step);
        if (prev_measured) measured.add(*prev_measured, end - last_update_step);
        for (auto& [id, b] : blocks)
            b.steps[std::size_t(b.precision)] += std::max<std::int64_t>(0, end - b.since);
    }

    std::string name(int id) const {
        if (header) {
            for (const sp::BlockInfo& info : header->blocks) {
                if (info.id == id) return info.name;
            }
        }
        return {};
    }
    std::size_t block_count() const { return header ? header->blocks.size() : blocks.size(); }
};

template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::optional<double> mean_sensitivity(const Block& b) {
    if (b.sensitivity_n == 0) return std::nullopt;
    return b.sensitivity_sum / double(b.sensitivity_n);
}

std::string to_json(const Summary& s) {
    nlohmann::ordered_json j;
    j["run_id"] = s.header ? nlohmann::ordered_json(s.header->run_id) : nlohmann::ordered_json(nullptr);
    j["producer"] = s.header ? nlohmann::ordered_json(s.header->producer) : nlohmann::ordered_json(nullptr);
    j["first_step"] = s.first_step;
    j["last_update_step"] = s.last_update_step;
    j["last_step"] = s.last_step;
    j["updates"] = s.updates;
    const std::optional<sp::RunEnd>& end = s.run_end.end();
    j["run_end"] = end ? nlohmann::ordered_json{{"step", end->step}, {"reason", end->reason}}
                       : nlohmann::ordered_json(nullptr);
    j["cut"] = !s.run_end.cut_message().empty();
    j["block_count"] = s.block_count();
    j["blocks"] = nlohmann::ordered_json::array();
    for (const auto& [id, b] : s.blocks) {
        nlohmann::ordered_json steps;
        for (sp::Precision p : sp::kAllPrecisions)
            steps[std::string(sp::to_string(p))] = b.steps[std::size_t(p)];
        nlohmann::ordered_json block;
        block["id"] = id;
        const std::string name = s.name(id);
        block["name"] = name.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(name);
        block["steps"] = steps;
        block["switches"] = b.switches;
        block["final"] = std::string(sp::to_string(b.precision));
        block["mean_sensitivity"] = or_null(mean_sensitivity(b));
        j["blocks"].push_back(std::move(block));
    }
    nlohmann::ordered_json events = nlohmann::ordered_json::object();
    for (const auto& [kind, n] : s.events) events[kind] = n;
    j["totals"] = {{"estimated_saving_pct", or_null(s.estimated.mean())},
                   {"measured_saving_pct", or_null(s.measured.mean())},
                   {"final_train_loss", or_null(s.train_loss)},
                   {"final_eval_loss", or_null(s.eval_loss)},
                   {"events", events},
                   {"commands", s.events.count("command") ? s.events.at("command") : 0},
                   {"commands_rejected", s.commands_rejected},
                   {"dropped_records", s.dropped_records}};
    return j.dump() + "\n";
}

std::string optional_number(const std::optional<double>& v, const char* format) {
    if (!v) return "-";
    char text[64];
    std::snprintf(text, sizeof text, format, *v);
    return text;
}

std::string to_table(const Summary& s) {
    std::string out;
    char line[512];
    if (s.header) out += "run       " + s.header->run_id + "  (" + s.header->producer + ")\n";
    std::snprintf(line, sizeof line, "steps     %lld..%lld (last step seen %lld), %llu updates, %zu blocks\n",
                  static_cast<long long>(s.first_step), static_cast<long long>(s.last_update_step),
                  static_cast<long long>(s.last_step), static_cast<unsigned long long>(s.updates),
                  s.block_count());
    out += line;
    if (const std::optional<sp::RunEnd>& end = s.run_end.end()) {
        out += "end       " + end->reason + " at step " + std::to_string(end->step) + "\n";
    } else if (const std::string cut = s.run_end.cut_message(); !cut.empty()) {
        out += "end       " + cut + "\n";
    }
    out += "saving    estimated " + optional_number(s.estimated.mean(), "%.2f%%") + ", measured " +
           optional_number(s.measured.mean(), "%.2f%%") + "  (step-weighted means)\n";
    out += "loss      train " + optional_number(s.train_loss, "%.6g") + ", eval " +
           optional_number(s.eval_loss, "%.6g") + "  (final)\n";
    std::string events;
    for (const auto& [kind, n] : s.events)
        events += (events.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    out += "events    " + (events.empty() ? std::string("none") : events);
    if (s.commands_rejected > 0) out += "; " + std::to_string(s.commands_rejected) + " command(s) rejected";
    if (s.dropped_records > 0) out += "; " + std::to_string(s.dropped_records) + " record(s) dropped";
    out += "\n";
    if (s.blocks.empty()) return out + "(no per-block details in this file)\n";

    out += "\n   id  name              bf16    int8     fp8    int4  switches  final     mean sens\n";
    for (const auto& [id, b] : s.blocks) {
        const std::string name = s.name(id);
        const std::int64_t fp8 =
            b.steps[std::size_t(sp::Precision::fp8_e4m3)] + b.steps[std::size_t(sp::Precision::fp8_e5m2)];
        std::snprintf(line, sizeof line, "%5d  %-16.16s %6lld  %6lld  %6lld  %6lld  %8d  %-8s  %s\n", id,
                      name.empty() ? "-" : name.c_str(),
                      static_cast<long long>(b.steps[std::size_t(sp::Precision::bf16)]),
                      static_cast<long long>(b.steps[std::size_t(sp::Precision::int8)]),
                      static_cast<long long>(fp8),
                      static_cast<long long>(b.steps[std::size_t(sp::Precision::int4)]), b.switches,
                      std::string(sp::to_string(b.precision)).c_str(),
                      optional_number(mean_sensitivity(b), "%.4f").c_str());
        out += line;
    }
    return out;
}

int run_summarize(const SummarizeArgs& args) {
    const std::string& path = args.path;
    const std::unique_ptr<sp::JsonlReader> reader = open_telemetry_file(kCommand, path);
    if (!reader) return 2;
    Summary s;
    sp::TelemetryRecord rec;
    while (reader->next(rec)) {
        s.run_end.see(rec);
        if (const auto* u = std::get_if<sp::UpdateRecord>(&rec)) {
            s.update(*u);
        } else if (const auto* h = std::get_if<sp::RunHeader>(&rec)) {
            if (!s.header) s.header = *h;  // a repeated header is validate's business
        } else if (const auto* e = std::get_if<sp::EventRecord>(&rec)) {
            s.see_step(e->step);  // dropped events at shutdown carry step -1
            s.event(*e);
        } else {
            s.see_step(std::get<sp::StepStatsRecord>(rec).step);
        }
    }
    if (reader->problem_count() > 0) {
        const sp::LineProblem& first = reader->problems().front();
        std::fprintf(stderr, "sp-ctl summarize: skipped %llu bad line(s); the first: %s:%llu: %s\n",
                     static_cast<unsigned long long>(reader->problem_count()), path.c_str(),
                     static_cast<unsigned long long>(first.line), first.reason.c_str());
    }
    if (const std::string none = s.run_end.no_record_message(); !none.empty()) {
        std::fprintf(stderr, "sp-ctl summarize: '%s' holds no record: %s\n", path.c_str(), none.c_str());
        return 1;
    }
    if (s.updates == 0) {
        std::fprintf(stderr, "sp-ctl summarize: '%s' holds no update record\n", path.c_str());
        return 1;
    }
    s.finish();
    return write_stdout(kCommand, args.json ? to_json(s) : to_table(s)) ? 0 : 2;
}

}  // namespace

Command add_summarize(CLI::App& root) {
    auto args = std::make_shared<SummarizeArgs>();
    CLI::App* command = root.add_subcommand(kCommand, kDescription);
    command->add_option("FILE", args->path, "the telemetry file (.jsonl)")->required();
    command->add_flag("--json", args->json, "print one JSON object instead of the table");
    command->footer(
        "Exit codes: 0 ok, 1 no update record (or no record at all: cut: no header), 2 bad usage or "
        "unreadable file.");
    return {command, [args] { return run_summarize(*args); }};
}

}  // namespace sp::ctl
