"""sp.torch.apply(scope=...) and the loss estimate in a PyTorch loop (core/POLICY.md rules 22, 23): the
weights scope rounds a block's weights alone, the header records the scope, the backward pass hands the
agent its layers' output gradients, mode tolerance keeps its plans within the tolerance, and the file
re-simulates decision for decision."""

import pytest
import torch
import torch.nn.functional as F

import selective_precision as sp
from conftest import FAST_CONFIG, TinyModel, read_jsonl, reference_rows, validates_and_resimulates

INT8_STATIC = dict(FAST_CONFIG, mode="static", force_int8_blocks=[0, 1, 2])


def first_layer(scope):
    """Block 0's first linear layer in one forward pass with every block pinned to INT8: its input,
    output, and the weight and bias it computed with."""
    torch.manual_seed(0)
    model = TinyModel()
    seen = {}

    def capture(module, inputs, output):
        seen.update(x=inputs[0].detach(), y=output.detach(), w=module.weight.detach().clone(),
                    b=module.bias.detach().clone())

    model.layers[0].up.register_forward_hook(capture)
    agent = sp.Agent(config=INT8_STATIC, network=False)
    agent.register_blocks(model.layers)
    sp.torch.apply(model, agent, scope=scope)
    model(torch.randn(4, 6, 16, generator=torch.Generator().manual_seed(1)))
    agent.close()
    return seen


def test_weights_scope_rounds_the_weights_alone():
    weights, compute = first_layer("weights"), first_layer("compute")
    # The same INT8 weight in both; the input rounded to BF16 in one, to INT8 per token in the other.
    torch.testing.assert_close(weights["w"], compute["w"], rtol=0, atol=0)
    torch.testing.assert_close(weights["w"], reference_rows(weights["w"], "int8", 32), rtol=0, atol=0)
    bf16_input = weights["x"].to(torch.bfloat16).float()
    torch.testing.assert_close(weights["y"], F.linear(bf16_input, weights["w"], weights["b"]), rtol=0, atol=1e-6)
    int8_input = reference_rows(compute["x"], "int8", compute["x"].numel() // 16)
    torch.testing.assert_close(compute["y"], F.linear(int8_input, compute["w"], compute["b"]), rtol=0, atol=1e-6)
    assert not torch.allclose(weights["y"], compute["y"])


def test_scope_is_checked_and_recorded(tmp_path):
    torch.manual_seed(0)
    model = TinyModel()
    agent = sp.Agent(config=FAST_CONFIG, telemetry=str(tmp_path / "t.jsonl"), network=False)
    agent.register_blocks(model.layers)
    with pytest.raises(ValueError, match="scope must be 'compute' or 'weights'"):
        sp.torch.apply(model, agent, scope="activations")
    sp.torch.apply(model, agent, scope="weights")
    loss = model(torch.randn(4, 6, 16))
    loss.backward()
    agent.step(loss)
    agent.close()
    header = read_jsonl(tmp_path / "t.jsonl")[0]
    assert header["config"]["precision_scope"] == "weights"


def test_tolerance_mode_plans_on_the_loss_estimate(tmp_path):
    telemetry = str(tmp_path / "tolerance.jsonl")
    config = dict(FAST_CONFIG, mode="tolerance", loss_tolerance_pct=0.05, distribution_interval_steps=4,
                  telemetry_every_step=True)
    torch.manual_seed(0)
    model = TinyModel()
    agent = sp.Agent(config=config, telemetry=telemetry, network=False)
    agent.register_blocks(model.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sp.torch.apply(model, agent, optimizer=opt, scope="weights")
    gen = torch.Generator().manual_seed(2)
    for _ in range(24):
        loss = model(torch.randn(4, 6, 16, generator=gen))
        loss.backward()
        opt.step()
        opt.zero_grad()
        agent.step(loss)
    agent.close()
    records = read_jsonl(telemetry)
    estimates = [r for r in records if "loss_estimates" in r]
    assert [r["step"] for r in estimates] == [0, 4, 8, 12, 16, 20]
    assert all(len(r["loss_estimates"]) == 3 for r in estimates)
    updates = [r for r in records if "step_id" in r]
    for u in updates:
        assert u["loss_tolerance_pct"] == 0.05
        low = {i: d for i, d in u["block_details"].items() if d["precision"] != "bf16"}
        spent = sum(d["loss_delta_pct"][d["precision"]] for d in low.values())
        assert spent <= 0.05 + 1e-12
        assert abs(spent - u["estimated_loss_pct"]) < 1e-9
        for d in u["block_details"].values():
            assert "on the loss estimate" in d["reason_text"]
    validates_and_resimulates(telemetry, min_updates=8)
