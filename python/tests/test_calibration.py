"""agent.calibrate(batches): sp-trainer's INT8 output-error calibration from Python, through each
block's forward on the inputs that reach it, with the same cache, fingerprint and header field."""

import torch

import selective_precision as sp
from conftest import FAST_CONFIG, TinyModel, read_jsonl, reference_rows


def expected_errors(model, inputs):
    """Each block run alone on what reaches it, its weights in BF16 and in INT8 (core's reference)."""
    errors = []
    xs = [x.clone() for x in inputs]
    for block in model.layers:
        masters = {n: p.detach().clone() for n, p in block.named_parameters()}
        total = 0.0
        with torch.no_grad():
            for x in xs:
                outs = []
                for precision in ("bf16", "int8"):
                    for n, p in block.named_parameters():
                        rows = p.shape[0] if p.dim() >= 2 else 1
                        p.copy_(reference_rows(masters[n], precision, rows))
                    outs.append(block(x).double())
                total += float((outs[0] - outs[1]).norm() / outs[0].norm())
            for n, p in block.named_parameters():
                p.copy_(masters[n])
            xs = [block(x) for x in xs]
        errors.append(total / len(xs))
    return errors


def config(tmp_path, **more):
    return dict(FAST_CONFIG, run_calibration=True, calibration_samples=2,
                calibration_cache_dir=str(tmp_path / "cache"), **more)


def samples(n=3):
    gen = torch.Generator().manual_seed(9)
    return [torch.randn(2, 5, 16, generator=gen) for _ in range(n)]


def test_calibration_measures_each_block_on_what_reaches_it(tmp_path):
    torch.manual_seed(0)
    model = TinyModel()
    expected = expected_errors(model, samples()[:2])
    agent = sp.Agent(config=config(tmp_path), telemetry=tmp_path / "run.jsonl", network=False)
    agent.register_blocks(model.layers, model=model)
    result = agent.calibrate(samples())
    assert not result["from_cache"] and result["cache_path"].startswith(str(tmp_path / "cache"))
    assert len(result["errors"]) == 3
    for got, want in zip(result["errors"], expected):
        assert want > 0 and abs(got - want) <= 1e-6 * want, (got, want)
    loss = model(samples()[0])
    loss.backward()
    agent.step(loss)
    agent.close()
    header = read_jsonl(tmp_path / "run.jsonl")[0]
    assert header["calibration"]["errors"] == {str(b): e for b, e in enumerate(result["errors"])}


def test_calibration_under_apply_restores_the_weights_and_is_cached_by_weights(tmp_path):
    torch.manual_seed(0)
    model = TinyModel()
    agent = sp.Agent(config=config(tmp_path, mode="static", force_int4_blocks=[1]), network=False)
    agent.register_blocks(model.layers, model=model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sp.torch.apply(model, agent, optimizer=opt)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    routed = agent.precisions
    result = agent.calibrate(samples(), forward=model)
    assert all(e > 0 for e in result["errors"])
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), before[n]), n
    assert agent.precisions == routed  # calibration set each block's format only while it ran
    for x in samples():  # training goes on: calibration's writes are not taken for an optimizer's
        loss = model(x)
        loss.backward()
        opt.step()
        agent.step(loss)
        opt.zero_grad()
    agent.close()

    torch.manual_seed(0)
    again = sp.Agent(config=config(tmp_path), network=False)
    same = TinyModel()
    again.register_blocks(same.layers, model=same)
    cached = again.calibrate(samples())
    assert cached["from_cache"] and cached["errors"] == result["errors"]
    again.close()
    other = sp.Agent(config=config(tmp_path), network=False)
    other_model = TinyModel()  # other weights, the same layout: another fingerprint
    other.register_blocks(other_model.layers, model=other_model)
    assert not other.calibrate(samples())["from_cache"]
    other.close()
