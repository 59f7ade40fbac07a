#pragma once
// Activations and gradients as a block's matrix products take them in its format: each row (the
// last dimension: a token's features) rounded with the core reference quantizers (sp/quantize.h):
// INT8 and FP8 with a scale per row, INT4 per group of `int4_group` elements, BF16 per element.
// The one definition shared by sp-trainer's GPT and the Python runtime (python/), so both round
// exactly alike; weights are materialized per output row instead (materialize.h, the runtime).
#include <ATen/core/Tensor.h>

#include <cstddef>

#include "sp/precision.h"
#include "sp/quantize.h"

namespace sp::agent {

// A new tensor with the shape, dtype and device of `x` holding its rows rounded to `format`, in
// float. No autograd history. On the host the core reference itself computes them; on another device
// rounded_rows_aten does, where the tensor is.
at::Tensor rounded_rows(const at::Tensor& x, Precision format,
                        std::size_t int4_group = kDefaultInt4GroupSize);

// The same values from ATen operations on x's own device, bit for bit the reference's (NaN payloads
// aside): the reference's scales (float divisions), x / scale, round half to even, the FP8 grid
// through exact powers of two. test_rounding checks it against the reference on the host; the GPU
// checks (tools/gpu_checks) on a CUDA device.
at::Tensor rounded_rows_aten(const at::Tensor& x, Precision format,
                             std::size_t int4_group = kDefaultInt4GroupSize);

}  // namespace sp::agent
