#!/usr/bin/python3
"""A real PyTorch trainer with the Selective Precision agent attached: an ``nn.TransformerEncoder``
language model on the bundled text, as people write one.

* a causal mask (pre-norm layers: torch 1.13's fused inference path stays off, so every forward
  goes through the covered attention);
* gradient accumulation, gradient clipping, a warm-up + cosine ``LambdaLR`` schedule, optional bf16
  autocast (``--bf16``), a ``no_grad`` evaluation every ``--eval-every`` steps, and a checkpoint at
  the end (``--checkpoint``: the masters, the optimizer, the scheduler and the step);
* the agent attached with ``sp.torch.apply(model, agent, optimizer=optimizer)``, so the loop calls
  ``optimizer.step()`` before ``agent.step(loss)`` and loses nothing.

    /usr/bin/python3 examples/python/train_transformer.py --steps 200 --telemetry run.jsonl
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import selective_precision as sp

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEXT = os.path.join(HERE, "..", "..", "resources", "text", "kjv_torah.txt")


class TransformerLM(nn.Module):
    def __init__(self, layers, d_model, heads, seq_len, vocab=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("causal", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, tokens):
        n = tokens.shape[1]
        x = self.embed(tokens) + self.position(torch.arange(n, device=tokens.device))
        x = self.encoder(x, mask=self.causal[:n, :n])
        return self.head(self.ln(x))


def batches(data, batch, seq_len, generator):
    while True:
        start = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=generator)
        window = torch.stack([data[s:s + seq_len + 1] for s in start.tolist()])
        yield window[:, :-1], window[:, 1:]


def warmup_cosine(steps):
    warmup = max(1, min(30, steps // 10))

    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, steps - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=8, help="sequences per micro-batch")
    p.add_argument("--accumulate", type=int, default=2, help="micro-batches per optimizer step")
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clipping (0: off)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--bf16", action="store_true", help="bf16 autocast for the forward")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--text", default=DEFAULT_TEXT)
    p.add_argument("--config", help="policy config: a JSON file (core/CONFIG.md)")
    p.add_argument("--telemetry", help="write telemetry JSONL to this file")
    p.add_argument("--checkpoint", help="save the masters, optimizer and scheduler here at the end")
    p.add_argument("--telemetry-endpoint", default="tcp://127.0.0.1:5556")
    p.add_argument("--control-endpoint", default="tcp://127.0.0.1:5557")
    p.add_argument("--no-network", action="store_true", help="no live telemetry or control")
    p.add_argument("--monitor-only", action="store_true", help="decide, but do not round (no sp.torch.apply)")
    p.add_argument("--threads", type=int, help="threads for the matrix products (default: every core)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse(argv)
    print("threads:", sp.configure_threads(a.threads))
    torch.manual_seed(a.seed)
    with open(a.text, "rb") as f:
        text = torch.tensor(list(f.read()), dtype=torch.long)
    split = int(len(text) * 0.9)
    train = batches(text[:split], a.batch, a.seq_len, torch.Generator().manual_seed(a.seed))
    held_out = batches(text[split:], a.batch, a.seq_len, torch.Generator().manual_seed(a.seed + 1))
    eval_set = [next(held_out) for _ in range(4)]
    model = TransformerLM(a.layers, a.d_model, a.heads, a.seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(a.steps))

    def loss_of(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            return F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())

    def evaluate():
        model.eval()
        with torch.no_grad():
            loss = sum(loss_of(x, y).item() for x, y in eval_set) / len(eval_set)
        model.train()
        return loss

    start = time.time()
    with sp.Agent(config=a.config, telemetry=a.telemetry, network=not a.no_network,
                  telemetry_endpoint=a.telemetry_endpoint, control_endpoint=a.control_endpoint) as agent:
        agent.register_blocks(model.encoder.layers, model=model)
        if not a.monitor_only:
            sp.torch.apply(model, agent, optimizer=optimizer)
        agent.on_change(lambda precisions: print("  map:", precisions, flush=True))
        first_eval = final_eval = evaluate()
        agent.record_eval_loss(first_eval, step=0)
        for step in range(a.steps):
            total = 0.0
            for _ in range(a.accumulate):
                x, y = next(train)
                loss = loss_of(x, y) / a.accumulate
                loss.backward()
                total += loss.item()
            if a.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            optimizer.step()  # apply(optimizer=) put the masters back first
            scheduler.step()
            agent.step(total)
            optimizer.zero_grad(set_to_none=True)
            if step % a.eval_every == 0 or step == a.steps - 1:
                final_eval = evaluate()
                agent.record_eval_loss(final_eval, step=step + 1)
                print("step %5d/%d  train %.4f  eval %.4f" % (step, a.steps, total, final_eval), flush=True)
        if a.checkpoint:  # the masters, whatever the parameters hold now
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "step": a.steps}, a.checkpoint)
    s = agent.summary()
    print("summary")
    print("  steps            %d in %.1f s" % (s["steps"], time.time() - start))
    print("  eval loss        %.4f -> %.4f (initial -> final)" % (first_eval, final_eval))
    print("  precision        block-steps: %s" % ", ".join("%d %s" % (n, f) for f, n in sorted(s["block_steps"].items())))
    print("  measured saving  %.2f%% of the bytes copied vs all-BF16" % s["saving_pct"])
    print("  checkpoint       %s" % (a.checkpoint or "none"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the agent wrote run_end "interrupted" on its way out
        print("interrupted", file=sys.stderr)
        sys.exit(130)
