#include "sp/cuda/grad_stats_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace sp::cuda {

namespace {

[[noreturn]] void reject(std::size_t tensor, const std::string& why) {
    throw std::invalid_argument("grad stats plan: tensor " + std::to_string(tensor) + ": " + why);
}

}  // namespace

GradStatsPlan build_grad_stats_plan(const std::vector<GradTensorDesc>& tensors, int n_blocks,
                                    std::int64_t chunk_elems) {
    if (n_blocks < 0) throw std::invalid_argument("grad stats plan: negative block count");
    if (chunk_elems <= 0 || chunk_elems % 8 != 0 || chunk_elems > max_chunk_elems())
        throw std::invalid_argument("grad stats plan: chunk_elems " + std::to_string(chunk_elems) +
                                    " is not a positive multiple of 8 up to 2^30");

    GradStatsPlan plan;
    plan.n_blocks = n_blocks;
    plan.chunk_elems = chunk_elems;
    plan.block_numel.assign(std::size_t(n_blocks), 0);
    plan.block_tensors.assign(std::size_t(n_blocks), 0);

    // Validate everything (and count chunks) before building anything.
    std::uint64_t n_chunks = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const GradTensorDesc& t = tensors[i];
        if (t.block < 0 || t.block >= n_blocks) reject(i, "block index out of range");
        if (t.numel < 0) reject(i, "negative numel");
        if (t.dtype != GradDType::f32 && t.dtype != GradDType::bf16 && t.dtype != GradDType::f16)
            reject(i, "unknown dtype");
        if (t.numel == 0) continue;
        if (t.data == nullptr) reject(i, "null data pointer");
        if (reinterpret_cast<std::uintptr_t>(t.data) % element_size(t.dtype) != 0)
            reject(i, "data pointer not aligned to its element size");
        n_chunks += std::uint64_t((t.numel + chunk_elems - 1) / chunk_elems);
    }
    if (n_chunks > std::uint64_t(std::numeric_limits<std::int32_t>::max()))
        throw std::invalid_argument("grad stats plan: more than 2^31 - 1 chunks");

    // Block order, stable within a block: the registration order of its tensors.
    std::vector<std::size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return tensors[a].block < tensors[b].block; });

    plan.chunks.reserve(std::size_t(n_chunks));
    plan.block_first_chunk.assign(std::size_t(n_blocks) + 1, 0);
    int next_block = 0;
    for (const std::size_t i : order) {
        const GradTensorDesc& t = tensors[i];
        while (next_block <= t.block)
            plan.block_first_chunk[std::size_t(next_block++)] = std::int64_t(plan.chunks.size());
        plan.block_tensors[std::size_t(t.block)] += 1;
        plan.block_numel[std::size_t(t.block)] += std::uint64_t(t.numel);
        plan.total_elems += std::uint64_t(t.numel);
        const std::uint64_t esize = element_size(t.dtype);
        plan.total_bytes += std::uint64_t(t.numel) * esize;
        const std::uint64_t base = reinterpret_cast<std::uintptr_t>(t.data);
        const auto vec_elems = std::uint32_t(kVectorBytes / esize);
        for (std::int64_t off = 0; off < t.numel; off += chunk_elems) {
            GradChunk c;
            c.addr = base + std::uint64_t(off) * esize;  // 64-bit: offsets beyond 2^31 elements are fine
            c.numel = std::uint32_t(std::min(chunk_elems, t.numel - off));
            c.block = t.block;
            c.dtype = std::uint8_t(t.dtype);
            c.vec_elems = std::uint8_t(vec_elems);
            const std::uint64_t misalign = c.addr % kVectorBytes;
            const auto to_boundary = std::uint32_t(misalign == 0 ? 0 : (kVectorBytes - misalign) / esize);
            c.head = std::uint8_t(std::min(to_boundary, c.numel));
            plan.chunks.push_back(c);
        }
    }
    while (next_block <= n_blocks)
        plan.block_first_chunk[std::size_t(next_block++)] = std::int64_t(plan.chunks.size());
    return plan;
}

}  // namespace sp::cuda
