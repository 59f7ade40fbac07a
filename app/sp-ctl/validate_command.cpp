// sp-ctl validate FILE [--json] [--max-problems N]: parse errors and consistency checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "option_checks.h"
#include "sp/event_payload.h"
#include "sp/jsonl.h"
#include "sp/run_end.h"
#include "sp/simulator.h"

namespace sp::ctl {
namespace {

constexpr const char* kCommand = "validate";
constexpr const char* kDescription =
    "check a telemetry file: parse errors and inconsistent records\n"
    "\n"
    "Reads a telemetry file (core/TELEMETRY.md) and prints how many records of each kind it holds,\n"
    "then the first N problems (--max-problems) as FILE:LINE: reason. Problems are lines that do not\n"
    "parse (a truncated last line included) and records that contradict the file: a header that is\n"
    "not the first record or is repeated, update steps that do not increase, precision counts or\n"
    "precision_changes that disagree with block_details, an estimated saving that disagrees with the\n"
    "details and the header's block sizes, each block_details key or block an event names that the\n"
    "header's layout lacks, a run (with a header) that stops without its run_end record: the run was\n"
    "cut, a file without any record (0 bytes or blank lines only: cut: no header), and an event with\n"
    "a field that readers act on of the wrong type (a precision_change whose block is not a block\n"
    "id). Step statistics lines are judged by `sp-ctl simulate`'s rules (core/SIMULATOR.md): the\n"
    "first one simulate would reject is a problem.\n"
    "Records of an unknown type (a newer producer) are counted, not problems.";

struct ValidateArgs {
    std::string path;
    bool json = false;
    std::uint64_t max_problems = 20;
};

// Stored problems are capped like JsonlReader's own list; the count stays exact.
constexpr std::size_t kMaxStoredProblems = sp::JsonlReader::kMaxStoredProblems;

struct Checker {
    std::map<int, std::uint64_t> layout;  // header block id -> bytes_bf16
    std::uint64_t header_line = 0;        // 0: no header seen yet
    std::uint64_t records_before_header = 0;
    std::optional<std::int64_t> last_step;
    std::uint64_t last_step_line = 0;
    std::size_t max_details = 0;

    std::vector<sp::LineProblem> problems;
    std::uint64_t count = 0;

    void add(std::uint64_t line, std::string reason) {
        ++count;
        if (problems.size() < kMaxStoredProblems) problems.push_back({line, std::move(reason)});
    }

    void header(const sp::RunHeader& h, std::uint64_t line, std::uint64_t records_seen) {
        if (header_line != 0) {
            add(line, "another header (the first is at line " + std::to_string(header_line) + ")");
            return;  // the first header's layout stays the reference
        }
        header_line = line;
        if (records_seen > 0) add(line, "the header is not the first record");
        for (const sp::BlockInfo& b : h.blocks) layout[b.id] = b.bytes_bf16;
    }

    void update(const sp::UpdateRecord& r, std::uint64_t line) {
        const std::string step = std::to_string(r.step_id);
        if (r.step_id < 0) add(line, "step_id " + step + " is negative (a training step is >= 0)");
        if (last_step && r.step_id <= *last_step) {
            add(line, "step_id " + step + " does not increase (the previous update, line " +
                          std::to_string(last_step_line) + ", has step_id " + std::to_string(*last_step) +
                          ")");
        }
        last_step = r.step_id;
        last_step_line = line;
        // The original tool wrote "block_details": {}; there is nothing to cross-check then.
        if (r.block_details.empty()) return;
        max_details = std::max(max_details, r.block_details.size());

        int bf16 = 0, int8 = 0, fp8 = 0, int4 = 0, changed = 0;
        for (const sp::BlockDetail& d : r.block_details) {
            (d.precision == sp::Precision::bf16   ? bf16
             : d.precision == sp::Precision::int8 ? int8
             : d.precision == sp::Precision::int4 ? int4
                                                  : fp8)++;
            changed += d.changed ? 1 : 0;
            if (!layout.empty() && layout.count(d.id) == 0) {
                add(line, "block " + std::to_string(d.id) + " is not in the header's layout");
            }
        }
        const int sum = r.blocks_bf16 + r.blocks_int8 + r.blocks_fp8 + r.blocks_int4;
        if (sum != int(r.block_details.size())) {
            add(line, "blocks_bf16+blocks_int8+blocks_fp8+blocks_int4 = " + std::to_string(sum) +
                          " but block_details has " + std::to_string(r.block_details.size()) + " blocks");
        } else if (bf16 != r.blocks_bf16 || int8 != r.blocks_int8 || fp8 != r.blocks_fp8 ||
                   int4 != r.blocks_int4) {
            add(line, "precision counts bf16/int8/fp8/int4 " + std::to_string(r.blocks_bf16) + "/" +
                          std::to_string(r.blocks_int8) + "/" + std::to_string(r.blocks_fp8) + "/" +
                          std::to_string(r.blocks_int4) + " disagree with block_details (" +
                          std::to_string(bf16) + "/" + std::to_string(int8) + "/" + std::to_string(fp8) +
                          "/" + std::to_string(int4) + ")");
        }
        if (changed != r.precision_changes) {
            add(line, "precision_changes " + std::to_string(r.precision_changes) + " but " +
                          std::to_string(changed) + " blocks are marked changed");
        }
        check_saving(r, line);
    }

