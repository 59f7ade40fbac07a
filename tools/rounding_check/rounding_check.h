#pragma once
// The device rounding of activations and gradients (sp::agent::rounded_rows_aten) against the core
// reference (sp::roundtrip), bit for bit, on any device: every format, odd shapes and transposed
// views, INT4 groups that do not divide a row or exceed it, ties, zeros of both signs, FP8 subnormal quanta
// and a sweep of every binade, saturation, NaN and infinities. Shared by test_rounding (the host; CUDA where
// there is one) and check_device_rounding (the device preset's check, run by
// tools/gpu_checks/run_trainer_on_device.sh).
#include <c10/core/Device.h>

#include <string>

namespace sp::check {

// "" when every case gives the reference's bits on `device` (NaN matching any NaN); otherwise the
// first case and element that does not, in words.
std::string rounding_mismatch(c10::Device device);

}  // namespace sp::check
