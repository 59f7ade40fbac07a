#pragma once
// A stable sort of items by a double, largest first, for the budget planner's moves: tens of thousands
// of items in a few linear passes, where a comparison sort or a heap costs a mispredicted branch per
// comparison. It radix-sorts (key, index) pairs on the value rounded to float (rounding is monotone,
// so only items whose floats are equal can be out of order), then puts each run of equal floats in
// order by the double itself, stably. The items themselves do not move.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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

// A sort key in the high 32 bits, the item's index in the low 32.
inline std::uint32_t key_part(std::uint64_t k) {
    return std::uint32_t(k >> 32);
}
inline std::uint32_t index_part(std::uint64_t k) {
    return std::uint32_t(k);
}

// Sorts `keys` by their key part ascending, stably, one byte per pass (a pass whose byte is the same for
// every key is skipped; 256 buckets keep the scattered writes few enough to stay in cache). `scratch`
// is reused storage.
inline void radix_sort_keys(std::vector<std::uint64_t>& keys, std::vector<std::uint64_t>& scratch) {
    constexpr std::array<int, 4> kShift = {32, 40, 48, 56};
    constexpr std::uint32_t kMask = 0xff;
    std::array<std::array<std::uint32_t, kMask + 1>, kShift.size()> counts{};
    for (const std::uint64_t k : keys)
        for (std::size_t d = 0; d < kShift.size(); ++d) ++counts[d][(k >> kShift[d]) & kMask];
    scratch.resize(keys.size());
    for (std::size_t d = 0; d < kShift.size(); ++d) {
        std::array<std::uint32_t, kMask + 1>& count = counts[d];
        const std::uint64_t first = keys.empty() ? 0 : (keys.front() >> kShift[d]) & kMask;
        if (count[first] == keys.size()) continue;  // one digit for all: nothing would move
        std::uint32_t offset = 0;
        for (std::uint32_t& c : count) {
            const std::uint32_t here = c;
            c = offset;
            offset += here;
        }
        for (const std::uint64_t k : keys) scratch[count[(k >> kShift[d]) & kMask]++] = k;
        keys.swap(scratch);
    }
}

// The order of the first `count` of `items` by `value_of(item)` (a double, not NaN), largest first,
// stable: `keys` gets one entry per item, whose index_part() is the item's index. At most 2^32 items.
template <class Item, class ValueOf>
void order_descending(const std::vector<Item>& items, std::size_t count, std::vector<std::uint64_t>& keys,
                      std::vector<std::uint64_t>& key_scratch, ValueOf value_of) {
    keys.resize(count);
    for (std::size_t i = 0; i < count; ++i)
        keys[i] = std::uint64_t(descending_key(float(value_of(items[i])))) << 32 | i;
    radix_sort_keys(keys, key_scratch);
    // Runs of equal floats: insertion sort by the double (runs are short; equal doubles keep their order).
    auto value_at = [&](std::size_t i) { return value_of(items[index_part(keys[i])]); };
    for (std::size_t i = 1; i < keys.size(); ++i) {
        if (key_part(keys[i]) != key_part(keys[i - 1])) continue;
        const double v = value_at(i);
        if (!(v > value_at(i - 1))) continue;
        const std::uint64_t moving = keys[i];
        std::size_t j = i;
        while (j > 0 && key_part(keys[j - 1]) == key_part(moving) && v > value_at(j - 1)) {
            keys[j] = keys[j - 1];
            --j;
        }
        keys[j] = moving;
    }
}

}  // namespace sp::detail
