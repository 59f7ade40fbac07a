#pragma once
// GPU checks of the LibTorch CUDA paths, shared by the Qt test (test_cuda_grad_stats_collector, label
// gpu) and by bench_cuda_grad_stats --check (which also runs where Qt is not installed). Each check
// returns "" on success, "SKIP: why" when it cannot run here, or what went wrong.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sp::gpu_checks {

using Check = std::pair<std::string, std::function<std::string()>>;

// True when LibTorch sees a CUDA device.
bool have_cuda_device();

// The CUDA collector against the CPU collector (and so against its float64-referenced semantics) on
// random blocks of fp32/bf16/fp16 gradients with NaN/Inf, empty and non-dense gradients; plan
// refresh when storage moves and in-place updates; a tensor of more than 2^31 elements; collect()
// returning while the stream is held (no host sync).
std::vector<Check> collector_checks();

// The reference precision runtime's staged upload: parameters bit-identical to the host reference
// materialization, bytes as counted. Only where sp_agent is built (SP_GPU_CHECKS_RUNTIME).
std::vector<Check> runtime_checks();

}  // namespace sp::gpu_checks
