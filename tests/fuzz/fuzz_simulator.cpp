// The simulator's inputs on arbitrary text: simulate() on the text as a stats/telemetry stream, and
// parse_calibration on the same text. Both report bad input as SimulationError (SIMULATOR.md);
// simulate() also throws ConfigError when the input's header config does not fit its layout (as
// sp-ctl simulate expects: "A configuration error exits 2 too"). Anything else escaping is a finding.
#include <sstream>

#include "fuzz_target.h"
#include "sp/simulator.h"

extern "C" int SP_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
    const std::string text(sp::fuzz::as_text(data, size));
    {
        std::istringstream in(text);
        try {
            sp::simulate(in, "fuzz", sp::SimulationOptions{});
        } catch (const sp::SimulationError&) {
        } catch (const sp::ConfigError&) {
        }
    }
    std::istringstream in(text);
    try {
        sp::parse_calibration(in, "fuzz");
    } catch (const sp::SimulationError&) {
    }
    return 0;
}
