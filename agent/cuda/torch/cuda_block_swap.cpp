#include "cuda_block_swap.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "cuda_dequantize_param.h"
#include "swapped_weights.h"

namespace sp::agent::detail {
namespace {

// Pieces start on 16-byte boundaries, so the arena's byte slices can be viewed as bf16 / int8 / fp32.
std::size_t align16(std::size_t n) {
    return (n + 15) / 16 * 16;
}

// A pair of timing events around one piece of device work, read once the work is known done.
struct Timed {
    cudaEvent_t start = nullptr, end = nullptr;
    bool pending = false;
    // Adds the last recorded interval to `seconds` (waiting for its end first) and forgets it.
    void collect(double& seconds) {
        if (!pending) return;
        C10_CUDA_CHECK(cudaEventSynchronize(end));
        float ms = 0;
        C10_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
        seconds += double(ms) / 1000.0;
        pending = false;
    }
};

struct DeviceSlot {
    cudaEvent_t consumed = nullptr;  // compute stream: the slot's payload has been read
    Timed copy, expansion;           // copy: on the copy stream; its end is the "copied" event
    bool used = false;
    at::Tensor arena;                                  // device bytes: the payloads
    std::vector<std::size_t> offsets;                  // each payload's place in the arena
    std::vector<std::shared_ptr<const Payload>> held;  // kept until the copy is known done
    SwappedWeights weights;                            // holding the weights: the block's expanded parameters
};

class CudaSwapSlots final : public SwapSlots {
  public:
    CudaSwapSlots(c10::Device device, std::size_t slots, bool hold_weights)
        : device_(device), expander_(device), slots_(slots), hold_weights_(hold_weights) {
        if (!device.is_cuda()) throw std::invalid_argument("CudaSwapSlots: not a CUDA device");
        c10::cuda::CUDAGuard guard(device_);
        copy_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index()).stream();
        for (DeviceSlot& s : slots_) {
            C10_CUDA_CHECK(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming));
            for (Timed* t : {&s.copy, &s.expansion}) {
                C10_CUDA_CHECK(cudaEventCreate(&t->start));
                C10_CUDA_CHECK(cudaEventCreate(&t->end));
            }
        }
    }

    ~CudaSwapSlots() override {
        c10::cuda::CUDAGuard guard(device_);
        for (DeviceSlot& s : slots_) {
            if (s.used) (void)cudaEventSynchronize(s.copy.end);  // the payloads must outlive the copy
            for (cudaEvent_t e : {s.consumed, s.copy.start, s.copy.end, s.expansion.start, s.expansion.end})
                (void)cudaEventDestroy(e);
        }
    }

    CudaSwapSlots(const CudaSwapSlots&) = delete;
    CudaSwapSlots& operator=(const CudaSwapSlots&) = delete;

