// sp-ctl validate FILE.jsonl [--json] [--max-problems N]: parse errors and consistency checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "sp/event_payload.h"
#include "sp/json_input.h"
#include "sp/jsonl.h"
#include "sp/run_end.h"
#include "sp/simulator.h"

namespace sp::ctl {
namespace {

constexpr const char* kCommand = "validate";
constexpr const char* kUsage =
    "usage: sp-ctl validate FILE.jsonl [--json] [--max-problems N]\n"
    "\n"
    "Reads a telemetry file (core/TELEMETRY.md) and prints how many records of each kind it holds,\n"
    "then the first N problems (default 20) as FILE:LINE: reason. Problems are lines that do not\n"
    "parse (a truncated last line included) and records that contradict the file: a header that is\n"
    "not the first record or is repeated, update steps that do not increase, precision counts or\n"
    "precision_changes that disagree with block_details, an estimated saving that disagrees with the\n"
    "details and the header's block sizes, a detail block the header's layout lacks, a run (with a\n"
    "header) that stops without its run_end record: the run was cut, and an event with a field that readers "
    "act on\n"
    "of the wrong type (a precision_change whose block is not a block id). Step statistics lines are\n"
    "judged by `sp-ctl simulate`'s rules (core/SIMULATOR.md): the first one simulate would reject is a\n"
    "problem.\n"
    "Records of an unknown type (a newer producer) are counted, not problems.\n"
    "--json prints one JSON object instead.\n"
    "Exit codes: 0 clean, 1 problems found, 2 bad usage or unreadable file.\n";

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
        nlohmann::json payload;
        sp::JsonError bad;
        if (!sp::parse_json(e.payload_json, payload, bad)) return;  // the reader parsed it already
        if (std::string problem = sp::event_payload_problem(e.kind, payload); !problem.empty())
            add(line, e.kind + " event: " + problem);
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

}  // namespace

int run_validate(const Args& args) {
    ParsedArgs parsed;
    if (const auto exit =
            parse_args(kCommand, args, {{"--json", false}, {"--max-problems", true}}, kUsage, 1, parsed)) {
        return *exit;
    }
    if (parsed.positionals.empty()) {
        std::fprintf(stderr, "sp-ctl validate: a telemetry file is required\n\n%s", kUsage);
        return 2;
    }
    const std::optional<std::uint64_t> max_problems = parse_count(parsed.value("--max-problems", "20"));
    if (!max_problems) {
        std::fprintf(stderr, "sp-ctl validate: --max-problems needs a non-negative integer, got '%s'\n",
                     parsed.value("--max-problems").c_str());
        return 2;
    }
    const std::string& path = parsed.positionals.front();
    const std::unique_ptr<sp::JsonlReader> reader = open_telemetry_file(kCommand, path);
    if (!reader) return 2;
    Checker check;
    std::uint64_t headers = 0, updates = 0, stats = 0, events = 0, records = 0;
    std::map<std::string, std::uint64_t> event_kinds;
    sp::TelemetryRecord rec;
    sp::RunEndTracker run_end;
    while (reader->next(rec)) {
        const std::uint64_t line = reader->lines_read();  // next() stops right after the record's line
        run_end.see(rec);
        if (const auto* u = std::get_if<sp::UpdateRecord>(&rec)) {
            ++updates;
            check.update(*u, line);
        } else if (const auto* h = std::get_if<sp::RunHeader>(&rec)) {
            ++headers;
            check.header(*h, line, records);
        } else if (const auto* e = std::get_if<sp::EventRecord>(&rec)) {
            ++events;
            ++event_kinds[e->kind];
            check.event(*e, line);
        } else {
            ++stats;
        }
        ++records;
    }

    // Step statistics are judged by the simulator's own rules: what validate calls clean, simulate
    // reads.
    if (stats > 0) check_step_statistics(path, check);
    // Reported at the file's last line, where the missing record should have been.
    if (const std::string cut = run_end.cut_message(); !cut.empty()) check.add(reader->lines_read(), cut);
    // Parse problems and consistency problems, in file order.
    std::vector<sp::LineProblem> problems = reader->problems();
    problems.insert(problems.end(), check.problems.begin(), check.problems.end());
    std::stable_sort(problems.begin(), problems.end(),
                     [](const sp::LineProblem& a, const sp::LineProblem& b) { return a.line < b.line; });
    const std::uint64_t bad_lines = reader->problem_count();
    const std::uint64_t total = bad_lines + check.count;
    const std::size_t shown = std::size_t(std::min<std::uint64_t>(*max_problems, problems.size()));
    // The header's layout is authoritative; a file without one (the original tool) has only details.
    const std::size_t blocks = check.layout.empty() ? check.max_details : check.layout.size();

    std::string out;
    if (parsed.has("--json")) {
        nlohmann::ordered_json j;
        j["file"] = path;
        j["lines"] = reader->lines_read();
        j["counts"] = {{"header", headers},
                       {"update", updates},
                       {"event", events},
                       {"step_stats", stats},
                       {"unknown_type", reader->unknown_type_count()},
                       {"bad_lines", bad_lines},
                       {"inconsistencies", check.count}};
        j["events"] = nlohmann::ordered_json::object();
        for (const auto& [kind, n] : event_kinds) j["events"][kind] = n;
        j["blocks"] = blocks;
        j["problem_count"] = total;
        j["problems"] = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < shown; ++i) {
            j["problems"].push_back({{"line", problems[i].line}, {"reason", problems[i].reason}});
        }
        j["clean"] = total == 0;
        out = j.dump() + "\n";
    } else {
        std::string kinds;
        for (const auto& [kind, n] : event_kinds) {
            kinds += (kinds.empty() ? "  (" : ", ") + kind + " " + std::to_string(n);
        }
        if (!kinds.empty()) kinds += ")";
        const auto row = [&out](const char* name, std::uint64_t n, const std::string& extra = {}) {
            char text[64];
            std::snprintf(text, sizeof text, "  %-13s %llu", name, static_cast<unsigned long long>(n));
            out += text + extra + "\n";
        };
        out = path + ": " + std::to_string(reader->lines_read()) + " lines\n";
        row("header", headers);
        row("update", updates);
        row("event", events, kinds);
        row("step stats", stats);
        row("unknown type", reader->unknown_type_count());
        row("bad lines", bad_lines);
        row("inconsistent", check.count);
        row("blocks", blocks);
        for (std::size_t i = 0; i < shown; ++i) {
            out += path + ":" + std::to_string(problems[i].line) + ": " + problems[i].reason + "\n";
        }
        if (total > shown) {
            out += "... " + std::to_string(total - shown) + " more problem(s) not shown (--max-problems " +
                   std::to_string(*max_problems) + ")\n";
        }
        out += total == 0 ? "clean\n" : std::to_string(total) + " problem(s)\n";
    }
    if (!write_stdout(kCommand, out)) return 2;
    return total == 0 ? 0 : 1;
}

}  // namespace sp::ctl
