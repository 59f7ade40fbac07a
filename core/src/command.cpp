// Operator commands. Parsing is strict about the fields a command needs (a malformed pin must not
// half-apply) and ignores the rest, because transports wrap commands with their own fields ("id").
#include "sp/command.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace sp {
namespace {

using json = nlohmann::json;

constexpr Command::Kind kAllKinds[] = {Command::Kind::pin,         Command::Kind::release,
                                       Command::Kind::release_all, Command::Kind::set_mode,
                                       Command::Kind::set_budget,  Command::Kind::set_tolerance};

std::string show(const json& v) {
    std::string text = v.dump();
    constexpr std::size_t kMax = 80;  // keep one-line errors readable when someone sends a blob
    if (text.size() > kMax) text = text.substr(0, kMax) + "...";
    return text;
}

std::string valid_kinds() {
    std::string out;
    for (Command::Kind k : kAllKinds) out += (out.empty() ? "" : ", ") + std::string(to_string(k));
    return out;
}

std::string valid_precisions() {
    std::string out;
    for (Precision p : kAllPrecisions) out += (out.empty() ? "" : ", ") + std::string(to_string(p));
    return out;
}

// A non-negative block id that fits an int. Integral floats (3.0) are accepted, as in the config.
bool read_block_id(const json& v, int& out) {
    if (v.is_number_unsigned()) {
        const auto u = v.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) return false;
        out = static_cast<int>(u);
        return true;
    }
    if (v.is_number_integer()) {
        const auto i = v.get<std::int64_t>();
        if (i < 0 || i > std::numeric_limits<int>::max()) return false;
        out = static_cast<int>(i);
        return true;
    }
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d) || d < 0 || d > std::numeric_limits<int>::max()) return false;
    out = static_cast<int>(d);
    return true;
}

// "blocks": a non-empty array of block ids, returned sorted without duplicates.
bool read_blocks(const json& j, std::string_view cmd, std::vector<int>& out, std::string& error) {
    const auto it = j.find("blocks");
    if (it == j.end()) {
        error = "field 'blocks': missing (required by '" + std::string(cmd) + "')";
        return false;
    }
    if (!it->is_array() || it->empty()) {
        error =
            "field 'blocks': must be a non-empty array of non-negative integer block ids, got " + show(*it);
        return false;
    }
    std::vector<int> ids;
    for (std::size_t i = 0; i < it->size(); ++i) {
        int id = 0;
        if (!read_block_id((*it)[i], id)) {
            error = "field 'blocks': element [" + std::to_string(i) +
                    "] must be a non-negative integer block id, got " + show((*it)[i]);
            return false;
        }
        ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    out = std::move(ids);
    return true;
}

// A required string field; sets `error` when it is missing or not a string.
const std::string* read_string(const json& j, const char* field, std::string_view cmd, std::string_view valid,
                               std::string& error) {
    const auto it = j.find(field);
    if (it == j.end()) {
        error = "field '" + std::string(field) + "': missing (" +
                (cmd.empty() ? std::string() : "required by '" + std::string(cmd) + "'; ") + "one of " +
                std::string(valid) + ")";
        return nullptr;
    }
    if (!it->is_string()) {
        error = "field '" + std::string(field) + "': must be a string (one of " + std::string(valid) +
                "), got " + show(*it);
        return nullptr;
    }
    return it->get_ptr<const std::string*>();
}

// A pin's optional lifetime and spike release. Absent means a pin until released, as before.
bool read_pin_options(const json& j, Command& c, std::string& error) {
    if (const auto it = j.find("for_steps"); it != j.end()) {
        // Up to about 30 years of steps at one per millisecond: far beyond any run, and step + for_steps
        // cannot overflow.
        constexpr std::int64_t kMaxSteps = std::int64_t(1) << 40;
        if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > kMaxSteps) {
            error = "field 'for_steps': must be a positive integer number of steps (at most " +
                    std::to_string(kMaxSteps) + "), got " + show(*it);
            return false;
        }
        c.for_steps = it->get<std::int64_t>();
    }
    if (const auto it = j.find("release_on_spike"); it != j.end()) {
        if (!it->is_boolean()) {
            error = "field 'release_on_spike': must be true or false, got " + show(*it);
            return false;
        }
        c.release_on_spike = it->get<bool>();
    }
    return true;
}

// A percentage in [0, 100] from field `key` (or its `alias`, when one is given; both present must
// agree), required by command `cmd`.
bool read_percent(const json& j, const char* key, const char* alias, const std::string& cmd, double& out,
                  std::string& error) {
    const std::string named =
        alias ? std::string("'") + key + "' (or '" + alias + "')" : std::string("'") + key + "'";
    auto it = j.find(key);
    if (alias) {
        const auto other = j.find(alias);
        if (it == j.end()) {
            it = other;
        } else if (other != j.end() && *other != *it) {
            error = "fields '" + std::string(key) + "' and '" + alias + "' disagree: " + show(*it) + " and " +
                    show(*other);
            return false;
        }
    }
    if (it == j.end()) {
        error = "field " + named + ": missing (required by '" + cmd + "'; a number in [0, 100])";
        return false;
    }
    if (!it->is_number() || !(it->get<double>() >= 0.0 && it->get<double>() <= 100.0)) {
        error = "field " + named + ": must be a number in [0, 100], got " + show(*it);
        return false;
    }
    out = it->get<double>();
    return true;
}

}  // namespace

