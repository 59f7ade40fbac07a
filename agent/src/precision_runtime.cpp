#include "sp/agent/precision_runtime.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "block_swap.h"
#include "materialize.h"
#include "payload.h"
#if SP_AGENT_HAVE_CUDA
#include "cuda_block_swap.h"
#include "cuda_staged_upload.h"
#endif

namespace sp::agent {

ReferencePrecisionRuntime::ReferencePrecisionRuntime(std::vector<AgentBlock> blocks,
                                                     std::size_t int4_group_size)
    : blocks_(std::move(blocks)), int4_group_(int4_group_size) {
    if (int4_group_ == 0)
        throw std::invalid_argument("ReferencePrecisionRuntime: int4_group_size must be >= 1");
    const std::size_t n = blocks_.size();
    masters_.resize(n);
    for (std::size_t b = 0; b < n; ++b) {
        for (std::size_t k = 0; k < blocks_[b].streamed().size(); ++k) {
            const at::Tensor& p = blocks_[b].streamed()[k];
            const std::string what =
                "block '" + blocks_[b].name + "' parameter " +
                (k < blocks_[b].param_names.size() ? "'" + blocks_[b].param_names[k] + "'"
                                                   : std::to_string(k));
            if (!p.defined())
                throw std::invalid_argument("ReferencePrecisionRuntime: " + what + " is undefined");
            // The masters are the optimizer's values, kept in the parameter's own dtype: fp32, or the
            // bf16/fp16 a model trains in (its optimizer steps those; a wider copy would hold nothing
            // more). The formats are computed from them in fp32 and rounded once to that dtype.
            const at::ScalarType t = p.scalar_type();
            if (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf)
                throw std::invalid_argument("ReferencePrecisionRuntime: " + what + " is " +
                                            std::string(c10::toString(t)) + ", not fp32, bf16 or fp16");
        }
    }
#if SP_AGENT_HAVE_CUDA
    for (const auto& block : blocks_)
        for (const at::Tensor& p : block.streamed()) {
            if (!p.is_cuda()) continue;
            if (!uploader_) uploader_ = std::make_shared<detail::CudaStagedUploader>(p.device());
        }
#endif
    at::NoGradGuard no_grad;
    for (std::size_t b = 0; b < n; ++b) {
        masters_[b].reserve(blocks_[b].streamed().size());
        for (std::size_t k = 0; k < blocks_[b].streamed().size(); ++k) {
            const at::Tensor& p = blocks_[b].streamed()[k];
            // A tensor kept as it is is its own master (master() returns it): no copy.
            // With the CUDA path the masters are host copies: materialization happens on the host
            // and only its payload is uploaded.
            masters_[b].push_back(blocks_[b].kept_as_is(k) ? at::Tensor{}
                                  : uploader_ && p.is_cuda()
                                      ? p.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true)
                                      : p.detach().clone());
        }
    }
    precision_.assign(n, Precision::bf16);
    stale_.assign(n, false);
    frozen_payloads_.resize(n);
    for (std::size_t b = 0; b < n; ++b) frozen_payloads_[b].resize(blocks_[b].streamed().size());
    pending_per_block_.assign(n, TransferBytes{});
    step_per_block_.assign(n, TransferBytes{});
    for (std::size_t b = 0; b < n; ++b) total_ += materialize(b);  // the initial load: no step's
}

const at::Tensor* ReferencePrecisionRuntime::master(std::size_t block, std::size_t k) const {
    if (block >= masters_.size() || k >= masters_[block].size()) return nullptr;
    if (blocks_[block].kept_as_is(k)) return &blocks_[block].streamed()[k];
    return &masters_[block][k];
}

bool ReferencePrecisionRuntime::frozen(std::size_t block, std::size_t k) const {
    return !blocks_[block].streamed()[k].requires_grad();
}

const detail::Payload& ReferencePrecisionRuntime::frozen_payload(std::size_t block, std::size_t k,
                                                                 Precision p) {
    std::shared_ptr<detail::Payload>& cached = frozen_payloads_[block][k];
    if (cached && cached->precision == p) return *cached;
#if SP_AGENT_HAVE_CUDA
    // The old payload's pinned bytes may still be read by the last upload.
    if (cached && uploader_) uploader_->wait_for_copy();
#endif
    cached = std::make_shared<detail::Payload>(detail::pack_payload(masters_[block][k], p, int4_group_));
#if SP_AGENT_HAVE_CUDA
    if (uploader_) detail::CudaStagedUploader::pin(*cached);
#endif
    return *cached;
}

