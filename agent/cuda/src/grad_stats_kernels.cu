// The fused gradient-statistics kernels and their launcher (see grad_stats_launcher.h). The
// arithmetic and each thread's traversal are in grad_stats_kernel_math.h, shared with the host model
// that replays these kernels on the CPU; this file holds the thread plumbing and the launcher.
//
// Statistics per chunk: every element is read once, as 16-byte vector loads after at most a few
// scalar head elements. Each thread accumulates, over the finite elements, the count and the shifted
// sums S1 = sum (x - K) and S2 = sum (x - K)^2 in fp64 (K = the chunk's first element when finite,
// else 0; a float difference and its square are exact or nearly so in fp64), plus max |x| in fp32
// (exact) and the non-finite count. Shifted sums with one K per chunk add across threads without any
// correction, so the block reduction is a plain fixed-order sum; then
// M2 = S2 - S1^2 / n loses only log2(1 + n (mean - K)^2 / M2) bits, a handful when K is a sample of
// the chunk. Chunks are merged per block with Chan's formula (mean, M2) in a fixed order: results are
// deterministic for a given plan.
//
// fp64 is used on purpose: the per-element cost is one f32->f64 conversion and three fp64 adds/FMAs,
// within the fp64 and conversion throughput of data-centre GPUs (sm_80, sm_90) at HBM bandwidth. On
// GPUs with 1/64-rate fp64 this pass would be compute-bound (expected, not measured on such a GPU).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "grad_stats_kernel_math.h"
#include "sp/cuda/grad_stats_launcher.h"

namespace sp::cuda {

namespace {

using kernel::ChunkPartial;
using kernel::kChunkThreads;
using kernel::kMergeThreads;
using kernel::kWarpSize;
using kernel::Moments;
using kernel::ThreadAcc;

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("cuda grad stats: ") + what + ": " + cudaGetErrorString(e));
}

// Gradient bytes through the read-only data cache.
struct DeviceMemory {
    __device__ __forceinline__ std::uint16_t load16(const unsigned char* p) const {
        return __ldg(reinterpret_cast<const unsigned short*>(p));
    }
    __device__ __forceinline__ std::uint32_t load32(const unsigned char* p) const {
        return __ldg(reinterpret_cast<const unsigned int*>(p));
    }
    __device__ __forceinline__ kernel::Words load128(const unsigned char* p) const {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
        return kernel::Words{{v.x, v.y, v.z, v.w}};
    }
};

template <int kDtype>
__device__ __forceinline__ ThreadAcc thread_share(const GradChunk& c, double* k) {
    const DeviceMemory mem;
    *k = kernel::chunk_shift<kDtype>(mem, c);
    ThreadAcc a = kernel::empty_acc();
    kernel::accumulate_chunk<kDtype>(mem, c, a, *k, threadIdx.x);
    return a;
}

// Lane 0 ends with the warp's sum: lane i adds lane i + off for off = 16, 8, 4, 2, 1 (the host model
// replays this tree).
__device__ __forceinline__ void warp_sum(ThreadAcc& a) {
#pragma unroll
    for (int off = kWarpSize / 2; off > 0; off >>= 1) {
        ThreadAcc o;
        o.finite = __shfl_down_sync(0xffffffffu, a.finite, off);
        o.nonfinite = __shfl_down_sync(0xffffffffu, a.nonfinite, off);
        o.max_abs = __shfl_down_sync(0xffffffffu, a.max_abs, off);
        o.s1 = __shfl_down_sync(0xffffffffu, a.s1, off);
        o.s2 = __shfl_down_sync(0xffffffffu, a.s2, off);
        kernel::combine(a, o);
    }
}

