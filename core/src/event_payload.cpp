#include "sp/event_payload.h"

#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

namespace sp {
namespace {

// How a value reads in a problem: short, and never the whole of a large value.
std::string shown(const nlohmann::json& value) {
    std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    constexpr std::size_t kMax = 40;
    if (text.size() > kMax) text = text.substr(0, kMax) + "...";
    return text;
}

std::optional<Precision> precision_field(const nlohmann::json& payload, const char* key,
                                         std::string& problem) {
    const auto it = payload.find(key);
    if (it == payload.end()) {
        problem = std::string("'") + key + "' is missing";
        return std::nullopt;
    }
    std::optional<Precision> p;
    if (it->is_string()) p = parse_precision(it->get_ref<const std::string&>());
    if (!p) problem = std::string("'") + key + "' must be a precision name, got " + shown(*it);
    return p;
}

bool is_block_id(const nlohmann::json& value) {
    constexpr auto kMax = std::numeric_limits<int>::max();
    if (value.is_number_unsigned()) return value.get<std::uint64_t>() <= std::uint64_t(kMax);
    if (!value.is_number_integer()) return false;
    const std::int64_t id = value.get<std::int64_t>();
    return id >= 0 && id <= kMax;
}

}  // namespace

std::optional<PrecisionChangePayload> parse_precision_change(const nlohmann::json& payload,
                                                             std::string& problem) {
    if (!payload.is_object()) {
        problem = "the payload is not a JSON object";
        return std::nullopt;
    }
    PrecisionChangePayload out;
    const auto block = payload.find("block");
    if (block == payload.end()) {
        problem = "'block' is missing";
        return std::nullopt;
    }
    if (!is_block_id(*block)) {
        problem = "'block' must be a non-negative integer, got " + shown(*block);
        return std::nullopt;
    }
    out.block = int(block->get<std::int64_t>());
    const auto from = precision_field(payload, "from", problem);
    if (!from) return std::nullopt;
    const auto to = precision_field(payload, "to", problem);
    if (!to) return std::nullopt;
    out.from = *from;
    out.to = *to;
    if (const auto reason = payload.find("reason"); reason != payload.end()) {
        if (!reason->is_string()) {
            problem = "'reason' must be a string, got " + shown(*reason);
            return std::nullopt;
        }
        out.reason = reason->get<std::string>();
    }
    return out;
}

std::string event_payload_problem(std::string_view kind, const nlohmann::json& payload) {
    std::string problem;
    if (kind == "precision_change" && !parse_precision_change(payload, problem)) return problem;
    return {};
}

}  // namespace sp
