"""sp.torch.apply rounds exactly as core's reference quantizers do (sp/quantize.h), bit for bit, for
all five formats: the weights each block computes with (per output row), the input of each linear
layer and the gradient arriving at its output (per row: per token)."""

import pytest
import torch

import selective_precision as sp
from conftest import FAST_CONFIG, TinyModel, reference_rows

GROUP = 8  # small, so INT4's groups split the rows of the test's shapes


def weight_rows(t):
    return 1 if t.dim() <= 1 else t.shape[0]


def token_rows(t):
    return t.numel() // t.shape[-1]


@pytest.mark.parametrize("precision", sp.PRECISIONS)
def test_apply_rounds_weights_inputs_and_gradients_like_the_reference(precision):
    torch.manual_seed(5)
    model = TinyModel(blocks=2, d=16)
    masters = {n: p.detach().clone() for n, p in model.layers.named_parameters()}
    config = dict(FAST_CONFIG, int4_group_size=GROUP)
    if precision != "bf16":
        config.update({"mode": "static", "force_%s_blocks" % precision: [0, 1]})
    else:
        config.update({"mode": "off"})
    agent = sp.Agent(config=config, network=False)
    agent.register_blocks(model.layers)

    raw_in, rounded_in, raw_grad, rounded_grad = {}, {}, {}, {}
    linears = {name: m for name, m in model.layers.named_modules() if isinstance(m, torch.nn.Linear)}

    def keep_input(store, name):
        def hook(module, inputs):
            store[name] = inputs[0].detach().clone()
        return hook

    def keep_output_grad(store, name):
        def hook(module, inputs, output):
            output.register_hook(lambda g: store.__setitem__(name, g.clone()))
        return hook

    for name, m in linears.items():  # before apply's hooks: what arrives, and the gradient it passes on
        m.register_forward_pre_hook(keep_input(raw_in, name))
        m.register_forward_hook(keep_output_grad(rounded_grad, name))
    sp.torch.apply(model, agent)
    for name, m in linears.items():  # after them: what the layer computes with, the gradient it gets
        m.register_forward_pre_hook(keep_input(rounded_in, name))
        m.register_forward_hook(keep_output_grad(raw_grad, name))

    x = torch.randn(3, 5, 16)
    loss = model(x)
    loss.backward()
    assert agent.precisions == {"blocks.0": precision, "blocks.1": precision}
    for name, p in model.layers.named_parameters():  # all parameters, LayerNorms included
        assert torch.equal(p.detach(), reference_rows(masters[name], precision, weight_rows(p))), name
    for name in linears:
        assert torch.equal(rounded_in[name], reference_rows(raw_in[name], precision, token_rows(raw_in[name]))), name
        assert torch.equal(rounded_grad[name], reference_rows(raw_grad[name], precision, token_rows(raw_grad[name]))), name
        assert not torch.equal(rounded_in[name], raw_in[name]), name  # it did round
    agent.step(loss)
    # The optimizer gets the fp32 masters (straight-through), and the next forward rounds again.
    for name, p in model.layers.named_parameters():
        assert torch.equal(p.detach(), masters[name]), name
    with torch.no_grad():
        model.layers[0].up.weight.add_(0.25)
    model(x)
    expected = reference_rows(masters["0.up.weight"] + 0.25, precision, 32)
    assert torch.equal(model.layers[0].up.weight.detach(), expected)
    agent.close()
    # The run ends with the fp32 weights in the model, never a quantized copy.
    assert torch.equal(model.layers[0].up.weight.detach(), masters["0.up.weight"] + 0.25)


def test_eval_forwards_round_but_do_not_open_steps():
    torch.manual_seed(2)
    model = TinyModel(blocks=1)
    agent = sp.Agent(config=dict(FAST_CONFIG, mode="static", force_int8_blocks=[0]), network=False)
    agent.register_blocks(model.layers)
    sp.torch.apply(model, agent)
    with torch.no_grad():
        model(torch.randn(2, 4, 16))
    assert agent.current_step == 0 and not agent._core.step_open
    loss = model(torch.randn(2, 4, 16))
    assert agent._core.step_open
    loss.backward()
    agent.step(loss)
    assert agent.current_step == 1
    with pytest.raises(RuntimeError, match="before the first step"):
        sp.torch.apply(model, agent)
    agent.close()


def test_apply_refuses_non_fp32_blocks():
    model = TinyModel(blocks=1).double()
    agent = sp.Agent(network=False)
    agent.register_blocks(model.layers)
    with pytest.raises(ValueError, match="fp32"):
        sp.torch.apply(model, agent)
    agent.close()