TransferBytes ReferencePrecisionRuntime::block_bytes(std::size_t block, Precision p) const {
    TransferBytes bytes;
    const AgentBlock& b = blocks_.at(block);
    for (std::size_t k = 0; k < b.streamed().size(); ++k) {
        // The master's shape: a parameter block-swap has released keeps its shape but not its storage.
        const at::Tensor& t = b.kept_as_is(k) ? b.streamed()[k] : masters_[block][k];
        const at::Tensor rows = output_rows(t, b.stored_transposed(k));
        bytes.copied += detail::materialized_bytes(rows, b.kept_as_is(k) ? Precision::bf16 : p, int4_group_);
        bytes.bf16 += detail::materialized_bytes(rows, Precision::bf16);
    }
    return bytes;
}

TransferBytes ReferencePrecisionRuntime::materialize(std::size_t block) {
#if SP_AGENT_HAVE_CUDA
    if (uploader_) return materialize_uploaded(block);
#endif
    const Precision p = precision_[block];
    const std::vector<at::Tensor>& params = blocks_[block].streamed();
    const bool planted = p == Precision::int8 && blocks_[block].harsh_int8_step > 0.0;
    for (std::size_t k = 0; k < params.size(); ++k) {
        if (blocks_[block].kept_as_is(k)) continue;
        const at::Tensor& master = masters_[block][k];
        const bool transposed = blocks_[block].stored_transposed(k);
        if (frozen(block, k) && !planted && !params[k].is_cuda() && !transposed) {
            // Packed once, expanded every time: the same values as materialized(), without quantizing
            // an unchanging master again at every step.
            const detail::Payload& payload = frozen_payload(block, k, p);
            if (!host_expander_)
                host_expander_ = std::make_shared<detail::PayloadExpander>(c10::Device(c10::kCPU));
            auto* values = const_cast<std::uint8_t*>(payload.values.data());
            auto* scales = const_cast<float*>(payload.scales.data());
            host_expander_->expand(at::from_blob(values, {std::int64_t(payload.values.size())}, at::kByte),
                                   at::from_blob(scales, {std::int64_t(payload.scales.size())}, at::kFloat),
                                   payload, params[k]);
        } else {
            detail::assign(params[k],
                           detail::materialized_as_stored(master, transposed, p,
                                                          blocks_[block].harsh_int8_step, int4_group_));
        }
    }
    return block_bytes(block, p);
}

TransferBytes ReferencePrecisionRuntime::materialize_uploaded([[maybe_unused]] std::size_t block) {
    TransferBytes bytes;
#if SP_AGENT_HAVE_CUDA
    const Precision p = precision_[block];
    const std::vector<at::Tensor>& params = blocks_[block].streamed();
    // CPU parameters next to CUDA ones, and the planted INT8 fault, keep the plain path; the rest of
    // the block goes in one batched upload of packed payloads, expanded on the device.
    const bool planted = p == Precision::int8 && blocks_[block].harsh_int8_step > 0.0;
    uploader_->begin();
    for (std::size_t k = 0; k < params.size(); ++k) {
        const at::Tensor& master = masters_[block][k];
        if (blocks_[block].kept_as_is(k)) {
            const std::uint64_t kept = detail::materialized_bytes(params[k], Precision::bf16);
            bytes.copied += kept;
            bytes.bf16 += kept;
            continue;
        }
        bytes.bf16 += detail::materialized_bytes(master, Precision::bf16);
        if (!params[k].is_cuda() || planted || blocks_[block].stored_transposed(k)) {
            const bool transposed = blocks_[block].stored_transposed(k);
            detail::assign(params[k],
                           detail::materialized_as_stored(master, transposed, p,
                                                          blocks_[block].harsh_int8_step, int4_group_));
            bytes.copied += detail::materialized_bytes(output_rows(master, transposed), p, int4_group_);
        } else if (frozen(block, k)) {
            uploader_->add(params[k], frozen_payload(block, k, p));
        } else {
            uploader_->add(params[k], detail::pack_payload(master, p, int4_group_));
        }
    }
    bytes.copied += uploader_->finish();
#endif
    return bytes;
}

