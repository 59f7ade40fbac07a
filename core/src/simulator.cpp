#include "sp/simulator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "sp/event_payload.h"

#include "sp/command.h"
#include "sp/json_input.h"
#include "sp/policy.h"
#include "sp/policy_stepper.h"
#include "sp/telemetry.h"

namespace sp {
namespace {

using nlohmann::json;

struct StepInput {
    std::int64_t step = 0;
    std::optional<double> timestamp;
    std::vector<BlockGradStats> stats;
    std::uint64_t stats_line = 0;  // 0: no stats line for this step
    std::optional<double> loss;    // the recorded training loss (NaN: recorded as null, non-finite)
    std::vector<BlockSnr> snr;     // SNR estimates taken at this step
    std::vector<BlockLossEstimate> loss_estimates;  // loss-change estimates taken at this step (rule 23)
    std::vector<std::pair<Command, std::uint64_t>> commands;  // with their line numbers
    // A data-parallel follower's map_adopted event: the blocks where it took rank 0's decision.
    std::vector<std::tuple<int, Precision, Reason>> adopted;
};

struct ParsedInput {
    std::optional<BlockLayout> layout;
    std::optional<Config> header_config;
    std::optional<std::map<int, double>> header_calibration;
    std::vector<FormatMask> admitted_formats;  // from the header; empty: every format
    std::uint64_t skipped_update_records = 0;
    std::vector<std::string> warnings;  // lines skipped (only a cut last line is)
    std::vector<StepInput> steps;       // ascending
    int max_block_id = -1;
};

constexpr int kMaxImplicitBlocks = 4096;  // SIMULATOR.md: blocks without a layout line

// What a parse reads: every line (simulate), or only the layout or header, the step statistics and
// map_adopted events (check_simulation_input: sp-ctl validate judges the other lines itself).
enum class Scope : std::uint8_t { every_line, statistics };

bool is_statistics_or_layout(const json& j) {
    if (!j.is_object()) return false;
    const auto type = j.find("type");
    if (type == j.end()) return !j.contains("step_id");
    if (*type == "event") {  // map_adopted: only the simulator reads its to and reasons
        const auto kind = j.find("kind");
        return kind != j.end() && *kind == "map_adopted";
    }
    return *type == "header" || *type == "layout";
}

class LineParser {
  public:
    explicit LineParser(std::string source, std::function<bool()> cancelled = {},
                        Scope scope = Scope::every_line)
        : source_(std::move(source)), cancelled_(std::move(cancelled)), scope_(scope) {}

    [[noreturn]] void fail(const std::string& what) const { throw SimulationError(source_, line_, what); }

    void parse(std::istream& in, ParsedInput& out) {
        std::string text;
        bool seen_content = false;
        while (std::getline(in, text)) {
            ++line_;
            if (cancelled_ && line_ % 4096 == 0 && cancelled_()) throw SimulationCancelled();
            if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
            json j;
            JsonError bad;
            const bool parsed = parse_json(text, j, bad);
            // Skipped lines are not content: the header may still come first after them.
            if (scope_ == Scope::statistics && !(parsed && is_statistics_or_layout(j))) continue;
            if (!parsed) {
                // A last line without its newline that does not parse was cut (a full disk, a
                // killed writer): like the other readers, say so, skip it and use the rest.
                if (in.eof()) {
                    out.warnings.push_back(source_ + ":" + std::to_string(line_) +
                                           ": truncated last line skipped: not valid JSON: " + bad.message());
                    break;
                }
                fail("not valid JSON: " + bad.message());
            }
            if (!j.is_object()) fail("expected a JSON object, got " + std::string(j.type_name()));
            const std::string type =
                j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
            if (type == "layout" || type == "header") {
                if (seen_content) fail("the " + type + " line must be the first line");
                out.layout = parse_layout(j);
                if (type == "header") read_header_settings(j, out);
            } else if (type == "event") {
                add_event(j, out);  // operator commands and adopted maps; other events are skipped
            } else if (!type.empty() || j.contains("type")) {
                fail("unknown line type " + j["type"].dump() +
                     " (expected \"layout\", \"header\" or \"event\")");
            } else if (j.contains("step_id")) {
                ++out.skipped_update_records;  // a telemetry file's own update records
            } else {
                add_step_line(j, out);
            }
            seen_content = true;
        }
        if (in.bad()) fail("read error");
    }

