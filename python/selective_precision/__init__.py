"""Selective Precision for PyTorch training loops.

A few lines added to an existing loop::

    import selective_precision as sp

    with sp.Agent(config={"snr_tiers": True}, telemetry="run.jsonl") as agent:
        agent.register_blocks(model.blocks)
        sp.torch.apply(model, agent, optimizer=optimizer)  # optional: each block in its format
        for batch in data:
            loss = model(batch)
            loss.backward()
            agent.step(loss)                  # after backward (before or after optimizer.step)
            optimizer.step()
            optimizer.zero_grad()

The agent is the C++ one (``selective_precision._core``): the same policy, telemetry, wire protocol
and commands as ``sp-trainer``. python/README.md documents every call.
"""

import itertools
import json
import logging
import os

import torch as _torch  # noqa: F401  (first: _core's tensors are torch's own)

from . import _calibration, _core
from . import torch  # noqa: F401  (sp.torch.apply)

__all__ = ["Agent", "PRECISIONS", "configure_threads", "__version__"]
__version__ = _core.__version__

#: The formats a block can be routed to, as ``Agent.precisions`` names them.
PRECISIONS = tuple(_core.PRECISIONS)

_log = logging.getLogger("selective_precision")


def configure_threads(threads=None):
    """Gives the matrix products ``threads`` threads (None: every core) the way sp-trainer does.

    Debian's torch calls OpenBLAS, whose thread pool and torch's own spin against each other on
    the same cores: a small linear layer runs up to 100x slower. With OpenBLAS this gives it the
    threads and torch's pool one; otherwise torch's pool gets them. Returns what it set.
    """
    return _core.configure_threads(threads)


def _loss_value(loss):
    """A float from a float or a one-element tensor (detached: the agent never holds the graph)."""
    if hasattr(loss, "detach"):
        if loss.numel() != 1:
            raise ValueError("loss must be a float or a one-element tensor, got a tensor of shape %s"
                             % (tuple(loss.shape),))
        return float(loss.detach().item())
    return float(loss)


def _job_group(process_group):
    """The process group the agent joins: the one given, or torch.distributed's default one."""
    if process_group is False:
        return None
    dist = getattr(_torch, "distributed", None)
    initialized = dist is not None and dist.is_available() and dist.is_initialized()
    if process_group is None or (initialized and process_group is dist.group.WORLD):
        return dist.distributed_c10d._get_default_group() if initialized else None
    return process_group


def _one_line(text):
    return " ".join(str(text).split())