// grid: one thread block per chunk.
__global__ void __launch_bounds__(kChunkThreads)
    chunk_stats_kernel(const GradChunk* __restrict__ chunks, ChunkPartial* __restrict__ partials) {
    const GradChunk c = chunks[blockIdx.x];
    double k = 0.0;
    ThreadAcc a;
    switch (c.dtype) {
        case 0:
            a = thread_share<0>(c, &k);
            break;
        case 1:
            a = thread_share<1>(c, &k);
            break;
        default:
            a = thread_share<2>(c, &k);
            break;
    }

    __shared__ ThreadAcc warps[kChunkThreads / kWarpSize];
    warp_sum(a);
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    if (lane == 0) warps[warp] = a;
    __syncthreads();
    if (threadIdx.x != 0) return;
    ThreadAcc t = warps[0];
    for (int w = 1; w < kChunkThreads / kWarpSize; ++w) kernel::combine(t, warps[w]);
    partials[blockIdx.x] = kernel::finish_chunk(t, k);
}

// grid: one thread block per agent block. Each thread merges a strided subset of the block's chunk
// partials in order, then a fixed shared-memory tree merges the threads.
__global__ void __launch_bounds__(kMergeThreads)
    block_merge_kernel(const ChunkPartial* __restrict__ partials,
                       const std::int64_t* __restrict__ first_chunk, BlockMoments* __restrict__ out) {
    __shared__ Moments tree[kMergeThreads];
    tree[threadIdx.x] =
        kernel::merge_strided(partials, first_chunk[blockIdx.x], first_chunk[blockIdx.x + 1], threadIdx.x);
    __syncthreads();
    for (int half = kMergeThreads / 2; half > 0; half >>= 1) {
        if (int(threadIdx.x) < half) kernel::merge(tree[threadIdx.x], tree[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = kernel::to_block_moments(tree[0]);
}

// A device buffer that grows stream-ordered and never shrinks.
struct DeviceBuffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    void reserve(std::size_t want, cudaStream_t s) {
        if (want <= bytes) return;
        if (ptr) check(cudaFreeAsync(ptr, s), "cudaFreeAsync");
        ptr = nullptr;
        bytes = 0;
        check(cudaMallocAsync(&ptr, want, s), "cudaMallocAsync");
        bytes = want;
    }
};

}  // namespace

bool cuda_device_available() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
        return false;
    }
    return n > 0;
}

struct GradStatsLauncher::Impl {
    GradStatsPlan plan;
    DeviceBuffer chunks, partials, first_chunk, results;
    BlockMoments* pinned = nullptr;  // plan.n_blocks entries, written by the device
    std::size_t pinned_capacity = 0;
    cudaEvent_t done = nullptr;
    cudaStream_t last_stream = nullptr;
    bool used = false;      // some call enqueued work on last_stream
    bool any_work = false;  // ... and some of it after `done` was last recorded
    bool launched = false;  // a launch() since set_plan()
    bool fetched = false;   // `results` already holds the last launch's values
    std::vector<BlockMoments> out;

    // Orders this call's work after everything earlier calls enqueued on another stream.
    void follow(cudaStream_t s) {
        if (used && s != last_stream) {
            if (any_work) check(cudaEventRecord(done, last_stream), "cudaEventRecord");
            check(cudaStreamWaitEvent(s, done, 0), "cudaStreamWaitEvent");
        }
        last_stream = s;
        used = true;
    }
};

GradStatsLauncher::GradStatsLauncher() : impl_(std::make_unique<Impl>()) {
    check(cudaEventCreateWithFlags(&impl_->done, cudaEventDisableTiming), "cudaEventCreate");
}

GradStatsLauncher::~GradStatsLauncher() {
    // Teardown waits for outstanding work: the buffers may still be in use on the device.
    cudaStream_t s = impl_->last_stream;
    if (impl_->used && cudaEventRecord(impl_->done, s) == cudaSuccess)
        (void)cudaEventSynchronize(impl_->done);
    for (DeviceBuffer* b : {&impl_->chunks, &impl_->partials, &impl_->first_chunk, &impl_->results})
        if (b->ptr) (void)cudaFreeAsync(b->ptr, s);
    if (impl_->pinned) (void)cudaFreeHost(impl_->pinned);
    if (impl_->done) (void)cudaEventDestroy(impl_->done);
}

const GradStatsPlan& GradStatsLauncher::plan() const {
    return impl_->plan;
}

