#pragma once
// Items in descending order of a double, sorted only as far as they are read: for the budget
// planner, which reads its moves largest gain first and usually stops after a quarter of them (once
// nothing fits any more), so a full sort would mostly order moves nobody reads. One counting pass
// puts the items into buckets by the value's float bits (rounding to float and the bits' order are
// both monotone in the value); a bucket is sorted when the reader reaches it, by the value itself,
// largest first, equal values in index order (a stable order).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sp/budget.h"

namespace sp::detail {

// The key that sorts floats in descending order as unsigned integers: larger values first, -0 and +0
// equal (as `==` has them).
inline std::uint32_t descending_key(float value) {
    if (value == 0.0F) value = 0.0F;  // -0 -> +0
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    const std::uint32_t ascending = (bits >> 31) != 0 ? ~bits : bits | (std::uint32_t(1) << 31);
    return ~ascending;
}

// A bucket holds the values whose float bits share their top 16 bits (128 buckets a binade, values
// within 1/128 of each other); the last of kBuckets holds the rest, the smallest values, which a plan
// seldom reaches: 4,096 buckets cover 32 binades below the largest value.
constexpr unsigned kBucketShift = 16;
constexpr std::uint32_t kBuckets = 4096;

// Buckets items [0, count) of `items` by value_of(item) (a double, not NaN). At most 2^32 items.
template <class Item, class ValueOf>
void assign_buckets(DescendingBuckets& d, const std::vector<Item>& items, std::size_t count,
                    ValueOf value_of) {
    d.keys.resize(count);
    std::uint32_t lo = ~std::uint32_t(0);
    for (std::size_t i = 0; i < count; ++i) {
        d.keys[i] = descending_key(float(value_of(items[i])));
        lo = std::min(lo, d.keys[i]);
    }
    const auto bucket_of = [lo](std::uint32_t key) {
        return std::min((key >> kBucketShift) - (lo >> kBucketShift), kBuckets - 1);
    };
    d.starts.assign(kBuckets + 1, 0);
    for (std::size_t i = 0; i < count; ++i) ++d.starts[bucket_of(d.keys[i]) + 1];
    for (std::size_t b = 1; b <= kBuckets; ++b) d.starts[b] += d.starts[b - 1];
    // Each bucket filled from its start, in index order.
    d.fill.assign(d.starts.begin(), d.starts.end());
    d.entries.resize(count);
    for (std::size_t i = 0; i < count; ++i)
        d.entries[d.fill[bucket_of(d.keys[i])]++] = {value_of(items[i]), std::uint32_t(i)};
}

// Calls visit(index) for each item assigned, largest value first (equal values: lower index first),
// until visit returns false.
template <class Visit>
void visit_descending(DescendingBuckets& d, Visit visit) {
    using Entry = DescendingBuckets::Entry;
    const auto before = [](const Entry& a, const Entry& b) {
        return a.value > b.value || (a.value == b.value && a.index < b.index);
    };
    for (std::size_t b = 0; b + 1 < d.starts.size(); ++b) {
        const auto first = d.entries.begin() + std::ptrdiff_t(d.starts[b]);
        const auto last = d.entries.begin() + std::ptrdiff_t(d.starts[b + 1]);
        std::sort(first, last, before);
        for (auto e = first; e != last; ++e)
            if (!visit(e->index)) return;
    }
}

}  // namespace sp::detail
