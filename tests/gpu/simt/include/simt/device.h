#pragma once
// The CUDA C++ that agent/cuda/src/grad_stats_kernels.cu uses, as plain C++ for the SIMT emulator:
// qualifiers, built-in variables, vector types, intrinsics, and simt::launch(), which the test build
// calls where the source says `kernel<<<grid, block, smem, stream>>>(args)` (see ../../README.md).
// Each CUDA thread of a block runs as a fiber; src/block_runner.cpp schedules them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "simt/runtime_api.h"

// CUDA's own names, spelled as CUDA spells them so kernel sources compile unchanged: the naming
// and reserved-identifier checks do not apply.
// NOLINTBEGIN(bugprone-reserved-identifier,readability-identifier-naming)
// Execution-space and launch qualifiers mean nothing on the host.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// A block's threads are fibers of one OS thread (its stream's worker), which runs one block at a time:
// one static per OS thread is one array per running block. Not cleared between blocks (see README).
#define __shared__ static thread_local

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
// NOLINTEND(bugprone-reserved-identifier,readability-identifier-naming)

namespace simt {

constexpr unsigned kWarpSize = 32;

struct ThreadCoordinates {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
};

// The running CUDA thread's coordinates (fatal outside a kernel).
const ThreadCoordinates& this_thread();
// __syncthreads(): returns once every thread of the block that has not exited has arrived.
void sync_block();
// The exchange behind the warp shuffles: every lane of the caller's warp deposits `word`, and each gets
// back the word of lane `src_lane`. `mask` must name every lane of the warp (fatal otherwise).
std::uint64_t warp_exchange(unsigned mask, std::uint64_t word, unsigned src_lane);

struct LaunchConfig {
    dim3 grid;
    dim3 block;
    std::size_t shared_bytes = 0;  // dynamic shared memory: not emulated, must be 0
    cudaStream_t stream = nullptr;
};

// Enqueues `thread_body` on cfg.stream, to run once per thread of every block; an invalid
// configuration sets the error cudaGetLastError() returns, as a launch does.
void enqueue_grid(const LaunchConfig& cfg, std::function<void()> thread_body);

// kernel<<<cfg>>>(args...): the arguments are converted to the kernel's parameter types and copied at
// the call, as a launch copies them.
template <class... Params, class... Args>
void launch(const LaunchConfig& cfg, void (*kernel)(Params...), Args&&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
    enqueue_grid(cfg, [kernel, params = std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)] {
        std::apply(kernel, params);
    });
}

}  // namespace simt

// CUDA's built-in variables and intrinsics (see the note on the qualifiers above).
// NOLINTBEGIN(bugprone-reserved-identifier,readability-identifier-naming)
#define threadIdx (::simt::this_thread().thread_idx)
#define blockIdx (::simt::this_thread().block_idx)
#define blockDim (::simt::this_thread().block_dim)
#define gridDim (::simt::this_thread().grid_dim)

inline void __syncthreads() {
    ::simt::sync_block();
}

// Lane i gets the value of lane i + delta within its width-lane segment, or its own value past the
// segment's end.
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = int(::simt::kWarpSize)) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move up to 8 bytes");
    const ::simt::ThreadCoordinates& t = ::simt::this_thread();
    const unsigned linear =
        t.thread_idx.x + t.block_dim.x * (t.thread_idx.y + t.block_dim.y * t.thread_idx.z);
    const unsigned lane = linear % ::simt::kWarpSize, w = unsigned(width);
    const unsigned src = lane % w + delta < w ? lane + delta : lane;
    std::uint64_t word = 0;
    std::memcpy(&word, &var, sizeof var);
    word = ::simt::warp_exchange(mask, word, src);
    std::memcpy(&var, &word, sizeof var);
    return var;
}

// Loads through the read-only data cache: a plain load here (memcpy: the bytes may be any type's).
template <class T>
T __ldg(const T* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
// NOLINTEND(bugprone-reserved-identifier,readability-identifier-naming)
