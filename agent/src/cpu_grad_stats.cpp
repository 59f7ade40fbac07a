// CPU gradient statistics: every gradient of every block is cut into chunks of kChunkElems elements,
// the chunks are reduced in parallel (at::parallel_for) into one Partial each, and each block's
// partials are merged in chunk order with Chan's formula. A chunk's result does not depend on which
// thread computed it and the merge order is fixed, so results are bitwise identical for any thread
// count.
//
// Inside a chunk, one pass computes sum and sum of squares (in double: a float squared is exact in
// double) and max |g| (in float: exact), assuming every element is finite. A NaN or Inf turns the
// sum of squares into Inf or NaN, which is how the pass notices one; only such chunks are redone by a
// per-element loop that skips non-finite values. M2 is sumsq - sum * mean when that is well
// conditioned (mean small next to the spread, the usual case for gradients); otherwise a second pass
// over the chunk, still in cache, computes the corrected two-pass sum of squared deviations.
//
// The pass has two implementations: a portable loop the compiler vectorizes (any ISA, SSE2 on
// x86-64), and on x86-64 CPUs with AVX2, FMA and F16C an intrinsics version selected at run time
// (1.5x faster on fp32, which is then memory-bound, 3x on bf16, 5x on fp16): GCC 12 lowers float ->
// double widening of generic vectors poorly, and the port usage needs hand care (see step16). The two
// sum in different orders, so their last bits may differ; each is deterministic.
//
// Note: at::parallel_for is header-only under LibTorch's OpenMP backend; this file must be compiled
// with -fopenmp for the chunks to run on more than one thread (results are the same either way).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#define SP_GRAD_STATS_AVX2 1
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "sp/agent/grad_stats_collector.h"

