#include "sp/layout.h"

namespace sp {

BlockLayout uniform_layout(int count, std::uint64_t bytes_bf16) {
    BlockLayout layout;
    layout.reserve(std::size_t(count > 0 ? count : 0));
    for (int i = 0; i < count; ++i) layout.push_back({i, "blocks." + std::to_string(i), bytes_bf16});
    return layout;
}

}  // namespace sp
