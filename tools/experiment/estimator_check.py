#!/usr/bin/env python3
"""The loss estimate (core/POLICY.md rule 23) against paired single-block gaps, from one sp-trainer run.

The run profiles at its distribution statistics steps (`distribution_interval_steps`, with
`telemetry_every_step` on: the step lines carry `loss_estimates`) and probes, with `--probe-maps`, every
block alone in every low format at the same steps (`{"step": S, "name": ..., "map": [...]}` lines, one
block off BF16 per map). For each step both have, prints the Spearman rank correlation between the
estimate (in percent of that step's training loss) and the measured gap (`gap_pct`) over the
(block, format) pairs, per format too, the median ratio measured / estimated, and the largest gaps.

    estimator_check.py --telemetry RUN.jsonl --probes PROBES.jsonl

Prints the map file such a run needs with `--write-maps FILE --blocks N --steps S,S,...`.
"""

import argparse
import json
import math
import sys

FORMATS = ("int8", "fp8_e4m3", "fp8_e5m2", "int4")


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2  # ties share their mean rank
        i = j + 1
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else float("nan")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def write_maps(path, blocks, steps):
    with open(path, "w") as f:
        for step in steps:
            for b in range(blocks):
                for fmt in FORMATS:
                    m = ["bf16"] * blocks
                    m[b] = fmt
                    f.write(json.dumps({"step": step, "name": "b%d-%s" % (b, fmt), "map": m}) + "\n")


def report(telemetry, probes):
    estimates, losses = {}, {}
    for r in read_jsonl(telemetry):
        if "loss_estimates" in r:
            estimates[r["step"]] = {e["id"]: e["loss_delta"] for e in r["loss_estimates"]}
            losses[r["step"]] = r.get("loss")
    measured = {}
    for p in read_jsonl(probes):
        measured.setdefault(p["step"], []).append(p)
    for step in sorted(set(estimates) & set(measured)):
        pairs = []
        for p in measured[step]:
            low = [(b, f) for b, f in enumerate(p["map"]) if f != "bf16"]
            if len(low) != 1 or low[0][0] not in estimates[step]:
                continue
            b, f = low[0]
            pairs.append((b, f, 100.0 * estimates[step][b][f] / losses[step], p["gap_pct"]))
        est, gap = [x[2] for x in pairs], [x[3] for x in pairs]
        ratios = sorted(g / e for e, g in zip(est, gap) if e > 0)
        print("step %d: %d pairs, Spearman %.3f, median measured/estimated %.2f"
              % (step, len(pairs), spearman(est, gap), ratios[len(ratios) // 2] if ratios else float("nan")))
        for fmt in FORMATS:
            sub = [x for x in pairs if x[1] == fmt]
            if len(sub) > 1:
                print("  %-9s Spearman %6.3f   estimated mean %+.3g%%   measured mean %+.3g%%"
                      % (fmt, spearman([x[2] for x in sub], [x[3] for x in sub]),
                         sum(x[2] for x in sub) / len(sub), sum(x[3] for x in sub) / len(sub)))
        top = sorted(pairs, key=lambda x: -x[3])[:4]
        print("  largest measured (block, format, estimated %, measured %):",
              ", ".join("(%d, %s, %.3g, %.3g)" % t for t in top))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--telemetry")
    parser.add_argument("--probes")
    parser.add_argument("--write-maps")
    parser.add_argument("--blocks", type=int)
    parser.add_argument("--steps")
    a = parser.parse_args()
    if a.write_maps:
        if not a.blocks or not a.steps:
            parser.error("--write-maps needs --blocks and --steps")
        write_maps(a.write_maps, a.blocks, [int(s) for s in a.steps.split(",")])
        return 0
    if not a.telemetry or not a.probes:
        parser.error("--telemetry and --probes are required")
    report(a.telemetry, a.probes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
