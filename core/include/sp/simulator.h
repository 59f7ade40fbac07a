#pragma once
// Offline policy simulation: re-run the policy on recorded gradient statistics (the input format
// is documented in core/SIMULATOR.md). The whole input is parsed and checked before any record is
// produced, so a caller never prints half a result for bad input.
#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "sp/config.h"
#include "sp/layout.h"
#include "sp/telemetry.h"

namespace sp {

// Bad simulation input. line() is 1-based; 0 when the problem is not tied to one line.
class SimulationError : public std::runtime_error {
  public:
    SimulationError(std::string source, std::uint64_t line, const std::string& message);
    std::uint64_t line() const { return line_; }

  private:
    std::uint64_t line_;
};

struct SimulationResult {
    BlockLayout layout;
    std::vector<UpdateRecord> records;
    std::uint64_t steps = 0;     // distinct steps simulated
    std::uint64_t commands = 0;  // operator commands applied
};

// `{"errors": {"0": 0.012, ...}}` -> block id -> relative error. `source` names the input in errors.
std::map<int, double> parse_calibration(std::istream& in, const std::string& source);

// Runs the policy over a stats stream. `calibration` (may be empty) must then cover every block.
// `now` supplies timestamps for steps whose line has no "timestamp".
SimulationResult simulate(std::istream& stats, const std::string& source, const Config& config,
                          const std::map<int, double>& calibration, const std::function<double()>& now);

}  // namespace sp
