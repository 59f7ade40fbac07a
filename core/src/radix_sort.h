#pragma once
// A stable sort of items by a double, largest first, for the budget planner's moves: tens of thousands
// of items in a few linear passes, where a comparison sort or a heap costs a mispredicted branch per
// comparison. It radix-sorts on the value rounded to float (4 byte passes instead of 8; rounding is
// monotone, so only items whose floats are equal can be out of order), then puts each run of equal
// floats in order by the double itself, stably.
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

// Sorts `items` by `key_of(item)` (32 bits) ascending, stably; `scratch` is reused storage. A pass whose
// byte is the same for every item is skipped.
template <class Item, class KeyOf>
void radix_sort_32(std::vector<Item>& items, std::vector<Item>& scratch, KeyOf key_of) {
    constexpr int kBytes = 4;
    std::array<std::array<std::size_t, 256>, kBytes> counts{};
    for (const Item& item : items) {
        const std::uint32_t key = key_of(item);
        for (int d = 0; d < kBytes; ++d) ++counts[std::size_t(d)][(key >> (8 * d)) & 0xffU];
    }
    scratch.resize(items.size());
    for (int d = 0; d < kBytes; ++d) {
        std::array<std::size_t, 256>& count = counts[std::size_t(d)];
        const std::uint32_t first = items.empty() ? 0 : (key_of(items.front()) >> (8 * d)) & 0xffU;
        if (count[first] == items.size()) continue;
        std::size_t offset = 0;
        for (std::size_t& c : count) {
            const std::size_t here = c;
            c = offset;
            offset += here;
        }
        for (const Item& item : items) scratch[count[(key_of(item) >> (8 * d)) & 0xffU]++] = item;
        items.swap(scratch);
    }
}

// Sorts `items` by `value_of(item)` (a double, not NaN) in descending order, stably.
template <class Item, class ValueOf>
void stable_sort_descending(std::vector<Item>& items, std::vector<Item>& scratch, ValueOf value_of) {
    radix_sort_32(items, scratch, [&](const Item& item) { return descending_key(float(value_of(item))); });
    // Runs of equal floats: insertion sort by the double (runs are short; equal doubles keep their order).
    for (std::size_t i = 1; i < items.size(); ++i) {
        const double v = value_of(items[i]);
        if (!(v > value_of(items[i - 1]))) continue;
        const float f = float(v);
        Item moving = items[i];
        std::size_t j = i;
        while (j > 0 && float(value_of(items[j - 1])) == f && v > value_of(items[j - 1])) {
            items[j] = items[j - 1];
            --j;
        }
        items[j] = moving;
    }
}

}  // namespace sp::detail