std::string_view to_string(Command::Kind k) {
    switch (k) {
        case Command::Kind::pin:
            return "pin";
        case Command::Kind::release:
            return "release";
        case Command::Kind::release_all:
            return "release_all";
        case Command::Kind::set_mode:
            return "set_mode";
        case Command::Kind::set_budget:
            return "set_budget";
        case Command::Kind::set_tolerance:
            return "set_tolerance";
    }
    return "unknown";
}

std::string check_command(const Command& c, int block_count, FormatMask materializable) {
    for (int id : c.blocks) {
        if (id < 0 || id >= block_count) {
            const std::string range = block_count == 0 ? std::string("the model has no blocks")
                                                       : "the model has " + std::to_string(block_count) +
                                                             " blocks: 0.." + std::to_string(block_count - 1);
            return "unknown block " + std::to_string(id) + " (" + range + ")";
        }
    }
    if (c.kind == Command::Kind::pin && !has_format(materializable, c.precision)) {
        std::string can;
        for (Precision p : kAllPrecisions)
            if (has_format(materializable, p)) can += (can.empty() ? "" : ", ") + std::string(to_string(p));
        return "precision '" + std::string(to_string(c.precision)) +
               "' cannot be materialized by this trainer's runtime (it can: " + can + ")";
    }
    return {};
}

bool parse_command(const json& j, Command& out, std::string& error) {
    if (!j.is_object()) {
        error = "a command must be a JSON object, got " + show(j);
        return false;
    }
    const std::string* name = read_string(j, "cmd", "", valid_kinds(), error);
    if (!name) return false;
    const auto kind = std::find_if(std::begin(kAllKinds), std::end(kAllKinds),
                                   [&](Command::Kind k) { return to_string(k) == *name; });
    if (kind == std::end(kAllKinds)) {
        error = "field 'cmd': unknown command " + show(json(*name)) + "; valid: " + valid_kinds();
        return false;
    }

    // Build into a local so that `out` is untouched on failure.
    Command c;
    c.kind = *kind;
    switch (c.kind) {
        case Command::Kind::pin: {
            if (!read_blocks(j, *name, c.blocks, error)) return false;
            const std::string* text = read_string(j, "precision", *name, valid_precisions(), error);
            if (!text) return false;
            const auto p = parse_precision(*text);
            if (!p) {
                error = "field 'precision': unknown precision " + show(json(*text)) +
                        "; valid: " + valid_precisions();
                return false;
            }
            c.precision = *p;
            if (!read_pin_options(j, c, error)) return false;
            break;
        }
        case Command::Kind::release:
            if (!read_blocks(j, *name, c.blocks, error)) return false;
            break;
        case Command::Kind::release_all:
            break;
        case Command::Kind::set_mode: {
            const std::string valid = "off, static, dynamic, budget, tolerance";
            const std::string* text = read_string(j, "mode", *name, valid, error);
            if (!text) return false;
            if (!parse_mode(*text, c.mode)) {
                error = "field 'mode': unknown mode " + show(json(*text)) + "; valid: " + valid;
                return false;
            }
            break;
        }
        case Command::Kind::set_budget:
            if (!read_percent(j, "target_pct", nullptr, *name, c.target_pct, error)) return false;
            break;
        case Command::Kind::set_tolerance:
            if (!read_percent(j, "loss_tolerance_pct", "pct", *name, c.tolerance_pct, error)) return false;
            break;
    }
    out = std::move(c);
    error.clear();
    return true;
}

json to_json(const Command& c) {
    json j = json::object();
    j["cmd"] = std::string(to_string(c.kind));
    switch (c.kind) {
        case Command::Kind::pin:
            j["blocks"] = c.blocks;
            j["precision"] = std::string(to_string(c.precision));
            if (c.for_steps > 0) j["for_steps"] = c.for_steps;
            if (c.release_on_spike) j["release_on_spike"] = true;
            break;
        case Command::Kind::release:
            j["blocks"] = c.blocks;
            break;
        case Command::Kind::release_all:
            break;
        case Command::Kind::set_mode:
            j["mode"] = std::string(to_string(c.mode));
            break;
        case Command::Kind::set_budget:
            j["target_pct"] = c.target_pct;
            break;
        case Command::Kind::set_tolerance:
            j["loss_tolerance_pct"] = c.tolerance_pct;
            break;
    }
    return j;
}

}  // namespace sp
