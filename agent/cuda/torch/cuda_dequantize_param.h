#pragma once
// One payload's expansion on the device with the dequantize kernels, shared by the staged uploader
// and block-swap's slots (built only where LibTorch has CUDA).
#include <ATen/core/Tensor.h>

#include <cstddef>

#include "payload.h"

struct CUstream_st;

namespace sp::agent::detail {

// Expands the payload whose codes lie at `arena + values_offset` and scales at `arena +
// scales_offset` (device memory) straight into `param` with the dequantize kernels, one launch on
// `stream` (sp::cuda_dequantize: decode(code) * scale in fp32, the expander's arithmetic, rounded once
// to BF16 for a BF16 parameter, so the same bits; checked against core on the SIMT emulator), and
// returns true; false where they do not apply (a BF16 payload, a parameter neither fp32 nor bf16, or
// not contiguous), which PayloadExpander handles.
bool dequantize_with_kernel(const unsigned char* arena, std::size_t values_offset, std::size_t scales_offset,
                            const Payload& meta, const at::Tensor& param, CUstream_st* stream);

}  // namespace sp::agent::detail
