#pragma once
// Device dequantization of the packed payloads the runtime streams (agent/src/payload.h, laid out as
// core stores them, sp/quantize.h): INT8 codes + fp32 row scales; INT4 two's-complement nibbles, two a
// byte, each row starting on a byte (low nibble = even column) + fp32 scales per group of a row (the
// last group of a row shorter when the group does not divide it); FP8 E4M3 / E5M2 codes + fp32 row
// scales. Each element is decode(code) * scale in fp32, one multiplication, as core's dequantize_*
// functions, written to fp32 (the runtime's compute copy) or rounded to BF16 (core's round_to_bf16).
// Plain C++: includers need no CUDA headers.
#include <cstddef>
#include <cstdint>

#include "sp/cuda/stream.h"

namespace sp::cuda {

enum class PackedFormat : std::int32_t { int8 = 0, int4 = 1, fp8_e4m3 = 2, fp8_e5m2 = 3 };
enum class DequantizedType : std::int32_t { f32 = 0, bf16 = 1 };

// A row-major [rows x cols] payload. `codes` and `scales` are device pointers (host pointers for the
// host model); `group` is the INT4 group size (>= 1), ignored by the other formats.
struct PackedTensor {
    PackedFormat format = PackedFormat::int8;
    const std::uint8_t* codes = nullptr;
    const float* scales = nullptr;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t group = 0;
};

// Code bytes and scale count of a payload of this shape (what core stores).
std::int64_t packed_code_bytes(const PackedTensor& t);
std::int64_t packed_scale_count(const PackedTensor& t);

// Enqueues the expansion of `in` into `out` (rows * cols elements of `type`, device memory) on
// `stream`; never waits for the device. std::invalid_argument for a bad shape, group, format or
// misaligned pointer (scales and fp32 output 4-byte aligned, bf16 output 2-byte aligned);
// std::runtime_error for a CUDA error. An empty tensor enqueues nothing.
void launch_dequantize(const PackedTensor& in, void* out, DequantizedType type, Stream stream);

// Up to this many tensors expand in one launch of launch_dequantize_batch (a longer list takes more).
inline constexpr std::size_t kMaxDequantizeBatch = 16;

// Enqueues the expansion of in[i] into out[i] for every i < count, all in one format and one output
// type, in one kernel launch per kMaxDequantizeBatch tensors (a block's weights in one): the same bits
// as launch_dequantize of each. The same errors, checked before anything is enqueued, and
// std::invalid_argument for a batch that mixes formats. Empty tensors enqueue nothing.
void launch_dequantize_batch(const PackedTensor* in, void* const* out, std::size_t count,
                             DequantizedType type, Stream stream);

// The kernels' own per-element code (src/dequantize_math.h) run on the host, element by element: the
// same bits as the kernels. Always built (sp_dequantize_host_model).
void dequantize_on_host(const PackedTensor& in, void* out, DequantizedType type);

// Throws std::invalid_argument when `in` or `out` cannot be expanded (shared by both paths).
void check_dequantize_arguments(const PackedTensor& in, const void* out, DequantizedType type);

}  // namespace sp::cuda
