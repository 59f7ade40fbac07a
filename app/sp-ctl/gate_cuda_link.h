#pragma once
// `sp-ctl gate --link cuda` (core/GATE.md, "The CUDA link"): each format's payload, packed as the
// runtime streams it (agent/src/payload.h), copied from pinned host memory to the GPU and expanded to
// BF16 there by the dequantize kernels (sp::cuda_dequantize), against BF16's payload copied the same
// way. GPU time between CUDA events. Compiled only where nvcc was found (SP_CTL_HAVE_CUDA_LINK).
#include <cstdint>
#include <string>
#include <vector>

#include "gate_measure.h"
#include "sp/format_gate.h"

namespace sp::ctl {

// "" when a CUDA device can be measured, else why not (no device, no driver, ...).
std::string cuda_link_unavailable();

// "cuda (NVIDIA H100 80GB HBM3, sm_90)": the current device.
std::string cuda_device_description();

// As measure_size(): `repeats` rounds in rotating order, each path's median per trip. Throws
// std::runtime_error on a CUDA error.
std::vector<sp::GateMeasurement> measure_size_cuda(sp::LayerKind kind, std::uint64_t rows, std::uint64_t cols,
                                                   const GateSweep& sweep);

}  // namespace sp::ctl
