#pragma once
// Typed views of the event payloads that readers act on (core/TELEMETRY.md, "Event record"). An
// event's payload comes from outside the reading process (a file, or anything that can publish on
// the telemetry port), so a field of the wrong type is a named problem here, never an exception in a
// reader: `sp-ctl validate` reports it and the dashboard logs the event as malformed.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "sp/precision.h"

namespace sp {

// `precision_change`: one block moved from one precision to another.
struct PrecisionChangePayload {
    int block = 0;  // >= 0
    Precision from = Precision::bf16, to = Precision::bf16;
    std::string reason;  // optional in the payload: "" when absent
};

// The payload of a `precision_change` event, or nullopt with `problem` saying which key is missing or
// of the wrong type ("'block' must be a non-negative integer, got null").
std::optional<PrecisionChangePayload> parse_precision_change(const nlohmann::json& payload,
                                                             std::string& problem);

// "" when the payload (the event's whole JSON object) of an event of `kind` holds what readers need
// of that kind; otherwise what is wrong. Kinds without required fields are always "".
std::string event_payload_problem(std::string_view kind, const nlohmann::json& payload);

}  // namespace sp
