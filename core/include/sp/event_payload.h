#pragma once
// Event records and their typed payloads (core/TELEMETRY.md, "Event record"). Each kind the agent
// writes and a reader acts on has a struct; the agent builds it, the writer appends its fields to
// the line directly (in the order and number formatting the format has always had), and the reader
// builds it back from the parsed object. An event's payload comes from outside the reading process
// (a file, or anything that can publish on the telemetry port), so a field of the wrong type is a
// named problem, never an exception in a reader: such an event, and one of a kind this project does
// not write, is kept as an UntypedEvent that holds its fields as JSON text.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sp/command.h"
#include "sp/precision.h"
#include "sp/telemetry.h"

namespace sp {

// `precision_change`: one block moved from one precision to another.
struct PrecisionChangePayload {
    int block = 0;  // >= 0
    std::optional<std::string> name;
    Precision from = Precision::bf16, to = Precision::bf16;
    std::optional<std::string> reason;  // a Reason's name from the agent; any string from others
};

// `command`: an operator command applied (or refused) at the event's step.
struct CommandEventPayload {
    std::optional<Command> command;
    std::optional<bool> ok;                // the agent always writes it; absent reads as applied
    std::optional<std::string> id;         // the control request's id (agent/PROTOCOL.md 4.3)
    std::optional<std::uint64_t> changes;  // precision changes it made (when ok)
    std::optional<std::string> error;      // why it was refused (when not ok)
};

// What the loss detector judged (POLICY.md rules 11-15). Each field is optional on the wire; the
// agent writes all of them. NaN reads and writes as JSON null (a non-finite loss).
struct LossEvidence {
    std::optional<double> loss, ema, stddev, z;
    std::optional<std::int64_t> history;  // finite losses seen before
    std::optional<double> threshold;
    std::optional<std::int64_t> window_steps;
};

// "spike" or "nonfinite" for an alarm; "expired" for a pin whose steps ran out.
enum class EventTrigger : std::uint8_t { spike, nonfinite, expired };
std::string_view to_string(EventTrigger t);

// `loss_spike`: an alarm with no recent switch to blame; nothing changed.
struct LossSpikePayload {
    std::optional<EventTrigger> trigger;
    LossEvidence evidence;
};

// `rollback`: the blocks an alarm moved back to BF16, held there before `cooldown_until`.
struct RollbackPayload {
    std::optional<EventTrigger> trigger;
    LossEvidence evidence;
    std::vector<int> blocks;
    std::vector<std::string> names;
    std::optional<std::int64_t> cooldown_until;
};

// `pin_release`: pins with terms that ended by themselves (POLICY.md rule 20).
struct PinReleasePayload {
    EventTrigger trigger = EventTrigger::expired;
    LossEvidence evidence;                       // an alarm's; empty for "expired"
    std::optional<std::int64_t> cooldown_until;  // an alarm's
    std::vector<int> blocks;
    std::vector<std::string> names;
};

// `map_adopted`: a data-parallel follower took rank 0's map (agent/PROTOCOL.md §11). `to` and
// `reasons` stand beside `blocks`; files of older agents have neither.
struct MapAdoptedPayload {
    std::optional<int> from_rank;
    std::vector<int> blocks;
    std::optional<std::vector<Precision>> to;
    std::optional<std::vector<Reason>> reasons;
    std::optional<std::string> difference;
};

// `dropped`: records a writer lost right before this line.
struct DroppedPayload {
    std::uint64_t count = 0;
    std::optional<std::uint64_t> total;
    std::optional<std::uint64_t> write_errors;
    std::optional<std::string> error;
};

// `warning`: a message for whoever reads the run.
struct WarningPayload {
    std::optional<std::string> message;
};

// `telemetry_loss` (live only): the agent's JSONL file stopped or resumed taking records.
struct TelemetryLossPayload {
    std::string file;
    bool failing = false;  // "state": "failing" / "recovered"
    std::uint64_t lost = 0, lost_to_errors = 0, offered = 0;
    std::optional<std::string> error;
};

// `run_end`: the last record of a run (TELEMETRY.md "Run end").
struct RunEndPayload {
    std::optional<std::string> reason;
};

// Any other kind, or a known kind whose payload a reader cannot trust (`problem` says why).
struct UntypedEvent {
    // The kind-specific members as a compact JSON object ("{}" when none): never "type", "kind",
    // "step" or "timestamp". The reader and event_from_json_text write it; the writer copies it.
    std::string fields_json = "{}";
    std::string problem;  // "" for a kind without a typed payload
    std::string message;  // the "message" string member, when there is one (shown by readers)
    // The "id" string member, when there is one: a malformed command event still names the command
    // it answers, so a client waiting on that command learns that its outcome is unknown.
    std::string id;
};

using EventPayload = std::variant<UntypedEvent, PrecisionChangePayload, CommandEventPayload,
                                  PinReleasePayload, LossSpikePayload, RollbackPayload, MapAdoptedPayload,
                                  DroppedPayload, WarningPayload, TelemetryLossPayload, RunEndPayload>;

struct EventRecord {
    std::int64_t step = 0;
    double timestamp = 0.0;
    std::string kind;  // "precision_change", "command", ...; for a typed payload its kind_name
    EventPayload payload;
};

// The kind a typed payload is written as; "" for UntypedEvent (its record's `kind` names it).
std::string_view kind_name(const EventPayload& payload);

// An event of the payload's kind.
EventRecord make_event(std::int64_t step, double timestamp, EventPayload payload);

// The typed payload of an event of `kind` from its whole JSON object (the record's line, parsed);
// an UntypedEvent for another kind, or with `problem` set ("'block' must be a non-negative integer,
// got null") when the object does not hold what readers need of a known kind. Never throws for any
// value of `object`.
template <class Json>
EventPayload read_event_payload(std::string_view kind, const Json& object);
extern template EventPayload read_event_payload(std::string_view, const nlohmann::json&);
extern template EventPayload read_event_payload(std::string_view, const nlohmann::ordered_json&);

// An event from the text of its kind-specific members (a JSON object; a "kind", "step" or
// "timestamp" in it is ignored): the reader's view of what a producer of other kinds publishes.
// Text that is not a JSON object gives an UntypedEvent with that problem.
EventRecord event_from_json_text(std::string kind, std::int64_t step, double timestamp,
                                 std::string_view fields_json);

// The named problem of an event whose known kind's payload could not be trusted; "" otherwise.
const std::string& event_problem(const EventRecord& e);

// The block ids an event names, in its order: a precision_change's block, the blocks of a
// pin_release, rollback or map_adopted, and those of an applied command (pin, release). Empty for
// other kinds, an untrusted payload, and a refused command, whose blocks may rightly be ones the run
// lacks (why it was refused).
std::vector<int> event_blocks(const EventRecord& e);

// Appends the event's line (no newline) to `out`. Throws std::invalid_argument when the record has
// no kind, when a typed payload's kind differs from the record's, or when an UntypedEvent's
// fields_json is not an object's text.
void append_json(std::string& out, const EventRecord& e);

}  // namespace sp
