// AgentBlocks from LibTorch modules, and the layout the policy sees. block.h only forward-declares
// torch::nn::Module; the module API (<torch/nn/module.h>, seconds to compile) stays in this file.
#include <torch/nn/module.h>

#include <stdexcept>

#include "sp/agent/block.h"

namespace sp::agent {

std::vector<AgentBlock> blocks_from_modules(const std::vector<NamedModule>& modules) {
    std::vector<AgentBlock> blocks;
    blocks.reserve(modules.size());
    for (const auto& [name, module] : modules) {
        if (module == nullptr)
            throw std::invalid_argument("blocks_from_modules: null module for '" + name + "'");
        AgentBlock b;
        b.id = static_cast<int>(blocks.size());
        b.name = name;
        // named_parameters() returns handles that share storage with the module's own parameters, so
        // their .grad() is what backward() fills in.
        for (const auto& item : module->named_parameters(/*recurse=*/true)) {
            b.param_names.push_back(item.key());
            b.params.push_back(item.value());
        }
        blocks.push_back(std::move(b));
    }
    return blocks;
}

BlockLayout layout_of(const std::vector<AgentBlock>& blocks) {
    BlockLayout layout;
    layout.reserve(blocks.size());
    for (const auto& b : blocks) {
        std::uint64_t numel = 0;
        for (const auto& p : b.streamed()) numel += static_cast<std::uint64_t>(p.numel());
        BlockInfo info;
        info.id = b.id;
        info.name = b.name;
        info.bytes_bf16 = 2 * numel;
        layout.push_back(std::move(info));
    }
    return layout;
}

}  // namespace sp::agent
