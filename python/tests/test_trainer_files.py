"""The Python trainer's JSONL is a telemetry file like sp-trainer's: `sp-ctl validate` calls it clean
and `sp-ctl simulate --stats` replays it to the same decisions, block by block."""

import json
import subprocess
import sys

import pytest

from conftest import EXAMPLE, read_jsonl, sp_ctl

SMALL = ["--blocks", "3", "--d-model", "32", "--seq-len", "32", "--batch", "8", "--eval-every", "20",
         "--threads", "1", "--no-network"]


def run_example(tmp_path, config, *extra, steps=60):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config))
    telemetry = tmp_path / "run.jsonl"
    done = subprocess.run([sys.executable, EXAMPLE, "--steps", str(steps), "--config", str(cfg),
                           "--telemetry", str(telemetry), *SMALL, *extra],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return telemetry, done.stdout


@pytest.mark.parametrize("config", [
    {"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 10, "run_calibration": False,
     "int8_threshold": 0.5, "bf16_threshold": 0.9,
     "log_decisions": False, "distribution_interval_steps": 10},
    {"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 10, "run_calibration": False,
     "int8_threshold": 0.5, "bf16_threshold": 0.9,
     "log_decisions": False, "distribution_interval_steps": 10, "snr_tiers": True},
    {"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 10, "run_calibration": False,
     "int8_threshold": 0.5, "bf16_threshold": 0.9,
     "log_decisions": False, "mode": "budget", "budget_target_pct": 50},
], ids=["seed_defaults", "snr_tiers", "budget"])
def test_file_validates_and_resimulates_to_the_same_decisions(tmp_path, config):
    telemetry, out = run_example(tmp_path, config)
    assert "summary" in out and "measured saving" in out
    # Two savings are printed in different places: each says which it is.
    assert "scales included" in out
    validate = sp_ctl("validate", telemetry)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "clean" in validate.stdout
    records = read_jsonl(telemetry)
    updates = [r for r in records if "step_id" in r]
    assert len(updates) >= 10
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


def test_monitor_only_file_resimulates_too(tmp_path):
    config = {"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 10,
              "run_calibration": False, "log_decisions": False}
    telemetry, _ = run_example(tmp_path, config, "--monitor-only", steps=30)
    assert sp_ctl("validate", telemetry).returncode == 0
    assert sp_ctl("simulate", "--stats", telemetry).returncode == 0
