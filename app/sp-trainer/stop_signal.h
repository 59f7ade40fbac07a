#pragma once
// Ctrl-C (SIGINT) and SIGTERM end the run between two steps instead of killing the process, so the
// agent writes its run_end record ("interrupted"), the telemetry file is complete and the summary
// is printed. A second signal kills at once (the default action is restored by the first).
// sp-trainer installs them when training starts: during set-up a signal keeps its default action
// and ends the process at once, since nothing would read the flag before the first step.
namespace sp::trainer {

void install_stop_signals();
// The signal that asked to stop, 0 when none did.
int stop_signal();

}  // namespace sp::trainer