class Agent:
    """The Selective Precision agent inside a Python training loop.

    ``config``: None (the defaults of core/CONFIG.md), a dict of config keys, or the path of a JSON
    config file; a bad one raises ``ValueError`` with the message ``sp-trainer`` prints.
    ``telemetry``: the JSONL file to write, or None for no file (the config's ``telemetry_file`` is
    not used). ``network``: serve live telemetry and take commands on ``telemetry_endpoint`` and
    ``control_endpoint`` (agent/PROTOCOL.md); a refused endpoint or key file raises ``OSError``.
    ``every_step_stats``: write the per-step statistics lines ``sp-ctl simulate --stats`` replays.
    ``process_group``: the data-parallel job's group (default: torch.distributed's default group when
    it is initialized; ``False``: this process decides alone). With two ranks or more, rank 0 decides
    and every rank applies the same map at the same step (agent/PROTOCOL.md §11); rank R serves on the
    endpoints' ports + 2·R and writes ``NAME.rankR.jsonl``; the other ranks refuse commands.
    """

    def __init__(self, config=None, telemetry=None, *, telemetry_endpoint="tcp://127.0.0.1:5556",
                 control_endpoint="tcp://127.0.0.1:5557", server_key=None, allowed_clients=None,
                 network=True, every_step_stats=True, run_id=None, model_identity="", process_group=None):
        config_json = config_path = None
        if isinstance(config, dict):
            try:
                config_json = json.dumps(config, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise ValueError("config: %s" % e) from None
        elif isinstance(config, (str, bytes, os.PathLike)):
            config_path = os.fsdecode(config)
        elif config is not None:
            raise TypeError("config must be None, a dict or a path, not %s" % type(config).__name__)
        self._core = _core._Agent(
            config_json=config_json, config_path=config_path,
            telemetry=None if telemetry is None else os.fsdecode(telemetry),
            every_step_stats=bool(every_step_stats), network=bool(network),
            telemetry_endpoint=telemetry_endpoint or "", control_endpoint=control_endpoint or "",
            server_key=os.fsdecode(server_key) if server_key else "",
            allowed_clients=os.fsdecode(allowed_clients) if allowed_clients else "",
            run_id=run_id or "", model_identity=model_identity or "",
            process_group=_job_group(process_group))
        self._model_identity = model_identity or ""
        self._model = None
        self._modules = []
        self._names = []
        self._map = []
        self._map_version = -1
        self._callbacks = []
        self._last_loss = None
        self._profiling = False  # sp.torch.apply: this step hands linear inputs to the profiler

    # -- set-up -------------------------------------------------------------------------------

    def register_blocks(self, blocks, *, model=None):
        """Registers the blocks the agent routes, once, before the first step.

        ``blocks``: an iterable of ``nn.Module`` (e.g. ``model.transformer.h``) or a dict of name ->
        module. Block ids follow the order (0, 1, ...), as ``sp-ctl pin --blocks`` addresses them.
        Names are the dict's keys, else the modules' qualified names in ``model`` when it is given,
        else ``blocks.<id>``. The gradients are read in C++ from each block's parameters.
        """
        if self._modules:
            raise RuntimeError("register_blocks: blocks are already registered")
        if isinstance(blocks, dict):
            named = list(blocks.items())
        else:
            modules = list(blocks)
            qualified = {}
            if model is not None:
                qualified = {id(m): n for n, m in model.named_modules()}
            named = []
            for i, m in enumerate(modules):
                if model is not None and id(m) not in qualified:
                    raise ValueError("register_blocks: block %d is not a submodule of the model" % i)
                named.append((qualified.get(id(m), "blocks.%d" % i), m))
        if not named:
            raise ValueError("register_blocks: no blocks")
        specs = []
        owner = {}  # id(parameter) -> (block id, block name, parameter name)
        for block_id, (name, module) in enumerate(named):
            params = list(module.named_parameters())
            if not params:
                raise ValueError("register_blocks: block '%s' has no parameters" % name)
            for pname, p in params:
                if id(p) in owner:
                    other_id, other, other_pname = owner[id(p)]
                    raise ValueError(
                        "register_blocks: block %d '%s' and block %d '%s' share a parameter ('%s' of the "
                        "first, '%s' of the second): the same module twice, or a parent and its child; "
                        "a parameter belongs to one block" % (other_id, other, block_id, name, other_pname, pname))
                owner[id(p)] = (block_id, name, pname)
            transposed = {id(torch.conv1d_weight(m)) for m in module.modules()} - {id(None)}
            specs.append((str(name), [n for n, _ in params], [p for _, p in params],
                          [id(p) in transposed for _, p in params]))
        self._core.register_blocks(specs)
        self._model = model
        self._modules = [m for _, m in named]
        self._names = self._core.block_names()
        self._map = self._core.precisions()
        self._map_version = self._core.map_version
        self._drain_log()

    def calibrate(self, batches, forward=None):
        """``sp-trainer``'s INT8 output-error calibration, before the first step: for each block the
        relative error ||out_bf16 - out_int8|| / ||out_bf16|| of its forward on real inputs, averaged
        over ``calibration_samples`` batches; it feeds the error score (POLICY.md), the header's
        ``calibration_errors`` and the live clients' ``hello``.

        ``batches``: an iterable of model inputs (its first ``calibration_samples`` are used).
        ``forward``: runs the model on one of them (default: the ``model`` given to
        ``register_blocks``). It runs once per batch under ``no_grad`` to capture what enters each
        block; each block is then run alone on those inputs, its weights in BF16 and in INT8 (and,
        under ``sp.torch.apply``, its linear inputs rounded to the same format). Results are cached
        on disk by fingerprint, as ``sp-trainer``'s: the config's ``calibration_cache_dir``, keyed by
        ``model_identity`` (else a hash of the blocks' weights) and the blocks' layout. Returns
        ``{"errors", "fingerprint", "cache_path", "from_cache"}``; with ``run_calibration`` false it
        measures nothing and returns zeros."""
        self._require_blocks()
        forward = forward if forward is not None else self._model
        if forward is None:
            raise ValueError("calibrate: give forward= (or register_blocks(..., model=model))")
        config = self.config
        if not config["run_calibration"]:
            return self._core.calibrate(None, None, None, "")
        samples = list(itertools.islice(iter(batches), config["calibration_samples"]))
        if len(samples) < config["calibration_samples"]:
            raise ValueError("calibrate: %d batches for calibration_samples %d"
                             % (len(samples), config["calibration_samples"]))
        captured = _calibration.capture_block_inputs(self._modules, forward, samples)
        identity = self._model_identity or _calibration.weights_identity(self)
        routed = list(self._map)
        try:
            return self._core.calibrate(*_calibration.hooks(self, captured), identity)
        finally:
            self._map = routed  # compute_format set each block's format while it ran

    def on_change(self, callback):
        """Calls ``callback(precisions)`` (block name -> format) on the training thread, at the step
        boundary where the map changed. Returns the callback, so it can decorate a function."""
        self._callbacks.append(callback)
        return callback

    # -- the loop -----------------------------------------------------------------------------

    def begin_step(self):
        """Opens the next step (applies queued operator commands). Optional: ``step()`` and, with
        ``sp.torch.apply``, the first training forward open it when it is not open yet."""
        self._require_blocks()
        self._core.begin_step()
        self._sync_map()

    def end_step(self, loss):
        """Closes the step after backward: statistics, the policy update, the step's telemetry and
        the loss feedback. Call before ``optimizer.zero_grad()``."""
        self._require_blocks()
        value = _loss_value(loss)
        self._core.end_step(value)
        self._last_loss = value
        self._sync_map()

    def step(self, loss):
        """``begin_step()`` when needed, then ``end_step(loss)``: the one call a loop needs."""
        self.end_step(loss)

    def record_eval_loss(self, loss, step=None):
        """The latest held-out loss; the next update record carries it (``step``: when measured)."""
        self._core.record_eval_loss(_loss_value(loss), step)

    # -- operator commands (the same objects as sp-ctl's; applied at the next step boundary) ----

    def command(self, command):
        """Queues a command dict (``{"cmd": "pin", "blocks": [0], "precision": "int8"}``, core's
        command.h). Returns the step it will be applied at; ``ValueError`` when it would be rejected.
        A command refused only where it applies (``set_budget`` outside mode budget, ``release`` of a
        block with no pin: POLICY.md rules 9 and 18) is written as a ``command`` event with
        ``"ok": false`` and its error, and logged; nothing changes."""
        return self._core.enqueue(json.dumps(command))

    def pin(self, blocks, precision, *, for_steps=0, release_on_spike=False):
        cmd = {"cmd": "pin", "blocks": self._ids(blocks), "precision": precision}
        if for_steps:
            cmd["for_steps"] = int(for_steps)
        if release_on_spike:
            cmd["release_on_spike"] = True
        return self.command(cmd)

    def release(self, blocks):
        return self.command({"cmd": "release", "blocks": self._ids(blocks)})

    def release_all(self):
        return self.command({"cmd": "release_all"})

    # -- what it decided ----------------------------------------------------------------------

    @property
    def precisions(self):
        """Block name -> ``"bf16" | "int8" | "int4" | "fp8_e4m3" | "fp8_e5m2"``, as of now."""
        return dict(zip(self._names, self._map))

    @property
    def block_names(self):
        return list(self._names)

    @property
    def current_step(self):
        """The open step, or the next one to open (steps count from 0)."""
        return self._core.current_step

    @property
    def run_id(self):
        return self._core.run_id

    @property
    def rank(self):
        """This process's rank in the data-parallel job (0 alone)."""
        return self._core.rank

    @property
    def world_size(self):
        return self._core.world_size

    @property
    def config(self):
        """The effective config, every key (core/CONFIG.md)."""
        return json.loads(self._core.config_json())

    def summary(self):
        """What a run's end prints: steps, block-steps per format, switches, bytes and losses."""
        copied, bf16 = self._core.total_bytes()
        return {
            "steps": self._core.current_step,
            "block_steps": self._core.block_steps(),
            "switches": self._core.switches,
            "bytes_copied": copied,
            "bytes_bf16": bf16,
            "saving_pct": 100.0 * (1.0 - copied / bf16) if bf16 else 0.0,
            "last_train_loss": self._last_loss,
            "overhead": self._core.overhead(),
            "telemetry": self._core.telemetry_loss(),
        }

    # -- the run's end ------------------------------------------------------------------------

    def close(self, reason="completed"):
        """Ends the run: a ``run_end`` record with ``reason`` in the file and on the wire. Once."""
        if not self._core.ended:
            self._core.end_run(_one_line(reason))
            self._drain_log()

    @property
    def closed(self):
        return self._core.ended

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close("completed")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("interrupted")
        else:
            self.close("error: %s: %s" % (exc_type.__name__, exc))
        return False

    # -- internals ----------------------------------------------------------------------------

    def _require_blocks(self):
        if not self._modules:
            raise RuntimeError("register_blocks first")

    def _ids(self, blocks):
        if isinstance(blocks, (int, str)):
            blocks = [blocks]
        ids = []
        for b in blocks:
            if isinstance(b, str):
                if b not in self._names:
                    raise ValueError("no block named '%s'" % b)
                ids.append(self._names.index(b))
            else:
                ids.append(int(b))
        return ids

    def _sync_map(self):
        # The map as a list of names only when it changed: a step costs one integer read otherwise.
        changed = self._core.map_version != self._map_version
        if changed:
            self._map_version = self._core.map_version
            self._map = self._core.precisions()
        self._map_version = self._core.map_version
        self._drain_log()
        if changed and self._callbacks:
            current = self.precisions
            for callback in list(self._callbacks):
                callback(dict(current))

    def _drain_log(self):
        for line in self._core.take_log():
            _log.info("%s", line)
