#!/usr/bin/env python3
"""Writes the bundled simulator example (stats.jsonl, calibration.json) deterministically.

A 48-block transformer as in the seed's "Problem" table: early blocks have low gradient activity and
low INT8 error, mid blocks moderate, late blocks high. Mid blocks 16-28 quiet down between steps 50 and 140 and 16-21 grow louder after; block 10 has a burst of non-finite gradients
at step 95, an operator pins blocks 3,4 to bf16 at step 120 and releases them at step 160.
Run: python3 make_example.py  (from this folder)
"""
import json
import math
import random

BLOCKS = 48
STEPS = 200
rng = random.Random(20261121)

layout = {"type": "layout", "blocks": [
    {"id": b, "name": f"blocks.{b}", "bytes_bf16": 2 * 12 * 1024 * 1024} for b in range(BLOCKS)]}

def activity(block, step):
    depth = block / (BLOCKS - 1)
    base = 0.2 + 1.6 * depth ** 2               # late blocks are loud
    decay = 1.0 + 2.0 * math.exp(-step / 40.0)  # gradients shrink as training settles
    if 16 <= block <= 28:                       # mid blocks settle, and some wake up again later
        base *= 0.08 if 50 <= step < 140 else (3.0 if step >= 140 and block <= 21 else 1.0)
    return base * decay * (1.0 + 0.15 * rng.gauss(0.0, 1.0))

with open("stats.jsonl", "w") as out:
    out.write(json.dumps(layout) + "\n")
    for step in range(STEPS):
        if step == 120:
            out.write(json.dumps({"step": step, "command": {"cmd": "pin", "blocks": [3, 4], "precision": "bf16"}}) + "\n")
        if step == 160:
            out.write(json.dumps({"step": step, "command": {"cmd": "release", "blocks": [3, 4]}}) + "\n")
        blocks = []
        for b in range(BLOCKS):
            l2 = max(activity(b, step), 1e-6)
            numel = 12 * 1024 * 1024
            rms = l2 / math.sqrt(numel)
            entry = {"id": b, "l2_norm": round(l2, 6), "max_abs": round(rms * 9.0, 9),
                     "variance": float(f"{rms * rms:.6g}"), "mean": float(f"{rms * 0.01 * rng.gauss(0, 1):.6g}"),
                     "numel": numel, "nonfinite_count": 0}
            if b == 10 and step == 95:
                entry.update({"l2_norm": None, "max_abs": None, "variance": None, "mean": None,
                              "nonfinite_count": 17})
            blocks.append(entry)
        out.write(json.dumps({"step": step, "timestamp": round(1763700000.0 + 0.35 * step, 3),
                              "blocks": blocks}) + "\n")

with open("calibration.json", "w") as out:
    errors = {str(b): round(0.01 + 0.07 * (b / (BLOCKS - 1)) ** 1.5, 5) for b in range(BLOCKS)}
    json.dump({"errors": errors}, out, indent=1)
    out.write("\n")