    void upload(std::size_t slot, const SwapBlock& block) override {
        c10::cuda::CUDAGuard guard(device_);
        DeviceSlot& s = slots_.at(slot);
        s.copy.collect(stats_.upload_s);  // see the header: the one host wait
        s.offsets.clear();
        std::size_t bytes = 0;
        for (const auto& payload : block.payloads) {
            if (!payload->pinned.defined())
                throw std::logic_error("CudaSwapSlots: a payload without page-locked bytes");
            s.offsets.push_back(bytes);
            bytes = align16(bytes + std::size_t(payload->pinned.numel()));
        }
        reserve(s, bytes);
        // The slot's previous expansion (compute stream) must have read it before it is overwritten.
        if (s.used) C10_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, s.consumed, 0));
        auto* arena = static_cast<unsigned char*>(s.arena.data_ptr());
        C10_CUDA_CHECK(cudaEventRecord(s.copy.start, copy_stream_));
        for (std::size_t k = 0; k < block.payloads.size(); ++k) {
            const at::Tensor& pinned = block.payloads[k]->pinned;
            if (pinned.numel() > 0)
                C10_CUDA_CHECK(cudaMemcpyAsync(arena + s.offsets[k], pinned.data_ptr(),
                                               std::size_t(pinned.numel()), cudaMemcpyHostToDevice,
                                               copy_stream_));
        }
        C10_CUDA_CHECK(cudaEventRecord(s.copy.end, copy_stream_));
        s.copy.pending = true;
        s.held = block.payloads;
        s.used = true;
        note_peak();
    }

    void expand(std::size_t slot, const SwapBlock& block) override {
        c10::cuda::CUDAGuard guard(device_);
        DeviceSlot& s = slots_.at(slot);
        const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
        s.expansion.collect(stats_.expand_s);                         // K blocks ago: normally long done
        C10_CUDA_CHECK(cudaStreamWaitEvent(compute, s.copy.end, 0));  // on the device, not the host
        if (hold_weights_) s.weights.view_into(block.params);         // allocated on the compute stream
        C10_CUDA_CHECK(cudaEventRecord(s.expansion.start, compute));
        const auto* arena = static_cast<const unsigned char*>(s.arena.data_ptr());
        KernelBatch kernels;  // the block's kernel-expanded payloads: one launch
        for (std::size_t k = 0; k < block.params.size(); ++k) {
            const Payload& payload = *block.payloads[k];
            const std::size_t at = s.offsets.at(k);
            if (kernels.add(arena, at, at + payload.pinned_scales_offset, payload, block.params[k])) continue;
            const at::Tensor values =
                s.arena.narrow(0, std::int64_t(at), std::int64_t(payload.values.size()));
            const at::Tensor scales = s.arena
                                          .narrow(0, std::int64_t(at + payload.pinned_scales_offset),
                                                  std::int64_t(payload.scales.size() * sizeof(float)))
                                          .view(at::kFloat);
            expander_.expand(values, scales, payload, block.params[k]);
        }
        kernels.launch(compute);
        C10_CUDA_CHECK(cudaEventRecord(s.expansion.end, compute));
        s.expansion.pending = true;
        C10_CUDA_CHECK(cudaEventRecord(s.consumed, compute));
        note_peak();
    }

    void release(std::size_t slot, const SwapBlock& block) override {
        (void)slot;
        SwappedWeights::release(block.params);
    }

    // Waits for the slots' last copies and expansions: for the end of a run.
    SwapStats stats() const override {
        c10::cuda::CUDAGuard guard(device_);
        for (DeviceSlot& s : slots_) {
            s.copy.collect(stats_.upload_s);
            s.expansion.collect(stats_.expand_s);
        }
        return stats_;
    }

  private:
    void reserve(DeviceSlot& s, std::size_t bytes) {
        if (s.arena.defined() && std::size_t(s.arena.numel()) >= bytes) return;
        // Allocated on the compute stream, whose earlier work may still use the memory the allocator
        // hands back: the copy stream waits for it, through the slot's consumed event.
        s.arena = at::empty({std::int64_t(bytes)}, at::TensorOptions().dtype(at::kByte).device(device_));
        const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
        C10_CUDA_CHECK(cudaEventRecord(s.consumed, compute));
        C10_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, s.consumed, 0));
    }

    void note_peak() {
        std::uint64_t bytes = 0;
        for (const DeviceSlot& s : slots_)
            bytes += (s.arena.defined() ? std::uint64_t(s.arena.numel()) : 0) + s.weights.bytes();
        stats_.peak_bytes = std::max(stats_.peak_bytes, bytes);
    }

    c10::Device device_;
    PayloadExpander expander_;
    cudaStream_t copy_stream_ = nullptr;
    mutable std::vector<DeviceSlot> slots_;  // mutable: stats() reads the timing events
    bool hold_weights_;
    mutable SwapStats stats_;
};

}  // namespace

std::unique_ptr<SwapSlots> make_cuda_swap_slots(c10::Device device, std::size_t slots, bool hold_weights) {
    if (slots == 0) throw std::invalid_argument("block-swap needs at least one slot");
    return std::make_unique<CudaSwapSlots>(device, slots, hold_weights);
}

}  // namespace sp::agent::detail
