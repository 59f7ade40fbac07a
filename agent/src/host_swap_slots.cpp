// The CPU's block-swap slots (make_host_swap_slots, block_swap.h): the same slot discipline as the
// CUDA slots, in host memory, so that the schedule, its bytes and the values a block computes with are
// checked on any machine.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "block_swap.h"
#include "swapped_weights.h"

namespace sp::agent::detail {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// A slot holds a block's payloads back to back, each tensor's values then its scales, the scales on a
// 4-byte boundary so that they can be viewed as fp32 where they lie; holding the weights, also the
// block's expanded parameters (SwappedWeights).
class HostSwapSlots final : public SwapSlots {
  public:
    HostSwapSlots(std::size_t slots, bool hold_weights)
        : expander_(c10::Device(c10::kCPU)), staging_(slots), weights_(slots), hold_weights_(hold_weights) {}

    void upload(std::size_t slot, const SwapBlock& block) override {
        const auto start = Clock::now();
        std::vector<float>& bytes = staging_.at(slot);  // float elements: 4-byte aligned storage
        std::size_t floats = 0;
        for (const auto& payload : block.payloads)
            floats += (payload->values.size() + 3) / 4 + payload->scales.size();
        if (bytes.capacity() < floats) {  // exactly the largest payload: the peak says what a slot needs
            std::vector<float> larger;
            larger.reserve(floats);
            bytes.swap(larger);
        }
        bytes.resize(floats);
        std::size_t at = 0;
        for (const auto& payload : block.payloads) {
            if (!payload->values.empty())
                std::memcpy(&bytes[at], payload->values.data(), payload->values.size());
            at += (payload->values.size() + 3) / 4;
            if (!payload->scales.empty())
                std::memcpy(&bytes[at], payload->scales.data(), payload->scales.size() * sizeof(float));
            at += payload->scales.size();
        }
        stats_.upload_s += seconds_since(start);
        note_peak();
    }

    void expand(std::size_t slot, const SwapBlock& block) override {
        const auto start = Clock::now();
        at::NoGradGuard no_grad;
        if (hold_weights_) weights_.at(slot).view_into(block.params);
        std::vector<float>& bytes = staging_.at(slot);
        std::size_t at = 0;
        for (std::size_t k = 0; k < block.params.size(); ++k) {
            const Payload& payload = *block.payloads[k];
            const at::Tensor values =
                at::from_blob(bytes.data() + at, {std::int64_t(payload.values.size())}, at::kByte);
            at += (payload.values.size() + 3) / 4;
            const at::Tensor scales =
                at::from_blob(bytes.data() + at, {std::int64_t(payload.scales.size())}, at::kFloat);
            at += payload.scales.size();
            expander_.expand(values, scales, payload, block.params[k]);
        }
        stats_.expand_s += seconds_since(start);
        note_peak();
    }

    void release(std::size_t slot, const SwapBlock& block) override {
        (void)slot;
        SwappedWeights::release(block.params);
    }

    SwapStats stats() const override { return stats_; }

  private:
    void note_peak() {
        std::uint64_t bytes = 0;
        for (const auto& s : staging_) bytes += s.capacity() * sizeof(float);
        for (const auto& w : weights_) bytes += w.bytes();
        stats_.peak_bytes = std::max(stats_.peak_bytes, bytes);
    }

    PayloadExpander expander_;
    std::vector<std::vector<float>> staging_;
    std::vector<SwappedWeights> weights_;
    bool hold_weights_;
    SwapStats stats_;
};

}  // namespace

std::unique_ptr<SwapSlots> make_host_swap_slots(std::size_t slots, bool hold_weights) {
    if (slots == 0) throw std::invalid_argument("block-swap needs at least one slot");
    return std::make_unique<HostSwapSlots>(slots, hold_weights);
}

}  // namespace sp::agent::detail
