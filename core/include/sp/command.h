#pragma once
// Operator commands that change routing: the same objects travel in the simulator's input,
// on the control socket and through the agent's command queue.
//   {"cmd":"pin","blocks":[3,4],"precision":"int8"}   {"cmd":"release","blocks":[3]}
//   {"cmd":"release_all"}                               {"cmd":"set_mode","mode":"static"}
//   {"cmd":"set_budget","target_pct":55}           {"cmd":"set_tolerance","loss_tolerance_pct":0.3}
//   {"cmd":"pin","blocks":[2],"precision":"int8","for_steps":200,"release_on_spike":true}
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sp/config.h"
#include "sp/precision.h"

namespace sp {

struct Command {
    enum class Kind : std::uint8_t { pin, release, release_all, set_mode, set_budget, set_tolerance };
    Kind kind = Kind::release_all;
    std::vector<int> blocks;                // pin, release
    Precision precision = Precision::bf16;  // pin
    // pin: the pin ends by itself at the boundary of step (applied + for_steps); 0: until released.
    std::int64_t for_steps = 0;
    // pin: a loss spike releases it, and a block pinned below BF16 is rolled back (POLICY.md rule 20).
    bool release_on_spike = false;
    Mode mode = Mode::dynamic;  // set_mode
    double target_pct = 0.0;    // set_budget: budget_target_pct, in [0, 100]
    // set_tolerance: loss_tolerance_pct, in [0, 100] (JSON "loss_tolerance_pct", or "pct")
    double tolerance_pct = 0.0;
};

std::string_view to_string(Command::Kind k);

// Why a parsed command cannot be applied to a model of `block_count` blocks whose runtime can
// materialize `materializable` ("" when it can): an unknown block, a pin to a format the runtime
// cannot materialize. The policy and the agent (when the request arrives) both ask this.
std::string check_command(const Command& c, int block_count, FormatMask materializable);

// Parses one command object. Fields other than the command's own are ignored (e.g. a
// protocol "id"). On failure returns false and sets `error` to a message naming the field.
bool parse_command(const nlohmann::json& j, Command& out, std::string& error);

nlohmann::json to_json(const Command& c);

}  // namespace sp
