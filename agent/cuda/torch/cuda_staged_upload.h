#pragma once
// The reference precision runtime's host -> device path on CUDA (built only where LibTorch has CUDA).
// Masters live in host memory; a block's payload in its routed format (detail::Payload: BF16 values,
// or INT8 / FP8 codes + fp32 row scales, or INT4 nibbles + fp32 group scales) is what crosses the
// bus. The payloads of a batch are packed into pinned staging, copied with one cudaMemcpyAsync on a
// side stream, and the compute stream waits on the copy's event (on the device) before it expands
// them into the parameters: INT8 / INT4 / FP8 payloads into fp32 or bf16 contiguous parameters with
// the dequantize kernels (sp::cuda_dequantize), the rest with detail::PayloadExpander (ATen); both
// compute decode(code) * scale in fp32, the core reference's own arithmetic, so values are
// bit-identical to detail::materialized(). finish() reports the payload
// bytes (= detail::materialized_bytes()); the one copy per batch also carries at most 15 bytes of
// alignment padding per piece.
//
// Host waits: begin() waits for the previous batch's copy to finish reading the staging before it is
// overwritten (normally long done); nothing else blocks the host.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "payload.h"
#include "sp/precision.h"

struct CUevent_st;

namespace sp::agent::detail {

class CudaStagedUploader {
  public:
    explicit CudaStagedUploader(c10::Device device);
    ~CudaStagedUploader();
    CudaStagedUploader(const CudaStagedUploader&) = delete;
    CudaStagedUploader& operator=(const CudaStagedUploader&) = delete;

    // A batch: begin(); add() per parameter; finish() enqueues the copy and the expansion and returns
    // the bytes copied host -> device. `param` is the CUDA parameter that receives the values of
    // `payload` (packed from its master; same number of elements). A payload without pinned bytes
    // is copied into the batch's staging at once (it need not outlive the call); a pinned one
    // (pin()) is copied from its own page-locked bytes, which must not change until the next
    // begin().
    void begin();
    void add(const at::Tensor& param, const Payload& payload);
    std::uint64_t finish();

    // Gives `payload` its page-locked copy (Payload::pinned), for payloads streamed repeatedly.
    static void pin(Payload& payload);
    // Waits until the last batch's copy has read its sources: call before freeing or changing a
    // pinned payload that batch used.
    void wait_for_copy();

  private:
    struct Item {
        at::Tensor param;
        Payload meta;  // format, shape and group; its byte vectors left empty
        std::size_t values_offset = 0, scales_offset = 0;  // in the device arena (and staging)
        std::size_t values_bytes = 0, scales_count = 0;
        const at::Tensor* pinned = nullptr;  // a pinned payload: copied from here, not from staging
        std::size_t pinned_scales_offset = 0;
    };
    void reserve(std::size_t staged, std::size_t arena);  // staging and device arena bytes

    c10::Device device_;
    PayloadExpander expander_;
    void* side_stream_ = nullptr;     // c10::cuda::CUDAStream from the pool, kept as its cudaStream_t
    CUevent_st* copied_ = nullptr;    // side stream: the copy of the last batch is done
    CUevent_st* consumed_ = nullptr;  // compute stream: the last batch's expansion has read the arena
    bool in_flight_ = false;
    at::Tensor staging_;                  // pinned host bytes
    at::Tensor arena_;                    // device bytes
    std::vector<unsigned char> packing_;  // host payload being assembled, before it goes to staging
    std::vector<Item> items_;
};

}  // namespace sp::agent::detail
