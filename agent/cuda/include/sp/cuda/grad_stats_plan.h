#pragma once
// The host half of the fused CUDA gradient-statistics pass: a plan that cuts every registered
// gradient tensor into chunks, one CUDA thread block each. Pure C++ (no CUDA headers, no CUDA
// runtime), so it builds and is unit-tested everywhere; the launcher (grad_stats_launcher.h) uploads
// it once and reuses it until gradient storage moves.
//
// 64-bit indexing lives here: a chunk's start address is computed on the host in 64-bit arithmetic,
// and a chunk holds at most max_chunk_elems() elements, so the kernel indexes within a chunk with
// 32-bit integers even for tensors of more than 2^31 elements.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sp::cuda {

enum class GradDType : std::uint8_t { f32 = 0, bf16 = 1, f16 = 2 };

inline std::size_t element_size(GradDType t) {
    return t == GradDType::f32 ? 4 : 2;
}

// One gradient: a dense device buffer of `numel` elements (in any order: the statistics do not
// depend on it) belonging to block `block` (0 .. n_blocks-1, not necessarily sorted).
struct GradTensorDesc {
    const void* data = nullptr;
    std::int64_t numel = 0;
    GradDType dtype = GradDType::f32;
    std::int32_t block = 0;
};

// Bytes per vector load: 16 (uint4), i.e. 4 fp32 or 8 bf16/fp16 elements.
constexpr std::size_t kVectorBytes = 16;

// One chunk: elements [0, numel) at address `addr`, read as `head` scalars until the first 16-byte
// boundary, then (numel - head) / vec_elems vector loads, then the remaining scalars. The layout is
// what the device reads, so it is kept small and trivially copyable (24 bytes).
struct GradChunk {
    std::uint64_t addr = 0;      // device address of the chunk's first element
    std::uint32_t numel = 0;     // > 0: empty tensors have no chunks
    std::int32_t block = 0;      // dense block index
    std::uint8_t dtype = 0;      // GradDType
    std::uint8_t head = 0;       // scalar elements before the first aligned vector (< vec_elems)
    std::uint8_t vec_elems = 1;  // elements per 16-byte vector load (4 or 8)
    std::uint8_t reserved = 0;
    // First element after the vector body (head <= numel always).
    std::uint32_t tail_start() const { return head + (numel - head) / vec_elems * vec_elems; }
};
static_assert(sizeof(GradChunk) == 24, "GradChunk is uploaded as is; keep it packed");

struct GradStatsPlan {
    int n_blocks = 0;
    std::int64_t chunk_elems = 0;
    // Grouped by block (ascending), then by tensor in the order given, then by offset: block b's
    // chunks are [block_first_chunk[b], block_first_chunk[b + 1]), so the per-block merge reads a
    // contiguous range and its order (hence its result) is fixed.
    std::vector<GradChunk> chunks;
    std::vector<std::int64_t> block_first_chunk;  // n_blocks + 1 entries
    std::vector<std::uint64_t> block_numel;       // every element, empty tensors included (zero)
    std::vector<std::uint32_t> block_tensors;     // tensors per block, empty ones included
    std::uint64_t total_elems = 0;
    std::uint64_t total_bytes = 0;  // gradient bytes one pass reads
};

// Default chunk: 64K elements (256 KB fp32, 128 KB bf16): 256 threads x 32 vector loads of 16 bytes
// for bf16, enough work per thread block that the per-chunk partial (40 bytes) and the block merge
// are noise, and enough chunks (16K for a 1B-parameter model) to fill any GPU.
constexpr std::int64_t kDefaultChunkElems = std::int64_t{1} << 16;
// Chunks are indexed with 32-bit integers on the device and must keep vector loads aligned.
constexpr std::int64_t max_chunk_elems() {
    return std::int64_t{1} << 30;
}

// Builds the plan. std::invalid_argument for: n_blocks < 0, a block index outside [0, n_blocks), a
// negative numel, a null pointer with numel > 0, a pointer not aligned to its element size (the
// device cannot load it), a chunk_elems that is not a positive multiple of 8 (so that every chunk of a
// tensor keeps the tensor's alignment) or exceeds max_chunk_elems(), or more than 2^31 - 1 chunks (one
// grid). Tensors with numel == 0 get no chunk but count in block_tensors.
GradStatsPlan build_grad_stats_plan(const std::vector<GradTensorDesc>& tensors, int n_blocks,
                                    std::int64_t chunk_elems = kDefaultChunkElems);

}  // namespace sp::cuda
