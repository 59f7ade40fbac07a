#pragma once
// Gradient tensors for the statistics tests of the fused pass (the kernels on a GPU, their host model
// everywhere): random fp32/bf16/fp16 values with NaN and +-Inf as raw bytes, laid out in one arena at
// offsets that put some tensors off the 16-byte grid, and the float64 reference per block.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reference_moments.h"
#include "sp/cuda/block_moments.h"
#include "sp/cuda/grad_stats_plan.h"

namespace sp::test {

inline float float_from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
// Host encoders (round toward zero: the reference decodes the stored bits, so any rounding will do)
// and exact decoders, written independently of the kernels' own decoding.
inline std::uint16_t bf16_bits(float f) {
    return std::uint16_t(bits_of(f) >> 16);
}
inline float bf16_value(std::uint16_t b) {
    return float_from_bits(std::uint32_t(b) << 16);
}
inline std::uint16_t f16_bits(float f) {
    const std::uint32_t u = bits_of(f);
    const auto sign = std::uint16_t((u >> 16) & 0x8000u);
    if (std::isnan(f)) return std::uint16_t(sign | 0x7e00u);
    const int e = int((u >> 23) & 0xffu) - 112;
    const std::uint32_t mant = (u & 0x7fffffu) | 0x800000u;
    if (e >= 31) return std::uint16_t(sign | 0x7c00u);  // overflow and Inf
    if (e <= 0) {
        const int shift = 14 - e;
        return std::uint16_t(sign | (shift > 24 ? 0u : mant >> shift));
    }
    return std::uint16_t(sign | std::uint32_t(e) << 10 | ((u & 0x7fffffu) >> 13));
}
inline float f16_value(std::uint16_t h) {
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    float v;
    if (e == 0)
        v = std::ldexp(float(m), -24);
    else if (e == 31)
        v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else
        v = std::ldexp(float(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

// One tensor: its values as the kernels will see them, and its raw bytes.
struct HostTensor {
    sp::cuda::GradDType dtype = sp::cuda::GradDType::f32;
    int block = 0;
    std::vector<float> values;  // decoded
    std::vector<unsigned char> bytes;
    std::size_t offset = 0;  // bytes from the arena start (see lay_out)
};

inline HostTensor make_tensor(std::mt19937_64& rng, sp::cuda::GradDType dtype, int block, std::int64_t n,
                              double scale, double offset, int n_nonfinite) {
    using sp::cuda::GradDType;
    HostTensor t;
    t.dtype = dtype;
    t.block = block;
    std::normal_distribution<double> normal(offset, scale);
    std::vector<float> raw(static_cast<std::size_t>(n));
    for (auto& x : raw) x = float(normal(rng));
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
    for (int i = 0; i < n_nonfinite && n > 0; ++i)
        raw[std::size_t(rng() % std::uint64_t(n))] = specials[i % 3];
    const std::size_t es = sp::cuda::element_size(dtype);
    t.bytes.resize(raw.size() * es);
    t.values.resize(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (dtype == GradDType::f32) {
            std::memcpy(&t.bytes[4 * i], &raw[i], 4);
            t.values[i] = raw[i];
        } else {
            const std::uint16_t b = dtype == GradDType::bf16 ? bf16_bits(raw[i]) : f16_bits(raw[i]);
            std::memcpy(&t.bytes[2 * i], &b, 2);
            t.values[i] = dtype == GradDType::bf16 ? bf16_value(b) : f16_value(b);
        }
    }
    return t;
}

// Overwrites element i with x encoded in the tensor's dtype (NaN, Inf and all), keeping `values` the
// decoded value, as make_tensor does.
inline void set_element(HostTensor& t, std::size_t i, float x) {
    using sp::cuda::GradDType;
    if (t.dtype == GradDType::f32) {
        std::memcpy(&t.bytes[4 * i], &x, 4);
        t.values[i] = x;
        return;
    }
    const std::uint16_t b = t.dtype == GradDType::bf16 ? bf16_bits(x) : f16_bits(x);
    std::memcpy(&t.bytes[2 * i], &b, 2);
    t.values[i] = t.dtype == GradDType::bf16 ? bf16_value(b) : f16_value(b);
}

// Sets each tensor's arena offset: 256-byte aligned, except that some tensors start off the 16-byte
// grid (as storage offsets do), always on their element size. Returns the arena's size in bytes.
// Arenas with the same offsets (and bases aligned to 256) give the same plan chunks.
inline std::size_t lay_out(std::vector<HostTensor>& tensors) {
    std::size_t bytes = 0;
    for (auto& t : tensors) {
        const std::size_t es = sp::cuda::element_size(t.dtype);
        const std::size_t misalign = t.values.size() % 3 == 0 ? es * (t.values.size() % (16 / es)) : 0;
        t.offset = (bytes + 255) / 256 * 256 + misalign;
        bytes = t.offset + t.bytes.size();
    }
    return bytes;
}

// The tensors' descriptors for an arena starting at `base` (laid out by lay_out).
inline std::vector<sp::cuda::GradTensorDesc> descriptors(const std::vector<HostTensor>& tensors,
                                                         unsigned char* base) {
    std::vector<sp::cuda::GradTensorDesc> d;
    d.reserve(tensors.size());
    for (const auto& t : tensors)
        d.push_back(
            sp::cuda::GradTensorDesc{base + t.offset, std::int64_t(t.values.size()), t.dtype, t.block});
    return d;
}

// The tensors in host memory at their lay_out() offsets from a 256-byte aligned base (plus `shift`
// bytes), as a device arena holds them: the same addresses modulo 256 give the same plan chunks.
// Bit for bit, member by member: the kernels and the host model must agree exactly (a -0.0 for a 0.0
// or another NaN payload is a difference).
inline bool same_bits(const sp::cuda::BlockMoments& a, const sp::cuda::BlockMoments& b) {
    const auto bits = [](double x) {
        std::uint64_t u = 0;
        std::memcpy(&u, &x, sizeof u);
        return u;
    };
    return a.finite == b.finite && a.nonfinite == b.nonfinite && bits(a.mean) == bits(b.mean) &&
           bits(a.m2) == bits(b.m2) && bits(a.sumsq) == bits(b.sumsq) && bits(a.max_abs) == bits(b.max_abs);
}

struct HostArena {
    std::vector<unsigned char> storage;
    std::vector<sp::cuda::GradTensorDesc> place(std::vector<HostTensor>& tensors, std::size_t shift = 0) {
        storage.assign(lay_out(tensors) + 512, 0);
        auto* b = storage.data() + (256 - reinterpret_cast<std::uintptr_t>(storage.data()) % 256) + shift;
        for (const auto& t : tensors)  // an empty tensor has no bytes (and memcpy no null source)
            if (!t.bytes.empty()) std::memcpy(b + t.offset, t.bytes.data(), t.bytes.size());
        return descriptors(tensors, b);
    }
};

inline ReferenceMoments reference(const std::vector<HostTensor>& tensors, int block) {
    std::vector<double> v;
    std::uint64_t nonfinite = 0;
    for (const auto& t : tensors) {
        if (t.block != block) continue;
        for (float x : t.values) {
            if (std::isfinite(x))
                v.push_back(x);
            else
                ++nonfinite;
        }
    }
    return reference_moments(v, nonfinite);
}

// The pass sums the same float values in fp64 in another order (shifted by one element per chunk),
// so l2 and variance agree to ~1e-9 relative and the mean to 1e-9 of |mean| + rms. max |g|, counts and
// non-finite counts are exact.
constexpr double kMomentsRelTol = 1e-9;

inline void check_block(const sp::cuda::BlockMoments& got, const ReferenceMoments& want,
                        const QString& what) {
    check_moments({got.finite, got.nonfinite, got.max_abs, std::sqrt(got.sumsq), got.mean,
                   got.finite ? got.m2 / double(got.finite) : 0.0},
                  want, kMomentsRelTol, what);
}

// The alignment cases: for every dtype, tensors of 1, 5, 8, 17 and 4103 elements over blocks 0 and 1
// at every element-aligned shift of the arena below 16 bytes (heads of 0 .. 7 elements before the
// vector body, tails of every length). Calls check(host, shift, what) for each, and stops at the
// first failure.
template <typename Check>
void for_every_alignment(Check check) {
    std::mt19937_64 rng(3);
    for (const sp::cuda::GradDType d :
         {sp::cuda::GradDType::f32, sp::cuda::GradDType::bf16, sp::cuda::GradDType::f16}) {
        std::vector<HostTensor> host;
        for (int n : {1, 5, 8, 17, 4103}) host.push_back(make_tensor(rng, d, n % 2, n, 0.1, 0.0, 1));
        const std::size_t es = sp::cuda::element_size(d);
        for (std::size_t shift = 0; shift < 16; shift += es) {
            check(host, shift, QString("dtype %1 shift %2").arg(int(d)).arg(shift));
            if (QTest::currentTestFailed()) return;
        }
    }
}

// A random mixed list: `count` tensors over blocks 0 .. n_blocks - 2 (the last block stays empty), of
// sizes drawn from `sizes`, some far from zero mean (cancellation), some with NaN/Inf.
inline std::vector<HostTensor> random_tensor_list(std::mt19937_64& rng, int n_blocks, int count,
                                                  bool far_from_zero,
                                                  const std::vector<std::int64_t>& sizes) {
    const sp::cuda::GradDType dtypes[] = {sp::cuda::GradDType::f32, sp::cuda::GradDType::bf16,
                                          sp::cuda::GradDType::f16};
    std::vector<HostTensor> host;
    for (int i = 0; i < count; ++i) {
        const int block = int(rng() % std::uint64_t(n_blocks - 1));
        const sp::cuda::GradDType d = dtypes[rng() % 3];
        const std::int64_t n = sizes[rng() % sizes.size()];
        host.push_back(make_tensor(rng, d, block, n, 1e-3 * double(1 + rng() % 100),
                                   far_from_zero ? 0.5 : 0.0, int(rng() % 4) - 1));
    }
    return host;
}

// ... of sizes around the default chunk's and the vectors' boundaries.
inline std::vector<HostTensor> random_tensor_list(std::mt19937_64& rng, int n_blocks, int count,
                                                  bool far_from_zero) {
    return random_tensor_list(rng, n_blocks, count, far_from_zero,
                              {0, 1, 2, 3, 7, 9, 15, 33, 1000, 4097, 65535, 65536, 65537, 300001});
}

}  // namespace sp::test