void GradStatsLauncher::set_plan(GradStatsPlan plan, Stream stream) {
    Impl& m = *impl_;
    cudaStream_t s = stream;
    m.follow(s);
    const std::size_t n_chunks = plan.chunks.size();
    const auto n_blocks = std::size_t(plan.n_blocks);
    m.chunks.reserve(n_chunks * sizeof(GradChunk), s);
    m.partials.reserve(n_chunks * sizeof(ChunkPartial), s);
    m.first_chunk.reserve((n_blocks + 1) * sizeof(std::int64_t), s);
    m.results.reserve(n_blocks * sizeof(BlockMoments), s);
    // From pageable memory: the runtime stages the bytes before returning, without a device sync,
    // so `plan` may be moved below. Happens only when gradient storage moved, not per step.
    if (n_chunks > 0)
        check(cudaMemcpyAsync(m.chunks.ptr, plan.chunks.data(), n_chunks * sizeof(GradChunk),
                              cudaMemcpyHostToDevice, s),
              "upload chunk table");
    check(cudaMemcpyAsync(m.first_chunk.ptr, plan.block_first_chunk.data(),
                          (n_blocks + 1) * sizeof(std::int64_t), cudaMemcpyHostToDevice, s),
          "upload block ranges");
    if (n_blocks > m.pinned_capacity) {
        // Growing the pinned buffer is the one place that waits: the device may still be copying
        // the previous results into it. Only on a plan with more blocks than any before.
        if (m.pinned) {
            check(cudaEventRecord(m.done, s), "cudaEventRecord");
            check(cudaEventSynchronize(m.done), "cudaEventSynchronize");
            check(cudaFreeHost(m.pinned), "cudaFreeHost");
            m.pinned = nullptr;
            m.pinned_capacity = 0;
        }
        void* p = nullptr;
        check(cudaMallocHost(&p, n_blocks * sizeof(BlockMoments)), "cudaMallocHost");
        m.pinned = static_cast<BlockMoments*>(p);
        m.pinned_capacity = n_blocks;
    }
    m.plan = std::move(plan);
    m.any_work = true;
    m.launched = false;
    m.fetched = false;
    m.out.clear();
}

void GradStatsLauncher::launch(Stream stream) {
    Impl& m = *impl_;
    cudaStream_t s = stream;
    m.follow(s);
    const auto n_chunks = static_cast<unsigned>(m.plan.chunks.size());
    const auto n_blocks = static_cast<unsigned>(m.plan.n_blocks);
    if (n_chunks > 0) {
        chunk_stats_kernel<<<n_chunks, kChunkThreads, 0, s>>>(static_cast<const GradChunk*>(m.chunks.ptr),
                                                              static_cast<ChunkPartial*>(m.partials.ptr));
        check(cudaGetLastError(), "chunk_stats_kernel launch");
    }
    if (n_blocks > 0) {
        block_merge_kernel<<<n_blocks, kMergeThreads, 0, s>>>(
            static_cast<const ChunkPartial*>(m.partials.ptr),
            static_cast<const std::int64_t*>(m.first_chunk.ptr), static_cast<BlockMoments*>(m.results.ptr));
        check(cudaGetLastError(), "block_merge_kernel launch");
        check(cudaMemcpyAsync(m.pinned, m.results.ptr, n_blocks * sizeof(BlockMoments),
                              cudaMemcpyDeviceToHost, s),
              "copy results to pinned memory");
    }
    check(cudaEventRecord(m.done, s), "cudaEventRecord");
    m.any_work = false;  // everything so far is before `done`
    m.launched = true;
    m.fetched = false;
}

bool GradStatsLauncher::ready() const {
    const cudaError_t e = cudaEventQuery(impl_->done);
    if (e == cudaErrorNotReady) return false;
    check(e, "cudaEventQuery");
    return true;
}

const std::vector<BlockMoments>& GradStatsLauncher::results() {
    Impl& m = *impl_;
    if (!m.launched || m.fetched) return m.out;
    check(cudaEventSynchronize(m.done), "cudaEventSynchronize");
    m.out.assign(m.pinned, m.pinned + m.plan.n_blocks);
    m.fetched = true;
    return m.out;
}

}  // namespace sp::cuda
