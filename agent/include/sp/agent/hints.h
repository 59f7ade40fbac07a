#pragma once
// What the agent hands the trainer's runtime: the block -> precision map and why, the way the
// seed's Conductor consumes `block_precision_map`. No LibTorch here: a user's runtime can consume
// hints without knowing anything of the agent's internals.
#include <cstdint>
#include <vector>

#include "sp/precision.h"
#include "sp/telemetry.h"

namespace sp::agent {

struct PrecisionHints {
    std::int64_t step = 0;
    bool updated = false;              // this step ran a policy update (the map may have changed)
    std::vector<Precision> precision;  // by block id
    std::vector<Reason> reason;        // by block id; reasons as of the latest update or command
};

// Implemented by the trainer's runtime; called from compute_hints() on the training thread.
class HintSink {
  public:
    virtual ~HintSink() = default;
    virtual void on_hints(const PrecisionHints& hints) = 0;
    // The formats this runtime can materialize. The agent never routes to others and rejects pins to
    // them when the request arrives.
    virtual FormatMask formats() const { return kAllFormats; }
};

}  // namespace sp::agent
