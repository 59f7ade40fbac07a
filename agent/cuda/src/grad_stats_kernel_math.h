#pragma once
// The arithmetic and the per-thread traversal of the gradient-statistics kernels, written once and
// compiled twice: for the device by grad_stats_kernels.cu, and for the host by grad_stats_host_model.cpp,
// which replays the kernels thread by thread in the kernels' own order. That replay is how the
// algorithm is tested on machines without a GPU (test_grad_stats_host_model), and it is the exact
// expected value for the kernels on a GPU. Only the thread plumbing (warp shuffles, shared-memory
// trees) is written twice; both spell out the same reduction order.
//
// Bit-for-bit agreement needs the same operations on both sides: every multiply-add here is an
// explicit fma(), the .cu is compiled with --fmad=false and the host model with -ffp-contract=off, so
// neither compiler fuses anything else.
#include <float.h>
#include <math.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sp/cuda/block_moments.h"
#include "sp/cuda/grad_stats_plan.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define SP_HD __host__ __device__ __forceinline__
#else
#define SP_HD inline
#endif
#if defined(__CUDA_ARCH__)  // the device pass only: host compilers warn about the pragma
#define SP_UNROLL _Pragma("unroll")
#else
#define SP_UNROLL
#endif

namespace sp::cuda::kernel {

constexpr int kChunkThreads = 256;
constexpr int kMergeThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

// One 16-byte vector load, as four 32-bit words (4 fp32 or 8 bf16/fp16 elements).
struct Words {
    std::uint32_t w[4];
};

SP_HD float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// IEEE binary16 to float, exact (every half is a float). The device uses its conversion instruction.
SP_HD float half_to_float(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return float_from_bits(sign | 0x7f800000u | mant << 13);  // Inf, NaN
    if (exp != 0) return float_from_bits(sign | (exp + 112u) << 23 | mant << 13);
    const float v = float(mant) * 5.9604644775390625e-8f;  // subnormal or zero: mant * 2^-24, exact
    return sign ? -v : v;
#endif
}

// dtype codes as in GradDType: 0 fp32, 1 bf16, 2 fp16.
template <int kDtype>
SP_HD float decode16(std::uint16_t b) {
    if constexpr (kDtype == 1)
        return float_from_bits(std::uint32_t(b) << 16);
    else
        return half_to_float(b);
}

template <int kDtype>
constexpr std::size_t kElementBytes = kDtype == 0 ? 4 : 2;

// One thread's running sums over finite values, shifted by the chunk's K (see add()). No default
// member initializers: arrays of it live in __shared__ memory.
struct ThreadAcc {
    std::uint32_t finite;
    std::uint32_t nonfinite;
    float max_abs;
    double s1;  // sum (x - K)
    double s2;  // sum (x - K)^2
};

SP_HD ThreadAcc empty_acc() {
    return ThreadAcc{0u, 0u, 0.0f, 0.0, 0.0};
}

SP_HD void add(ThreadAcc& a, float x, double k) {
    const float ax = fabsf(x);
    const bool fin = ax <= FLT_MAX;  // false for NaN and +-Inf: counted, never summed or dropped silently
    const double d = fin ? double(x) - k : 0.0;
    a.s1 += d;
    a.s2 = fma(d, d, a.s2);
    a.finite += fin ? 1u : 0u;
    a.nonfinite += fin ? 0u : 1u;
    a.max_abs = fin ? fmaxf(a.max_abs, ax) : a.max_abs;
}

// Sums another thread's accumulator into `a` (the reduction step on both sides).
SP_HD void combine(ThreadAcc& a, const ThreadAcc& b) {
    a.finite += b.finite;
    a.nonfinite += b.nonfinite;
    a.max_abs = fmaxf(a.max_abs, b.max_abs);
    a.s1 += b.s1;
    a.s2 += b.s2;
}

template <int kDtype>
SP_HD void add_words(ThreadAcc& a, const Words& v, double k) {
    SP_UNROLL
    for (int j = 0; j < 4; ++j) {
        if constexpr (kDtype == 0) {
            add(a, float_from_bits(v.w[j]), k);
        } else {
            add(a, decode16<kDtype>(std::uint16_t(v.w[j] & 0xffffu)), k);  // little-endian: low half first
            add(a, decode16<kDtype>(std::uint16_t(v.w[j] >> 16)), k);
        }
    }
}

// Memory is how a side reads gradient bytes: load16/load32 (scalars) and load128 (one aligned
// 16-byte vector). The device reads through the read-only cache, the host model with memcpy.
template <int kDtype, class Memory>
SP_HD float load_element(const Memory& mem, const unsigned char* base, std::uint32_t i) {
    if constexpr (kDtype == 0)
        return float_from_bits(mem.load32(base + std::size_t(i) * 4));
    else
        return decode16<kDtype>(mem.load16(base + std::size_t(i) * 2));
}

// The chunk's first byte. Chunks carry their address as an integer so the plan stays plain data
// that the host builds and copies to the device in one transfer.
SP_HD const unsigned char* chunk_bytes(const GradChunk& c) {
    return reinterpret_cast<const unsigned char*>(c.addr);  // NOLINT(performance-no-int-to-ptr): see above
}

// The chunk's shift K: its first element when finite, else 0. Sums of x - K stay small when the
// values sit far from zero, which keeps M2 = S2 - S1^2/n accurate.
template <int kDtype, class Memory>
SP_HD double chunk_shift(const Memory& mem, const GradChunk& c) {
    const float k0 = load_element<kDtype>(mem, chunk_bytes(c), 0);
    return fabsf(k0) <= FLT_MAX ? double(k0) : 0.0;
}

// Thread `tid`'s share of a chunk: at most one head scalar, every kChunkThreads-th 16-byte vector
// (kUnroll loads in flight), then every kChunkThreads-th tail scalar. Together the threads read each
// element exactly once (test_grad_stats_plan checks the head/body/tail split).
template <int kDtype, class Memory>
SP_HD void accumulate_chunk(const Memory& mem, const GradChunk& c, ThreadAcc& a, double k,
                            std::uint32_t tid) {
    const unsigned char* base = chunk_bytes(c);
    if (tid < c.head) add(a, load_element<kDtype>(mem, base, tid), k);
    const std::uint32_t tail = c.head + (c.numel - c.head) / c.vec_elems * c.vec_elems;  // tail_start()
    const std::uint32_t n_vec = (tail - c.head) / c.vec_elems;
    const unsigned char* body = base + std::size_t(c.head) * kElementBytes<kDtype>;
    std::uint32_t v = tid;
    for (; v + (kUnroll - 1) * kChunkThreads < n_vec; v += kUnroll * kChunkThreads) {
        Words r[kUnroll];
        SP_UNROLL
        for (int u = 0; u < kUnroll; ++u) r[u] = mem.load128(body + std::size_t(v + u * kChunkThreads) * 16);
        SP_UNROLL
        for (int u = 0; u < kUnroll; ++u) add_words<kDtype>(a, r[u], k);
    }
    for (; v < n_vec; v += kChunkThreads) add_words<kDtype>(a, mem.load128(body + std::size_t(v) * 16), k);
    for (std::uint32_t i = tail + tid; i < c.numel; i += kChunkThreads)
        add(a, load_element<kDtype>(mem, base, i), k);
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

// The chunk's statistics from the sum of its threads' accumulators.
SP_HD ChunkPartial finish_chunk(const ThreadAcc& t, double k) {
    ChunkPartial p{t.finite, t.nonfinite, t.max_abs, 0.0f, 0.0, 0.0, 0.0};
    if (t.finite > 0) {
        const double n = double(t.finite);
        p.mean = k + t.s1 / n;
        p.m2 = fmax(0.0, fma(-t.s1, t.s1 / n, t.s2));
        p.sumsq = fma(n * p.mean, p.mean, p.m2);  // two non-negative terms: no cancellation
    }
    return p;
}

// A block's running statistics in the merge kernel (BlockMoments without initializers, for
// __shared__ arrays).
struct Moments {
    unsigned long long finite;
    unsigned long long nonfinite;
    double mean;
    double m2;
    double sumsq;
    double max_abs;
};

SP_HD Moments empty_moments() {
    return Moments{0ull, 0ull, 0.0, 0.0, 0.0, 0.0};
}

SP_HD Moments to_moments(const ChunkPartial& p) {
    return Moments{p.finite, p.nonfinite, p.mean, p.m2, p.sumsq, double(p.max_abs)};
}

SP_HD BlockMoments to_block_moments(const Moments& m) {
    BlockMoments o;
    o.finite = m.finite;
    o.nonfinite = m.nonfinite;
    o.mean = m.mean;
    o.m2 = m.m2;
    o.sumsq = m.sumsq;
    o.max_abs = m.max_abs;
    return o;
}

// Chan, Golub & LeVeque's pairwise update of (n, mean, M2), plus the order-free parts.
SP_HD void merge(Moments& a, const Moments& b) {
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
    a.mean = fma(delta, nb / n, a.mean);
    a.m2 = a.m2 + fma(delta * delta, na * (nb / n), b.m2);
    a.finite += b.finite;
}

// Merge thread `tid`'s strided share of a block's chunk partials [begin, end), in order.
SP_HD Moments merge_strided(const ChunkPartial* partials, std::int64_t begin, std::int64_t end,
                            std::uint32_t tid) {
    Moments acc = empty_moments();
    for (std::int64_t c = begin + tid; c < end; c += kMergeThreads) merge(acc, to_moments(partials[c]));
    return acc;
}

}  // namespace sp::cuda::kernel
