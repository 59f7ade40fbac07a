// The dequantize kernels and their launcher (see dequantize_launcher.h). The per-element arithmetic
// and indexing are in dequantize_math.h, shared with the host model; this file holds the thread
// layout and the launch.
//
// Layout: a row is cut into tiles of kTileElems columns; one 256-thread block per tile (grid-stride
// when there are more tiles than kMaxBlocks), thread t writing columns t, t + 256, t + 512, t + 768
// of its tile, so that a warp's stores are consecutive. The row and tile of a block come from one
// 64-bit division per tile, not per element; tensors beyond 2^31 elements index in 64 bits.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "dequantize_math.h"
#include "sp/cuda/dequantize_launcher.h"

namespace sp::cuda {

namespace {

constexpr int kDequantThreads = 256;
constexpr int kElemsPerThread = 4;
constexpr std::int64_t kTileElems = std::int64_t(kDequantThreads) * kElemsPerThread;
constexpr std::int64_t kMaxBlocks = 1 << 20;

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("cuda dequantize: ") + what + ": " + cudaGetErrorString(e));
}

template <PackedFormat kFormat, DequantizedType kType>
__global__ void __launch_bounds__(kDequantThreads)
    dequantize_kernel(const PackedTensor t, void* __restrict__ out, const std::int64_t tiles_per_row) {
    const std::int64_t n_tiles = t.rows * tiles_per_row;
    for (std::int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const std::int64_t row = tile / tiles_per_row;
        const std::int64_t first_col = (tile - row * tiles_per_row) * kTileElems;
        for (int k = 0; k < kElemsPerThread; ++k) {
            const std::int64_t col = first_col + std::int64_t(k) * kDequantThreads + threadIdx.x;
            if (col >= t.cols) break;
            dequant::store<kType>(out, row * t.cols + col, dequant::element_value<kFormat>(t, row, col));
        }
    }
}

template <PackedFormat kFormat>
void launch_format(const PackedTensor& t, void* out, DequantizedType type, cudaStream_t s) {
    const std::int64_t tiles_per_row = (t.cols + kTileElems - 1) / kTileElems;
    const std::int64_t n_tiles = t.rows * tiles_per_row;
    const auto blocks = static_cast<unsigned>(n_tiles < kMaxBlocks ? n_tiles : kMaxBlocks);
    // Through a pointer: one launch site for both output types (and a plain kernel name, which the
    // SIMT emulator's rewrite of launches expects).
    const auto kernel = type == DequantizedType::f32 ? &dequantize_kernel<kFormat, DequantizedType::f32>
                                                     : &dequantize_kernel<kFormat, DequantizedType::bf16>;
    kernel<<<blocks, kDequantThreads, 0, s>>>(t, out, tiles_per_row);
    check(cudaGetLastError(), "dequantize_kernel launch");
}

}  // namespace

void launch_dequantize(const PackedTensor& in, void* out, DequantizedType type, Stream stream) {
    check_dequantize_arguments(in, out, type);
    if (in.rows == 0 || in.cols == 0) return;
    cudaStream_t s = stream;
    switch (in.format) {
        case PackedFormat::int8:
            launch_format<PackedFormat::int8>(in, out, type, s);
            break;
        case PackedFormat::int4:
            launch_format<PackedFormat::int4>(in, out, type, s);
            break;
        case PackedFormat::fp8_e4m3:
            launch_format<PackedFormat::fp8_e4m3>(in, out, type, s);
            break;
        case PackedFormat::fp8_e5m2:
            launch_format<PackedFormat::fp8_e5m2>(in, out, type, s);
            break;
    }
}

}  // namespace sp::cuda
