#pragma once
// The blocks a policy routes: stable integer ids, human names, and their size at BF16.
#include <cstdint>
#include <string>
#include <vector>

#include "sp/precision.h"

namespace sp {

struct BlockInfo {
    int id = 0;                    // dense 0..n-1 in registration order
    std::string name;              // e.g. "blocks.3"
    std::uint64_t bytes_bf16 = 0;  // parameter bytes when the block is held in BF16

    // Size at another precision, by element width (what the seed's estimate counts).
    double bytes_at(Precision p) const { return double(bytes_bf16) * bytes_per_element(p) / 2.0; }
};

using BlockLayout = std::vector<BlockInfo>;

// `count` blocks named "blocks.<i>", each of `bytes_bf16` bytes.
BlockLayout uniform_layout(int count, std::uint64_t bytes_bf16 = 1);

}  // namespace sp
