"""The Python trainer live: sp-ctl reaches it (a pin applies at the acknowledged step and its command
event is in the file), a subscriber and a command client ride along 2,000 steps without a deadlock,
and Ctrl-C ends the run cleanly. Every wait is on an event (a reply, a process's exit, a record),
bounded by a timeout that only a hung run reaches."""

import json
import re
import signal
import subprocess
import sys
import threading

from conftest import EXAMPLE, SP_CTL, ipc_endpoints, read_jsonl, sp_ctl

TINY = ["--blocks", "2", "--d-model", "16", "--seq-len", "16", "--batch", "2", "--threads", "1"]


def start_trainer(tmp_path, steps, *extra):
    pub, ctl = ipc_endpoints(tmp_path)
    telemetry = tmp_path / "run.jsonl"
    proc = subprocess.Popen([sys.executable, EXAMPLE, "--steps", str(steps), "--telemetry", str(telemetry),
                             "--telemetry-endpoint", pub, "--control-endpoint", ctl, *TINY, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, pub, ctl, telemetry


def test_a_pin_from_sp_ctl_applies_at_the_acknowledged_step(tmp_path):
    proc, pub, ctl, telemetry = start_trainer(tmp_path, 100000, "--eval-every", "1000")
    try:
        # The request waits in ZeroMQ's queue until the trainer binds: no sleep needed.
        pin = sp_ctl("pin", "--blocks", "1", "--precision", "int8", "--endpoint", ctl,
                     "--telemetry-endpoint", pub, "--timeout", "60", "--wait-timeout", "60")
        assert pin.returncode == 0, pin.stdout + pin.stderr
        applied = re.search(r"applied: .* at step (\d+)", pin.stdout)
        assert applied, pin.stdout
        step = int(applied.group(1))
        snapshot = sp_ctl("snapshot", "--endpoint", ctl, "--timeout", "30")
        assert snapshot.returncode == 0, snapshot.stderr
        assert "mode dynamic (budget target 50.0%, used in mode budget only)" in snapshot.stdout, snapshot.stdout
        # A budget target outside budget mode would do nothing: the operator is told so (exit 1).
        budget = sp_ctl("budget", "--target-pct", "60", "--endpoint", ctl, "--telemetry-endpoint", pub,
                        "--timeout", "30", "--wait-timeout", "60")
        assert budget.returncode == 1, budget.stdout + budget.stderr
        assert "rejected by the agent" in budget.stderr and "switch first" in budget.stderr, budget.stderr
        # Two policy updates after the pin: the map they record is the pinned one.
        updates = sp_ctl("tail", "--endpoint", pub, "--topics", "update", "--count", "2", "--timeout", "60")
        assert updates.returncode == 0, updates.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err  # Ctrl-C: the example's exit status for an interrupted run
    records = read_jsonl(telemetry)
    commands = [r for r in records if r.get("kind") == "command"]
    assert [c["step"] for c in commands][0] == step
    assert commands[0]["ok"] and commands[0]["command"] == {"cmd": "pin", "blocks": [1], "precision": "int8"}
    assert not commands[1]["ok"] and commands[1]["command"]["cmd"] == "set_budget"
    later = [r for r in records if "step_id" in r and r["step_id"] >= step]
    assert later and all(u["block_details"]["1"]["precision"] == "int8" for u in later)
    ends = [r for r in records if r.get("kind") == "run_end"]
    assert len(ends) == 1 and ends[0]["reason"] == "interrupted"


def test_two_thousand_steps_with_a_subscriber_and_a_command_client(tmp_path):
    proc, pub, ctl, telemetry = start_trainer(tmp_path, 2000, "--eval-every", "500")
    # To a file: a pipe nobody reads until the end would fill and stall the subscriber.
    tail_file = open(tmp_path / "tail.jsonl", "w")
    tail = subprocess.Popen([SP_CTL, "tail", "--endpoint", pub, "--json"], stdout=tail_file,
                            stderr=subprocess.DEVNULL)
    replies = []
    stop = threading.Event()

    def commands():
        blocks = ["0", "1"]
        while not stop.is_set():
            for cmd in (["pin", "--blocks", blocks[len(replies) % 2], "--precision", "int4"],
                        ["release", "--blocks", blocks[len(replies) % 2]]):
                r = sp_ctl(*cmd, "--endpoint", ctl, "--no-wait", "--timeout", "10")
                replies.append(r.returncode)

    client = threading.Thread(target=commands)
    client.start()
    try:
        out, err = proc.communicate(timeout=500)
    finally:
        stop.set()
        client.join(timeout=60)
        tail.send_signal(signal.SIGINT)
        tail.wait(timeout=60)
        tail_file.close()
    tail_out = (tmp_path / "tail.jsonl").read_text()
    assert proc.returncode == 0, err
    assert "summary" in out
    assert replies.count(0) >= 4, replies  # the agent answered while training
    records = read_jsonl(telemetry)
    assert [r for r in records if r.get("kind") == "run_end"][0]["reason"] == "completed"
    assert max(r["step_id"] for r in records if "step_id" in r) >= 1990
    assert len([r for r in records if r.get("kind") == "command"]) >= 2
    seen = [json.loads(line) for line in tail_out.splitlines() if line.startswith("{")]
    assert any(m["topic"] == "update" for m in seen)
    assert any(m["topic"] == "event" and m["message"].get("kind") == "run_end" for m in seen), \
        "the subscriber did not see the run's end"
    assert sp_ctl("validate", telemetry).returncode == 0
