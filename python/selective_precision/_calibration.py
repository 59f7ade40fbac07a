"""``sp.Agent.calibrate``'s Python side: what enters each block on real inputs, and the three hooks
the C++ calibration (agent/include/sp/agent/calibration.h) calls to run one block alone."""

import hashlib

import torch


def capture_block_inputs(blocks, forward, samples):
    """Runs ``forward(sample)`` for each sample under ``no_grad`` and keeps, per sample and block,
    the arguments of the block's first call: ``[sample][block] -> (args, kwargs)``."""
    captured = [[None] * len(blocks) for _ in samples]
    current = {"sample": 0}
    restore = []

    def capturing(block_id, original):
        def forward_and_keep(*args, **kwargs):
            row = captured[current["sample"]]
            if row[block_id] is None:
                row[block_id] = (args, kwargs)
            return original(*args, **kwargs)
        return forward_and_keep

    try:
        for block_id, block in enumerate(blocks):
            restore.append((block, block.__dict__.get("forward")))
            block.forward = capturing(block_id, block.forward)
        with torch.no_grad():
            for s, batch in enumerate(samples):
                current["sample"] = s
                forward(batch)
    finally:
        for block, own_forward in restore:  # a forward set on the instance (a covered attention) stays
            if own_forward is None:
                del block.forward
            else:
                block.forward = own_forward
    for s, row in enumerate(captured):
        for block_id, call in enumerate(row):
            if call is None:
                raise ValueError("calibrate: block %d did not run in the forward of batch %d" % (block_id, s))
            if not call[0] or not isinstance(call[0][0], torch.Tensor):
                raise ValueError("calibrate: block %d's first argument is not a tensor (it is run alone on it)"
                                 % block_id)
    return captured


def weights_identity(agent):
    """The calibration cache's model identity when none was given: a hash of the blocks' weights
    (their masters under sp.torch.apply), so that another model of the same layout never reads
    these errors."""
    h = hashlib.sha256()
    for block_id, block in enumerate(agent._modules):
        for k, (name, p) in enumerate(block.named_parameters()):
            master = agent._core.checkpoint_value(block_id, k)
            value = p if master is None else master
            h.update(("%s %s %s;" % (name, tuple(p.shape), p.dtype)).encode())
            h.update(value.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return "python weights sha256:" + h.hexdigest()[:32]


def hooks(agent, captured):
    """(input, forward, compute_format) for the C++ calibration. ``forward`` runs the block on ``x``
    with the other arguments of the sample ``input`` last returned; ``compute_format`` sets the format
    ``sp.torch.apply``'s hooks round the block's linear inputs to (agent._map, restored by the caller)."""
    state = {"sample": 0}

    def block_input(block, sample):
        state["sample"] = sample
        return captured[sample][block][0][0]

    def block_forward(block, x):
        args, kwargs = captured[state["sample"]][block]
        with torch.no_grad():
            out = agent._modules[block](x, *args[1:], **kwargs)
        while isinstance(out, (tuple, list)):
            out = out[0]
        return out

    def compute_format(block, precision):
        agent._map[block] = precision

    return block_input, block_forward, compute_format
