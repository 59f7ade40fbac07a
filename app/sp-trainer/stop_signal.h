#pragma once
#include <string>

// Ctrl-C (SIGINT) and SIGTERM end the run between two steps instead of killing the process, so the
// agent writes its run_end record ("interrupted"), the telemetry file is complete and the summary
// is printed. A second signal kills at once (the default action is restored by the first).
// sp-trainer installs them when training starts: during set-up a signal ends the process at once
// by its default action (nothing would read the flag before the first step), after removing the
// still-empty telemetry file (install_setup_signals).
namespace sp::trainer {

// During set-up (from the agent's start to install_stop_signals): SIGINT and SIGTERM still end the
// process at once, but first remove `telemetry_file` if it is still empty, so that a run stopped
// before its header leaves no file rather than a 0-byte one (which readers call cut: no header).
// A file that holds anything stays. "" installs nothing.
void install_setup_signals(const std::string& telemetry_file);
void install_stop_signals();
// The signal that asked to stop, 0 when none did.
int stop_signal();

}  // namespace sp::trainer
