"""Shared pieces of the Python package's tests (run by CTest: python/CMakeLists.txt)."""

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import selective_precision as sp

SP_CTL = os.environ.get("SP_CTL", "sp-ctl")
SOURCE_DIR = os.environ.get("SP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(SOURCE_DIR, "examples", "python", "train_gpt.py")
TRANSFORMER_EXAMPLE = os.path.join(SOURCE_DIR, "examples", "python", "train_transformer.py")


class TinyBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.ln(x))))


class TinyModel(nn.Module):
    def __init__(self, blocks=3, d=16):
        super().__init__()
        self.layers = nn.ModuleList(TinyBlock(d) for _ in range(blocks))
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return self.head(x).pow(2).mean()


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    return TinyModel()


# A config that routes within a few steps, as the C++ tests' small runs do.
FAST_CONFIG = {"warmup_steps": 2, "update_interval_steps": 2, "min_steps_between_switches": 4,
               "run_calibration": False, "log_decisions": False}


def train(model, agent, steps, *, seed=1, lr=1e-2):
    """A plain loop with the agent in it; returns the last loss."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss = None
    for _ in range(steps):
        x = torch.randn(4, 8, 16, generator=gen)
        loss = model(x)
        loss.backward()
        agent.step(loss)
        opt.step()
        opt.zero_grad()
    return loss


def reference_rows(t, precision, rows, group=8):
    """core's quantize-then-dequantize of `t` as `rows` rows (on a plain list: the reference every
    rounding is checked against), in `t`'s dtype and shape."""
    flat = t.detach().reshape(-1).tolist()
    out = sp._core.reference_roundtrip(precision, flat, rows, len(flat) // rows, group)
    return torch.tensor(out, dtype=t.dtype).reshape(t.shape)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def sp_ctl(*args, timeout=120):
    return subprocess.run([SP_CTL, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def ipc_endpoints(tmp_path):
    return "ipc://%s" % (tmp_path / "pub"), "ipc://%s" % (tmp_path / "ctl")


def python_process(args, **kwargs):
    """A child Python (the interpreter running the tests) with the same package path."""
    return subprocess.Popen([sys.executable, *args], **kwargs)


def validates_and_resimulates(telemetry, min_updates=10):
    """`sp-ctl validate` calls a Python run's file clean, the run routed some block below BF16, and
    `sp-ctl simulate --stats` replays it to the same decisions, block by block."""
    validate = sp_ctl("validate", telemetry)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "clean" in validate.stdout
    records = read_jsonl(telemetry)
    updates = [r for r in records if "step_id" in r]
    assert len(updates) >= min_updates
    assert records[0]["producer"].startswith("selective_precision (python)")
    low = [d for u in updates for d in u["block_details"].values() if d["precision"] != "bf16"]
    assert low, "the run never routed a block below BF16: the replay would prove little"
    sim = sp_ctl("simulate", "--stats", telemetry)
    assert sim.returncode == 0, sim.stderr
    assert "estimated bandwidth saving" in sim.stderr and "from element widths" in sim.stderr
    replayed = [json.loads(line) for line in sim.stdout.splitlines() if line.strip()]
    assert len(replayed) == len(updates)
    for recorded, again in zip(updates, replayed):
        for block, detail in recorded["block_details"].items():
            assert again["block_details"][block]["precision"] == detail["precision"], recorded["step_id"]
            assert again["block_details"][block]["reason_text"] == detail["reason_text"], recorded["step_id"]
    return updates