  private:
    template <typename T>
    T integer(const json& j, const char* key, T min) const {
        const auto it = j.find(key);
        if (it == j.end()) fail(std::string("missing field '") + key + "'");
        if (!it->is_number_integer())
            fail(std::string("field '") + key + "': expected an integer, got " + it->dump());
        if (it->is_number_unsigned() ? it->get<std::uint64_t>() > std::uint64_t(std::numeric_limits<T>::max())
                                     : it->get<std::int64_t>() < std::int64_t(min)) {
            fail(std::string("field '") + key + "': out of range: " + it->dump());
        }
        return it->get<T>();
    }

    // A statistic: a non-negative number, or null (only meaningful alongside nonfinite_count > 0).
    double statistic(const json& j, const char* key, bool required, bool may_be_negative = false) const {
        const auto it = j.find(key);
        if (it == j.end()) {
            if (required) fail(std::string("missing field '") + key + "'");
            return 0.0;
        }
        if (it->is_null()) return std::numeric_limits<double>::quiet_NaN();
        if (!it->is_number())
            fail(std::string("field '") + key + "': expected a number or null, got " + it->dump());
        const double v = it->get<double>();
        if (v < 0.0 && !may_be_negative)
            fail(std::string("field '") + key + "': must be >= 0, got " + it->dump());
        return v;
    }

    BlockLayout parse_layout(const json& j) const {
        const auto blocks = j.find("blocks");
        if (blocks == j.end() || !blocks->is_array() || blocks->empty())
            fail("layout: 'blocks' must be a non-empty array");
        BlockLayout layout;
        for (const json& b : *blocks) {
            if (!b.is_object()) fail("layout: each block must be an object, got " + b.dump());
            BlockInfo info;
            info.id = integer<int>(b, "id", 0);
            if (info.id != int(layout.size()))
                fail("layout: block ids must be 0..n-1 in order; expected " + std::to_string(layout.size()) +
                     ", got " + std::to_string(info.id));
            const auto name = b.find("name");
            info.name = (name != b.end() && name->is_string()) ? name->get<std::string>()
                                                               : "blocks." + std::to_string(info.id);
            info.bytes_bf16 = b.contains("bytes_bf16") ? integer<std::uint64_t>(b, "bytes_bf16", 0) : 1;
            layout.push_back(std::move(info));
        }
        return layout;
    }

    // A telemetry file's header carries the run's effective config and calibration: the defaults
    // for a re-simulation that does not name its own.
    void read_header_settings(const json& j, ParsedInput& out) const {
        if (const auto c = j.find("config"); c != j.end() && c->is_object() && !c->empty()) {
            try {
                out.header_config = config_from_json(*c);
            } catch (const ConfigError& e) {
                fail(std::string("header config: ") + e.what());
            }
        }
        if (const auto a = j.find("admitted_formats"); a != j.end()) out.admitted_formats = admitted(*a);
        const auto cal = j.find("calibration");
        if (cal == j.end()) return;
        std::istringstream text(cal->dump());
        try {
            out.header_calibration = parse_calibration(text, "header calibration");
        } catch (const SimulationError& e) {
            fail(e.what());
        }
    }

    std::vector<FormatMask> admitted(const json& a) const {
        if (!a.is_array()) fail("header admitted_formats: expected an array, got " + a.dump());
        std::vector<FormatMask> out;
        for (const json& formats : a) {
            if (!formats.is_array())
                fail("header admitted_formats: expected arrays of format names, got " + formats.dump());
            FormatMask m = 0;
            for (const json& f : formats) {
                const auto p = f.is_string() ? parse_precision(f.get<std::string>()) : std::nullopt;
                if (!p) fail("header admitted_formats: unknown format " + f.dump());
                m |= format_bit(*p);
            }
            out.push_back(m);
        }
        return out;
    }

    // "snr": [{"id": 0, "snr_db": {"int8": 41.7, ...}}, ...], and "loss_estimates" with "loss_delta" alike:
    // each entry's block id and its per-format values.
    std::vector<std::pair<int, PerFormat>> per_format_entries(const json& a, const char* list,
                                                              const char* values, ParsedInput& out) const {
        if (!a.is_array()) fail(std::string("field '") + list + "': expected an array, got " + a.dump());
        std::vector<std::pair<int, PerFormat>> entries;
        for (const json& b : a) {
            if (!b.is_object())
                fail(std::string("each ") + list + " entry must be an object, got " + b.dump());
            const int id = integer<int>(b, "id", 0);
            check_block(id, out);
            PerFormat formats = kNoSnr;
            const auto v = b.find(values);
            if (v != b.end()) {
                const std::string field = std::string("field '") + values;
                if (!v->is_object()) fail(field + "': expected an object, got " + v->dump());
                for (const auto& [name, value] : v->items()) {
                    const auto p = parse_precision(name);
                    if (!p) fail(field + "': unknown format '" + name + "'");
                    if (!value.is_number() && !value.is_null())
                        fail(field + "." + name + "': expected a number or null, got " + value.dump());
                    formats[std::size_t(*p)] =
                        value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
                }
            }
            entries.emplace_back(id, formats);
        }
        return entries;
    }

