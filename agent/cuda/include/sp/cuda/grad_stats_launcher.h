#pragma once
// The device half of the fused gradient-statistics pass. Plain C++: includers need no CUDA headers
// (the stream is CUstream_st*, which is what cudaStream_t and CUstream are).
//
// Per collect: one multi-tensor kernel (one thread block per plan chunk: count, mean, M2, max |g|
// over finite values, non-finite count), one small kernel that merges each block's chunk partials
// with Chan's formula in a fixed order, one cudaMemcpyAsync of the per-block results into pinned host
// memory and one cudaEventRecord, all on the caller's stream. launch() never waits for the device;
// results() waits on the event, and only then.
#include <cstdint>
#include <memory>
#include <vector>

#include "sp/cuda/block_moments.h"
#include "sp/cuda/grad_stats_plan.h"
#include "sp/cuda/stream.h"

namespace sp::cuda {

// True when the CUDA runtime reports at least one device. Never throws: false on any error (no
// driver, no device, insufficient driver).
bool cuda_device_available();

// All calls must be made with the same current CUDA device (the one the gradients live on). Errors
// from the CUDA runtime are std::runtime_error.
class GradStatsLauncher {
  public:
    GradStatsLauncher();
    ~GradStatsLauncher();
    GradStatsLauncher(const GradStatsLauncher&) = delete;
    GradStatsLauncher& operator=(const GradStatsLauncher&) = delete;

    // Takes a plan and uploads its chunk table, stream-ordered on `stream` (device buffers grow with
    // cudaMallocAsync / cudaFreeAsync; no host synchronization). Call again only when gradient
    // storage moved (pointers or sizes changed): the plan holds device addresses.
    void set_plan(GradStatsPlan plan, Stream stream);
    const GradStatsPlan& plan() const;

    // Enqueues the pass over the plan's tensors on `stream`: kernels, copy to pinned memory, event.
    // Work left on another stream by an earlier call is waited for on the device
    // (cudaStreamWaitEvent), never on the host.
    void launch(Stream stream);

    // True when the last launch() has completed (or none was made). Does not block.
    bool ready() const;

    // Per block (plan.n_blocks entries) results of the last launch(): waits on its event. Empty
    // before the first launch(). Valid until the next launch().
    const std::vector<BlockMoments>& results();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sp::cuda
