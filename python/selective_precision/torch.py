"""``sp.torch.apply(model, agent)``: every registered block computes in its routed format.

As ``sp-trainer``'s reference runtime does (agent/include/sp/agent/precision_runtime.h):

* each block's weights are materialized in its format after every optimizer step (INT8 and FP8
  with a scale per output row, INT4 per group, BF16 per element) from fp32 masters, and the
  optimizer steps the masters with the gradients taken at the materialized weights;
* the input of each ``nn.Linear`` in a block, and the gradient arriving at its output, are rounded
  to the block's format per row (per token), with the same C++ quantizers (``sp/quantize.h``);
* bytes are counted as stored, and the linear inputs reach the SNR profiling at its cadence.

Call it after ``agent.register_blocks`` and before the first step. Without it the agent monitors
and decides, and a runtime of the user's own reads ``agent.precisions``.
"""

import torch

from . import _core


class _RoundInput(torch.autograd.Function):
    """Forward: the input rounded to the format; backward: the gradient straight through."""

    @staticmethod
    def forward(ctx, x, precision, group):
        return _core.round_rows(x, precision, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class _RoundGradient(torch.autograd.Function):
    """Forward: the identity; backward: the gradient rounded to the format."""

    @staticmethod
    def forward(ctx, x, precision, group):
        ctx.precision, ctx.group = precision, group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _core.round_rows(grad, ctx.precision, ctx.group), None, None


def _linear_layers(block):
    """(layer index, nn.Linear) for each linear layer of a block; the index is its weight's place
    among the block's parameters of two or more dimensions, as the agent's profiler counts layers."""
    index = {}
    for param in block.parameters():
        if param.dim() >= 2:
            index[id(param)] = len(index)
    return [(index[id(m.weight)], m) for m in block.modules()
            if isinstance(m, torch.nn.Linear) and id(m.weight) in index]


class _BlockHooks:
    """The hooks of one block: open the step and materialize before its forward; round and observe
    each linear layer's input; round the gradient at each linear layer's output."""

    def __init__(self, agent, block_id):
        self.agent, self.core, self.block = agent, agent._core, block_id
        self.group = agent._core.int4_group_size

    def before_block(self, module, inputs):
        if self.core.before_forward(torch.is_grad_enabled()):
            self.agent._sync_map()
            self.agent._profiling = self.core.wants_layer_inputs()

    def before_linear(self, layer):
        def hook(module, inputs):
            x = inputs[0]
            if self.agent._profiling and torch.is_grad_enabled():
                self.core.observe_layer_input(self.block, layer, x.detach())
            rounded = _RoundInput.apply(x, self.agent._map[self.block], self.group)
            return (rounded,) + tuple(inputs[1:])
        return hook

    def after_linear(self, module, inputs, output):
        if not output.requires_grad:
            return output
        return _RoundGradient.apply(output, self.agent._map[self.block], self.group)


def apply(model, agent):
    """Makes every block registered with ``agent`` compute in its routed format (see the module's
    documentation). ``model`` is the module the blocks belong to; returns it."""
    agent._require_blocks()
    core = agent._core
    if core.current_step > 0 or core.step_open:
        raise RuntimeError("sp.torch.apply: call it before the first step")
    for i, block in enumerate(agent._modules):
        for p in block.parameters():
            if p.dtype != torch.float32:
                raise ValueError("sp.torch.apply: block '%s' has a %s parameter; the runtime keeps fp32 "
                                 "masters" % (agent._names[i], p.dtype))
    core.attach_runtime()
    agent._profiling = False
    handles = []
    for block_id, block in enumerate(agent._modules):
        hooks = _BlockHooks(agent, block_id)
        handles.append(block.register_forward_pre_hook(hooks.before_block))
        for layer, linear in _linear_layers(block):
            handles.append(linear.register_forward_pre_hook(hooks.before_linear(layer)))
            handles.append(linear.register_forward_hook(hooks.after_linear))
    agent._hook_handles = handles
    return model