    // The typed reader's payload (sp/event_payload.h): the same checks every reader makes.
    void add_event(const json& j, ParsedInput& out) {
        // find, not value(): value() throws nlohmann's type_error when "kind" is not a string.
        const auto kind = j.find("kind");
        if (kind == j.end() || !kind->is_string()) return;
        const std::string& name = kind->get_ref<const std::string&>();
        if (name != "map_adopted" && name != "command") return;
        const EventPayload payload = read_event_payload(name, j);
        const auto step = integer<std::int64_t>(j, "step", 0);
        if (const auto* adopted = std::get_if<MapAdoptedPayload>(&payload)) {
            add_adopted_map(step, *adopted, out);
        } else if (const auto* command = std::get_if<CommandEventPayload>(&payload)) {
            if (!command->ok.value_or(false)) return;  // rejected: never applied
            if (!command->command) fail("command event without 'command'");
            add_command(step, *command->command, out);
        } else if (name == "map_adopted") {
            fail("map_adopted event: " + std::get<UntypedEvent>(payload).problem);
        } else if (j.contains("ok") && j["ok"].is_boolean() && j["ok"].get<bool>()) {
            fail("command event: " + std::get<UntypedEvent>(payload).problem);  // an applied one
        }
    }

    // map_adopted (agent/PROTOCOL.md §11): `blocks`, with `to` and `reasons` beside them, are rank
    // 0's decisions this rank took after its own update. A file written before `to` and `reasons`
    // existed cannot replay them: said once, and its own decisions stand.
    void add_adopted_map(std::int64_t step, const MapAdoptedPayload& p, ParsedInput& out) {
        if (!p.to && !p.reasons) {
            if (!warned_old_adoption_)
                out.warnings.push_back(source_ + ":" + std::to_string(line_) +
                                       ": map_adopted without 'to' and 'reasons' (an older agent): rank 0's "
                                       "map is not replayed, this rank's own decisions stand");
            warned_old_adoption_ = true;
            return;
        }
        if (!p.to || !p.reasons)
            fail("map_adopted event: 'to' and 'reasons' must be arrays as long as 'blocks'");
        StepInput& entry = step_entry(step, out);
        std::set<int> adopted;  // at this step, earlier events included: a block is adopted once
        for (const auto& [block, block_to, block_reason] : entry.adopted) adopted.insert(block);
        for (std::size_t i = 0; i < p.blocks.size(); ++i) {
            const int block = p.blocks[i];
            check_block(block, out);
            if (!adopted.insert(block).second)
                fail("map_adopted event: block " + std::to_string(block) + " adopted twice at step " +
                     std::to_string(step));
            entry.adopted.emplace_back(block, (*p.to)[i], (*p.reasons)[i]);
        }
    }

    void add_command(std::int64_t step, const Command& command, ParsedInput& out) const {
        StepInput& entry = step_entry(step, out);
        for (int id : command.blocks) check_block(id, out);
        entry.commands.emplace_back(command, line_);
    }

    StepInput& step_entry(std::int64_t step, ParsedInput& out) const {
        if (!out.steps.empty() && step < out.steps.back().step)
            fail("step " + std::to_string(step) + " comes after step " +
                 std::to_string(out.steps.back().step) + "; steps must not decrease");
        if (out.steps.empty() || out.steps.back().step != step) {
            out.steps.emplace_back();
            out.steps.back().step = step;
        }
        return out.steps.back();
    }

    void check_block(int id, ParsedInput& out) const {
        if (out.layout && id >= int(out.layout->size()))
            fail("unknown block " + std::to_string(id) + " (the layout has " +
                 std::to_string(out.layout->size()) + " blocks)");
        // Without a layout every id up to the largest costs memory and time at each update: a huge id
        // (a corrupt file) would exhaust memory, and INT_MAX would overflow max_block_id + 1.
        if (!out.layout && id >= kMaxImplicitBlocks)
            fail("block " + std::to_string(id) + ": without a layout line block ids stop at " +
                 std::to_string(kMaxImplicitBlocks - 1) + " (give the layout as the first line)");
        out.max_block_id = std::max(out.max_block_id, id);
    }

