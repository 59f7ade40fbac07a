// The CUDA gradient-statistics chunk planner (pure C++, no GPU): every element of every non-empty
// tensor is covered by exactly one chunk, chunks are grouped by block in a fixed order, vector loads
// start on 16-byte boundaries, 64-bit sizes and offsets survive, and bad input is rejected. Device
// pointers are fake addresses: the planner never dereferences them.
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <vector>

#include "sp/cuda/grad_stats_plan.h"

using sp::cuda::build_grad_stats_plan;
using sp::cuda::GradChunk;
using sp::cuda::GradDType;
using sp::cuda::GradStatsPlan;
using sp::cuda::GradTensorDesc;

namespace {

const void* fake_ptr(std::uint64_t addr) {
    // Never dereferenced: the plan only does arithmetic on addresses.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(addr));
}

GradTensorDesc tensor(std::uint64_t addr, std::int64_t numel, GradDType dtype, int block) {
    GradTensorDesc t;
    t.data = fake_ptr(addr);
    t.numel = numel;
    t.dtype = dtype;
    t.block = block;
    return t;
}

// Checks every structural promise of `plan` for `tensors`; failures name the broken promise.
void check_plan(const GradStatsPlan& plan, const std::vector<GradTensorDesc>& tensors, int n_blocks,
                std::int64_t chunk_elems) {
    QCOMPARE(plan.n_blocks, n_blocks);
    QCOMPARE(plan.chunk_elems, chunk_elems);
    QCOMPARE(plan.block_first_chunk.size(), std::size_t(n_blocks) + 1);
    QCOMPARE(plan.block_first_chunk.front(), std::int64_t{0});
    QCOMPARE(plan.block_first_chunk.back(), std::int64_t(plan.chunks.size()));

    // Per tensor (keyed by start address; the tests use distinct ones), the chunks in plan order must
    // tile [addr, addr + numel * esize) exactly: first at the start, each at the previous one's end.
    std::map<std::uint64_t, std::uint64_t> next_addr, end_addr;
    std::vector<std::uint64_t> numel(std::size_t(n_blocks), 0);
    std::vector<std::uint32_t> count(std::size_t(n_blocks), 0);
    std::uint64_t total = 0, bytes = 0;
    for (const auto& t : tensors) {
        const auto a = std::uint64_t(reinterpret_cast<std::uintptr_t>(t.data));
        numel[std::size_t(t.block)] += std::uint64_t(t.numel);
        count[std::size_t(t.block)] += 1;
        total += std::uint64_t(t.numel);
        bytes += std::uint64_t(t.numel) * sp::cuda::element_size(t.dtype);
        if (t.numel == 0) continue;
        next_addr[a] = a;
        end_addr[a] = a + std::uint64_t(t.numel) * sp::cuda::element_size(t.dtype);
    }
    QCOMPARE(plan.block_numel, numel);
    QCOMPARE(plan.block_tensors, count);
    QCOMPARE(plan.total_elems, total);
    QCOMPARE(plan.total_bytes, bytes);

    for (int b = 0; b < n_blocks; ++b) {
        const std::int64_t first = plan.block_first_chunk[std::size_t(b)];
        const std::int64_t last = plan.block_first_chunk[std::size_t(b) + 1];
        QVERIFY2(first <= last, "block ranges ascend");
        for (std::int64_t c = first; c < last; ++c) {
            const GradChunk& k = plan.chunks[std::size_t(c)];
            QCOMPARE(k.block, b);
            QVERIFY2(k.numel > 0 && std::int64_t(k.numel) <= chunk_elems,
                     "chunk size within (0, chunk_elems]");
            const std::uint64_t esize = sp::cuda::element_size(GradDType(k.dtype));
            QCOMPARE(std::size_t(k.vec_elems), sp::cuda::kVectorBytes / esize);
            QVERIFY2(k.head < k.vec_elems && k.head <= k.numel, "head shorter than one vector");
            // The vector body starts on a 16-byte boundary unless the chunk ends before one.
            if (k.head < k.numel)
                QCOMPARE((k.addr + k.head * esize) % sp::cuda::kVectorBytes, std::uint64_t{0});
            QVERIFY2(k.tail_start() <= k.numel && k.numel - k.tail_start() < k.vec_elems,
                     "tail shorter than one vector");
            QCOMPARE((k.tail_start() - k.head) % k.vec_elems, 0u);
            // Which tensor: the one whose range holds the chunk.
            auto it = end_addr.upper_bound(k.addr);
            QVERIFY2(it != end_addr.begin(), "chunk inside some tensor");
            --it;
            const std::uint64_t start = it->first;
            QCOMPARE(k.addr, next_addr[start]);  // no gap, no overlap, in offset order
            next_addr[start] = k.addr + k.numel * esize;
            QVERIFY2(next_addr[start] <= it->second, "chunk ends inside its tensor");
        }
    }
    for (const auto& [start, end] : end_addr) QCOMPARE(next_addr[start], end);  // fully covered
}

}  // namespace

