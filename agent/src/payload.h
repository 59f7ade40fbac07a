#pragma once
// A tensor's payload in a format: what is kept on the host and crosses the bus when a block is
// streamed, codes and scales exactly as core stores them (sp/quantize.h):
//   BF16      the bf16 bit patterns, 2 bytes per element;
//   INT8      int8 codes, row-major, + one fp32 scale per row;
//   FP8       E4M3 / E5M2 codes, row-major, + one fp32 scale per row;
//   INT4      two's-complement nibbles, two per byte, each row starting on a byte (low nibble =
//             even column), + fp32 scales per group of `group` elements of a row.
// Rows are size(0) for a tensor of dim >= 2, else one row (detail::int8_rows).
//
// pack_payload quantizes on the host with sp::pack_rows (the core reference's codes and scales bit for
// bit, vectorized), its rows split over ATen's intra-op threads; PayloadExpander turns a payload back
// into values with ATen operations on whatever device its tensors are on (the CPU, or a GPU after
// the upload), computing decode(code) * scale in fp32 as the reference does, so the values are
// bit-identical to detail::materialized() of the same master (tests/unit/test_precision_runtime).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "sp/precision.h"
#include "sp/quantize.h"

namespace sp::agent::detail {

struct Payload {
    Precision precision = Precision::bf16;
    std::int64_t rows = 0, cols = 0;
    std::size_t group = 0;             // INT4 only
    std::vector<std::uint8_t> values;  // bf16 bits, or the codes
    std::vector<float> scales;         // empty for BF16
    // Optional, set by CudaStagedUploader::pin for a payload that is streamed again and again (a
    // frozen weight): the same bytes in page-locked host memory, values then scales at
    // pinned_scales_offset, which the upload copies to the device directly (DMA, no host copy).
    at::Tensor pinned;
    std::size_t pinned_scales_offset = 0;
    std::uint64_t bytes() const { return values.size() + sizeof(float) * scales.size(); }
};

// Elements per task of the intra-op pool when pack_payload splits a tensor's rows (256 KiB of fp32),
// so that a small tensor stays on the calling thread.
inline constexpr std::int64_t kPackGrainElements = std::int64_t{1} << 16;

// `master`: a float tensor in host memory (any shape). std::invalid_argument otherwise, or for an
// INT4 group of 0. BF16 values are round_to_bf16's: a NaN is 0x7FC0 (LibTorch 1.13's vectorized
// to(kBFloat16) writes 0xFFFF; both expand to NaN).
Payload pack_payload(const at::Tensor& master, Precision p, std::size_t int4_group = kDefaultInt4GroupSize);

// Expands payloads on one device: holds the 256-entry FP8 decode tables there, so that expanding
// never copies from the host.
class PayloadExpander {
  public:
    explicit PayloadExpander(c10::Device device);
    // `values`: uint8 tensor holding payload.values (same length); `scales`: fp32 tensor holding
    // payload.scales; both on this expander's device, like `param`, which receives the values
    // (numel rows * cols, any float dtype) in place. `meta` supplies the format, shape and group
    // (its byte vectors are not read).
    void expand(const at::Tensor& values, const at::Tensor& scales, const Payload& meta,
                const at::Tensor& param) const;

  private:
    at::Tensor fp8_e4m3_, fp8_e5m2_;  // decode tables: code -> value
};

}  // namespace sp::agent::detail
