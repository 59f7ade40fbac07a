#pragma once
// What the agent hands the trainer's runtime: the block -> precision map and why, the way the
// seed's Conductor consumes `block_precision_map`. No LibTorch here: a user's runtime can consume
// hints without knowing anything of the agent's internals.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sp/precision.h"
#include "sp/telemetry.h"

namespace at {
class Tensor;
}

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
    // The full-precision value of block `block`'s k-th streamed parameter (AgentBlock::streamed())
    // when the parameter itself holds something else during the forward pass (the reference
    // runtime's materialized copy): the fp32 master, which must stay unchanged from the forward pass
    // until the optimizer steps. With it the agent measures a layer's output SNR off the training
    // thread while the step goes on (core/SNR.md, "Off the training thread"). nullptr (the default):
    // the agent measures the parameter in compute_hints(), on the training thread.
    virtual const at::Tensor* master(std::size_t /*block*/, std::size_t /*k*/) const { return nullptr; }
};

}  // namespace sp::agent