class TestGradStatsPlan : public QObject {
    Q_OBJECT

  private slots:
    void empty_inputs() {
        const GradStatsPlan none = build_grad_stats_plan({}, 3);
        check_plan(none, {}, 3, sp::cuda::kDefaultChunkElems);
        QVERIFY(none.chunks.empty());

        // Empty tensors have no chunk (even with a null pointer) but count as the block's tensors.
        const std::vector<GradTensorDesc> t = {tensor(0, 0, GradDType::f32, 1),
                                               tensor(0x1000, 0, GradDType::bf16, 1)};
        const GradStatsPlan p = build_grad_stats_plan(t, 2);
        check_plan(p, t, 2, sp::cuda::kDefaultChunkElems);
        QVERIFY(p.chunks.empty());
        QCOMPARE(p.block_tensors[1], 2u);

        QVERIFY(build_grad_stats_plan({}, 0).block_first_chunk == std::vector<std::int64_t>{0});
    }

    void odd_sizes_mixed_dtypes() {
        constexpr std::int64_t chunk = 64;
        std::vector<GradTensorDesc> t;
        std::uint64_t addr = 0x7f0000000000;
        const GradDType dtypes[] = {GradDType::f32, GradDType::bf16, GradDType::f16};
        int i = 0;
        for (std::int64_t n : {1, 2, 3, 7, 8, 9, 63, 64, 65, 127, 129, 1000, 4097}) {
            const GradDType d = dtypes[i % 3];
            t.push_back(tensor(addr, n, d, i % 4));
            addr += std::uint64_t(n) * sp::cuda::element_size(d) + 256;  // keeps every start 16-byte aligned
            addr = (addr + 15) / 16 * 16;
            ++i;
        }
        const GradStatsPlan p = build_grad_stats_plan(t, 4, chunk);
        check_plan(p, t, 4, chunk);
        std::uint64_t want = 0;
        for (const auto& x : t) want += std::uint64_t((x.numel + chunk - 1) / chunk);
        QCOMPARE(p.chunks.size(), std::size_t(want));
        for (const GradChunk& k : p.chunks) QCOMPARE(int(k.head), 0);  // aligned starts need no head
    }

    void misaligned_starts() {
        // Storage offsets: every element-aligned start within a 16-byte line, for each dtype, with
        // sizes shorter and longer than the head.
        constexpr std::int64_t chunk = 32;
        std::vector<GradTensorDesc> t;
        const std::uint64_t line = 0x10000000;
        int k = 0;
        for (GradDType d : {GradDType::f32, GradDType::bf16, GradDType::f16}) {
            const std::uint64_t es = sp::cuda::element_size(d);
            for (std::uint64_t off = 0; off < 16; off += es) {
                for (std::int64_t n : {1, 3, 5, 31, 33, 100}) {
                    ++k;
                    t.push_back(tensor(line * std::uint64_t(k) + off, n, d, k % 3));
                }
            }
        }
        const GradStatsPlan p = build_grad_stats_plan(t, 3, chunk);
        check_plan(p, t, 3, chunk);
        bool saw_head = false;
        for (const GradChunk& c : p.chunks) saw_head = saw_head || c.head > 0;
        QVERIFY(saw_head);
    }