    void add_step_line(const json& j, ParsedInput& out) const {
        const auto step = integer<std::int64_t>(j, "step", 0);
        const bool has_blocks = j.contains("blocks"), has_command = j.contains("command");
        if (has_blocks == has_command) fail("a step line needs exactly one of 'blocks' or 'command'");
        if (has_command) {
            Command c;
            std::string error;
            if (!parse_command(j["command"], c, error)) fail("command: " + error);
            add_command(step, c, out);
            return;
        }
        StepInput& entry = step_entry(step, out);
        if (entry.stats_line != 0)
            fail("step " + std::to_string(step) + " already has a stats line (line " +
                 std::to_string(entry.stats_line) + ")");
        entry.stats_line = line_;
        if (j.contains("timestamp")) {
            if (!j["timestamp"].is_number())
                fail("field 'timestamp': expected a number, got " + j["timestamp"].dump());
            entry.timestamp = j["timestamp"].get<double>();
        }
        if (const auto loss = j.find("loss"); loss != j.end()) {
            if (!loss->is_null() && !loss->is_number())
                fail("field 'loss': expected a number or null, got " + loss->dump());
            entry.loss = loss->is_null() ? std::numeric_limits<double>::quiet_NaN() : loss->get<double>();
        }
        if (const auto snr = j.find("snr"); snr != j.end())
            for (const auto& [id, db] : per_format_entries(*snr, "snr", "snr_db", out))
                entry.snr.push_back({id, db});
        if (const auto est = j.find("loss_estimates"); est != j.end())
            for (const auto& [id, delta] : per_format_entries(*est, "loss_estimates", "loss_delta", out))
                entry.loss_estimates.push_back({id, delta});
        const json& blocks = j["blocks"];
        if (!blocks.is_array()) fail("field 'blocks': expected an array, got " + blocks.dump());
        std::set<int> seen;
        for (const json& b : blocks) {
            if (!b.is_object()) fail("each block entry must be an object, got " + b.dump());
            BlockGradStats s;
            s.block_id = integer<int>(b, "id", 0);
            check_block(s.block_id, out);
            if (!seen.insert(s.block_id).second)
                fail("block " + std::to_string(s.block_id) + " appears twice");
            s.l2_norm = statistic(b, "l2_norm", true);
            s.max_abs = statistic(b, "max_abs", true);
            s.variance = statistic(b, "variance", true);
            s.mean = statistic(b, "mean", false, /*may_be_negative=*/true);
            s.numel = b.contains("numel") ? integer<std::uint64_t>(b, "numel", 0) : 0;
            s.nonfinite_count =
                b.contains("nonfinite_count") ? integer<std::uint64_t>(b, "nonfinite_count", 0) : 0;
            entry.stats.push_back(s);
        }
    }

