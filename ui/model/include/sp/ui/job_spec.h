#pragma once
// The endpoints of a data-parallel job (agent/PROTOCOL.md §11): one agent per rank, each with its
// own telemetry and control sockets. The dashboard follows a job as one run: rank 0's stream is the
// run, the other ranks' streams feed the rank status model (rank_status_model.h).
#include <optional>
#include <vector>

#include <QString>

#include "sp/ui/live_source.h"

namespace sp::ui {

// Parses one --connect value for a job of `ranks` ranks:
//   "SPEC"            ranks 0 or 1: one agent (parseEndpointSpec's forms). ranks N > 1: the N ranks
//                     of one job, rank r at sp::protocol::rank_endpoint(base, r) for telemetry and
//                     control alike (the control base is SPEC's, port + 1 when not given).
//   "SPEC;SPEC;..."   one job, one SPEC per rank in rank order; with ranks N > 0 the list must hold N.
// Every rank's endpoints must differ from every other's. nullopt with `error` (when given) saying
// what is wrong, without naming a flag (the caller does).
std::optional<std::vector<LiveEndpoints>> parseJobSpec(const QString& spec, int ranks, QString* error);

// The inverse for a job of several ranks: "TEL,CTL;TEL,CTL;..." (what the recent list keeps).
QString jobSpecText(const std::vector<LiveEndpoints>& ranks);

}  // namespace sp::ui