    // The fields readers act on (sp/event_payload.h): the dashboard's rule set, so a file this calls
    // clean is one the dashboard shows.
    void event(const sp::EventRecord& e, std::uint64_t line) {
        if (const std::string& problem = sp::event_problem(e); !problem.empty())
            add(line, e.kind + " event: " + problem);
        // Each block the layout lacks, every one: a reader would act on a block the run does not have.
        if (layout.empty()) return;
        for (const int id : sp::event_blocks(e)) {
            if (layout.count(id) == 0)
                add(line, e.kind + " event: block " + std::to_string(id) + " is not in the header's layout");
        }
    }

    // POLICY.md rule 10: every layout block counts, at its detail's precision (bf16 if it has none).
    void check_saving(const sp::UpdateRecord& r, std::uint64_t line) {
        if (layout.empty()) return;
        std::map<int, sp::Precision> precision;
        for (const sp::BlockDetail& d : r.block_details) precision[d.id] = d.precision;
        double total = 0.0, moved = 0.0;
        for (const auto& [id, bytes] : layout) {
            const auto it = precision.find(id);
            const sp::BlockInfo info{id, {}, bytes};
            total += double(bytes);
            moved += info.bytes_at(it == precision.end() ? sp::Precision::bf16 : it->second);
        }
        if (total <= 0.0) return;
        const double expected = 100.0 * (1.0 - moved / total);
        const double got = r.estimated_bandwidth_saving_pct;
        // Relative 1e-9 absorbs a different summation order; the floor keeps 0 vs 0 equal.
        const double tolerance = std::max(1e-9 * std::max(std::abs(expected), std::abs(got)), 1e-12);
        if (!(std::abs(got - expected) <= tolerance)) {
            char text[160];
            std::snprintf(text, sizeof text,
                          "estimated_bandwidth_saving_pct %.17g disagrees with block_details and the header "
                          "layout (%.17g)",
                          got, expected);
            add(line, text);
        }
    }
};

// The first statistics line `sp-ctl simulate` would reject (core's check_simulation_input).
void check_step_statistics(const std::string& path, Checker& check) {
    std::ifstream in(path, std::ios::binary);
    try {
        sp::check_simulation_input(in, path);
    } catch (const sp::SimulationError& e) {
        check.add(e.line(), "sp-ctl simulate rejects this file here: " + e.reason());
    }
}

// What validate found in a file: its records by kind, and its problems in file order.
struct Findings {
    std::uint64_t lines = 0, headers = 0, updates = 0, stats = 0, events = 0, unknown_type = 0;
    std::map<std::string, std::uint64_t> event_kinds;
    std::size_t blocks = 0;
    std::uint64_t bad_lines = 0, inconsistencies = 0;
    std::vector<sp::LineProblem> problems;  // as many as were stored, sorted by line

