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
// forward, which uploads the block into one of K slots (set_weight_residency's `swap_slots`, sp-trainer
// --swap-slots, default 2) and expands it; the next blocks' uploads (prefetch depth K - 1) go out (on
// CUDA, cudaMemcpyAsync on a copy stream) before block b's expansion, and each expansion waits on its
// copy's event on the device, never on the host (agent/src/block_swap.h,
// agent/cuda/torch/cuda_block_swap.h).
// Where the weights live then depends on whether they train:
//   - every streamed tensor frozen (a fine-tune's base under adapters; releases_weights() true): the
//     slot holds the block's expanded weights and the parameters view them. The model calls
//     after_block_forward(b) when the block's forward is done, which frees the slot, and
//     before_block_backward(b) / after_block_backward(b) around its backward, which uploads it again
//     (blocks N-1..0, prefetched in that order); the last block stays between its forward and its
//     backward. A training step therefore uploads 2N - 1 payloads, and the weights' device memory is
//     K slots of the largest block (swap_stats().peak_bytes). run_swapped_block
//     (sp/agent/swapped_block.h) is that protocol as an autograd function: the forward saves only the
//     block's input, the backward recomputes the block with its weights uploaded again (the shape of
//     activation checkpointing).
//   - some tensor trains (full fine-tuning): its parameter keeps its memory (the optimizer steps it and
//     its gradient is taken at it), each slot holds a payload from its upload to its expansion, and
//     backward uploads nothing: one upload per block per step, and the device holds every block's
//     expanded weights. Bounding those needs a gradient offload, which is not built.
// In both the values a block computes with are its masters materialized in its format, bit for bit
// those of `streamed` (so the same losses).
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
    // drop: a prefetched slot forgotten unread; release: a block's weights leave their slot
    enum Kind { upload, expand, drop, release } kind;
    std::size_t block = 0, slot = 0;
};

// Faults planted in block-swap's schedule on purpose, for the tests that show their checks catch a
// broken schedule (tests/unit/test_block_swap_bounded.cpp); a real run has none.
enum class BlockSwapFault {
    none,
    prefetch_into_busy_slot,  // a prefetch takes the next slot in turn, busy or not, unchecked
    reuse_stale_slot,         // acquiring a released block expands whatever its old slot holds
    keep_released_weights,    // release frees the slot but leaves the parameters viewing it
};

// What block-swap's slots cost (ReferencePrecisionRuntime::swap_stats).
struct SwapStats {
    // Host seconds: on the CPU the copies and expansions themselves; on CUDA the time to issue them
    // (the device does the work on its streams).
    double upload_s = 0, expand_s = 0;
    std::uint64_t peak_bytes = 0;  // the most bytes the slots held at once: payloads and held weights
};

struct TransferBytes {
    std::uint64_t copied = 0;  // bytes materialized and copied this step
    std::uint64_t bf16 = 0;    // what the same copies would have cost in BF16
    double saving_pct() const { return bf16 == 0 ? 0.0 : 100.0 * (1.0 - double(copied) / double(bf16)); }
    TransferBytes& operator+=(const TransferBytes& more) {
        copied += more.copied;
        bf16 += more.bf16;
        return *this;
    }
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
    // forward, whose blocks it packs now). `swap_slots` (block_swap only) >= 1, else
    // std::invalid_argument; so is a block_swap whose blocks keep tensors as they are or stored
    // transposed, or one that releases weights with a block under a planted INT8 fault (its backward
    // would draw other noise than its forward).
    void set_weight_residency(WeightResidency r, std::size_t swap_slots = 2);
    // block_swap with every streamed tensor frozen: the slots hold the weights, and the model must call
    // after_block_forward, before_block_backward and after_block_backward (run_swapped_block does).
    bool releases_weights() const;
    // Block `block`'s tensors that train (requires_grad), streamed or not: the adapters under a frozen
    // base. std::out_of_range for a block the runtime lacks.
    std::vector<at::Tensor> trainable_tensors(std::size_t block) const;
    // What the slots cost so far (zeros outside block_swap).
    SwapStats swap_stats() const;
    // The device bytes the blocks' weights take: block_swap's slots at their peak when they hold the
    // weights, otherwise every streamed parameter as it is held (its dtype).
    std::uint64_t weights_peak_bytes() const;

    // The weights scope (precision_scope "weights", POLICY.md rule 22) computes in BF16: every frozen
    // streamed tensor becomes a BF16 tensor (in place: the same tensor object) into which its payload
    // is expanded, decode(code) * scale rounded to BF16 once, and the trainer's blocks run in BF16.
    // Trainable tensors keep their dtype (the optimizer steps them). Call before set_weight_residency
    // (std::logic_error after it). From then on frozen parameters never hold their masters: readers
    // take master() (before_optimizer_step restores only trainable tensors, and reload_masters is
    // refused).
    void compute_frozen_in_bf16();
    bool frozen_in_bf16() const { return frozen_in_bf16_; }
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
    // With releases_weights() (no-ops otherwise): block `block`'s forward is done (its slot is freed
    // unless its backward comes next: the last block of a forward with gradients on); its backward is
    // about to run (it is uploaded again unless kept or prefetched, and blocks block-1..0 are
    // prefetched); its backward is done. std::logic_error for a call out of that order.
    void after_block_forward(std::size_t block);
    void before_block_backward(std::size_t block);
    void after_block_backward(std::size_t block);
    // The uploads and expansions since the last clear, while recording (for tests and traces).
    void record_block_swap_events(bool on);
    // For the tests only (BlockSwapFault); no-op outside block_swap.
    void plant_block_swap_fault(BlockSwapFault fault);
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
    // Counts the payloads a block-swap acquire uploaded: into the step with gradients on, into
    // total_bytes() only in an evaluation.
    void count_uploads(const std::vector<std::size_t>& uploaded, bool in_step);

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
    bool frozen_in_bf16_ = false;              // compute_frozen_in_bf16()
};

}  // namespace sp::agent
