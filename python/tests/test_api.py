"""The Python API: construction errors, registration, the step loop, commands, the run's end."""

import socket

import pytest
import torch

import selective_precision as sp
from conftest import FAST_CONFIG, TinyModel, read_jsonl, train


def run_end_of(path):
    ends = [r for r in read_jsonl(path) if r.get("kind") == "run_end"]
    assert len(ends) == 1, ends
    return ends[0]


def test_bad_config_raises_value_error_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match="int8_threshold"):
        sp.Agent(config={"int8_threshold": 7.0}, network=False)
    with pytest.raises(ValueError, match="no_such_key"):
        sp.Agent(config={"no_such_key": 1}, network=False)
    bad = tmp_path / "bad.json"
    bad.write_text('{"bf16_threshold": "high"}')
    with pytest.raises(ValueError, match="bf16_threshold") as e:
        sp.Agent(config=bad, network=False)
    assert str(bad) in str(e.value)
    with pytest.raises(ValueError):
        sp.Agent(config={"x": float("nan")}, network=False)
    with pytest.raises(TypeError):
        sp.Agent(config=42, network=False)


def test_refused_files_and_endpoints_raise_os_error(tmp_path):
    with pytest.raises(OSError, match="telemetry"):
        sp.Agent(telemetry=tmp_path / "missing" / "run.jsonl", network=False)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(OSError, match="cannot bind"):
            sp.Agent(telemetry_endpoint="tcp://127.0.0.1:%d" % port,
                     control_endpoint="ipc://%s" % (tmp_path / "ctl"))
    finally:
        taken.close()
    key = tmp_path / "agent.key"
    key.write_text("not a key\n")
    key.chmod(0o600)
    with pytest.raises(OSError):
        sp.Agent(telemetry_endpoint="ipc://%s" % (tmp_path / "p"), control_endpoint="ipc://%s" % (tmp_path / "c"),
                 server_key=key)


def test_force_list_beyond_the_model_is_a_value_error(tiny):
    agent = sp.Agent(config={"force_int8_blocks": [7]}, network=False)
    with pytest.raises(ValueError, match="force_int8_blocks"):
        agent.register_blocks(tiny.layers)


def test_block_names_follow_the_model_the_dict_or_the_order(tiny):
    a = sp.Agent(network=False)
    a.register_blocks(tiny.layers, model=tiny)
    assert a.block_names == ["layers.0", "layers.1", "layers.2"]
    assert a.precisions == {"layers.0": "bf16", "layers.1": "bf16", "layers.2": "bf16"}
    b = sp.Agent(network=False)
    b.register_blocks({"first": tiny.layers[0], "second": tiny.layers[2]})
    assert b.block_names == ["first", "second"]
    c = sp.Agent(network=False)
    c.register_blocks(tiny.layers)
    assert c.block_names == ["blocks.0", "blocks.1", "blocks.2"]
    with pytest.raises(RuntimeError):
        c.register_blocks(tiny.layers)
    with pytest.raises(ValueError, match="not a submodule"):
        sp.Agent(network=False).register_blocks([torch.nn.Linear(2, 2)], model=tiny)
    for agent in (a, b, c):
        agent.close()


def test_the_loop_routes_and_calls_on_change_at_the_boundary(tiny, tmp_path):
    seen = []
    path = tmp_path / "run.jsonl"
    with sp.Agent(config=FAST_CONFIG, telemetry=path, network=False) as agent:
        agent.register_blocks(tiny.layers, model=tiny)
        agent.on_change(seen.append)
        applies_at = agent.pin([0, "layers.2"], "int4")
        assert applies_at == 0
        train(tiny, agent, 6)
        agent.record_eval_loss(0.5, step=6)
        assert agent.precisions["layers.0"] == "int4" and agent.precisions["layers.2"] == "int4"
        assert seen and seen[0]["layers.0"] == "int4"
        assert agent.current_step == 6
        with pytest.raises(ValueError, match="block"):
            agent.pin([9], "int8")
        with pytest.raises(ValueError, match="precision"):
            agent.pin([0], "fp9")
    records = read_jsonl(path)
    assert records[0]["type"] == "header"
    commands = [r for r in records if r.get("kind") == "command"]
    assert commands[0]["step"] == 0 and commands[0]["ok"]
    assert run_end_of(path)["reason"] == "completed"
    summary = agent.summary()
    assert summary["steps"] == 6 and summary["block_steps"]["int4"] >= 12


def test_an_exception_inside_with_ends_the_run_with_error(tiny, tmp_path):
    path = tmp_path / "run.jsonl"
    with pytest.raises(RuntimeError, match="boom"):
        with sp.Agent(telemetry=path, network=False) as agent:
            agent.register_blocks(tiny.layers)
            train(tiny, agent, 2)
            raise RuntimeError("boom\nsecond line")
    assert run_end_of(path)["reason"] == "error: RuntimeError: boom second line"
    assert agent.closed


def test_keyboard_interrupt_ends_the_run_interrupted(tiny, tmp_path):
    path = tmp_path / "run.jsonl"
    with pytest.raises(KeyboardInterrupt):
        with sp.Agent(telemetry=path, network=False) as agent:
            agent.register_blocks(tiny.layers)
            train(tiny, agent, 1)
            raise KeyboardInterrupt
    assert run_end_of(path)["reason"] == "interrupted"


def test_close_outside_with_and_steps_after_it(tiny, tmp_path):
    path = tmp_path / "run.jsonl"
    agent = sp.Agent(telemetry=path, network=False)
    agent.register_blocks(tiny.layers)
    train(tiny, agent, 1)
    agent.close()
    agent.close()  # once
    assert run_end_of(path)["reason"] == "completed" and run_end_of(path)["step"] == 0
    with pytest.raises(RuntimeError, match="ended"):
        train(tiny, agent, 1)


def test_loss_must_be_one_number(tiny):
    agent = sp.Agent(network=False)
    agent.register_blocks(tiny.layers)
    with pytest.raises(ValueError, match="one-element"):
        agent.step(torch.ones(2))
    agent.step(torch.tensor(1.5))
    agent.step(2.5)
    assert agent.current_step == 2
    agent.close()


def test_monitoring_only_leaves_the_weights_alone(tmp_path):
    torch.manual_seed(3)
    model = TinyModel()
    before = [p.detach().clone() for p in model.parameters()]
    agent = sp.Agent(config=dict(FAST_CONFIG, force_int4_blocks=[0, 1, 2], mode="static"), network=False)
    agent.register_blocks(model.layers)
    train(model, agent, 3, lr=0.0)
    assert agent.precisions["blocks.0"] == "int4"
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    agent.close()