    std::uint64_t problem_count() const { return bad_lines + inconsistencies; }
};

Findings examine(sp::JsonlReader& reader, const std::string& path) {
    Findings found;
    Checker check;
    std::uint64_t records = 0;
    sp::TelemetryRecord rec;
    sp::RunEndTracker run_end;
    while (reader.next(rec)) {
        const std::uint64_t line = reader.lines_read();  // next() stops right after the record's line
        run_end.see(rec);
        if (const auto* u = std::get_if<sp::UpdateRecord>(&rec)) {
            ++found.updates;
            check.update(*u, line);
        } else if (const auto* h = std::get_if<sp::RunHeader>(&rec)) {
            ++found.headers;
            check.header(*h, line, records);
        } else if (const auto* e = std::get_if<sp::EventRecord>(&rec)) {
            ++found.events;
            ++found.event_kinds[e->kind];
            check.event(*e, line);
        } else {
            ++found.stats;
        }
        ++records;
    }

    // Step statistics are judged by the simulator's own rules: what validate calls clean, simulate
    // reads. That reads the file a second time, which a FIFO cannot give (a second open would wait
    // for a writer that is gone): left out, and said.
    if (found.stats > 0 && read_once(path)) {
        std::fprintf(stderr,
                     "sp-ctl %s: '%s' is a pipe, read once: its step statistics were not checked by "
                     "sp-ctl simulate's rules (validate a regular file for that)\n",
                     kCommand, path.c_str());
    } else if (found.stats > 0) {
        check_step_statistics(path, check);
    }
    // Reported at the file's last line (0 for a 0-byte file), where the missing record should have been.
    if (const std::string cut = run_end.cut_message(); !cut.empty()) check.add(reader.lines_read(), cut);
    if (const std::string none = run_end.no_record_message(); !none.empty())
        check.add(reader.lines_read(), none);
    // Parse problems and consistency problems, in file order.
    found.problems = reader.problems();
    found.problems.insert(found.problems.end(), check.problems.begin(), check.problems.end());
    std::stable_sort(found.problems.begin(), found.problems.end(),
                     [](const sp::LineProblem& a, const sp::LineProblem& b) { return a.line < b.line; });
    found.lines = reader.lines_read();
    found.unknown_type = reader.unknown_type_count();
    found.bad_lines = reader.problem_count();
    found.inconsistencies = check.count;
    // The header's layout is authoritative; a file without one (the original tool) has only details.
    found.blocks = check.layout.empty() ? check.max_details : check.layout.size();
    return found;
}

std::string to_json(const std::string& path, const Findings& f, std::size_t shown) {
    nlohmann::ordered_json j;
    j["file"] = path;
    j["lines"] = f.lines;
    j["counts"] = {{"header", f.headers},
                   {"update", f.updates},
                   {"event", f.events},
                   {"step_stats", f.stats},
                   {"unknown_type", f.unknown_type},
                   {"bad_lines", f.bad_lines},
                   {"inconsistencies", f.inconsistencies}};
    j["events"] = nlohmann::ordered_json::object();
    for (const auto& [kind, n] : f.event_kinds) j["events"][kind] = n;
    j["blocks"] = f.blocks;
    j["problem_count"] = f.problem_count();
    j["problems"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < shown; ++i) {
        j["problems"].push_back({{"line", f.problems[i].line}, {"reason", f.problems[i].reason}});
    }
    j["clean"] = f.problem_count() == 0;
    return j.dump() + "\n";
}

std::string to_text(const std::string& path, const Findings& f, std::size_t shown,
                    std::uint64_t max_problems) {
    std::string kinds;
    for (const auto& [kind, n] : f.event_kinds) {
        kinds += (kinds.empty() ? "  (" : ", ") + kind + " " + std::to_string(n);
    }
    if (!kinds.empty()) kinds += ")";
    std::string out = path + ": " + std::to_string(f.lines) + " lines\n";
    const auto row = [&out](const char* name, std::uint64_t n, const std::string& extra = {}) {
        char text[64];
        std::snprintf(text, sizeof text, "  %-13s %llu", name, static_cast<unsigned long long>(n));
        out += text + extra + "\n";
    };
    row("header", f.headers);
    row("update", f.updates);
    row("event", f.events, kinds);
    row("step stats", f.stats);
    row("unknown type", f.unknown_type);
    row("bad lines", f.bad_lines);
    row("inconsistent", f.inconsistencies);
    row("blocks", f.blocks);
    for (std::size_t i = 0; i < shown; ++i) {
        out += path + ":" + std::to_string(f.problems[i].line) + ": " + f.problems[i].reason + "\n";
    }
    const std::uint64_t total = f.problem_count();
    if (total > shown) {
        out += "... " + std::to_string(total - shown) + " more problem(s) not shown (--max-problems " +
               std::to_string(max_problems) + ")\n";
    }
    out += total == 0 ? "clean\n" : std::to_string(total) + " problem(s)\n";
    return out;
}

int run_validate(const ValidateArgs& args) {
    const std::unique_ptr<sp::JsonlReader> reader = open_telemetry_file(kCommand, args.path);
    if (!reader) return 2;
    const Findings found = examine(*reader, args.path);
    const std::size_t shown = std::size_t(std::min<std::uint64_t>(args.max_problems, found.problems.size()));
    const std::string out =
        args.json ? to_json(args.path, found, shown) : to_text(args.path, found, shown, args.max_problems);
    if (!write_stdout(kCommand, out)) return 2;
    return found.problem_count() == 0 ? 0 : 1;
}

}  // namespace

Command add_validate(CLI::App& root) {
    auto args = std::make_shared<ValidateArgs>();
    CLI::App* command = root.add_subcommand(kCommand, kDescription);
    command->add_option("FILE", args->path, "the telemetry file (.jsonl)")->required();
    command->add_flag("--json", args->json, "print one JSON object instead");
    command->add_option("--max-problems", args->max_problems, "how many problems to list")
        ->type_name("N")
        ->transform(whole_number(0))
        ->capture_default_str();
    command->footer("Exit codes: 0 clean, 1 problems found, 2 bad usage or unreadable file.");
    return {command, [args] { return run_validate(*args); }};
}

}  // namespace sp::ctl