void ReferencePrecisionRuntime::on_hints(const PrecisionHints& hints) {
    // Validate everything first, so a bad map changes nothing.
    if (hints.precision.size() != blocks_.size())
        throw std::invalid_argument(
            "ReferencePrecisionRuntime::on_hints: " + std::to_string(hints.precision.size()) +
            " precisions for " + std::to_string(blocks_.size()) + " blocks");
    for (const Precision p : hints.precision)
        if (std::size_t(p) >= kPrecisionCount)
            throw std::invalid_argument("ReferencePrecisionRuntime::on_hints: unknown precision " +
                                        std::to_string(int(p)));

    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        if (hints.precision[b] == precision_[b]) continue;
        precision_[b] = hints.precision[b];
        // While the parameters hold the masters the optimizer is about to step them; the
        // materialization after the step picks up the new precision.
        if (masters_in_params_) {
            stale_[b] = true;
            continue;
        }
        if (swap_) {
            pack_swap_block(b);  // copied at the block's next forward, and counted there
            continue;
        }
        const TransferBytes bytes = materialize(b);
        pending_per_block_[b] += bytes;
        pending_total_ += bytes;
    }
}

void ReferencePrecisionRuntime::before_optimizer_step(bool restore_frozen) {
    at::NoGradGuard no_grad;
    // Frozen tensors held in BF16 or in block-swap's slots never hold their masters: readers take
    // master().
    if (frozen_in_bf16_ || releases_weights()) restore_frozen = false;
    for (std::size_t b = 0; b < blocks_.size(); ++b)
        for (std::size_t k = 0; k < masters_[b].size(); ++k) {
            if ((frozen(b, k) && !restore_frozen) || blocks_[b].kept_as_is(k)) continue;
            detail::assign(blocks_[b].streamed()[k], masters_[b][k]);
            stale_[b] = true;
        }
    masters_in_params_ = true;
}

void ReferencePrecisionRuntime::reload_masters() {
    if (frozen_in_bf16_ || releases_weights())
        throw std::logic_error(
            "ReferencePrecisionRuntime::reload_masters: the frozen parameters are held in BF16 or in "
            "block-swap's slots, not as masters");
#if SP_AGENT_HAVE_CUDA
    if (uploader_) uploader_->wait_for_copy();  // the last upload may still read a frozen payload
#endif
    at::NoGradGuard no_grad;
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        for (std::size_t k = 0; k < masters_[b].size(); ++k) {
            if (blocks_[b].kept_as_is(k)) continue;
            masters_[b][k].copy_(blocks_[b].streamed()[k]);
            frozen_payloads_[b][k].reset();  // a frozen tensor's values may have changed too
        }
        if (swap_) {
            pack_swap_block(b);
            continue;
        }
        if (masters_in_params_) {
            stale_[b] = true;  // after_optimizer_step materializes it
            continue;
        }
        total_ += materialize(b);  // a load, as the initial one: no step's bytes
    }
}

void ReferencePrecisionRuntime::after_optimizer_step() {
    if (!masters_in_params_)
        throw std::logic_error(
            "ReferencePrecisionRuntime::after_optimizer_step without before_optimizer_step: the parameters "
            "hold the compute (materialized) weights, not updated masters");
    at::NoGradGuard no_grad;
    // A frozen master never changes: only the stepped tensors are read back.
    for (std::size_t b = 0; b < blocks_.size(); ++b)
        for (std::size_t k = 0; k < masters_[b].size(); ++k)
            if (!frozen(b, k) && !blocks_[b].kept_as_is(k)) masters_[b][k].copy_(blocks_[b].streamed()[k]);
    masters_in_params_ = false;
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        if (swap_) {
            stale_[b] = false;
            pack_swap_block(b);  // the payload the next forward uploads; nothing is copied now
            continue;
        }
        if (residency_ == WeightResidency::resident && !stale_[b]) continue;
        stale_[b] = false;
        const TransferBytes bytes = materialize(b);
        pending_per_block_[b] += bytes;
        pending_total_ += bytes;
    }
    step_per_block_ = pending_per_block_;
    step_total_ = pending_total_;
    total_ += pending_total_;
    pending_per_block_.assign(blocks_.size(), TransferBytes{});
    pending_total_ = TransferBytes{};
}

}  // namespace sp::agent