namespace sp::agent {
namespace {

// 64K elements: 256 KB of fp32, small enough to stay in L2 for the occasional second pass, large
// enough that per-chunk overhead is noise.
constexpr std::int64_t kChunkElems = std::int64_t{1} << 16;
// Below this many elements in all, the whole collect runs on the calling thread: waking the pool
// costs more than the work.
constexpr std::int64_t kSerialBelowElems = std::int64_t{1} << 17;
// Independent accumulators per quantity in the portable loops: the chunk is read as rows of kLanes
// elements and each column is summed on its own. The inner loop over a row is then element-wise (no
// reduction to reassociate), which GCC and Clang vectorize without -ffast-math; with 8 lanes GCC 12
// fully unrolls it and gives up.
constexpr int kLanes = 32;
// sumsq - sum * mean loses about log2(sumsq / M2) bits to cancellation; beyond 6 bits (mean^2 more
// than ~63x the variance) the chunk takes the two-pass route instead.
constexpr double kMaxCancellation = 64.0;

// One chunk's reduction. mean and m2 are over the finite elements only.
struct Partial {
    std::uint64_t finite = 0;
    std::uint64_t nonfinite = 0;
    double mean = 0.0;
    double m2 = 0.0;
    double sumsq = 0.0;
    double max_abs = 0.0;
};

// The single pass's results, valid only when sumsq is finite.
struct Sums {
    double sum = 0.0;
    double sumsq = 0.0;
    float max_abs = 0.0f;
};

inline float float_from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
inline std::uint32_t bits_from_float(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

template <typename T>
inline float to_float(T v) {
    return static_cast<float>(v);
}
template <>
inline float to_float<c10::BFloat16>(c10::BFloat16 v) {
    return float_from_bits(std::uint32_t{v.x} << 16);
}
// c10's fp16_ieee_to_fp32_value, with its final ?: turned into a bit mask: GCC 12 does not
// if-convert the original, and the loop that calls it stays scalar (4x slower).
template <>
inline float to_float<c10::Half>(c10::Half v) {
    const std::uint32_t w = std::uint32_t{v.x} << 16;
    const std::uint32_t sign = w & 0x80000000u;
    const std::uint32_t two_w = w + w;
    const float normalized = float_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = float_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
    const std::uint32_t denormal_mask = 0u - std::uint32_t{two_w < (1u << 27)};
    return float_from_bits(sign | (bits_from_float(denormalized) & denormal_mask) |
                           (bits_from_float(normalized) & ~denormal_mask));
}

template <typename T>
Sums sums_portable(const T* p, std::int64_t n) {
    double s[kLanes] = {};
    double q[kLanes] = {};
    float m[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) {
            const float x = to_float(p[i + k]);
            const double d = x;
            s[k] += d;
            q[k] += d * d;
            const float a = std::fabs(x);
            m[k] = a > m[k] ? a : m[k];
        }
    }
    Sums r;
    for (int k = 0; k < kLanes; ++k) {
        r.sum += s[k];
        r.sumsq += q[k];
        r.max_abs = std::max(r.max_abs, m[k]);
    }
    for (; i < n; ++i) {
        const float x = to_float(p[i]);
        r.sum += double(x);
        r.sumsq += double(x) * double(x);
        r.max_abs = std::max(r.max_abs, std::fabs(x));
    }
    return r;
}

#ifdef SP_GRAD_STATS_AVX2
#define SP_AVX2 __attribute__((target("avx2,f16c,fma")))

// Four (sum, sum of squares) lane sets of 4 doubles (enough independent adds to hide their latency),
// and the running max: float lanes for fp32, 16-bit patterns for bf16 and fp16.
struct Lanes {
    __m256d s[4];
    __m256d q[4];
    __m256 max_f32;
    __m256i max_u16;
};

// fma(d, d, q) rounds exactly like q + d * d: the square of a float is exact in double.
SP_AVX2 inline void add4(__m128 x, __m256d& s, __m256d& q) {
    const __m256d d = _mm256_cvtps_pd(x);
    s = _mm256_add_pd(s, d);
    q = _mm256_fmadd_pd(d, d, q);
}

// Each step16 reads 16 elements. The float -> double conversions take the shuffle port; the steps
// add as little else to it as they can (it, then the FP add ports, are the bottleneck).
SP_AVX2 inline void step16(const float* p, Lanes& l) {
    add4(_mm_loadu_ps(p), l.s[0], l.q[0]);  // quads straight from memory: no lane extracts
    add4(_mm_loadu_ps(p + 4), l.s[1], l.q[1]);
    add4(_mm_loadu_ps(p + 8), l.s[2], l.q[2]);
    add4(_mm_loadu_ps(p + 12), l.s[3], l.q[3]);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    l.max_f32 = _mm256_max_ps(l.max_f32, _mm256_and_ps(_mm256_loadu_ps(p), abs_mask));
    l.max_f32 = _mm256_max_ps(l.max_f32, _mm256_and_ps(_mm256_loadu_ps(p + 8), abs_mask));
}

// With the sign bit cleared, the bit patterns of finite bf16 / fp16 values order like their
// magnitudes, so max |x| is an unsigned 16-bit max over 16 elements at once. (Chunks holding a
// non-finite value are redone by the careful path.)
SP_AVX2 inline void max_abs_u16(const void* p, Lanes& l) {
    const __m256i raw = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    l.max_u16 = _mm256_max_epu16(l.max_u16, _mm256_and_si256(raw, _mm256_set1_epi16(0x7fff)));
}

// bf16 -> float without shuffles: in each 32-bit lane, the even element shifted up and the odd one
// masked are both already floats. Sums do not care that the elements come out of order.
SP_AVX2 inline void step16(const c10::BFloat16* p, Lanes& l) {
    const __m128i high_half = _mm_set1_epi32(static_cast<int>(0xffff0000u));
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8));
    add4(_mm_castsi128_ps(_mm_slli_epi32(v0, 16)), l.s[0], l.q[0]);
    add4(_mm_castsi128_ps(_mm_and_si128(v0, high_half)), l.s[1], l.q[1]);
    add4(_mm_castsi128_ps(_mm_slli_epi32(v1, 16)), l.s[2], l.q[2]);
    add4(_mm_castsi128_ps(_mm_and_si128(v1, high_half)), l.s[3], l.q[3]);
    max_abs_u16(p, l);
}

SP_AVX2 inline void step16(const c10::Half* p, Lanes& l) {
    const __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    add4(_mm256_castps256_ps128(x0), l.s[0], l.q[0]);
    add4(_mm256_extractf128_ps(x0, 1), l.s[1], l.q[1]);
    add4(_mm256_castps256_ps128(x1), l.s[2], l.q[2]);
    add4(_mm256_extractf128_ps(x1, 1), l.s[3], l.q[3]);
    max_abs_u16(p, l);
}

