#pragma once
// sp-ctl subcommands. Each takes the arguments after its name and returns the process exit code:
// 0 success, 1 the operation failed, 2 bad usage or bad input (the message names what is wrong).
#include <string>
#include <vector>

namespace spctl {

using Args = std::vector<std::string>;

int run_simulate(const Args& args);
int run_validate(const Args& args);
int run_summarize(const Args& args);

}  // namespace spctl
