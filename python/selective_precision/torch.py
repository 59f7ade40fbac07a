"""``sp.torch.apply(model, agent, optimizer=opt)``: every registered block computes in its routed format.

As ``sp-trainer``'s reference runtime does (agent/include/sp/agent/precision_runtime.h):

* each block's weights are materialized in its format after every optimizer step (INT8 and FP8
  with a scale per output row, INT4 per group, BF16 per element) from masters kept in the
  parameters' own dtype (fp32, or bf16/fp16 for a model that trains in it), and the optimizer steps
  the masters with the gradients taken at the materialized weights;
* the input of each ``nn.Linear`` in a block, and the gradient arriving at its output, are rounded
  to the block's format per row (per token), with the same C++ quantizers (``sp/quantize.h``);
* bytes are counted as stored, and the linear inputs reach the SNR profiling at its cadence.

What it covers (python/README.md, "What apply covers"): ``nn.Linear`` (weights, inputs, output
gradients), ``nn.MultiheadAttention`` (its projections as linear layers: ``_attention.py``) and
``nn.Embedding`` (weights). Every other parameter of one dimension (norms, biases) is materialized as
one row, and GPT-2's ``Conv1D`` as a linear layer whose ``[in, out]`` weight is scaled per output
channel (along dim 1). A parameter of two or more dimensions that none of these computes with (a
convolution, a bare ``nn.Parameter``) raises ``ValueError`` naming it, unless ``module_filter_fn``
leaves its module out.

The parameters hold either the compute copies (a forward may run) or the masters (the optimizer may
step them). With ``optimizer=`` the masters are put back before every ``optimizer.step()``, so any
call order keeps every update; without it, an optimizer step on the compute copies is detected at
the next ``agent.step`` or forward and raises ``RuntimeError`` saying what to change.
``model.state_dict()`` holds the masters at any point of the loop, and ``model.load_state_dict``
makes the loaded values the masters.

Call it after ``agent.register_blocks`` and before the first step. Without it the agent monitors
and decides, and a runtime of the user's own reads ``agent.precisions``.
"""

import types

import torch
import torch.nn.functional as F

from . import _attention, _core

#: The module types ``apply`` covers, and what it rounds for each (python/README.md).
COVERED_MODULES = {
    "torch.nn.Linear": "weight (one scale per output row), input and output gradient (per token)",
    "torch.nn.MultiheadAttention": "in_proj_weight or q/k/v_proj_weight and out_proj, as four linear layers",
    "torch.nn.Embedding": "weight (one scale per embedding row)",
    "Conv1D (GPT-2)": "weight stored [in, out], one scale per output channel (dim 1); input and output gradient",
}


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


class _BlockHooks:
    """The hooks of one block: open the step and materialize before its forward; round and observe
    each linear layer's input; round the gradient at each linear layer's output."""

    def __init__(self, agent, block_id, weights_scope):
        self.agent, self.core, self.block = agent, agent._core, block_id
        self.group = agent._core.int4_group_size
        self.weights_scope = weights_scope

    def compute_format(self):
        """What the block's inputs and output gradients are rounded to: its format, or BF16 in the
        "weights" scope (only its weights are stored in the format)."""
        return "bf16" if self.weights_scope else self.agent._map[self.block]

    def observe_output(self, y, layer):
        """On profiling steps, hands the gradient of the loss at a linear layer's output to the agent
        (the loss estimate, core/POLICY.md rule 23), before the format rounds it."""
        if self.agent._profiling and y.requires_grad:
            y.register_hook(lambda g: self.core.observe_layer_output_grad(self.block, layer, g))

    def before_block(self, module, inputs):
        if self.core.before_forward(torch.is_grad_enabled()):
            self.agent._sync_map()
            self.agent._profiling = self.core.wants_layer_inputs()

    def before_linear(self, layer):
        def hook(module, inputs):
            x = inputs[0]
            if self.agent._profiling and torch.is_grad_enabled():
                self.core.observe_layer_input(self.block, layer, x.detach())
            rounded = _RoundInput.apply(x, self.compute_format(), self.group)
            return (rounded,) + tuple(inputs[1:])
        return hook

    def after_linear(self, layer):
        def hook(module, inputs, output):
            if not output.requires_grad:
                return output
            self.observe_output(output, layer)
            return _RoundGradient.apply(output, self.compute_format(), self.group)
        return hook

    def project(self, x, weight, bias, layer):
        """One linear layer as the two hooks above compute it, for a module that calls no nn.Linear."""
        precision = self.compute_format()
        if self.agent._profiling and torch.is_grad_enabled():
            self.core.observe_layer_input(self.block, layer, x.detach())
        y = F.linear(_RoundInput.apply(x, precision, self.group), weight, bias)
        if not y.requires_grad:
            return y
        # A packed weight's row chunk (cross-attention's q, k, v) computes a third of the layer's output:
        # no gradient of the whole output to hand over, so such a block gets no loss estimate.
        if weight._base is None:
            self.observe_output(y, layer)
        return _RoundGradient.apply(y, precision, self.group)

    def cover_attention(self, mha, layers):
        def forward(module, *args, **kwargs):
            return _attention.attention_forward(module, self.project, layers, *args, **kwargs)
        mha.forward = types.MethodType(forward, mha)


