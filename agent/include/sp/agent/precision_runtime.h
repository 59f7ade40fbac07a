#pragma once
// The reference precision runtime: what makes the routing real. Each routed block's weights live as
// a master (fp32, or the bf16/fp16 the model trains in); after every optimizer step (and when its
// precision changes) they are materialized in the routed precision — BF16; INT8 per output row, symmetric,
// fp32 scales; FP8 E4M3/E5M2 with an fp32 scale per row; INT4 per group of int4_group_size elements of a row
// (the core quantization reference, sp/quantize.h) — and copied into the compute copy the forward pass uses.
// Gradients are taken at the compute weights and applied to the master (straight-through). Bytes are counted
// per block per step as stored (sp::stored_bytes): BF16 2 bytes per element, INT8 and FP8 1 byte per element
// + 4 per row scale, INT4 half a byte per element + 4 per group scale.
//
// Frozen tensors (requires_grad false: a fine-tune's base weights under adapters) have masters that
// never change: their payload is packed once per format and kept (on CUDA, in page-locked memory,
// uploaded by DMA), and the optimizer-step round trip skips them unless asked to restore them.
//
// Residency (set_weight_residency): `streamed` (the default) materializes every block after every
// optimizer step, so each step moves every block's payload, as a model whose weights do not stay on
// the accelerator would; `resident` materializes a block only when its values or precision changed
// (a trainable tensor stepped, a restored frozen one, a new map), so a frozen block costs nothing
// per step once it is in place.
//
// `block_swap` (the seeds' setting: a model larger than the accelerator's memory): after every
// optimizer step each block's payload is packed in its format and kept in host memory (on CUDA,
// page-locked); nothing is copied then. The model calls before_block_forward(b) before block b's
// forward, which uploads the block into one of two slots and expands it into the block's
// parameters, double-buffered: block b+1's upload goes out (on CUDA, cudaMemcpyAsync on a copy
// stream) before block b's expansion, into the other slot, and b+1's expansion waits on that copy's
// event on the device, never on the host (agent/src/block_swap.h, agent/cuda/torch/cuda_block_swap.h).
// Backward: each block keeps its expanded weights until its backward is done (the parameters are
// what autograd saved), so nothing is uploaded again for backward. The choice: it makes block-swap
// a drop-in for the linear layers as they are, with the same values in forward and backward as
// `streamed` (so the same losses, bit for bit), and the bus traffic per step is one upload per
// block, as in the seeds' forward-only count. Its cost: device memory still holds every block's
// expanded weights; saving that needs a backward that re-uploads in reverse order and a linear
// layer that saves its (block, k) key instead of its weight, which is not built.
// Bytes: every upload counts the block's payload once, with the same formula as `streamed`
// (block_bytes), into the step whose forward uploads it when gradients are on (`streamed` counts a
// new map in the step after which it is materialized, block-swap in the next step); the forward passes of an
// evaluation (grad mode off) count into total_bytes() only, so that the bytes per step compare with
// `streamed`'s. A precision change re-packs the block's payload and copies nothing until its next forward. A
// block under a planted INT8 fault (AgentBlock::harsh_int8_step) is uploaded as INT8 and then overwritten by
// the planted values, which no payload represents (drawn at the block's forward rather than after the
// optimizer step, so such a run need not match `streamed` bit for bit).
//
// Trainer step: forward; backward; agent.collect_block_grad_stats(); runtime.before_optimizer_step();
// agent.compute_hints(step) (delivered to on_hints, which then only records the map);
// optimizer.step(); runtime.after_optimizer_step() (materializes every block once, in its new precision).
// Hints that arrive outside that window are materialized at once.
#include <cstdint>
#include <memory>
#include <vector>

#include "sp/agent/block.h"
#include "sp/agent/hints.h"
#include "sp/quantize.h"

namespace sp::agent {

namespace detail {
struct BlockSwap;
class CudaStagedUploader;
class PayloadExpander;
struct Payload;
}  // namespace detail

enum class WeightResidency { streamed, resident, block_swap };

// What block-swap streaming did, in order (ReferencePrecisionRuntime::record_block_swap_events).
struct BlockSwapEvent {
    enum Kind { upload, expand, drop } kind;  // drop: a prefetched slot forgotten unread
    std::size_t block = 0, slot = 0;
};

struct TransferBytes {
    std::uint64_t copied = 0;  // bytes materialized and copied this step
    std::uint64_t bf16 = 0;    // what the same copies would have cost in BF16
    double saving_pct() const { return bf16 == 0 ? 0.0 : 100.0 * (1.0 - double(copied) / double(bf16)); }
};

class ReferencePrecisionRuntime : public HintSink {
  public:
    // Takes the blocks' parameters (fp32, bf16 or fp16; CPU, or CUDA: see below; std::invalid_argument
    // otherwise), snapshots them (clones, in their own dtype) as the masters and materializes
    // every block in BF16 into the parameters. Those bytes count into total_bytes() (the initial
    // load), not into any step. The parameters stay the same tensor objects and storage throughout:
    // every later write is an in-place copy, so an optimizer built on them keeps working.
    // CUDA parameters, in a build whose LibTorch has CUDA (SP_AGENT_HAVE_CUDA): the masters live in
    // host memory and only the materialized payload (BF16 values, or INT8 codes + row scales) is
    // copied to the device, through pinned staging and cudaMemcpyAsync on a side stream (see
    // agent/cuda/torch/cuda_staged_upload.h), so the bytes counted are bytes that crossed the bus.
    // Without CUDA LibTorch, CUDA parameters keep device masters and INT8 takes a slow host round trip.
    // FP8 and INT4 are materialized on the host in every build (their values are copied; their bytes
    // are counted as stored). `int4_group_size` >= 1 (std::invalid_argument otherwise).
    explicit ReferencePrecisionRuntime(std::vector<AgentBlock> blocks,
                                       std::size_t int4_group_size = kDefaultInt4GroupSize);

