#pragma once
// The one definition of "a parameter materialized in a precision", shared by calibration (which
// measures what INT8 costs in output error) and the reference runtime (which makes the routing
// real): both must see exactly the same numbers, so neither rounds on its own.
//
//   BF16: round to bfloat16 (round-to-nearest-even, what `t.to(at::kBFloat16)` does) and back.
//   INT8: per-output-row symmetric absmax with the core reference (sp::quantize_int8_rows), then
//         dequantized. Rows = size(0) for dim >= 2 (cols = numel / rows); a 1-D tensor is one row;
//         a 0-D tensor is one row of one element.
//         A block with a planted fault (AgentBlock::harsh_int8_step = K > 0) is instead rounded
//         stochastically onto {-s, 0, s} per row with s = K * absmax (unbiased, very noisy).
//   FP8 E4M3 / E5M2: one fp32 scale per row (absmax to the format's largest value), core reference.
//   INT4: symmetric absmax per group of `int4_group` elements along each row, core reference.
//
// Bytes (what storing/streaming the block in that precision costs, codes and scales as stored,
// sp::stored_bytes): BF16 = 2 * numel; INT8 and FP8 = numel + 4 * rows; INT4 = rows * ceil(cols / 2)
// + 4 * rows * ceil(cols / group).
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "sp/precision.h"
#include "sp/quantize.h"

namespace sp::agent::detail {

// Number of scale rows of a tensor of this shape (see above).
std::int64_t int8_rows(const at::Tensor& t);

// Bytes `t` occupies when held in `p`.
std::uint64_t materialized_bytes(const at::Tensor& t, Precision p,
                                 std::size_t int4_group = kDefaultInt4GroupSize);

// A new tensor with the dtype, shape and device of `src` holding its values materialized in `p`.
// `src` must be a floating point tensor; the quantized formats are computed in float (the reference
// works on float). `harsh_int8_step` only matters for INT8; 0 is the core reference.
at::Tensor materialized(const at::Tensor& src, Precision p, double harsh_int8_step = 0.0,
                        std::size_t int4_group = kDefaultInt4GroupSize);

// The same for a tensor whose output channels may lie along dim 1 (`transposed`: stored [in, out],
// AgentBlock::transposed): its transpose is materialized, so the rows scaled are output channels, and
// the result comes back in `src`'s own layout.
at::Tensor materialized_as_stored(const at::Tensor& src, bool transposed, Precision p,
                                  double harsh_int8_step = 0.0,
                                  std::size_t int4_group = kDefaultInt4GroupSize);

// Copies `value` into `param` in place (same storage: optimizers hold the parameter objects),
// without recording it for autograd. The copy bumps the parameter's version counter, so a graph
// that saved the old values and is still to be back-propagated fails loudly instead of silently
// using the new ones.
void assign(const at::Tensor& param, const at::Tensor& value);

}  // namespace sp::agent::detail
