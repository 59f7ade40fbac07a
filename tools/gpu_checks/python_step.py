#!/usr/bin/python3
"""The Python package on a device: examples/python/train_transformer.py's model on --device (cuda by
default), trained a few steps monitoring-only and a few with sp.torch.apply, printing one summary
line per mode for a device session to record (docs/gpu/):

    python-step mode=monitor device=cuda:0 collector=cuda steps=20 step_ms=12.3 agent_ms=0.21 saving_pct=0.0
    python-step mode=apply device=cuda:0 collector=cuda steps=20 step_ms=15.9 agent_ms=0.25 saving_pct=41.7

`--device cpu --d-model 32 --seq-len 32` is the dry run the CPU test suite makes
(python/tests/test_transformer_example.py), so
the step cannot rot where no GPU is lent. On a build without CUDA, a CUDA model stops at
register_blocks with the error that names the build option, and the line says so (exit 1).

    PYTHONPATH=build/ci/python /usr/bin/python3 tools/gpu_checks/python_step.py [--device cuda] [--steps 20]
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))

import selective_precision as sp  # noqa: E402
from train_transformer import TransformerLM  # noqa: E402

CONFIG = {"run_calibration": False, "log_decisions": False, "warmup_steps": 4, "update_interval_steps": 4,
          "min_steps_between_switches": 8, "snr_tiers": True, "int8_threshold": 0.7, "bf16_threshold": 0.9}


def run(mode, device, steps, d_model, seq_len):
    torch.manual_seed(0)
    model = TransformerLM(4, d_model, 4, seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (8, seq_len), device=device)
    with sp.Agent(config=CONFIG, network=False) as agent:
        try:
            agent.register_blocks(model.encoder.layers, model=model)
        except ValueError as e:
            print("python-step mode=%s device=%s error=%r" % (mode, device, str(e)), flush=True)
            return False
        if mode == "apply":
            sp.torch.apply(model, agent, optimizer=optimizer)
        times = []
        for _ in range(steps):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss = F.cross_entropy(model(x).flatten(0, 1), x.flatten())
            loss.backward()
            optimizer.step()
            agent.step(loss)
            optimizer.zero_grad(set_to_none=True)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        summary = agent.summary()
    collector = sp._core.statistics_device([("model", str(next(model.parameters()).device))])
    later = sorted(times[1:] or times)
    print("python-step mode=%s device=%s collector=%s steps=%d step_ms=%.2f agent_ms=%.3f saving_pct=%.1f"
          % (mode, next(model.parameters()).device, collector, steps, 1e3 * later[len(later) // 2],
             1e3 * summary["overhead"]["total_s"] / max(1, summary["steps"]), summary["saving_pct"]), flush=True)
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=128)
    a = p.parse_args()
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("python-step device=%s error='this torch has no CUDA device'" % a.device, flush=True)
        return 1
    ok = all([run(mode, a.device, a.steps, a.d_model, a.seq_len) for mode in ("monitor", "apply")])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
