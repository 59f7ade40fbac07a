"""examples/python/train_transformer.py, a trainer as people write one (nn.TransformerEncoder with a
causal mask, accumulation, clipping, a scheduler, bf16 autocast, no_grad evaluation, a checkpoint,
optimizer.step() before agent.step()), trains, writes a file that validates clean and re-simulates
to the same decisions, and checkpoints the masters."""

import json
import os
import subprocess
import sys

import pytest
import torch

import selective_precision as sp
from conftest import SOURCE_DIR, TRANSFORMER_EXAMPLE, validates_and_resimulates

CONFIG = {"warmup_steps": 4, "update_interval_steps": 4, "min_steps_between_switches": 8,
          "run_calibration": False, "snr_tiers": True, "distribution_interval_steps": 8,
          "int8_threshold": 0.7, "bf16_threshold": 0.9, "log_decisions": False}
SMALL = ["--layers", "3", "--d-model", "32", "--heads", "2", "--seq-len", "32", "--batch", "4",
         "--accumulate", "2", "--eval-every", "20", "--threads", "1", "--no-network"]


@pytest.mark.parametrize("autocast", [[], ["--bf16"]], ids=["fp32", "bf16 autocast"])
def test_the_transformer_trainer_routes_validates_and_resimulates(tmp_path, autocast):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(CONFIG))
    telemetry, checkpoint = tmp_path / "run.jsonl", tmp_path / "last.pt"
    done = subprocess.run([sys.executable, TRANSFORMER_EXAMPLE, "--steps", "48", "--config", str(cfg),
                           "--telemetry", str(telemetry), "--checkpoint", str(checkpoint), *SMALL, *autocast],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Seems like `optimizer.step()` has been overridden" not in done.stderr
    evals = [float(line.split("eval")[1]) for line in done.stdout.splitlines() if line.startswith("step")]
    assert evals[-1] < evals[0]  # it learned
    updates = validates_and_resimulates(telemetry)
    saved = torch.load(checkpoint)
    assert saved["step"] == 48 and saved["optimizer"]["state"]
    # The masters, not a compute copy: a copy in the block's format is its own rounding, a master not.
    precision = updates[-1]["block_details"]["0"]["precision"]
    weight = saved["model"]["encoder.layers.0.linear2.weight"]
    assert weight.dtype == torch.float32
    rounded = sp._core.reference_roundtrip(precision, weight.reshape(-1).tolist(), weight.shape[0], weight.shape[1])
    assert not torch.equal(torch.tensor(rounded).reshape(weight.shape), weight), precision


def test_the_device_step_runs_dry_on_the_cpu():
    """tools/gpu_checks/python_step.py, which a device session runs on CUDA, in both modes."""
    script = os.path.join(SOURCE_DIR, "tools", "gpu_checks", "python_step.py")
    done = subprocess.run([sys.executable, script, "--device", "cpu", "--steps", "3", "--d-model", "32",
                           "--seq-len", "32"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("python-step")]
    assert [line.split()[1] for line in lines] == ["mode=monitor", "mode=apply"]
    assert all("collector=cpu" in line and "steps=3" in line for line in lines)
