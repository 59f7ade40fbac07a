// The fused gradient-statistics kernels and their launcher (see grad_stats_launcher.h).
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
// GPUs with 1/64-rate fp64 this pass would be compute-bound (unmeasured: no such GPU here).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "sp/cuda/grad_stats_launcher.h"

namespace sp::cuda {

namespace {

constexpr int kChunkThreads = 256;
constexpr int kMergeThreads = 256;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("cuda grad stats: ") + what + ": " + cudaGetErrorString(e));
}

// One chunk's reduction, as the merge kernel reads it.
struct ChunkPartial {
    std::uint32_t finite;
    std::uint32_t nonfinite;
    float max_abs;
    float pad;
    double mean;
    double m2;
    double sumsq;
};

// No default member initializers: arrays of it live in __shared__ memory, which cannot have
// constructors.
struct ThreadAcc {
    unsigned finite;
    unsigned nonfinite;
    float max_abs;
    double s1;
    double s2;
};

// Device twin of BlockMoments (which has initializers) for the shared-memory merge tree.
struct Moments {
    unsigned long long finite;
    unsigned long long nonfinite;
    double mean;
    double m2;
    double sumsq;
    double max_abs;
};
static_assert(sizeof(Moments) == sizeof(BlockMoments), "Moments mirrors BlockMoments");

__device__ __forceinline__ void add(ThreadAcc& a, float x, double k) {
    const float ax = fabsf(x);
    const bool fin = ax <= FLT_MAX;  // false for NaN and +-Inf
    const double d = fin ? double(x) - k : 0.0;
    a.s1 += d;
    a.s2 = fma(d, d, a.s2);
    a.finite += fin ? 1u : 0u;
    a.nonfinite += fin ? 0u : 1u;
    a.max_abs = fin ? fmaxf(a.max_abs, ax) : a.max_abs;
}

// Element conversion by dtype; raw 16-bit patterns for bf16 and fp16.
template <int kDtype>
__device__ __forceinline__ float lo16(std::uint32_t w);
template <int kDtype>
__device__ __forceinline__ float hi16(std::uint32_t w);
template <>
__device__ __forceinline__ float lo16<1>(std::uint32_t w) {
    return __uint_as_float(w << 16);
}
template <>
__device__ __forceinline__ float hi16<1>(std::uint32_t w) {
    return __uint_as_float(w & 0xffff0000u);
}
template <>
__device__ __forceinline__ float lo16<2>(std::uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
}
template <>
__device__ __forceinline__ float hi16<2>(std::uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
}

template <int kDtype>
__device__ __forceinline__ float load_scalar(const unsigned char* base, std::uint32_t i) {
    if constexpr (kDtype == 0) {
        return __ldg(reinterpret_cast<const float*>(base) + i);
    } else {
        const unsigned short u = __ldg(reinterpret_cast<const unsigned short*>(base) + i);
        return lo16<kDtype>(u);
    }
}

template <int kDtype>
__device__ __forceinline__ void add_vector(ThreadAcc& a, const uint4& v, double k) {
    const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if constexpr (kDtype == 0) {
            add(a, __uint_as_float(w[j]), k);
        } else {
            add(a, lo16<kDtype>(w[j]), k);
            add(a, hi16<kDtype>(w[j]), k);
        }
    }
}

template <int kDtype>
__device__ void accumulate_chunk(const GradChunk& c, ThreadAcc& a, double k) {
    const auto* base = reinterpret_cast<const unsigned char*>(c.addr);
    const std::uint32_t tid = threadIdx.x;
    if (tid < c.head) add(a, load_scalar<kDtype>(base, tid), k);
    const std::uint32_t tail =
        c.head + (c.numel - c.head) / c.vec_elems * c.vec_elems;  // GradChunk::tail_start
    const std::uint32_t n_vec = (tail - c.head) / c.vec_elems;
    const uint4* vp = reinterpret_cast<const uint4*>(base + std::size_t(c.head) * (kDtype == 0 ? 4 : 2));
    std::uint32_t v = tid;
    for (; v + (kUnroll - 1) * kChunkThreads < n_vec; v += kUnroll * kChunkThreads) {
        uint4 r[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) r[u] = __ldg(vp + v + u * kChunkThreads);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) add_vector<kDtype>(a, r[u], k);
    }
    for (; v < n_vec; v += kChunkThreads) add_vector<kDtype>(a, __ldg(vp + v), k);
    for (std::uint32_t i = tail + tid; i < c.numel; i += kChunkThreads)
        add(a, load_scalar<kDtype>(base, i), k);
}

