#!/usr/bin/env python3
"""The report of run_trainer_on_device.sh: one table row per sp-trainer --summary-json file.

    trainer_report.py DEVICE_TXT SUMMARY.json...  > report.md

Per run: the median training step after the first (step_s[1:]: the first carries the warm-up and
step 0's profiling; evaluations excluded), the first step, the profiling and its share of the training
steps (profiling_s, profiling_share), the agent's overhead
per step and its share of the step, the statistics pass (the agent's gradient statistics,
agent_collect_s) as a share of the step, the bytes sent to the compute copy per step (the initial
load excluded) and their saving against BF16, the host time per step moving the weights (weights_s:
packing, materialization, block-swap's uploads and expansions), and the speed-up of the step against
the BF16 run of the same fine-tune mode and residency (BF16's median step / this median step). The
block-swap runs get a table of their own: each format's speed-up over BF16 in block-swap mode. Exits 1 when a summary
is missing a field; a run stopped before its first step, and a summary that is not JSON (a run killed
while writing it), are named under the table.
"""
import json
import statistics
import sys
from pathlib import Path


def load(path):
    s = json.loads(Path(path).read_text())
    steps = s["steps"]
    if steps <= 0:
        return {"name": Path(path).stem, "steps": 0}
    step_s = s["step_s"]
    steady = step_s[1:] or step_s
    return {
        "name": Path(path).stem,
        "mode": s["finetune_mode"],
        "residency": s["weight_residency"],
        "precision": s["precision"],
        "steps": steps,
        "step_ms": 1e3 * statistics.median(steady),
        "first_ms": 1e3 * step_s[0],
        "agent_ms": 1e3 * (s["agent_s"] - s["profiling_s"]) / steps,
        "profiling_s": s["profiling_s"],
        "profiling_share": s["profiling_share"],
        "collect_ms": 1e3 * s["agent_collect_s"] / steps,
        "hints_ms": 1e3 * s["agent_hints_s"] / steps,
        "weights_ms": 1e3 * s["weights_s"] / steps,
        "mb_per_step": s["bytes_copied_per_step"] / 1e6,
        "mb_bf16_per_step": s["bytes_bf16_per_step"] / 1e6,
        "low_share": s["low_block_step_share"],
        "final_train_loss": s["train_loss"][-1],
    }


def block_swap_table(ordered, bf16):
    """Each format's step in block-swap mode against BF16's, per fine-tune mode: the seeds' question."""
    rows = [r for r in ordered if r["residency"] == "block-swap"]
    if not rows:
        return []
    out = ["", "## Block-swap: speed-up of each format over BF16", "",
           "| mode | precision | step (ms) | MB/step | weights (ms/step) | speed-up vs BF16 |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        base = bf16.get((r["mode"], "block-swap"))
        speedup = f"{base / r['step_ms']:.3f}x" if base else "n/a (no BF16 block-swap run)"
        out.append(f"| {r['mode']} | {r['precision']} | {r['step_ms']:.2f} | {r['mb_per_step']:.2f} | "
                   f"{r['weights_ms']:.2f} | {speedup} |")
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    device = Path(argv[1]).read_text().strip().splitlines()
    runs, unreadable = [], []
    for p in argv[2:]:
        try:
            runs.append(load(p))
        except json.JSONDecodeError as e:  # a run killed while writing it: named, the rest reported
            unreadable.append(f"{Path(p).stem} ({e})")
        except (OSError, KeyError, ValueError, IndexError) as e:
            print(f"trainer_report: {p}: {e}", file=sys.stderr)
            return 1
    empty = [r["name"] for r in runs if r["steps"] == 0]
    runs = [r for r in runs if r["steps"] > 0]
    bf16 = {(r["mode"], r["residency"]): r["step_ms"] for r in runs if r["precision"] == "bf16"}
    out = ["# sp-trainer on the device: step time, agent overhead, bytes per step", ""]
    out += [f"- {line}" for line in device]
    out += ["", "| mode | residency | precision | steps | step (ms) | first step (ms) | profiling (s) | "
            "profiling share | agent (ms) | agent share | collect (ms) | stats share | hints (ms) | "
            "MB/step | BF16 MB/step | saving | weights (ms/step) | low-precision share | speed-up vs BF16 | "
            "last train loss |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = {"bf16": 0, "policy": 1, "int8": 2, "fp8_e4m3": 3, "fp8_e5m2": 4, "int4": 5}
    ordered = sorted(runs, key=lambda r: (r["mode"], r["residency"], order.get(r["precision"], 9)))
    for r in ordered:
        base = bf16.get((r["mode"], r["residency"]))
        speedup = f"{base / r['step_ms']:.3f}x" if base else "n/a"
        saving = 100.0 * (1 - r["mb_per_step"] / r["mb_bf16_per_step"]) if r["mb_bf16_per_step"] else 0.0
        out.append(
            f"| {r['mode']} | {r['residency']} | {r['precision']} | {r['steps']} | {r['step_ms']:.2f} | "
            f"{r['first_ms']:.0f} | {r['profiling_s']:.2f} | {100 * r['profiling_share']:.2f}% | "
            f"{r['agent_ms']:.3f} | {100 * r['agent_ms'] / r['step_ms']:.2f}% | {r['collect_ms']:.3f} | "
            f"{100 * r['collect_ms'] / r['step_ms']:.2f}% | {r['hints_ms']:.3f} | "
            f"{r['mb_per_step']:.2f} | {r['mb_bf16_per_step']:.2f} | {saving:.1f}% | {r['weights_ms']:.2f} | "
            f"{100 * r['low_share']:.0f}% | {speedup} | {r['final_train_loss']:.4f} |")
    out += block_swap_table(ordered, bf16)
    out += ["", "Step: median of the training steps after the first (forward, backward, the agent, the "
            "optimizer, the runtime's materialization; evaluations excluded), host wall time, the GPU's "
            "work included (the loss is read every step); the first step carries the warm-up and step "
            "0's distribution statistics. Profiling: the distribution statistics (SNR profiling) of the "
            "run, in all (step 0, then every distribution_interval_steps), host time on the training "
            "thread; its share: of all the training steps' time (profiling_share). Agent: collect + "
            "hints + bookkeeping, host time, mean per step, the profiling excluded; its share is of the "
            "median step. Stats share: the statistics pass (collect) as a share of the median step. MB/step: "
            "bytes sent to the compute copy per step in the blocks' formats; BF16 MB/step: the same "
            "sends in BF16. Weights: host time per step in the runtime's packing, materialization and "
            "(block-swap) uploads and expansions; on CUDA the copies themselves are asynchronous."]
    if empty:
        out += ["", "Stopped before their first step (no row): " + ", ".join(empty) + "."]
    if unreadable:
        out += ["", "Summaries that are not JSON (no row): " + ", ".join(unreadable) + "."]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
