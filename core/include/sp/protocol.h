#pragma once
// The wire protocol's message layer: what travels on the agent's telemetry PUB socket and its
// control ROUTER socket, without the sockets. Both the agent's I/O thread and the clients (sp-ctl,
// the dashboard) build and read messages only through these functions, so the format lives in
// one place. The protocol is documented in agent/PROTOCOL.md.
//
// Nothing here throws on input from the network: parse_request, parse_reply, parse_snapshot,
// parse_hello, parse_heartbeat and seq_of report
// problems as values. The builders throw std::invalid_argument only on a caller's own bad data
// (e.g. a config_json that is not an object).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sp/command.h"
#include "sp/config.h"
#include "sp/layout.h"
#include "sp/precision.h"
#include "sp/telemetry.h"

namespace sp {
class RecordLine;
}

namespace sp::protocol {

inline constexpr int kVersion = 1;
// Checked on the raw frame before any parsing: a client cannot make the agent parse a huge blob.
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;
// No request needs more than two levels; the limit keeps recursive code (error messages that
// print a value) away from adversarial nesting.
inline constexpr int kMaxRequestDepth = 32;
// The id is echoed in every answer and in the "command" event, so it stays short.
inline constexpr std::size_t kMaxIdBytes = 256;
// parse_request's block_count when the model is not known (a client validating before sending):
// block ids are then checked for shape only.
inline constexpr int kUnknownBlockCount = -1;
inline constexpr const char* kDefaultTelemetryEndpoint = "tcp://127.0.0.1:5556";
inline constexpr const char* kDefaultControlEndpoint = "tcp://127.0.0.1:5557";
// A data-parallel job (§11): rank r's sockets are the base endpoints with the port plus 2·r, so
// rank 0 keeps 5556/5557, rank 1 takes 5558/5559, and so on. Throws std::invalid_argument naming
// the endpoint when it has no numeric port or the port would pass 65535.
std::string rank_endpoint(const std::string& base, int rank);

// ---- Telemetry topics (the first frame of every PUB message) ----
enum class Topic : std::uint8_t { hello, update, stats, event, heartbeat };
std::string_view to_string(Topic t);
std::optional<Topic> parse_topic(std::string_view text);

// ---- Control requests ----
struct Request {
    enum class Kind : std::uint8_t { command, snapshot, ping };
    std::string id;
    Kind kind = Kind::ping;
    Command command;  // kind == command only
};

// The wire name of a request ("pin", "release", ..., "snapshot", "ping").
std::string_view cmd_name(const Request& r);

struct RequestError {
    std::optional<std::string> id;  // set when the request's id could be read; the reply echoes it
    std::string error;              // never empty
};

// Parses and validates one control frame against a model of `block_count` blocks
// (kUnknownBlockCount: skip the range check). Never throws.
std::variant<Request, RequestError> parse_request(std::string_view frame, int block_count);

// ---- Replies (agent side): one JSON text each ----
// {"id":..,"ok":true,"cmd":..,"effective_step":N} — the command is queued for step N's boundary.
std::string ack(const Request& r, std::int64_t effective_step);
// {"id":..,"ok":true,"pong":true,"step":..,"time":..,"protocol":1}
std::string pong(const Request& r, std::int64_t step, double time);
// {"id":..|null,"ok":false,"error":..}
std::string reject(const std::optional<std::string>& id, const std::string& error);
inline std::string reject(const RequestError& e) {
    return reject(e.id, e.error);
}

// The agent's whole routing state, for a late joiner.
struct Snapshot {
    std::uint64_t seq = 0;  // the last telemetry seq published when this state was taken
    std::int64_t step = 0;
    std::string run_id;
    int rank = 0;
    Mode mode = Mode::dynamic;  // the mode in force now (set_mode changes it)
    // The budget mode's target saving (set_budget changes it); nullopt: not reported (an older agent).
    std::optional<double> budget_target_pct;
    // The tolerance mode's loss tolerance (set_tolerance changes it); nullopt: not reported.
    std::optional<double> loss_tolerance_pct;
    BlockLayout layout;
    std::vector<Precision> precision;            // per block id
    std::vector<std::optional<Precision>> pins;  // per block id; nullopt: not pinned
    // The pins' terms (core/POLICY.md rule 20), per block id, or empty (not reported: an older
    // agent). pin_until: the step at whose boundary the pin ends by itself; nullopt: until released.
    std::vector<std::optional<std::int64_t>> pin_until;
    std::vector<bool> pin_release_on_spike;
    std::string config_json;  // the effective config object ("" means {})
    std::optional<UpdateRecord> last_update;
};
// {"id":..,"ok":true,"snapshot":{...}}; throws std::invalid_argument when config_json is not an
// object or precision/pins (and the terms, when given) do not have one entry per block.
// `last_update`, when given, is the agent's last update record as it was published: its line goes
// into the reply as it is (s.last_update is then not read), so a snapshot never re-serializes it.
std::string snapshot_reply(const Request& r, const Snapshot& s, const RecordLine* last_update = nullptr);

// ---- Telemetry message bodies (the second frame); "seq" is always the first key ----
// `calibration_errors` (per block id, the calibrated relative INT8 output error) is written once
// calibration ran; empty: left out.
std::string hello(std::uint64_t seq, const std::string& run_id, int rank, const BlockLayout& layout,
                  const std::string& config_json, double time,
                  const std::vector<double>& calibration_errors = {});
std::string heartbeat(std::uint64_t seq, std::int64_t step, double time);
// Adds "seq" as the first key of a record line from to_json_line (update, stats or event) by
// splicing text, without a DOM round trip. The line must be a JSON object without a top-level
// "seq" (surrounding whitespace is allowed); throws std::invalid_argument when it is not
// '{' ... '}'.
std::string with_seq(std::string_view json_line, std::uint64_t seq);
// The top-level "seq" of a message, nullopt when it has none or it is not an unsigned integer.
// Constant time for messages this layer built (seq first); other messages take a DOM parse.
// The fast path does not validate the rest of the message.
std::optional<std::uint64_t> seq_of(std::string_view json);

// ---- Client side ----
// {"id":..,"cmd":..,...}; the command's fields from sp::to_json(Command).
std::string make_request(const std::string& id, const Command& c);
// A snapshot or ping request; throws std::invalid_argument for Kind::command (it needs a Command).
std::string make_request(const std::string& id, Request::Kind kind);

struct Reply {
    std::optional<std::string> id;  // nullopt: the agent could not read the request's id
    bool ok = false;
    std::string error;                           // when !ok
    std::optional<std::int64_t> effective_step;  // acks of routing commands
    std::string text;  // the whole reply, for fields this struct does not lift (pong, snapshot)
};
// Reads one reply frame; nullopt with `error` set when it is not a valid reply.
std::optional<Reply> parse_reply(std::string_view frame, std::string& error);
// Reads the "snapshot" of a snapshot reply's text back into a Snapshot (the dashboard's late
// join). False with `error` set when the text is not an ok snapshot reply.
bool parse_snapshot(std::string_view reply_text, Snapshot& out, std::string& error);

// A `hello` body read back. The version is reported, not judged: a client decides whether it
// can follow that protocol (the dashboard refuses another; sp-ctl tail just prints it).
struct Hello {
    std::optional<int> protocol;  // nullopt: the body does not say
    int rank = 0;                 // 0 when the body does not say
    RunHeader header;             // producer "hello"; config_json "{}" when the body has none
};
// Reads one hello body; nullopt with `error` naming the field when it is not a hello. Block
// entries must be objects with an integer id, a string name and an unsigned bytes_bf16;
// calibration_errors beyond the layout are ignored and a null error reads as NaN.
std::optional<Hello> parse_hello(std::string_view body, std::string& error);

struct Heartbeat {
    std::int64_t step = 0;
    std::optional<double> time;  // nullopt: the body does not say
};
// Reads one heartbeat body; nullopt with `error` when it has no integer "step".
std::optional<Heartbeat> parse_heartbeat(std::string_view body, std::string& error);

}  // namespace sp::protocol
