"""nn.MultiheadAttention under sp.torch.apply: its forward is torch's, with every projection a
linear layer of the block (weights materialized, inputs and output gradients rounded per token),
bit for bit against core's reference quantizers, for all five formats and for the packed and
separate projections."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import selective_precision as sp
from selective_precision import _attention
from conftest import FAST_CONFIG, reference_rows

GROUP = 8


def plain(x, weight, bias, layer):
    return F.linear(x, weight, bias)


def layers_of(mha):
    index = {id(p): i for i, p in enumerate(p for p in mha.parameters() if p.dim() >= 2)}
    return {n: index[id(p)] for n, p in mha.named_parameters() if p.dim() >= 2}


CASES = {
    "self, batch first": dict(batch_first=True),
    "self, sequence first": dict(batch_first=False),
    "separate q/k/v weights": dict(batch_first=True, kdim=12, vdim=10),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("masks", ["none", "causal bool", "float and padding", "unbatched"])
def test_the_forward_is_torchs_own(case, masks):
    torch.manual_seed(1)
    options = CASES[case]
    mha = nn.MultiheadAttention(16, 4, **options).eval()
    batched = masks != "unbatched"
    shape = ((3, 5, 16) if options["batch_first"] else (5, 3, 16)) if batched else (5, 16)
    query = torch.randn(*shape)
    key = value = query
    if "kdim" in options:
        key = torch.randn(*shape[:-1], 12)
        value = torch.randn(*shape[:-1], 10)
    kwargs = {}
    if masks == "causal bool":
        kwargs["attn_mask"] = torch.ones(5, 5, dtype=torch.bool).triu(1)
    elif masks == "float and padding":
        kwargs["attn_mask"] = torch.randn(5, 5)
        kwargs["key_padding_mask"] = torch.tensor([[False] * 4 + [True]] * 3)
    for need_weights in (False, True):
        expected = mha(query, key, value, need_weights=need_weights, **kwargs)
        got = _attention.attention_forward(mha, plain, layers_of(mha), query, key, value,
                                           need_weights=need_weights, **kwargs)
        assert torch.allclose(got[0], expected[0], atol=1e-6), (case, masks)
        if need_weights:
            assert torch.allclose(got[1], expected[1], atol=1e-6)


class _RefRoundInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, precision):
        return reference_rows(x, precision, x.numel() // x.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _RefRoundGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, precision):
        ctx.precision = precision
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return reference_rows(grad, ctx.precision, grad.numel() // grad.shape[-1]), None


class AttentionBlock(nn.Module):
    def __init__(self, cross, **options):
        super().__init__()
        self.cross = cross
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True, **options)

    def forward(self, x, memory):
        kv = memory if self.cross else x
        return self.attn(x, kv, kv, need_weights=False)[0]


@pytest.mark.parametrize("precision", sp.PRECISIONS)
@pytest.mark.parametrize("layout", ["packed self", "packed cross", "separate"])
def test_apply_computes_attention_like_the_reference(precision, layout):
    torch.manual_seed(4)
    options = {"kdim": 12, "vdim": 12} if layout == "separate" else {}
    model = nn.ModuleDict({"block": AttentionBlock(cross=layout != "packed self", **options)})
    x = torch.randn(2, 5, 16)
    memory = torch.randn(2, 7, 12 if layout == "separate" else 16)
    reference = copy.deepcopy(model["block"])
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(reference_rows(p, precision, p.shape[0] if p.dim() >= 2 else 1))

    config = dict(FAST_CONFIG, int4_group_size=GROUP, mode="off")
    if precision != "bf16":
        config.update({"mode": "static", "force_%s_blocks" % precision: [0]})
    agent = sp.Agent(config=config, network=False)
    agent.register_blocks([model["block"]], model=model)
    sp.torch.apply(model, agent)
    out = model["block"](x, memory)
    out.pow(2).sum().backward()

    def project(t, weight, bias, layer):
        y = F.linear(_RefRoundInput.apply(t, precision), weight, bias)
        return _RefRoundGradient.apply(y, precision)

    kv = memory if layout != "packed self" else x
    expected = _attention.attention_forward(reference.attn, project, layers_of(reference.attn), x, kv, kv,
                                            need_weights=False)[0]
    expected.pow(2).sum().backward()
    assert agent.precisions == {"block": precision}
    assert torch.equal(out, expected)
    for (name, p), (_, q) in zip(model["block"].named_parameters(), reference.named_parameters()):
        assert torch.equal(p.detach(), q.detach()), name  # the weights it computed with
        assert torch.equal(p.grad, q.grad), name
    agent.close()


def test_bias_k_is_refused_by_name():
    model = nn.ModuleDict({"block": nn.Sequential(nn.MultiheadAttention(8, 2, add_bias_kv=True))})
    agent = sp.Agent(network=False)
    agent.register_blocks([model["block"]], model=model)
    with pytest.raises(ValueError, match=r"'block\.0\.in_proj_weight' of block\.0 .*bias_k/bias_v"):
        sp.torch.apply(model, agent)
    agent.close()
