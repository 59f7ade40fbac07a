#pragma once
// What `sp-ctl gate` times: one weight's trip from the fp32 master to the fp32 compute copy in one
// format — quantize (core's reference, sp/quantize.h), move the stored bytes over the link,
// dequantize. BF16's trip is the baseline: round to bf16, move 2 bytes per element, expand.
#include <cstdint>
#include <memory>

#include "sp/precision.h"

namespace sp::ctl {

class TransferPath {
  public:
    virtual ~TransferPath() = default;
    // One whole trip: reads rows * cols floats from `master`, writes rows * cols floats to `compute`.
    virtual void run(const float* master, float* compute) = 0;
    // The bytes the link carries per trip (payload and scales).
    virtual std::uint64_t moved_bytes() const = 0;
};

// The path of `format` over the CPU link (a copy of exactly the stored bytes into another buffer).
std::unique_ptr<TransferPath> make_cpu_path(sp::Precision format, std::uint64_t rows, std::uint64_t cols,
                                            std::uint64_t int4_group);

}  // namespace sp::ctl