    // Every format materializes here (HintSink::formats() stays at its default: all of them).
    // The masters (host copies with the CUDA upload path), changed only by after_optimizer_step();
    // nullptr for a block or parameter the runtime lacks.
    const at::Tensor* master(std::size_t block, std::size_t k) const override;

    // Records the routed map (hints.precision, one per block; std::invalid_argument for another
    // length — nothing changes then). Every
    // block whose precision changed is re-materialized from its master at once and its bytes count
    // into the step being accumulated. Between before_optimizer_step() and after_optimizer_step()
    // (the parameters hold the masters then) the map is only recorded; after_optimizer_step()
    // materializes it.
    void on_hints(const PrecisionHints& hints) override;

    // See the header comment; takes effect from the next optimizer step (block_swap: from the next
    // forward, whose blocks it packs now).
    void set_weight_residency(WeightResidency r);
    WeightResidency weight_residency() const { return residency_; }

    // Copies every master back into its parameter, so the optimizer steps the fp32 master values
    // with gradients that were taken at the compute (materialized) weights: straight-through.
    // Frozen tensors only with `restore_frozen` (the optimizer does not step them; restore them
    // when something reads the weights before after_optimizer_step, such as the agent's
    // distribution profiling in compute_hints on its cadence steps).
    void before_optimizer_step(bool restore_frozen = true);
    // Copies the updated parameters into the masters, materializes every block in its routed
    // precision into the parameters (the compute copy) and adds those bytes to the step. That
    // completes the step: step_bytes() and step_bytes_per_block() now report it (the copies made by
    // on_hints since the previous completed step plus this materialization), total_bytes() grows by
    // it, and accumulation restarts. std::logic_error without a preceding before_optimizer_step():
    // the parameters hold quantized values then, and taking them as masters would lose the fp32
    // values for good.
    void after_optimizer_step();

    // The parameters' current values become the masters, frozen tensors included (their packed
    // payloads are dropped): a checkpoint was loaded into the parameters. Every block is then
    // materialized again (counted in total_bytes() only, as the initial load), or, between
    // before_optimizer_step() and after_optimizer_step(), at after_optimizer_step().
    void reload_masters();

    // Block-swap's hook (no-op in the other modes): call before block `block`'s forward. Uploads it
    // unless prefetched, prefetches block + 1, expands the block into its parameters. Blocks in
    // order 0..N-1 give the double-buffered schedule; another order only loses prefetches.
    // std::logic_error between before_optimizer_step() and after_optimizer_step().
    void before_block_forward(std::size_t block);
    // The uploads and expansions since the last clear, while recording (for tests and traces).
    void record_block_swap_events(bool on);
    const std::vector<BlockSwapEvent>& block_swap_events() const;
    void clear_block_swap_events();

    const std::vector<Precision>& precisions() const { return precision_; }
    // What materializing `block` in `p` copies, and the same copies in BF16 (the bytes a step
    // counts for that block), whatever the block's current precision.
    TransferBytes block_bytes(std::size_t block, Precision p) const;
    // Bytes of the last completed step, in all and per block (zero before the first one).
    const TransferBytes& step_bytes() const { return step_total_; }
    const std::vector<TransferBytes>& step_bytes_per_block() const { return step_per_block_; }
    // Bytes since construction: the initial BF16 load plus every completed step.
    const TransferBytes& total_bytes() const { return total_; }

  private:
    // Materializes block `block` from its masters in precision_[block] into its parameters and
    // returns the bytes that cost.
    TransferBytes materialize(std::size_t block);
    TransferBytes materialize_uploaded(std::size_t block);  // the CUDA path
    bool frozen(std::size_t block, std::size_t k) const;
    // The packed payload of frozen tensor k of `block` in `p`, packed on first use and kept.
    const detail::Payload& frozen_payload(std::size_t block, std::size_t k, Precision p);
    // block_swap: packs `block`'s payloads for its next upload (frozen ones from the cache).
    void pack_swap_block(std::size_t block);

    std::vector<AgentBlock> blocks_;
    std::vector<std::vector<at::Tensor>> masters_;  // the parameters' dtype, per block per parameter
    std::vector<Precision> precision_;
    std::size_t int4_group_;
    std::vector<TransferBytes> pending_per_block_;  // being accumulated for the current step
    std::vector<TransferBytes> step_per_block_;     // the last completed step
    TransferBytes pending_total_, step_total_, total_;
    bool masters_in_params_ = false;  // between before_optimizer_step() and after_optimizer_step()
    WeightResidency residency_ = WeightResidency::streamed;
    // Since before_optimizer_step: the block's parameters hold some master values, or its precision
    // changed; either way it must be materialized again.
    std::vector<bool> stale_;
    // Frozen tensors' payloads, [block][tensor]; a payload of the wrong precision is repacked.
    std::vector<std::vector<std::shared_ptr<detail::Payload>>> frozen_payloads_;
    // Set when the parameters are on CUDA and this build has the CUDA path; shared_ptr so the type
    // may stay incomplete here.
    std::shared_ptr<detail::CudaStagedUploader> uploader_;
    std::shared_ptr<detail::PayloadExpander> host_expander_;  // frozen payloads into CPU parameters
    // block_swap: the blocks' packed payloads and the two-slot schedule that uploads them.
    std::shared_ptr<detail::BlockSwap> swap_;  // null in the other modes
};

}  // namespace sp::agent
