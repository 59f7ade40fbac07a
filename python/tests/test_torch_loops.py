"""sp.torch.apply in the loops people write: every call order keeps every update, checkpoints hold
the masters, bf16 models, what apply covers and refuses by name, the statistics' device, shared
blocks and unwritable telemetry paths."""

import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import selective_precision as sp
from conftest import FAST_CONFIG, TinyModel, reference_rows

INT8_ALL = dict(FAST_CONFIG, mode="static", force_int8_blocks=[0, 1, 2])


def batches(steps, micro, seed=3):
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randn(4, 6, 16, generator=gen) for _ in range(micro)] for _ in range(steps)]


def run(order, *, micro=1, clip=False, hooked=True, steps=4, precision_config=INT8_ALL):
    """Trains a fresh TinyModel in `order` (the calls after backward); returns (losses, masters)."""
    torch.manual_seed(0)
    model = TinyModel()
    agent = sp.Agent(config=precision_config, network=False)
    agent.register_blocks(model.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sp.torch.apply(model, agent, optimizer=opt if hooked else None)
    losses = []
    for micro_batches in batches(steps, micro):
        total = 0.0
        for x in micro_batches:
            loss = model(x) / len(micro_batches)
            loss.backward()
            total += float(loss)
        losses.append(total)
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        for call in order:
            if call == "agent":
                agent.step(total)
            elif call == "opt":
                opt.step()
            elif call == "zero":
                opt.zero_grad(set_to_none=True)
    state = copy.deepcopy(model.state_dict())
    agent.close()
    return losses, state


ORDERS = {
    "agent, opt, zero": ("agent", "opt", "zero"),
    "opt, agent, zero": ("opt", "agent", "zero"),
    "opt, zero, agent": ("opt", "zero", "agent"),
}


@pytest.mark.parametrize("micro,clip", [(1, False), (2, False), (1, True), (2, True)])
@pytest.mark.parametrize("order", list(ORDERS))
def test_every_call_order_keeps_every_update(order, micro, clip):
    reference_losses, reference = run(ORDERS["agent, opt, zero"], micro=micro, clip=clip)
    losses, state = run(ORDERS[order], micro=micro, clip=clip)
    assert losses == reference_losses
    for name, value in reference.items():
        assert torch.equal(state[name], value), name
    torch.manual_seed(0)
    initial = TinyModel().state_dict()
    assert not torch.equal(state["layers.0.up.weight"], initial["layers.0.up.weight"])  # it trained


def test_an_optimizer_step_on_compute_copies_raises_instead_of_losing_it():
    torch.manual_seed(0)
    model = TinyModel()
    agent = sp.Agent(config=INT8_ALL, network=False)
    agent.register_blocks(model.layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sp.torch.apply(model, agent)  # no optimizer=
    loss = model(torch.randn(4, 6, 16))
    loss.backward()
    opt.step()
    stepped = model.layers[1].up.weight.detach().clone()
    with pytest.raises(RuntimeError, match=r"agent\.step\(\), block 'blocks\.0' parameter 'ln\.weight' .*"
                                           r"int8 compute copy.*optimizer=opt"):
        agent.step(loss)
    assert torch.equal(model.layers[1].up.weight.detach(), stepped)  # nothing was overwritten
    # The same at the next forward, for a loop that never calls agent.step before it.
    with pytest.raises(RuntimeError, match="a block's forward"):
        model(torch.randn(4, 6, 16))
    agent.close()


def test_state_dict_holds_the_masters_and_a_round_trip_resumes_identically():
    config = dict(FAST_CONFIG, mode="static", force_int4_blocks=[0, 1, 2], int4_group_size=8)
    torch.manual_seed(0)
    model = TinyModel()
    agent = sp.Agent(config=config, network=False)
    agent.register_blocks(model.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sp.torch.apply(model, agent, optimizer=opt)
    data = batches(8, 1)

    def train_step(x):
        loss = model(x[0])
        loss.backward()
        opt.step()
        agent.step(loss)
        opt.zero_grad()
        return float(loss)

    for x in data[:3]:
        train_step(x)
    loss = model(data[3][0])  # mid-step: the parameters hold the INT4 compute copies
    saved = copy.deepcopy(model.state_dict())
    saved_opt = copy.deepcopy(opt.state_dict())
    compute = model.layers[0].up.weight.detach().clone()
    assert not torch.equal(saved["layers.0.up.weight"], compute)
    loss.backward()
    agent.step(loss)  # the parameters now hold the masters, as the checkpoint does
    assert torch.equal(saved["layers.0.up.weight"], model.layers[0].up.weight.detach())
    opt.step()
    opt.zero_grad()
    after = [train_step(x) for x in data[4:]]

    model.load_state_dict(saved)
    opt.load_state_dict(saved_opt)
    loss = model(data[3][0])
    assert torch.equal(model.layers[0].up.weight.detach(), compute)  # materialized from the loaded masters
    loss.backward()
    agent.step(loss)
    opt.step()
    opt.zero_grad()
    assert [train_step(x) for x in data[4:]] == after
    agent.close()


def test_bf16_parameters_keep_bf16_masters_and_every_update():
    torch.manual_seed(0)
    model = TinyModel().to(torch.bfloat16)
    agent = sp.Agent(config=INT8_ALL, network=False)
    agent.register_blocks(model.layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sp.torch.apply(model, agent, optimizer=opt)
    start = model.layers[0].up.weight.detach().clone()
    x = torch.randn(4, 6, 16, dtype=torch.bfloat16)
    loss = model(x)
    weight = model.layers[0].up.weight.detach()
    assert weight.dtype == torch.bfloat16
    rows = sp._core.reference_roundtrip("int8", start.float().reshape(-1).tolist(), 32, 16)
    expected = torch.tensor(rows, dtype=torch.float32).reshape(32, 16).to(torch.bfloat16)
    assert torch.equal(weight, expected)  # INT8 from the bf16 master, rounded once to bf16
    loss.backward()
    opt.step()
    agent.step(loss)
    master = model.layers[0].up.weight.detach()
    assert master.dtype == torch.bfloat16 and not torch.equal(master, start)
    agent.close()


def test_the_statistics_device_follows_the_parameters():
    device = sp._core.statistics_device
    assert device([("a", "cpu"), ("b", "cpu")]) == "cpu"
    with pytest.raises(ValueError, match="'b' is on cuda:0 but 'a' is on cpu"):
        device([("'a'", "cpu"), ("'b'", "cuda:0")])
    with pytest.raises(ValueError, match="on the CPU or on CUDA"):
        device([("a", "meta")])
    if not sp._core.HAS_CUDA:
        with pytest.raises(ValueError, match="built without CUDA.*SP_ENABLE_CUDA=ON"):
            device([("a", "cuda:0")])
    else:
        assert device([("a", "cuda:0")]) == "cuda"
    with pytest.raises(ValueError, match="meta"):
        sp.Agent(network=False).register_blocks([nn.Linear(4, 4, device="meta")])


def test_blocks_that_share_a_parameter_are_refused_naming_both():
    model = TinyModel()
    with pytest.raises(ValueError, match=r"block 0 'layers\.0' and block 1 'layers\.0' share"):
        sp.Agent(network=False).register_blocks([model.layers[0], model.layers[0]], model=model)
    with pytest.raises(ValueError, match=r"block 0 'layers' and block 1 'layers\.2' share"):
        sp.Agent(network=False).register_blocks([model.layers, model.layers[2]], model=model)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_a_telemetry_path_that_cannot_be_written_raises_at_once(tmp_path, kind):
    path = tmp_path / "run.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        os.symlink(tmp_path / "elsewhere.jsonl", path)
    else:
        path.mkdir()
    # In a child process: a FIFO that blocked the open would hang it, not the suite.
    code = ("import selective_precision as sp\n"
            "try:\n    sp.Agent(telemetry=%r, network=False)\n"
            "except OSError as e:\n    print('OSError:', e)\n" % str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    words = {"fifo": "FIFO", "symlink": "symbolic link", "directory": "is a directory"}[kind]
    assert out.stdout.startswith("OSError: telemetry: ") and words in out.stdout, out


class MixedBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.embed = nn.Embedding(10, d)
        self.conv = nn.Conv1d(d, d, 3, padding=1)
        self.up = nn.Linear(d, d)

    def forward(self, tokens):
        x = self.embed(tokens)
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
        return self.up(x).pow(2).mean()


def test_an_uncovered_weight_is_refused_by_name_unless_filtered_out():
    torch.manual_seed(0)
    model = nn.ModuleDict({"block": MixedBlock()})
    agent = sp.Agent(config=dict(FAST_CONFIG, mode="static", force_int8_blocks=[0]), network=False)
    agent.register_blocks([model["block"]], model=model)
    with pytest.raises(ValueError, match=r"'block\.conv\.weight' of block\.conv "
                                         r"\(torch\.nn\.modules\.conv\.Conv1d\) is not a module apply covers"):
        sp.torch.apply(model, agent)
    conv_before = {n: p.detach().clone() for n, p in model["block"].conv.named_parameters()}
    masters = {n: p.detach().clone() for n, p in model["block"].named_parameters()}
    sp.torch.apply(model, agent, module_filter_fn=lambda module, fqn: fqn != "block.conv")
    model["block"](torch.randint(0, 10, (2, 5)))
    for n, p in model["block"].conv.named_parameters():  # left as it is, bias included
        assert torch.equal(p.detach(), conv_before[n]), n
    embed = model["block"].embed.weight.detach()
    rows = sp._core.reference_roundtrip("int8", masters["embed.weight"].reshape(-1).tolist(), 10, 16)
    assert torch.equal(embed, torch.tensor(rows).reshape(10, 16))  # one scale per embedding row
    assert not torch.equal(model["block"].up.weight.detach(), masters["up.weight"])
    agent.close()


class Conv1D(nn.Module):
    """GPT-2's Conv1D (transformers.pytorch_utils): a linear layer stored as [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(*x.shape[:-1], self.nf)


@pytest.mark.parametrize("precision", sp.PRECISIONS)
def test_gpt2_conv1d_is_scaled_per_output_channel_like_the_reference(precision):
    torch.manual_seed(3)
    model = nn.ModuleDict({"block": nn.Sequential(Conv1D(24, 16), nn.GELU(), Conv1D(16, 24))})
    masters = {n: p.detach().clone() for n, p in model["block"].named_parameters()}
    config = dict(FAST_CONFIG, int4_group_size=8, mode="off")
    if precision != "bf16":
        config.update({"mode": "static", "force_%s_blocks" % precision: [0]})
    agent = sp.Agent(config=config, network=False)
    agent.register_blocks([model["block"]], model=model)
    raw, rounded = {}, {}
    first = model["block"][0]
    first.register_forward_pre_hook(lambda m, inputs: raw.__setitem__("x", inputs[0].detach().clone()))
    sp.torch.apply(model, agent)
    first.register_forward_pre_hook(lambda m, inputs: rounded.__setitem__("x", inputs[0].detach().clone()))
    x = torch.randn(2, 5, 16)
    model["block"](x).pow(2).sum().backward()
    assert agent.precisions == {"block": precision}
    for name, p in model["block"].named_parameters():
        if p.dim() == 2:  # [in, out]: one scale per output channel, along dim 1
            expected = reference_rows(masters[name].t().contiguous(), precision, p.shape[1]).t()
        else:
            expected = reference_rows(masters[name], precision, 1)
        assert torch.equal(p.detach(), expected), name
    assert torch.equal(rounded["x"], reference_rows(raw["x"], precision, 10))  # its input, per token
    agent.close()