template <typename T>
SP_AVX2 Sums sums_avx2(const T* p, std::int64_t n) {
    Lanes l;
    for (int k = 0; k < 4; ++k) l.s[k] = l.q[k] = _mm256_setzero_pd();
    l.max_f32 = _mm256_setzero_ps();
    l.max_u16 = _mm256_setzero_si256();
    std::int64_t i = 0;
    for (; i + 16 <= n; i += 16) step16(p + i, l);

    alignas(32) double s[4];
    alignas(32) double q[4];
    alignas(32) float m[8];
    alignas(32) std::uint16_t m16[16];
    _mm256_store_pd(s, _mm256_add_pd(_mm256_add_pd(l.s[0], l.s[1]), _mm256_add_pd(l.s[2], l.s[3])));
    _mm256_store_pd(q, _mm256_add_pd(_mm256_add_pd(l.q[0], l.q[1]), _mm256_add_pd(l.q[2], l.q[3])));
    _mm256_store_ps(m, l.max_f32);
    _mm256_store_si256(reinterpret_cast<__m256i*>(m16), l.max_u16);
    Sums r;
    for (int k = 0; k < 4; ++k) {
        r.sum += s[k];
        r.sumsq += q[k];
    }
    for (int k = 0; k < 8; ++k) r.max_abs = std::max(r.max_abs, m[k]);
    if constexpr (!std::is_same_v<T, float>) {
        for (int k = 0; k < 16; ++k) r.max_abs = std::max(r.max_abs, to_float(T(m16[k], T::from_bits())));
    }
    for (; i < n; ++i) {
        const float x = to_float(p[i]);
        r.sum += double(x);
        r.sumsq += double(x) * double(x);
        r.max_abs = std::max(r.max_abs, std::fabs(x));
    }
    return r;
}
#undef SP_AVX2

// F16C through cpuid: Clang's __builtin_cpu_supports does not know "f16c".
bool cpu_has_avx2() {
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#else
bool cpu_has_avx2() {
    return false;
}
#endif

// Corrected two-pass M2 (Chan, Golub, LeVeque): sum (x - mean)^2 - (sum (x - mean))^2 / n, the second
// term cancelling the rounding error of `mean`. With kFiniteOnly, non-finite elements are skipped.
template <bool kFiniteOnly, typename T>
double centered_m2(const T* p, std::int64_t n, double mean, std::uint64_t count) {
    double dev[kLanes] = {};
    double dev2[kLanes] = {};
    std::int64_t i = 0;
    if constexpr (!kFiniteOnly) {
        for (; i + kLanes <= n; i += kLanes) {
            for (int k = 0; k < kLanes; ++k) {
                const double d = double(to_float(p[i + k])) - mean;
                dev[k] += d;
                dev2[k] += d * d;
            }
        }
    }
    for (; i < n; ++i) {
        const float x = to_float(p[i]);
        if (kFiniteOnly && !std::isfinite(x)) continue;
        const double d = double(x) - mean;
        dev[0] += d;
        dev2[0] += d * d;
    }
    double s = 0.0;
    double s2 = 0.0;
    for (int k = 0; k < kLanes; ++k) {
        s += dev[k];
        s2 += dev2[k];
    }
    return std::max(0.0, s2 - s * s / double(count));
}

// The rare path: a chunk that holds at least one NaN or Inf, one element at a time.
template <typename T>
Partial chunk_stats_careful(const T* p, std::int64_t n) {
    Partial r;
    double sum = 0.0;
    float mx = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) {
        const float x = to_float(p[i]);
        if (!std::isfinite(x)) {
            ++r.nonfinite;
            continue;
        }
        ++r.finite;
        const double d = x;
        sum += d;
        r.sumsq += d * d;
        mx = std::max(mx, std::fabs(x));
    }
    r.max_abs = mx;
    if (r.finite > 0) {
        r.mean = sum / double(r.finite);
        r.m2 = centered_m2<true>(p, n, r.mean, r.finite);
    }
    return r;
}

template <typename T>
Partial chunk_stats(const T* p, std::int64_t n, bool avx2) {
    Partial r;
    if (n == 0) return r;
#ifdef SP_GRAD_STATS_AVX2
    const Sums f = avx2 ? sums_avx2(p, n) : sums_portable(p, n);
#else
    (void)avx2;
    const Sums f = sums_portable(p, n);
#endif
    // No sum of at most 2^63 finite float squares overflows a double: sumsq is finite iff every
    // element was.
    if (!std::isfinite(f.sumsq)) return chunk_stats_careful(p, n);
    r.finite = std::uint64_t(n);
    r.sumsq = f.sumsq;
    r.max_abs = f.max_abs;
    r.mean = f.sum / double(n);
    r.m2 = f.sumsq - f.sum * r.mean;
    if (!(r.m2 * kMaxCancellation >= f.sumsq)) r.m2 = centered_m2<false>(p, n, r.mean, r.finite);
    return r;
}