    void more_than_2_pow_31_elements() {
        // Fake pointers: three tensors past 2^31 elements (one past 2^32 bytes of offsets), one at
        // the default chunk size and one with the largest chunks.
        const std::uint64_t base = std::uint64_t{1} << 44;
        const std::int64_t big = (std::int64_t{1} << 31) + 12345;
        const std::int64_t huge = (std::int64_t{1} << 33) + 3;
        const std::vector<GradTensorDesc> t = {
            tensor(base, big, GradDType::f32, 0),
            tensor(base + (std::uint64_t{1} << 40), huge, GradDType::bf16, 1),
            tensor(base + (std::uint64_t{1} << 41) + 6, big, GradDType::f16, 1),
        };
        const GradStatsPlan p = build_grad_stats_plan(t, 2);
        check_plan(p, t, 2, sp::cuda::kDefaultChunkElems);
        QCOMPARE(p.block_numel[1], std::uint64_t(huge) + std::uint64_t(big));
        const GradChunk& last_of_huge =
            p.chunks[std::size_t(p.block_first_chunk[1]) + std::size_t((huge - 1) >> 16)];
        QCOMPARE(last_of_huge.addr,
                 base + (std::uint64_t{1} << 40) + std::uint64_t((huge - 1) >> 16 << 16) * 2);
        QCOMPARE(last_of_huge.numel, std::uint32_t(huge % (std::int64_t{1} << 16)));

        const GradStatsPlan coarse = build_grad_stats_plan(t, 2, sp::cuda::max_chunk_elems());
        check_plan(coarse, t, 2, sp::cuda::max_chunk_elems());
        QCOMPARE(coarse.chunks.size(), std::size_t(3 + 9 + 3));
    }

    void block_grouping_is_stable() {
        // Given out of block order: chunks come grouped by block, registration order within a block.
        const std::vector<GradTensorDesc> t = {
            tensor(0x1000, 10, GradDType::f32, 2), tensor(0x2000, 20, GradDType::bf16, 0),
            tensor(0x3000, 30, GradDType::f16, 2), tensor(0x4000, 0, GradDType::f32, 3),
            tensor(0x5000, 40, GradDType::f32, 0),
        };
        const GradStatsPlan p = build_grad_stats_plan(t, 5, 16);
        check_plan(p, t, 5, 16);
        std::vector<std::uint64_t> firsts;
        for (const GradChunk& c : p.chunks)
            if (firsts.empty() || c.addr < firsts.back() || c.addr >= firsts.back() + 0x1000)
                firsts.push_back(c.addr);
        QCOMPARE(firsts, (std::vector<std::uint64_t>{0x2000, 0x5000, 0x1000, 0x3000}));
        // Blocks 1 (no tensors), 3 (one empty tensor) and 4 have empty chunk ranges.
        for (int b : {1, 3, 4})
            QCOMPARE(p.block_first_chunk[std::size_t(b)], p.block_first_chunk[std::size_t(b) + 1]);
        QCOMPARE(p.block_tensors, (std::vector<std::uint32_t>{2, 0, 2, 1, 0}));
    }

    void rejects_bad_input() {
        auto rejected = [](const std::vector<GradTensorDesc>& t, int n_blocks, std::int64_t chunk) {
            try {
                (void)build_grad_stats_plan(t, n_blocks, chunk);
            } catch (const std::invalid_argument&) {
                return true;
            }
            return false;
        };
        const std::int64_t c = sp::cuda::kDefaultChunkElems;
        QVERIFY(rejected({}, -1, c));
        QVERIFY(rejected({tensor(0x1000, 4, GradDType::f32, 2)}, 2, c));   // block out of range
        QVERIFY(rejected({tensor(0x1000, 4, GradDType::f32, -1)}, 2, c));  // negative block
        QVERIFY(rejected({tensor(0x1000, -1, GradDType::f32, 0)}, 1, c));  // negative numel
        QVERIFY(rejected({tensor(0, 4, GradDType::f32, 0)}, 1, c));        // null with elements
        QVERIFY(rejected({tensor(0x1002, 4, GradDType::f32, 0)}, 1, c));   // fp32 not 4-aligned
        QVERIFY(rejected({tensor(0x1001, 4, GradDType::bf16, 0)}, 1, c));  // bf16 not 2-aligned
        QVERIFY(rejected({tensor(0x1000, 4, GradDType(7), 0)}, 1, c));     // unknown dtype
        for (std::int64_t bad :
             {std::int64_t{0}, std::int64_t{-8}, std::int64_t{12}, sp::cuda::max_chunk_elems() + 8})
            QVERIFY(rejected({tensor(0x1000, 4, GradDType::f32, 0)}, 1, bad));
        // More chunks than one grid can hold: 2^31 chunks of 8 elements.
        QVERIFY(rejected({tensor(0x1000, std::int64_t{1} << 34, GradDType::bf16, 0)}, 1, 8));
        QVERIFY(!rejected({tensor(0x1002, 4, GradDType::bf16, 0)}, 1, c));
    }
};

QTEST_GUILESS_MAIN(TestGradStatsPlan)
#include "test_grad_stats_plan.moc"
