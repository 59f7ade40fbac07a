// The dequantize kernels and their launcher (see dequantize_launcher.h). The per-element arithmetic
// and indexing are in dequantize_math.h, shared with the host model; this file holds the thread
// layout and the launch.
//
// Layout: a row is cut into tiles of kTileElems columns (a batch numbers the tiles of its tensors in
// a row); one 256-thread block per tile (grid-stride
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

// Tile `tile` (of t.rows * tiles_per_row) of one tensor: thread t writes columns t, t + 256, ... of it.
template <PackedFormat kFormat, DequantizedType kType>
__device__ __forceinline__ void expand_tile(const PackedTensor& t, void* __restrict__ out,
                                            const std::int64_t tiles_per_row, const std::int64_t tile) {
    const std::int64_t row = tile / tiles_per_row;
    const std::int64_t first_col = (tile - row * tiles_per_row) * kTileElems;
    for (int k = 0; k < kElemsPerThread; ++k) {
        const std::int64_t col = first_col + std::int64_t(k) * kDequantThreads + threadIdx.x;
        if (col >= t.cols) break;
        dequant::store<kType>(out, row * t.cols + col, dequant::element_value<kFormat>(t, row, col));
    }
}

template <PackedFormat kFormat, DequantizedType kType>
__global__ void __launch_bounds__(kDequantThreads)
    dequantize_kernel(const PackedTensor t, void* __restrict__ out, const std::int64_t tiles_per_row) {
    const std::int64_t n_tiles = t.rows * tiles_per_row;
    for (std::int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x)
        expand_tile<kFormat, kType>(t, out, tiles_per_row, tile);
}

// Several tensors of one format in one launch (a block's weights): the table travels as the kernel's
// argument (well under the 4 KB a launch carries), and the tiles of all of them are numbered in a row,
// tensor i's being [first_tile[i], first_tile[i + 1]).
struct PackedBatch {
    PackedTensor t[kMaxDequantizeBatch];
    void* out[kMaxDequantizeBatch];
    std::int64_t tiles_per_row[kMaxDequantizeBatch];
    std::int64_t first_tile[kMaxDequantizeBatch + 1];
    int count;
};

template <PackedFormat kFormat, DequantizedType kType>
__global__ void __launch_bounds__(kDequantThreads) dequantize_batch_kernel(const PackedBatch batch) {
    const std::int64_t n_tiles = batch.first_tile[batch.count];
    int i = 0;  // the tensor of `tile`: tiles only grow along a block's grid stride
    for (std::int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        while (tile >= batch.first_tile[i + 1]) ++i;
        expand_tile<kFormat, kType>(batch.t[i], batch.out[i], batch.tiles_per_row[i],
                                    tile - batch.first_tile[i]);
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

// One launch for up to kMaxDequantizeBatch tensors, all in kFormat.
template <PackedFormat kFormat>
void launch_batch(const PackedTensor* in, void* const* out, std::size_t count, DequantizedType type,
                  cudaStream_t s) {
    PackedBatch batch{};
    batch.count = int(count);
    batch.first_tile[0] = 0;
    for (std::size_t i = 0; i < count; ++i) {
        batch.t[i] = in[i];
        batch.out[i] = out[i];
        batch.tiles_per_row[i] = (in[i].cols + kTileElems - 1) / kTileElems;
        batch.first_tile[i + 1] = batch.first_tile[i] + in[i].rows * batch.tiles_per_row[i];
    }
    const std::int64_t n_tiles = batch.first_tile[count];
    if (n_tiles == 0) return;
    const auto blocks = static_cast<unsigned>(n_tiles < kMaxBlocks ? n_tiles : kMaxBlocks);
    const auto kernel = type == DequantizedType::f32
                            ? &dequantize_batch_kernel<kFormat, DequantizedType::f32>
                            : &dequantize_batch_kernel<kFormat, DequantizedType::bf16>;
    kernel<<<blocks, kDequantThreads, 0, s>>>(batch);
    check(cudaGetLastError(), "dequantize_batch_kernel launch");
}

}  // namespace

void launch_dequantize_batch(const PackedTensor* in, void* const* out, std::size_t count,
                             DequantizedType type, Stream stream) {
    for (std::size_t i = 0; i < count; ++i) {
        check_dequantize_arguments(in[i], out[i], type);
        if (in[i].format != in[0].format)
            throw std::invalid_argument("dequantize: a batch mixes formats (one launch is one format)");
    }
    cudaStream_t s = stream;
    for (std::size_t first = 0; first < count; first += kMaxDequantizeBatch) {
        const std::size_t n = count - first < kMaxDequantizeBatch ? count - first : kMaxDequantizeBatch;
        switch (in[0].format) {
            case PackedFormat::int8:
                launch_batch<PackedFormat::int8>(in + first, out + first, n, type, s);
                break;
            case PackedFormat::int4:
                launch_batch<PackedFormat::int4>(in + first, out + first, n, type, s);
                break;
            case PackedFormat::fp8_e4m3:
                launch_batch<PackedFormat::fp8_e4m3>(in + first, out + first, n, type, s);
                break;
            case PackedFormat::fp8_e5m2:
                launch_batch<PackedFormat::fp8_e5m2>(in + first, out + first, n, type, s);
                break;
        }
    }
}

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
