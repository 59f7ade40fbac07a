#pragma once
// The "sample" estimator's output measure (core/SNR.md, "On the device") with ATen operations on the
// operands' own device: the sampled weight rows and tokens are rounded to each low format there
// (sp::agent::rounded_rows_aten, the core reference's definition), the products and the output errors
// are taken there in double, and only their sums are reduced to one small vector, which is all that
// crosses to the host. The same code runs on CPU tensors (DistributionProfiler::set_measure_on_device),
// where tests/unit/test_distribution_profiler.cpp checks it against the host path.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sp::agent::detail {

struct DeviceOutputErrors {
    at::Tensor signal;  // 0-dim double: sum of y^2 over the tokens and rows
    at::Tensor error;   // double [low formats x tokens x rows]: y_f - y, kLowFormatsCheapestFirst order
};

// `rows`: the sampled weight rows [rows x in]; `tokens`: the sampled tokens [tokens x in]; any float
// dtype, on one device. y = tokens rows^T against the product of the rows rounded per format and,
// with `quantize_inputs` (precision_scope "compute"), the tokens rounded per format; as
// sp::output_errors does on the host.
DeviceOutputErrors device_output_errors(const at::Tensor& rows, const at::Tensor& tokens,
                                        std::size_t int4_group, bool quantize_inputs);

// The sums the profiler needs, as one double vector on the errors' device (device_sums_size
// elements): the signal, the error power per low format and, when `grad` (the output gradient at the
// same tokens and rows, [tokens x rows], any float dtype) is defined, per low format and token
// sum_r g e, then per low format and token sum_r (g e)^2 (sp::loss_change_from_token_sums).
at::Tensor device_output_sums(const DeviceOutputErrors& errors, const at::Tensor& grad);
std::size_t device_sums_size(std::size_t tokens, bool with_grad);

// `t` on `device` (itself when it is there already). From pageable host memory the copy does not wait
// for the device's stream: the driver stages such memory before the call returns, so later writes to
// `t` (the optimizer stepping a master) cannot reach it. Pinned memory, which the device would read
// later, is copied with a wait.
at::Tensor to_device(const at::Tensor& t, c10::Device device);
// An index tensor on `device`, by to_device: gathering sampled rows there does not wait either.
at::Tensor index_on(const std::vector<std::int64_t>& index, c10::Device device);

}  // namespace sp::agent::detail
