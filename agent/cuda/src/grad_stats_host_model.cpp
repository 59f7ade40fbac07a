#include "sp/cuda/grad_stats_host_model.h"

#include <array>

#include "grad_stats_kernel_math.h"

namespace sp::cuda {

namespace {

using kernel::ChunkPartial;
using kernel::kChunkThreads;
using kernel::kMergeThreads;
using kernel::kWarpSize;
using kernel::Moments;
using kernel::ThreadAcc;

struct HostMemory {
    std::uint16_t load16(const unsigned char* p) const {
        std::uint16_t v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    std::uint32_t load32(const unsigned char* p) const {
        std::uint32_t v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    kernel::Words load128(const unsigned char* p) const {
        kernel::Words w;
        std::memcpy(w.w, p, sizeof w.w);
        return w;
    }
};

template <int kDtype>
ChunkPartial chunk_on_host(const GradChunk& c) {
    const HostMemory mem;
    const double k = kernel::chunk_shift<kDtype>(mem, c);
    std::array<ThreadAcc, kChunkThreads> acc;
    for (std::uint32_t tid = 0; tid < kChunkThreads; ++tid) {
        acc[tid] = kernel::empty_acc();
        kernel::accumulate_chunk<kDtype>(mem, c, acc[tid], k, tid);
    }
    // warp_sum: for off = 16 .. 1, lane i adds lane i + off (lanes past the warp add their own value,
    // as __shfl_down_sync returns it; only lane 0's result is used). Ascending lanes read values not
    // yet updated in this round, as the simultaneous shuffle does.
    for (int w = 0; w < kChunkThreads / kWarpSize; ++w) {
        ThreadAcc* lane = acc.data() + w * kWarpSize;
        for (int off = kWarpSize / 2; off > 0; off >>= 1)
            for (int i = 0; i < kWarpSize; ++i)
                kernel::combine(lane[i], lane[i + off < kWarpSize ? i + off : i]);
    }
    ThreadAcc t = acc[0];
    for (int w = 1; w < kChunkThreads / kWarpSize; ++w) kernel::combine(t, acc[std::size_t(w) * kWarpSize]);
    return kernel::finish_chunk(t, k);
}

BlockMoments block_on_host(const std::vector<ChunkPartial>& partials, std::int64_t begin, std::int64_t end) {
    std::array<Moments, kMergeThreads> tree;
    for (std::uint32_t tid = 0; tid < kMergeThreads; ++tid)
        tree[tid] = kernel::merge_strided(partials.data(), begin, end, tid);
    for (int half = kMergeThreads / 2; half > 0; half >>= 1)
        for (int i = 0; i < half; ++i)
            kernel::merge(tree[std::size_t(i)], tree[std::size_t(i) + std::size_t(half)]);
    return kernel::to_block_moments(tree[0]);
}

}  // namespace

std::vector<BlockMoments> grad_stats_on_host(const GradStatsPlan& plan) {
    std::vector<ChunkPartial> partials;
    partials.reserve(plan.chunks.size());
    for (const GradChunk& c : plan.chunks) {
        switch (c.dtype) {
            case 0:
                partials.push_back(chunk_on_host<0>(c));
                break;
            case 1:
                partials.push_back(chunk_on_host<1>(c));
                break;
            default:
                partials.push_back(chunk_on_host<2>(c));
                break;
        }
    }
    std::vector<BlockMoments> out;
    out.reserve(std::size_t(plan.n_blocks));
    for (int b = 0; b < plan.n_blocks; ++b)
        out.push_back(block_on_host(partials, plan.block_first_chunk[std::size_t(b)],
                                    plan.block_first_chunk[std::size_t(b) + 1]));
    return out;
}

}  // namespace sp::cuda
