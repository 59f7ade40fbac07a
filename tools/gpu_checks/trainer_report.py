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
block-swap runs get a table of their own: each format's speed-up over BF16 in block-swap mode. The bus-bound
rows (run_trainer_on_device.sh --bus-bound: names bus-bound-*) get theirs, with upload, expansion and compute
time, the weights' peak device memory, and each row's speed-up over BF16 set against its byte ratio (the limit
when the bus bounds the step), and the issue's goals judged one by one. Exits 1 when a summary
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
        "upload_ms": 1e3 * s["upload_s"] / steps,
        "expand_ms": 1e3 * s["expand_s"] / steps,
        "peak_mb": s["weights_peak_bytes"] / 1e6,
        "block_bf16_mb": s["largest_block_bf16_bytes"] / 1e6,
        "slots": s["swap_slots"],
        "agent_all_share": s["agent_s"] / s["train_step_s"] if s["train_step_s"] > 0 else 0.0,
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


BUS_ORDER = ["bf16", "int8", "fp8_e4m3", "int4", "budget50", "budget65"]


def bus_bound_table(runs):
    """The bus-bound rows (bus-bound-*) and the goals of issue 46, each judged."""
    rows = {r["name"][len("bus-bound-"):]: r for r in runs if r["name"].startswith("bus-bound-")}
    if not rows:
        return []
    compute = rows.get("resident-bf16")
    base = rows.get("bf16")
    out = ["", "## Bus-bound: block-swap of a frozen base, BF16 compute, batch 1", "",
           "| row | step (ms) | upload (ms/step) | expansion (ms/step) | compute (ms) | weights peak (MB) | "
           "K x block BF16 (MB) | MB/step | speed-up vs BF16 | byte ratio (limit) | of the limit | "
           "agent+profiling |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    judged = {}
    for name in ["resident-bf16"] + BUS_ORDER:
        r = rows.get(name)
        if not r:
            continue
        speedup = base["step_ms"] / r["step_ms"] if base else float("nan")
        ratio = base["mb_per_step"] / r["mb_per_step"] if base and r["mb_per_step"] > 0 else float("nan")
        slots = r["slots"] or 0
        if slots:
            judged[name] = (speedup, ratio)
        compute_cell = f"{compute['step_ms']:.2f}" if compute else "n/a"
        # The resident row moves nothing: it has no byte ratio, and no speed-up to judge.
        against = (f"{speedup:.3f}x | {ratio:.2f}x | {100 * speedup / ratio:.0f}%" if slots and ratio == ratio
                   else "— | — | —")
        out.append(f"| {name} | {r['step_ms']:.2f} | {r['upload_ms']:.2f} | {r['expand_ms']:.2f} | "
                   f"{compute_cell} | {r['peak_mb']:.1f} | {slots * r['block_bf16_mb']:.1f} | "
                   f"{r['mb_per_step']:.2f} | {against} | {100 * r['agent_all_share']:.2f}% |")
    out += ["", "Compute: the step of bus-bound-resident-bf16, the same BF16 computation with the weights "
            "resident (nothing uploaded). Upload and expansion: block-swap's copies and expansions per "
            "training step (on CUDA their device time from timing events, overlapping the compute; on "
            "the CPU the host's time doing them, serial). Byte ratio: BF16's bytes per step over the "
            "row's, the speed-up the bus allows when it bounds the step. Weights peak: the slots at "
            "their largest, payload staging included; K x block BF16: K slots of the largest block's "
            "BF16 weights.", "", "### Goals (issue 46)", ""]

    def goal(text, ok):
        out.append(f"- {text}: {'met' if ok else 'NOT met'}")

    if base and compute:
        goal(f"bus-bound setting (BF16 upload {base['upload_ms']:.2f} ms/step > compute "
             f"{compute['step_ms']:.2f} ms)", base["upload_ms"] > compute["step_ms"])
    for name, need in (("int8", 1.6), ("int4", 2.4)):
        if name in judged:
            goal(f"{name.upper()} >= {need}x BF16's step ({judged[name][0]:.3f}x)", judged[name][0] >= need)
    for name in ("budget50", "budget65"):
        if name in judged:
            speedup, ratio = judged[name]
            goal(f"{name} speed-up >= 80% of its byte ratio ({speedup:.3f}x of {ratio:.2f}x)",
                 speedup >= 0.8 * ratio)
    for name, r in sorted(rows.items()):
        if r["slots"]:
            limit = r["slots"] * 2 * r["block_bf16_mb"] + 1.0  # weights + payload per slot, 1 MB slack
            goal(f"{name}: weights peak {r['peak_mb']:.1f} MB <= K x (block BF16 + its payload) = "
                 f"{limit:.1f} MB", r["peak_mb"] <= limit)
    worst = max((r["agent_all_share"] for r in rows.values()), default=0.0)
    goal(f"agent + profiling <= 1% of the step (worst row {100 * worst:.2f}%)", worst <= 0.01)
    slower = [n for n, (speedup, _) in judged.items() if n not in ("bf16", "resident-bf16") and speedup < 1.0]
    goal("no low format slower than BF16" + (f" (slower: {', '.join(slower)}; the report says why)"
                                             if slower else ""), not slower)
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
    out += bus_bound_table(ordered)
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
