#!/usr/bin/python3
"""The agent's per-step cost from Python against the C++ agent's, on the same model, in one process.

Monitoring only (no sp.torch.apply): after one forward and backward of examples/python/train_gpt.py's
model, the same gradients are handed to
  * the agent driven from Python, one `agent.step(loss)` per step (what a Python loop pays), and
  * the same kind of agent driven from C++ alone (`_run_steps_natively`: begin, collect, hints, end
    in a C++ loop, as sp-trainer drives it),
in alternating rounds; each round's ratio is Python / C++, and the median is reported (goal <= 1.2).
It also reports what the user waits for: a whole training step (forward, backward, agent, AdamW)
with the agent against the same step without it, for that model and for
examples/python/train_transformer.py's loop (nn.TransformerEncoder, two accumulated micro-batches,
clipping, a scheduler; goal <= 1.05), in alternating rounds.

    PYTHONPATH=build/ci/python /usr/bin/python3 tests/bench/bench_python_agent.py [--steps N] [--rounds R]
"""

import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))

import selective_precision as sp  # noqa: E402
from train_gpt import Gpt  # noqa: E402
from train_transformer import TransformerLM, warmup_cosine  # noqa: E402

CONFIG = {"run_calibration": False, "log_decisions": False}


def new_agent(model):
    agent = sp.Agent(config=CONFIG, network=False)
    agent.register_blocks(model.blocks, model=model)
    return agent


def agent_rounds(model, steps, rounds):
    x = torch.randint(0, 256, (8, 64))
    loss = model(x, x)
    loss.backward()
    value = float(loss)
    python_agent, cpp_agent = new_agent(model), new_agent(model)
    ratios, per_step = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            python_agent.step(value)
        t1 = time.perf_counter()
        cpp_agent._core._run_steps_natively(steps, value)
        t2 = time.perf_counter()
        ratios.append((t1 - t0) / (t2 - t1))
        per_step.append(((t1 - t0) / steps, (t2 - t1) / steps))
    python_agent.close()
    cpp_agent.close()
    return ratios, per_step


def gpt_step(model):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (8, 64))

    def step(agent):
        loss = model(x, x)
        loss.backward()
        if agent is not None:
            agent.step(loss)
        opt.step()
        opt.zero_grad()
    return step


def transformer_step(model):
    """train_transformer.py's loop body: two micro-batches, clipping, AdamW, a scheduler."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(10 ** 6))
    x = torch.randint(0, 256, (8, 64))

    def step(agent):
        total = 0.0
        for _ in range(2):
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()) / 2
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        scheduler.step()
        if agent is not None:
            agent.step(total)
        opt.zero_grad(set_to_none=True)
    return step


def with_and_without(step, blocks, model, steps, rounds=3):
    """Median seconds per step without the agent and with it (monitoring), in alternating rounds."""
    bare, with_agent = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            step(None)
        bare.append((time.perf_counter() - t0) / steps)
        agent = sp.Agent(config=CONFIG, network=False)
        agent.register_blocks(blocks, model=model)
        t0 = time.perf_counter()
        for _ in range(steps):
            step(agent)
        with_agent.append((time.perf_counter() - t0) / steps)
        agent.close()
    return statistics.median(bare), statistics.median(with_agent)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--threads", type=int, default=None)
    a = p.parse_args()
    print("threads:", sp.configure_threads(a.threads))
    torch.manual_seed(0)
    model = Gpt()
    ratios, per_step = agent_rounds(model, a.steps, a.rounds)
    py_us = statistics.median(s[0] for s in per_step) * 1e6
    cpp_us = statistics.median(s[1] for s in per_step) * 1e6
    print("agent step from Python: %.1f us; from C++: %.1f us; ratio (median of %d rounds) %.3f (goal <= 1.2)"
          % (py_us, cpp_us, a.rounds, statistics.median(ratios)))
    print("  rounds: " + " ".join("%.3f" % r for r in ratios))
    bare, with_agent = with_and_without(gpt_step(model), model.blocks, model, a.steps // 4)
    print("training step: %.2f ms bare, %.2f ms with the agent (monitoring): ratio %.3f"
          % (bare * 1e3, with_agent * 1e3, with_agent / bare))
    lm = TransformerLM(4, 64, 4, 64)
    bare, with_agent = with_and_without(transformer_step(lm), lm.encoder.layers, lm, a.steps // 8)
    print("train_transformer.py step: %.2f ms bare, %.2f ms with the agent (monitoring): ratio %.3f "
          "(goal <= 1.05)" % (bare * 1e3, with_agent * 1e3, with_agent / bare))
    return 0


if __name__ == "__main__":
    sys.exit(main())
