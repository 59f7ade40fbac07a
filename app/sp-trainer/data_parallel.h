#pragma once
// sp-trainer's data-parallel side (README, "Two ranks"): joining the job's c10d process group, and
// the launcher that starts N local ranks of one command line.
#include <memory>
#include <string>
#include <vector>

#include "trainer_options.h"

namespace sp::agent {
class ProcessGroupLink;
}

namespace sp::trainer {

// Rank 0 hosts a TCPStore at --master-addr:--master-port, every rank joins a Gloo process group
// through it (both waiting at most process_group_timeout_s). Null when --world-size is 1. Throws
// std::runtime_error naming the rank and the address when the rendezvous fails.
std::shared_ptr<agent::ProcessGroupLink> join_process_group(const TrainerOptions& o);

// --spawn N: runs this executable N times with `args` (minus --spawn) plus --world-size N --rank R
// (and a free --master-port unless one was given), prefixes each line of a rank's output with
// "[rank R] ", and returns 0 when every rank succeeded, else the first failing rank's exit status
// (128 + signal for a rank killed by one). The ranks' own timeouts end the others.
int spawn_ranks(const std::vector<std::string>& args, const TrainerOptions& o);

}  // namespace sp::trainer
