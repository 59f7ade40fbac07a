"""A torchrun-style data-parallel job from Python: two processes on the CPU with Gloo (env://), a
DDP-wrapped model, and an agent per rank bound to the default process group through the C++
data-parallel link (agent/PROTOCOL.md §11)."""

import os
import socket
import subprocess
import sys
import time

import pytest

from conftest import read_jsonl, sp_ctl

HERE = os.path.dirname(os.path.abspath(__file__))


def free_ports(count):
    """`count` consecutive free ports on the loopback interface."""
    for _ in range(50):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
        probe.close()
        if base + count > 65535:
            continue
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                held.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no free ports")


def start_job(tmp_path, *extra):
    master, base = free_ports(1), free_ports(4)
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "dp_worker.py"), "--out", str(tmp_path),
                                       "--port", str(base), *extra],
                                      env=env, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    return procs, base


def maps(path):
    return {r["step_id"]: {b: d["precision"] for b, d in r["block_details"].items()}
            for r in read_jsonl(path) if "step_id" in r}


def test_two_ranks_apply_one_map_and_rank_0_takes_the_commands(tmp_path):
    procs, base = start_job(tmp_path)
    try:
        refused = sp_ctl("pin", "--endpoint", "tcp://127.0.0.1:%d" % (base + 3), "--blocks", "0",
                         "--precision", "int4", "--timeout", "60")
        assert refused.returncode != 0
        assert "tcp://127.0.0.1:%d" % (base + 1) in refused.stdout + refused.stderr  # rank 0's endpoint
        pinned = sp_ctl("pin", "--endpoint", "tcp://127.0.0.1:%d" % (base + 1), "--blocks", "0",
                        "--precision", "int4", "--timeout", "60")
        assert pinned.returncode == 0, pinned.stdout + pinned.stderr
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outputs
    rank0, rank1 = maps(tmp_path / "run.rank0.jsonl"), maps(tmp_path / "run.rank1.jsonl")
    assert rank0 and rank0 == rank1  # the same map at every step
    assert any(m["0"] == "int4" for m in rank1.values())  # the pin sent to rank 0 applied on rank 1
    for rank in (0, 1):
        ends = [r for r in read_jsonl(tmp_path / ("run.rank%d.jsonl" % rank)) if r.get("kind") == "run_end"]
        assert ends and ends[0]["reason"] == "completed"


def test_a_killed_rank_ends_the_other_with_run_end_within_the_timeout(tmp_path):
    procs, _ = start_job(tmp_path, "--die-at", "5")
    try:
        procs[1].communicate(timeout=120)
        died = time.monotonic()
        out = procs[0].communicate(timeout=60)[0]
        waited = time.monotonic() - died
    finally:
        for p in procs:
            p.kill()
    assert procs[1].returncode == 9
    assert procs[0].returncode != 0, out
    assert waited <= 10 + 5, waited  # process_group_timeout_s 10, and the run's end
    ends = [r for r in read_jsonl(tmp_path / "run.rank0.jsonl") if r.get("kind") == "run_end"]
    assert len(ends) == 1 and ends[0]["reason"].startswith("error:"), ends