class _BlockPlan:
    """What ``apply`` does to one block: its linear layers (with their profiling index) and, per
    registered parameter, whether the runtime leaves it as it is (its module filtered out)."""

    def __init__(self, block, fqn, module_filter_fn):
        params = list(block.named_parameters())
        index = {id(p): k for k, (_, p) in enumerate(params)}
        # A layer's index is its weight's place among the block's tensors of two or more dimensions,
        # as the agent's profiler counts layers.
        layer_of = {}
        for _, p in params:
            if p.dim() >= 2:
                layer_of[id(p)] = len(layer_of)
        self.as_is = [False] * len(params)
        self.linears = []
        self.attentions = []  # (nn.MultiheadAttention, parameter name -> layer index)
        attention_parts = set()
        covered = set()
        excluded = []  # qualified-name prefixes the filter left out, with everything below them
        for name, module in block.named_modules():
            qualified = _join(fqn, name)
            if any(qualified == e or qualified.startswith(e + ".") for e in excluded):
                continue
            if module_filter_fn is not None and not module_filter_fn(module, qualified):
                excluded.append(qualified)
                for p in module.parameters():
                    if id(p) in index:
                        self.as_is[index[id(p)]] = True
                        covered.add(id(p))
                continue
            if id(module) in attention_parts:
                continue  # an out_proj: its attention computes it
            if isinstance(module, torch.nn.MultiheadAttention):
                if _attention.refusal(module) is None:
                    attention_parts.add(id(module.out_proj))
                    layers = {n: layer_of[id(p)] for n, p in module.named_parameters() if p.dim() >= 2}
                    self.attentions.append((module, layers))
                    covered.update(id(p) for p in module.parameters())
                continue  # else its weights are refused below, by name
            own = list(module.parameters(recurse=False))
            if isinstance(module, torch.nn.Linear) or conv1d_weight(module) is not None:
                self.linears.append((layer_of[id(module.weight)], module))
                covered.update(id(p) for p in own)
            elif isinstance(module, torch.nn.Embedding):
                covered.update(id(p) for p in own)
            else:
                covered.update(id(p) for p in own if p.dim() < 2)
        owners = {id(p): (n, m) for n, m in block.named_modules() for p in m.parameters(recurse=False)}
        for pname, p in params:
            if id(p) not in covered:
                mname, module = owners[id(p)]
                raise ValueError(_uncovered_message(fqn, pname, module, mname))


def conv1d_weight(module):
    """The weight of a GPT-2-style ``Conv1D`` (transformers.pytorch_utils: ``x @ weight + bias`` with
    the weight stored ``[in, out]`` and ``nf`` output channels), else None."""
    weight = getattr(module, "weight", None)
    if (type(module).__name__ == "Conv1D" and isinstance(weight, torch.nn.Parameter) and weight.dim() == 2
            and weight.shape[1] == getattr(module, "nf", None)):
        return weight
    return None


def _join(prefix, name):
    return prefix + "." + name if prefix and name else prefix or name