__device__ __forceinline__ void warp_sum(ThreadAcc& a) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        a.finite += __shfl_down_sync(0xffffffffu, a.finite, off);
        a.nonfinite += __shfl_down_sync(0xffffffffu, a.nonfinite, off);
        a.max_abs = fmaxf(a.max_abs, __shfl_down_sync(0xffffffffu, a.max_abs, off));
        a.s1 += __shfl_down_sync(0xffffffffu, a.s1, off);
        a.s2 += __shfl_down_sync(0xffffffffu, a.s2, off);
    }
}

// grid: one thread block per chunk.
__global__ void __launch_bounds__(kChunkThreads)
    chunk_stats_kernel(const GradChunk* __restrict__ chunks, ChunkPartial* __restrict__ partials) {
    const GradChunk c = chunks[blockIdx.x];
    const auto* base = reinterpret_cast<const unsigned char*>(c.addr);
    float k0;
    switch (c.dtype) {
        case 0:
            k0 = load_scalar<0>(base, 0);
            break;
        case 1:
            k0 = load_scalar<1>(base, 0);
            break;
        default:
            k0 = load_scalar<2>(base, 0);
            break;
    }
    const double k = fabsf(k0) <= FLT_MAX ? double(k0) : 0.0;

    ThreadAcc a{0u, 0u, 0.0f, 0.0, 0.0};
    switch (c.dtype) {
        case 0:
            accumulate_chunk<0>(c, a, k);
            break;
        case 1:
            accumulate_chunk<1>(c, a, k);
            break;
        default:
            accumulate_chunk<2>(c, a, k);
            break;
    }

    __shared__ ThreadAcc warps[kChunkThreads / 32];
    warp_sum(a);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warps[warp] = a;
    __syncthreads();
    if (threadIdx.x != 0) return;
    ThreadAcc t = warps[0];
    for (int w = 1; w < kChunkThreads / 32; ++w) {
        t.finite += warps[w].finite;
        t.nonfinite += warps[w].nonfinite;
        t.max_abs = fmaxf(t.max_abs, warps[w].max_abs);
        t.s1 += warps[w].s1;
        t.s2 += warps[w].s2;
    }
    ChunkPartial p;
    p.finite = t.finite;
    p.nonfinite = t.nonfinite;
    p.max_abs = t.max_abs;
    p.pad = 0.0f;
    p.mean = 0.0;
    p.m2 = 0.0;
    p.sumsq = 0.0;
    if (t.finite > 0) {
        const double n = double(t.finite);
        p.mean = k + t.s1 / n;
        p.m2 = fmax(0.0, t.s2 - t.s1 * (t.s1 / n));
        p.sumsq = p.m2 + n * p.mean * p.mean;  // two non-negative terms: no cancellation
    }
    partials[blockIdx.x] = p;
}

// Chan, Golub & LeVeque's pairwise update, plus the order-free parts.
__device__ __forceinline__ void merge(Moments& a, const Moments& b) {
    a.nonfinite += b.nonfinite;
    a.sumsq += b.sumsq;
    a.max_abs = fmax(a.max_abs, b.max_abs);
    if (b.finite == 0) return;
    if (a.finite == 0) {
        a.finite = b.finite;
        a.mean = b.mean;
        a.m2 = b.m2;
        return;
    }
    const double na = double(a.finite), nb = double(b.finite), n = na + nb;
    const double delta = b.mean - a.mean;
    a.mean += delta * (nb / n);
    a.m2 += b.m2 + delta * delta * (na * (nb / n));
    a.finite += b.finite;
}

// grid: one thread block per agent block. Each thread merges a strided subset of the block's chunk
// partials in order, then a fixed shared-memory tree merges the threads.
__global__ void __launch_bounds__(kMergeThreads)
    block_merge_kernel(const ChunkPartial* __restrict__ partials,
                       const std::int64_t* __restrict__ first_chunk, BlockMoments* __restrict__ out) {
    const std::int64_t begin = first_chunk[blockIdx.x], end = first_chunk[blockIdx.x + 1];
    Moments acc{0ull, 0ull, 0.0, 0.0, 0.0, 0.0};
    for (std::int64_t c = begin + threadIdx.x; c < end; c += kMergeThreads) {
        const ChunkPartial p = partials[c];
        Moments m;
        m.finite = p.finite;
        m.nonfinite = p.nonfinite;
        m.mean = p.mean;
        m.m2 = p.m2;
        m.sumsq = p.sumsq;
        m.max_abs = p.max_abs;
        merge(acc, m);
    }
    __shared__ Moments tree[kMergeThreads];
    tree[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kMergeThreads / 2; half > 0; half >>= 1) {
        if (int(threadIdx.x) < half) merge(tree[threadIdx.x], tree[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const Moments& t = tree[0];
        BlockMoments& o = out[blockIdx.x];
        o.finite = t.finite;
        o.nonfinite = t.nonfinite;
        o.mean = t.mean;
        o.m2 = t.m2;
        o.sumsq = t.sumsq;
        o.max_abs = t.max_abs;
    }
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