    std::string source_;
    bool warned_old_adoption_ = false;
    std::function<bool()> cancelled_;
    Scope scope_;
    std::uint64_t line_ = 0;
};

// Rank 0's map as a follower received it: its own map after the update, with the adopted blocks
// (the only ones where the two differed) set to rank 0's formats; and rank 0's reasons for them.
std::vector<Precision> adopted_map(const Policy& policy,
                                   const std::vector<std::tuple<int, Precision, Reason>>& adopted) {
    std::vector<Precision> map = policy.precisions();
    for (const auto& [block, to, reason] : adopted) map[std::size_t(block)] = to;
    return map;
}

std::vector<Reason> adopted_reasons(std::size_t blocks,
                                    const std::vector<std::tuple<int, Precision, Reason>>& adopted) {
    std::vector<Reason> reasons(blocks, Reason::hold);
    for (const auto& [block, to, reason] : adopted) reasons[std::size_t(block)] = reason;
    return reasons;
}

}  // namespace

SimulationError::SimulationError(const std::string& source, std::uint64_t line, const std::string& message)
    : std::runtime_error(source + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + message),
      line_(line),
      reason_(message) {}

void check_simulation_input(std::istream& stats, const std::string& source) {
    ParsedInput input;
    LineParser(source, {}, Scope::statistics).parse(stats, input);
}

std::map<int, double> parse_calibration(std::istream& in, const std::string& source) {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    json j;
    JsonError bad;
    if (!parse_json(text, j, bad)) throw SimulationError(source, 0, "not valid JSON: " + bad.message());
    const auto errors = j.is_object() ? j.find("errors") : j.end();
    if (errors == j.end() || !errors->is_object())
        throw SimulationError(source, 0, "expected {\"errors\": {\"<block id>\": <relative error>, ...}}");
    std::map<int, double> out;
    for (const auto& [key, value] : errors->items()) {
        std::size_t used = 0;
        int id = -1;
        try {
            id = std::stoi(key, &used);
        } catch (const std::exception&) {
        }
        if (id < 0 || used != key.size())
            throw SimulationError(source, 0,
                                  "errors: key '" + key + "' is not a block id (a non-negative integer)");
        if (!value.is_number() || value.get<double>() < 0.0)
            throw SimulationError(source, 0,
                                  "errors: block " + key + ": expected a number >= 0, got " + value.dump());
        out[id] = value.get<double>();
    }
    return out;
}

SimulationResult simulate(std::istream& stats, const std::string& source, const SimulationOptions& options) {
    ParsedInput input;
    LineParser(source, options.cancelled).parse(stats, input);

    SimulationResult result;
    result.config_from_header = !options.config && input.header_config;
    result.config = options.config ? *options.config : input.header_config ? *input.header_config : Config{};
    result.calibration_from_header = !options.calibration && input.header_calibration;
    const std::map<int, double> calibration =
        options.calibration ? *options.calibration
                            : input.header_calibration.value_or(std::map<int, double>{});
    result.skipped_update_records = input.skipped_update_records;
    result.warnings = std::move(input.warnings);
    result.layout = input.layout ? *input.layout : uniform_layout(input.max_block_id + 1);
    const std::size_t n = result.layout.size();
    std::vector<double> errors;
    if (!calibration.empty()) {
        errors.assign(n, 0.0);
        for (const auto& [id, err] : calibration) {
            if (id >= int(n))
                throw SimulationError("calibration", 0,
                                      "block " + std::to_string(id) + " is not in the layout (" +
                                          std::to_string(n) + " blocks)");
            errors[std::size_t(id)] = err;
        }
        for (std::size_t i = 0; i < n; ++i) {
            if (!calibration.count(int(i)))
                throw SimulationError("calibration", 0, "no error for block " + std::to_string(i));
        }
    }

    Policy policy(result.config, result.layout,
                  std::move(errors));  // ConfigError when config and layout disagree
    if (!input.admitted_formats.empty()) {
        if (input.admitted_formats.size() != n)
            throw SimulationError(
                source, 1,
                "header admitted_formats: " + std::to_string(input.admitted_formats.size()) +
                    " entries for " + std::to_string(n) + " blocks");
        policy.set_admitted_formats(input.admitted_formats);
    }
    PolicyStepper stepper(policy);
    for (const StepInput& step : input.steps) {
        if (options.cancelled && options.cancelled()) throw SimulationCancelled();
        // Lifetimes end at the boundary of a step the input has: a step the file lacks changes
        // nothing, since a released block keeps its precision until the next update (rule 9).
        if (const PinExpiry& expiry = stepper.begin(step.step); !expiry.blocks.empty())
            result.pin_releases.push_back({step.step, "expired", expiry.blocks});
        for (const auto& [command, line] : step.commands) {
            const CommandOutcome outcome = stepper.apply(command);
            if (!outcome.ok) throw SimulationError(source, line, "command rejected: " + outcome.error);
            ++result.commands;
        }
        for (const BlockGradStats& s : step.stats) stepper.observe(s);
        for (const BlockSnr& s : step.snr) stepper.observe_snr(s);
        for (const BlockLossEstimate& e : step.loss_estimates) stepper.observe_loss_estimate(e);
        const UpdateRecord* rec = stepper.update(step.timestamp ? *step.timestamp : options.now());
        if (!step.adopted.empty())
            stepper.adopt(adopted_map(policy, step.adopted), adopted_reasons(n, step.adopted));
        if (rec) result.records.push_back(*rec);  // a copy, the adoption in it: the policy reuses its record
        // Loss feedback after the update, as the agent's end_step does it.
        if (step.loss) {
            const LossFeedback& fb = stepper.end(*step.loss);
            if (fb.rolled_back()) result.rollbacks.push_back({step.step, fb.verdict, fb.suspects});
            if (!fb.released_pins.empty()) {
                const bool nonfinite = fb.verdict.kind == LossVerdict::Kind::nonfinite;
                result.pin_releases.push_back(
                    {step.step, nonfinite ? "nonfinite" : "spike", fb.released_pins});
            }
        }
        ++result.steps;
    }
    return result;
}

}  // namespace sp