// Chan et al.'s pairwise update of (count, mean, M2), plus the order-free parts.
void merge_into(Partial& a, const Partial& b) {
    a.nonfinite += b.nonfinite;
    a.sumsq += b.sumsq;
    a.max_abs = std::max(a.max_abs, b.max_abs);
    if (b.finite == 0) return;
    if (a.finite == 0) {
        a.finite = b.finite;
        a.mean = b.mean;
        a.m2 = b.m2;
        return;
    }
    const double na = double(a.finite);
    const double nb = double(b.finite);
    const double n = na + nb;
    const double delta = b.mean - a.mean;
    a.mean += delta * (nb / n);
    a.m2 += b.m2 + delta * delta * (na * nb / n);
    a.finite += b.finite;
}

bool supported_dtype(at::ScalarType t) {
    return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

class CpuGradStatsCollector final : public GradStatsCollector {
  public:
    explicit CpuGradStatsCollector(GradShard shard) : shard_(shard) {
        if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
            throw std::invalid_argument("cpu grad stats: shard " + std::to_string(shard.index) + " of " +
                                        std::to_string(shard.count));
    }

    void prepare(const std::vector<AgentBlock>& blocks) override {
        std::vector<const AgentBlock*> order;
        order.reserve(blocks.size());
        for (const auto& b : blocks) order.push_back(&b);
        std::stable_sort(order.begin(), order.end(),
                         [](const AgentBlock* x, const AgentBlock* y) { return x->id < y->id; });

        blocks_.clear();
        slots_.clear();
        for (const AgentBlock* b : order) {
            BlockPlan bp;
            bp.id = b->id;
            bp.first_slot = slots_.size();
            for (const auto& p : b->params) {
                Slot s;
                s.param = p;
                slots_.push_back(std::move(s));
            }
            bp.end_slot = slots_.size();
            blocks_.push_back(bp);
        }
        results_.clear();
        results_.reserve(blocks_.size());
        planned_ = false;  // grads usually do not exist yet; the plan waits for the first collect()
    }

    void collect() override {
        if (!planned_ || plan_stale()) rebuild_plan();

        // Storage may move between steps (zero_grad(set_to_none), optimizers replacing .grad), so the
        // data pointers are read afresh every time; only the chunk plan is kept.
        for (auto& s : slots_) {
            if (!s.defined) continue;
            const at::Tensor& g = s.param.grad();
            if (!g.is_cpu()) throw std::invalid_argument("cpu grad stats: gradient is not on the CPU");
            if (s.dense) {
                s.data = g.data_ptr();
            } else {
                s.staging.copy_(g);
                s.data = s.staging.data_ptr();
            }
        }

        const auto n_chunks = static_cast<std::int64_t>(chunks_.size());
        auto body = [this](std::int64_t begin, std::int64_t end) {
            for (std::int64_t c = begin; c < end; ++c) partials_[c] = run_chunk(chunks_[c]);
        };
        if (total_elems_ < kSerialBelowElems) {
            body(0, n_chunks);
        } else {
            at::parallel_for(0, n_chunks, 1, body);
        }

        results_.clear();
        for (const auto& bp : blocks_) {
            if (!bp.present) continue;
            Partial acc;
            for (std::size_t c = bp.first_chunk; c < bp.end_chunk; ++c) merge_into(acc, partials_[c]);
            BlockGradStats st;
            st.block_id = bp.id;
            st.numel = bp.numel;
            st.nonfinite_count = acc.nonfinite;
            st.l2_norm = std::sqrt(acc.sumsq);
            st.max_abs = acc.max_abs;
            st.mean = acc.mean;
            st.variance = acc.finite > 0 ? acc.m2 / double(acc.finite) : 0.0;
            results_.push_back(st);
        }
    }

    const std::vector<BlockGradStats>& results() override { return results_; }

  private:
    // One parameter. The signature fields (defined .. dense) are what the plan was built for.
    struct Slot {
        at::Tensor param;
        bool defined = false;
        std::int64_t numel = 0;
        at::ScalarType dtype = at::kFloat;
        // Non-overlapping and dense: the elements fill [data_ptr, data_ptr + numel) in some order,
        // which is all a reduction needs, so transposed or channels-last grads are read in place.
        bool dense = true;
        at::Tensor staging;  // contiguous copy of a grad that is not dense (slices with a step,
                             // expanded), reused every step
        const void* data = nullptr;
    };
    struct BlockPlan {
        int id = 0;
        std::size_t first_slot = 0, end_slot = 0;
        std::size_t first_chunk = 0, end_chunk = 0;
        bool present = false;  // at least one defined grad
        std::uint64_t numel = 0;
    };
    struct Chunk {
        std::size_t slot = 0;
        std::int64_t begin = 0, end = 0;
    };

    // True when some grad appeared, vanished, or changed size, dtype, layout or shape (the staging
    // copy needs the exact shape).
    bool plan_stale() const {
        for (const auto& s : slots_) {
            const at::Tensor& g = s.param.grad();
            if (g.defined() != s.defined) return true;
            if (!g.defined()) continue;
            if (g.numel() != s.numel || g.scalar_type() != s.dtype ||
                g.is_non_overlapping_and_dense() != s.dense)
                return true;
            if (!s.dense && !g.sizes().equals(s.staging.sizes())) return true;
        }
        return false;
    }

    void rebuild_plan() {
        planned_ = false;  // until it completes: a throw below leaves no half-built plan in use
        chunks_.clear();
        total_elems_ = 0;
        for (auto& bp : blocks_) {
            bp.present = false;
            bp.numel = 0;
            bp.first_chunk = chunks_.size();
            for (std::size_t i = bp.first_slot; i < bp.end_slot; ++i) {
                Slot& s = slots_[i];
                const at::Tensor& g = s.param.grad();
                s.defined = g.defined();
                s.data = nullptr;
                if (!s.defined) {
                    s.staging = at::Tensor();
                    continue;
                }
                if (!supported_dtype(g.scalar_type()))
                    throw std::invalid_argument(std::string("cpu grad stats: unsupported gradient dtype ") +
                                                c10::toString(g.scalar_type()));
                if (g.layout() != at::kStrided)
                    throw std::invalid_argument(
                        "cpu grad stats: only strided (dense) gradients are supported");
                s.numel = g.numel();
                s.dtype = g.scalar_type();
                s.dense = g.is_non_overlapping_and_dense();
                s.staging = s.dense ? at::Tensor() : at::empty_like(g, at::MemoryFormat::Contiguous);
                bp.present = true;
                // This rank's part of the gradient (all of it unless sharded).
                const std::int64_t first = s.numel * shard_.index / shard_.count;
                const std::int64_t last = s.numel * (shard_.index + 1) / shard_.count;
                bp.numel += std::uint64_t(last - first);
                total_elems_ += last - first;
                for (std::int64_t off = first; off < last; off += kChunkElems)
                    chunks_.push_back(Chunk{i, off, std::min(off + kChunkElems, last)});
            }
            bp.end_chunk = chunks_.size();
        }
        partials_.assign(chunks_.size(), Partial{});
        planned_ = true;
    }

    Partial run_chunk(const Chunk& c) const {
        const Slot& s = slots_[c.slot];
        const std::int64_t n = c.end - c.begin;
        switch (s.dtype) {
            case at::kFloat:
                return chunk_stats(static_cast<const float*>(s.data) + c.begin, n, avx2_);
            case at::kBFloat16:
                return chunk_stats(static_cast<const c10::BFloat16*>(s.data) + c.begin, n, avx2_);
            case at::kHalf:
                return chunk_stats(static_cast<const c10::Half*>(s.data) + c.begin, n, avx2_);
            default:
                return Partial{};  // unreachable: rebuild_plan() rejects other dtypes
        }
    }

    std::vector<BlockPlan> blocks_;  // ascending by id
    std::vector<Slot> slots_;
    std::vector<Chunk> chunks_;  // grouped by block, in slot order, then by offset
    std::vector<Partial> partials_;
    std::vector<BlockGradStats> results_;
    std::int64_t total_elems_ = 0;
    bool planned_ = false;
    GradShard shard_;
    // SP_GRAD_STATS_PORTABLE (any value) forces the portable pass: how tests cover it on AVX2 machines.
    const bool avx2_ = cpu_has_avx2() && std::getenv("SP_GRAD_STATS_PORTABLE") == nullptr;
};

}  // namespace

std::unique_ptr<GradStatsCollector> make_cpu_grad_stats_collector(GradShard shard) {
    return std::make_unique<CpuGradStatsCollector>(shard);
}

}  // namespace sp::agent
