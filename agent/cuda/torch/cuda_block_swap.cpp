#include "cuda_block_swap.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <array>
#include <stdexcept>
#include <utility>
#include <vector>

namespace sp::agent::detail {
namespace {

// Pieces start on 16-byte boundaries, so the arena's byte slices can be viewed as bf16 / int8 / fp32.
std::size_t align16(std::size_t n) {
    return (n + 15) / 16 * 16;
}

class CudaSwapSlots final : public SwapSlots {
  public:
    explicit CudaSwapSlots(c10::Device device) : device_(device), expander_(device) {
        if (!device.is_cuda()) throw std::invalid_argument("CudaSwapSlots: not a CUDA device");
        c10::cuda::CUDAGuard guard(device_);
        copy_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index()).stream();
        for (std::size_t s = 0; s < 2; ++s) {
            C10_CUDA_CHECK(cudaEventCreateWithFlags(&copied_[s], cudaEventDisableTiming));
            C10_CUDA_CHECK(cudaEventCreateWithFlags(&consumed_[s], cudaEventDisableTiming));
        }
    }

    ~CudaSwapSlots() override {
        c10::cuda::CUDAGuard guard(device_);
        for (std::size_t s = 0; s < 2; ++s) {
            if (used_[s]) (void)cudaEventSynchronize(copied_[s]);  // the payloads must outlive the copy
            (void)cudaEventDestroy(copied_[s]);
            (void)cudaEventDestroy(consumed_[s]);
        }
    }

    CudaSwapSlots(const CudaSwapSlots&) = delete;
    CudaSwapSlots& operator=(const CudaSwapSlots&) = delete;

    void upload(std::size_t slot, const SwapBlock& block) override {
        c10::cuda::CUDAGuard guard(device_);
        if (used_[slot]) C10_CUDA_CHECK(cudaEventSynchronize(copied_[slot]));  // see the header
        offsets_[slot].clear();
        std::size_t bytes = 0;
        for (const auto& payload : block.payloads) {
            if (!payload->pinned.defined())
                throw std::logic_error("CudaSwapSlots: a payload without page-locked bytes");
            offsets_[slot].push_back(bytes);
            bytes = align16(bytes + std::size_t(payload->pinned.numel()));
        }
        reserve(slot, bytes);
        // The slot's previous expansion (compute stream) must have read it before it is overwritten.
        if (used_[slot]) C10_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, consumed_[slot], 0));
        auto* arena = static_cast<unsigned char*>(arena_[slot].data_ptr());
        for (std::size_t k = 0; k < block.payloads.size(); ++k) {
            const at::Tensor& pinned = block.payloads[k]->pinned;
            if (pinned.numel() > 0)
                C10_CUDA_CHECK(cudaMemcpyAsync(arena + offsets_[slot][k], pinned.data_ptr(),
                                               std::size_t(pinned.numel()), cudaMemcpyHostToDevice,
                                               copy_stream_));
        }
        C10_CUDA_CHECK(cudaEventRecord(copied_[slot], copy_stream_));
        held_[slot] = block.payloads;  // kept until the copy is known done (next upload here)
        used_[slot] = true;
    }

    void expand(std::size_t slot, const SwapBlock& block) override {
        c10::cuda::CUDAGuard guard(device_);
        const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
        C10_CUDA_CHECK(cudaStreamWaitEvent(compute, copied_[slot], 0));  // on the device, not the host
        for (std::size_t k = 0; k < block.params.size(); ++k) {
            const Payload& payload = *block.payloads[k];
            const auto at = static_cast<std::int64_t>(offsets_[slot].at(k));
            const at::Tensor values = arena_[slot].narrow(0, at, std::int64_t(payload.values.size()));
            const at::Tensor scales = arena_[slot]
                                          .narrow(0, at + std::int64_t(payload.pinned_scales_offset),
                                                  std::int64_t(payload.scales.size() * sizeof(float)))
                                          .view(at::kFloat);
            expander_.expand(values, scales, payload, block.params[k]);
        }
        C10_CUDA_CHECK(cudaEventRecord(consumed_[slot], compute));
    }

  private:
    void reserve(std::size_t slot, std::size_t bytes) {
        if (arena_[slot].defined() && std::size_t(arena_[slot].numel()) >= bytes) return;
        // Allocated on the compute stream, whose earlier work may still use the memory the allocator
        // hands back: the copy stream waits for it, through the slot's consumed event.
        arena_[slot] = at::empty({std::int64_t(bytes)}, at::TensorOptions().dtype(at::kByte).device(device_));
        const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
        C10_CUDA_CHECK(cudaEventRecord(consumed_[slot], compute));
        C10_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, consumed_[slot], 0));
    }

    c10::Device device_;
    PayloadExpander expander_;
    cudaStream_t copy_stream_ = nullptr;
    std::array<cudaEvent_t, 2> copied_{}, consumed_{};
    std::array<bool, 2> used_{};
    std::array<at::Tensor, 2> arena_;
    std::array<std::vector<std::size_t>, 2> offsets_;  // each payload's place in the slot
    std::array<std::vector<std::shared_ptr<const Payload>>, 2> held_;
};

}  // namespace

std::unique_ptr<SwapSlots> make_cuda_swap_slots(c10::Device device) {
    return std::make_unique<CudaSwapSlots>(device);
}

}  // namespace sp::agent::detail
