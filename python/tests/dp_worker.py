"""One rank of a data-parallel job as `torchrun --nproc_per_node 2` starts it (env://: RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT), with a DDP model and the agent on the default process group:
test_distributed.py starts two. It trains until block 0 has been pinned to INT4 for three steps
(at most --max-steps); with --die-at S rank 1 kills itself at step S, after its optimizer step."""

import argparse
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import selective_precision as sp
from conftest import FAST_CONFIG, TinyModel


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--port", type=int, required=True, help="rank 0's telemetry port (control: + 1)")
    p.add_argument("--max-steps", type=int, default=20000)
    p.add_argument("--die-at", type=int, default=-1)
    a = p.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = TinyModel()
    ddp = DistributedDataParallel(model)  # before apply: DDP's first broadcast writes the parameters
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    config = dict(FAST_CONFIG, process_group_timeout_s=10)
    with sp.Agent(config=config, telemetry=os.path.join(a.out, "run.jsonl"),
                  telemetry_endpoint="tcp://127.0.0.1:%d" % a.port,
                  control_endpoint="tcp://127.0.0.1:%d" % (a.port + 1)) as agent:
        assert agent.rank == rank and agent.world_size == 2
        agent.register_blocks(model.layers, model=model)
        sp.torch.apply(model, agent, optimizer=opt)
        pinned_at = None
        for step in range(a.max_steps):
            loss = ddp(torch.randn(4, 6, 16, generator=gen))
            loss.backward()
            opt.step()
            if step == a.die_at and rank == 1:
                os._exit(9)
            agent.step(loss)
            opt.zero_grad()
            if pinned_at is None and agent.precisions["layers.0"] == "int4":
                pinned_at = step
            if pinned_at is not None and step >= pinned_at + 3:
                break
    print("rank %d: %d steps, pinned at %s" % (rank, step + 1, pinned_at), flush=True)


if __name__ == "__main__":
    main()