def _uncovered_message(fqn, param_name, module, module_name):
    kind = type(module).__module__ + "." + type(module).__name__
    module_fqn = _join(fqn, module_name)
    why = (_attention.refusal(module) if isinstance(module, torch.nn.MultiheadAttention)
           else "is not a module apply covers")
    return ("sp.torch.apply: parameter '%s' of %s (%s) %s; covered: %s. Leave the module out with "
            "module_filter_fn=lambda module, fqn: fqn != '%s' (it then computes as it is)"
            % (_join(fqn, param_name), module_fqn, kind, why, ", ".join(sorted(COVERED_MODULES)), module_fqn))


def _hook_optimizer(agent, optimizer):
    """Puts the masters back (and reads an open step's statistics) before every optimizer.step()."""
    core = agent._core
    if hasattr(optimizer, "register_step_pre_hook"):  # torch >= 2.0
        return optimizer.register_step_pre_hook(lambda opt, args, kwargs: core.before_optimizer_step())
    original = optimizer.step
    counted = getattr(original, "_with_counter", False)

    def step(*args, **kwargs):
        core.before_optimizer_step()
        return original(*args, **kwargs)

    if counted:
        # An lr_scheduler already wrapped step in a plain function that counts the calls: keep its
        # mark, or the scheduler warns that step was overridden.
        step._with_counter = True
        optimizer.step = step
    else:
        # A bound method, so that a scheduler made later can wrap it (it rebinds step's __func__).
        optimizer.step = types.MethodType(lambda self, *a, **k: step(*a, **k), optimizer)
    return None


def _hook_checkpoints(agent, model):
    """state_dict() holds the masters; load_state_dict() makes the loaded values the masters."""
    core = agent._core
    handles = []
    for block_id, block in enumerate(agent._modules):
        names = [n for n, _ in block.named_parameters()]

        def masters_into(module, state_dict, prefix, local_metadata, block_id=block_id, names=names):
            for k, name in enumerate(names):
                value = core.checkpoint_value(block_id, k)
                if value is not None and prefix + name in state_dict:
                    state_dict[prefix + name] = value
        handles.append(block._register_state_dict_hook(masters_into))
    handles.append(model.register_load_state_dict_post_hook(lambda module, keys: core.reload_masters()))
    return handles


def apply(model, agent, *, optimizer=None, module_filter_fn=None, scope=None):
    """Makes every block registered with ``agent`` compute in its routed format (see the module's
    documentation). ``model``: the module the blocks belong to. ``optimizer``: the optimizer that
    steps them, whose ``step`` then always finds the masters (recommended). ``module_filter_fn``:
    ``fn(module, fqn) -> bool`` (torchao's convention); a module it returns False for, with
    everything below it, is left as it is: never materialized, its activations not rounded, its
    bytes counted as BF16. ``scope``: ``"compute"`` (a block's format rounds its weights, its
    linear layers' inputs and output gradients) or ``"weights"`` (its weights alone; inputs and
    gradients in BF16: the block-swap setting); None keeps the config's ``precision_scope``, and a
    name sets it (the telemetry header records it). Returns ``model``."""
    agent._require_blocks()
    core = agent._core
    if core.current_step > 0 or core.step_open:
        raise RuntimeError("sp.torch.apply: call it before the first step")
    if scope is not None:
        if scope not in ("compute", "weights"):
            raise ValueError("sp.torch.apply: scope must be 'compute' or 'weights', not %r" % (scope,))
        core.set_precision_scope(scope)
    weights_scope = core.precision_scope == "weights"
    names = {id(m): n for n, m in model.named_modules()}
    plans = [_BlockPlan(block, names.get(id(block), agent._names[i]), module_filter_fn)
             for i, block in enumerate(agent._modules)]
    core.attach_runtime(as_is=[plan.as_is for plan in plans])
    agent._profiling = False
    handles = []
    for block_id, (block, plan) in enumerate(zip(agent._modules, plans)):
        hooks = _BlockHooks(agent, block_id, weights_scope)
        handles.append(block.register_forward_pre_hook(hooks.before_block))
        for layer, linear in plan.linears:
            handles.append(linear.register_forward_pre_hook(hooks.before_linear(layer)))
            handles.append(linear.register_forward_hook(hooks.after_linear(layer)))
        for mha, layers in plan.attentions:
            hooks.cover_attention(mha, layers)
    handles.extend(_hook_checkpoints(agent, model))
    if optimizer is not None:
        handle = _hook_optimizer(agent, optimizer)
        if handle is not None:
            handles.append(handle)
    agent._hook_handles = handles
    return model
