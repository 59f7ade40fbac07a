#!/usr/bin/python3
"""A PyTorch GPT on the bundled text with the Selective Precision agent attached.

The shape of sp-trainer's default model (byte-level, 4 pre-norm blocks, d_model 64, 4 heads,
sequence 64, batch 8, AdamW at 3e-3 with warm-up and cosine decay). While it trains,
``sp-dashboard --connect tcp://127.0.0.1:5556`` follows it and ``sp-ctl pin --blocks 0 --precision
int8`` reaches it. At the end it prints a summary like sp-trainer's.

    /usr/bin/python3 examples/python/train_gpt.py --steps 300 --telemetry run.jsonl
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


class Block(nn.Module):
    """Pre-norm: LayerNorm -> causal self-attention -> residual; LayerNorm -> MLP 4d -> residual."""

    def __init__(self, d_model, heads, seq_len):
        super().__init__()
        self.heads = heads
        self.ln_attn = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.attn_out = nn.Linear(d_model, d_model)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp_in = nn.Linear(d_model, 4 * d_model)
        self.mlp_out = nn.Linear(4 * d_model, d_model)
        self.register_buffer("mask", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_attn(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
        x = x + self.attn_out((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.ln_mlp(x))))


class Gpt(nn.Module):
    def __init__(self, blocks=4, d_model=64, heads=4, seq_len=64):
        super().__init__()
        self.embed = nn.Embedding(256, d_model)
        self.position = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, seq_len) for _ in range(blocks))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 256)

    def forward(self, tokens, targets):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return F.cross_entropy(self.head(self.ln(x)).flatten(0, 1), targets.flatten())


def batches(data, batch, seq_len, generator):
    while True:
        start = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=generator)
        window = torch.stack([data[s:s + seq_len + 1] for s in start.tolist()])
        yield window[:, :-1], window[:, 1:]


def learning_rate(step, steps, peak):
    warmup = max(1, min(30, steps // 10))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--text", default=DEFAULT_TEXT)
    p.add_argument("--config", help="policy config: a JSON file (core/CONFIG.md)")
    p.add_argument("--telemetry", help="write telemetry JSONL to this file")
    p.add_argument("--telemetry-endpoint", default="tcp://127.0.0.1:5556")
    p.add_argument("--control-endpoint", default="tcp://127.0.0.1:5557")
    p.add_argument("--no-network", action="store_true", help="no live telemetry or control")
    p.add_argument("--monitor-only", action="store_true", help="decide, but do not round (no sp.torch.apply)")
    p.add_argument("--threads", type=int, help="threads for the matrix products (default: every core)")
    a = p.parse_args(argv)
    print("threads:", sp.configure_threads(a.threads))
    torch.manual_seed(a.seed)
    with open(a.text, "rb") as f:
        text = torch.tensor(list(f.read()), dtype=torch.long)
    split = int(len(text) * 0.9)
    train = batches(text[:split], a.batch, a.seq_len, torch.Generator().manual_seed(a.seed))
    held_out = batches(text[split:], a.batch, a.seq_len, torch.Generator().manual_seed(a.seed + 1))
    eval_set = [next(held_out) for _ in range(4)]
    model = Gpt(a.blocks, a.d_model, 4, a.seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)

    def evaluate():
        with torch.no_grad():
            return sum(model(x, y).item() for x, y in eval_set) / len(eval_set)

    start = time.time()
    with sp.Agent(config=a.config, telemetry=a.telemetry, network=not a.no_network,
                  telemetry_endpoint=a.telemetry_endpoint, control_endpoint=a.control_endpoint) as agent:
        agent.register_blocks(model.blocks, model=model)
        if not a.monitor_only:
            sp.torch.apply(model, agent, optimizer=optimizer)
        agent.on_change(lambda precisions: print("  map:", precisions, flush=True))
        first_eval = final_eval = evaluate()
        agent.record_eval_loss(first_eval, step=0)
        for step in range(a.steps):
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, a.steps, a.lr)
            x, y = next(train)
            loss = model(x, y)
            loss.backward()
            agent.step(loss)
            optimizer.step()
            optimizer.zero_grad()
            if step % a.eval_every == 0 or step == a.steps - 1:
                final_eval = evaluate()
                agent.record_eval_loss(final_eval, step=step + 1)
                print("step %5d/%d  train %.4f  eval %.4f" % (step, a.steps, loss.item(), final_eval), flush=True)
    s = agent.summary()
    print("summary")
    print("  steps            %d in %.1f s" % (s["steps"], time.time() - start))
    print("  eval loss        %.4f -> %.4f (initial -> final)" % (first_eval, final_eval))
    print("  precision        block-steps: %s" % ", ".join("%d %s" % (n, f) for f, n in sorted(s["block_steps"].items())))
    print("  switches         %d block precision changes" % s["switches"])
    print("  measured saving  %.2f%% of all bytes copied vs all-BF16 (bytes the runtime copied, scales "
          "included: the records' estimated saving counts element widths only)" % s["saving_pct"])
    print("  agent overhead   %.3f s" % s["overhead"]["total_s"])
    print("  telemetry        %s" % (a.telemetry or "off"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the agent wrote run_end "interrupted" on its way out
        print("interrupted", file=sys.stderr)
        sys.exit(130)
