#pragma once
// Offline policy simulation: re-run the policy on recorded gradient statistics (the input format
// is documented in core/SIMULATOR.md). The whole input is parsed and checked before any record is
// produced, so a caller never prints half a result for bad input.
#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sp/config.h"
#include "sp/layout.h"
#include "sp/loss_monitor.h"
#include "sp/telemetry.h"

namespace sp {

// Bad simulation input. line() is 1-based; 0 when the problem is not tied to one line.
class SimulationError : public std::runtime_error {
  public:
    SimulationError(const std::string& source, std::uint64_t line, const std::string& message);
    std::uint64_t line() const { return line_; }
    // The message alone, without the "source:line: " that what() starts with.
    const std::string& reason() const { return reason_; }

  private:
    std::uint64_t line_;
    std::string reason_;
};

struct SimulationOptions {
    std::optional<Config> config;                      // none: the input's header config, else defaults
    std::optional<std::map<int, double>> calibration;  // none: the input's header calibration, if any
    std::function<double()> now = [] { return 0.0; };  // timestamps for steps without one
    // Polled while the input is read (every 4096 lines) and at every step simulated: returning true
    // stops the simulation with SimulationCancelled. Empty: never.
    std::function<bool()> cancelled;
};

// simulate() stopped because SimulationOptions::cancelled said so.
class SimulationCancelled : public std::runtime_error {
  public:
    SimulationCancelled() : std::runtime_error("the simulation was cancelled") {}
};

// A rollback the loss feedback made during the simulation (from the recorded training losses).
struct SimulatedRollback {
    std::int64_t step = 0;
    LossVerdict verdict;
    std::vector<int> blocks;
};

// A pin that ended by itself (POLICY.md rule 20): its for_steps ran out, or a loss alarm released it.
struct SimulatedPinRelease {
    std::int64_t step = 0;
    std::string trigger;  // "expired", "spike" or "nonfinite", as in the agent's pin_release event
    std::vector<int> blocks;
};

struct SimulationResult {
    Config config;                    // the configuration the policy ran with
    bool config_from_header = false;  // taken from a telemetry file's header
    bool calibration_from_header = false;
    std::uint64_t skipped_update_records = 0;  // a telemetry file's own update records, not input
    // Input skipped rather than refused, one message each ("run.jsonl:812: truncated last line
    // skipped: ..."): only a last line that lacks its newline and does not parse.
    std::vector<std::string> warnings;
    BlockLayout layout;
    std::vector<UpdateRecord> records;
    std::vector<SimulatedRollback> rollbacks;
    std::vector<SimulatedPinRelease> pin_releases;
    std::uint64_t steps = 0;     // distinct steps simulated
    std::uint64_t commands = 0;  // operator commands applied
};

// `{"errors": {"0": 0.012, ...}}` -> block id -> relative error. `source` names the input in errors.
std::map<int, double> parse_calibration(std::istream& in, const std::string& source);

// Runs the policy over a stats stream: a stats file as documented, or a telemetry file written with
// telemetry_every_step (its header gives layout, config and calibration; recorded operator commands
// are replayed; its update records are skipped). A calibration, when given, must cover every block.
SimulationResult simulate(std::istream& stats, const std::string& source, const SimulationOptions& options);

// The checks simulate() makes on the step statistics lines and map_adopted events of its input (and
// on the layout or header they are judged against), without simulating: throws the SimulationError
// simulate() would for the first of those lines it rejects. Every other line (other events, update
// records, other types, text that is not a JSON object) is skipped: `sp-ctl validate`, which runs
// it, judges those itself. One rule set thus judges those lines for both commands.
void check_simulation_input(std::istream& stats, const std::string& source);

}  // namespace sp
