#pragma once
// The reference precision runtime's host -> device path on CUDA (built only where LibTorch has CUDA).
// Masters live in host memory; a block is materialized on the host in its routed precision and only
// that payload crosses the bus: BF16 values (2 bytes per element) or INT8 codes plus fp32 row scales
// (1 byte per element + 4 per row). The payload is packed into pinned staging, copied with one
// cudaMemcpyAsync on a side stream, and the compute stream waits on the copy's event (on the device)
// before it expands the payload into the parameters (bf16 -> dtype; float(q) * scale, the core
// reference's own arithmetic, so values are bit-identical to detail::materialized()). finish()
// reports the payload bytes (= detail::materialized_bytes()); the one copy per batch also carries at
// most 15 bytes of alignment padding per piece.
//
// Host waits: begin() waits for the previous batch's copy to finish reading the staging before it is
// overwritten (normally long done); nothing else blocks the host.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

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
    // the bytes copied host -> device. `master` is the fp32 host master, `param` the CUDA parameter
    // (same shape) that receives the materialized values.
    void begin();
    void add(const at::Tensor& param, const at::Tensor& master, Precision p);
    std::uint64_t finish();

  private:
    struct Item {
        at::Tensor param;
        Precision precision;
        std::int64_t rows = 0, cols = 0;
        std::size_t values_offset = 0, scales_offset = 0;  // in the staging / device arenas
    };
    void reserve(std::size_t bytes);

    c10::Device device_;
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
