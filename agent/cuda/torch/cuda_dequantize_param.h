#pragma once
// Payloads expanded on the device by the dequantize kernels, gathered so that a block's take one
// launch (sp::cuda::launch_dequantize_batch); shared by the staged uploader and block-swap's slots
// (built only where LibTorch has CUDA).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

#include "payload.h"
#include "sp/cuda/dequantize_launcher.h"

struct CUstream_st;

namespace sp::agent::detail {

class KernelBatch {
  public:
    // The payload whose codes lie at `arena + values_offset` and scales at `arena + scales_offset`
    // (device memory), for `param`: true when the kernels take it (an INT8, INT4 or FP8 payload into a
    // contiguous fp32 or bf16 parameter of its size; decode(code) * scale in fp32, the expander's
    // arithmetic, rounded once to BF16 for a BF16 parameter, so the same bits; checked against core on
    // the SIMT emulator), which launch() then expands; false otherwise (a BF16 payload, another dtype,
    // a strided parameter), for PayloadExpander.
    bool add(const unsigned char* arena, std::size_t values_offset, std::size_t scales_offset,
             const Payload& meta, const at::Tensor& param);
    // Enqueues the expansions gathered since the last launch on `stream`: one launch per format and
    // output type (a block has one format), per kMaxDequantizeBatch tensors. Never waits.
    void launch(CUstream_st* stream);

  private:
    struct Item {
        sp::cuda::PackedTensor in;
        void* out = nullptr;
        sp::cuda::DequantizedType type = sp::cuda::DequantizedType::f32;
    };
    std::vector<Item> items_;
    std::vector<at::Tensor> params_;  // their versions are bumped at launch, as copy_() would
};

}  // namespace sp::agent::detail
