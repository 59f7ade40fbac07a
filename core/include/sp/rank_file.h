#pragma once
// The telemetry file of one rank of a data-parallel job (agent/PROTOCOL.md §11): sp-trainer and the
// Python package name it alike, and its endpoints follow sp::protocol::rank_endpoint.
#include <string>

namespace sp {

// "run.jsonl" -> "run.rank1.jsonl"; a name without the extension gets ".rank1" at its end.
std::string rank_file_name(const std::string& file, int rank);

}  // namespace sp
