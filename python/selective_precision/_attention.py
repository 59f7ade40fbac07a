"""``nn.MultiheadAttention`` as ``sp.torch.apply`` computes it.

``nn.MultiheadAttention`` calls ``F.multi_head_attention_forward`` with its bare projection weights
and never runs its ``out_proj``'s forward, so no module hook sees its projections. ``apply`` replaces
the module's ``forward`` with :func:`attention_forward`, the same computation as torch 1.13's, in
which each projection is one call of ``project(x, weight, bias, layer)``: the block's
``nn.Linear`` step (the input rounded to the format per token and handed to the profiler, the linear
product, the gradient at its output rounded per token). The packed ``in_proj_weight`` is one
projection in self-attention (query, key and value the same tensor) and three, over its row chunks,
otherwise; ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` are three; ``out_proj`` is one.
"""

import math

import torch
import torch.nn.functional as F


def refusal(mha):
    """Why ``mha`` cannot be covered (a phrase), or None."""
    if mha.bias_k is not None or mha.bias_v is not None:
        return "has bias_k/bias_v, which apply does not cover"
    if mha.add_zero_attn:
        return "has add_zero_attn, which apply does not cover"
    return None


def _in_projections(mha, project, query, key, value, self_attention, layers):
    if mha._qkv_same_embed_dim:
        w, b = mha.in_proj_weight, mha.in_proj_bias
        if self_attention:
            return project(query, w, b, layers["in_proj_weight"]).chunk(3, dim=-1)
        ws = w.chunk(3)
        bs = b.chunk(3) if b is not None else (None, None, None)
        return tuple(project(x, wi, bi, layers["in_proj_weight"])
                     for x, wi, bi in zip((query, key, value), ws, bs))
    bs = mha.in_proj_bias.chunk(3) if mha.in_proj_bias is not None else (None, None, None)
    return tuple(project(x, getattr(mha, name), bi, layers[name])
                 for x, name, bi in zip((query, key, value), ("q_proj_weight", "k_proj_weight", "v_proj_weight"), bs))


def _merged_mask(attn_mask, key_padding_mask, shape, like, is_causal):
    """One additive float mask [bsz * heads or 1, tgt_len, src_len], or None (as torch 1.13 merges);
    ``shape``: (bsz, heads, tgt_len, src_len); ``like``: the queries (dtype and device)."""
    bsz, heads, tgt_len, src_len = shape
    if attn_mask is None and is_causal:
        attn_mask = torch.ones(tgt_len, src_len, dtype=torch.bool, device=like.device).triu(1)
    if attn_mask is not None:
        if attn_mask.dtype == torch.uint8:
            attn_mask = attn_mask.to(torch.bool)
        if attn_mask.dim() == 2:
            attn_mask = attn_mask.unsqueeze(0)
    if key_padding_mask is not None:
        kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, heads, -1, -1).reshape(bsz * heads, 1, src_len)
        if kpm.dtype != torch.bool:
            attn_mask = kpm if attn_mask is None else attn_mask + kpm
        elif attn_mask is None:
            attn_mask = kpm
        elif attn_mask.dtype == torch.bool:
            attn_mask = attn_mask.logical_or(kpm)
        else:
            attn_mask = attn_mask.masked_fill(kpm, float("-inf"))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=like.dtype).masked_fill_(attn_mask, float("-inf"))
    return attn_mask


def attention_forward(mha, project, layers, query, key, value, key_padding_mask=None, need_weights=True,
                      attn_mask=None, average_attn_weights=True, is_causal=False):
    """``mha``'s forward with every projection through ``project`` (see the module's documentation).
    ``layers``: parameter name -> the layer index the profiler knows it by."""
    self_attention = query is key and key is value
    batched = query.dim() == 3
    if not batched:
        query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    elif mha.batch_first:
        query, key, value = (t.transpose(0, 1) for t in (query, key, value))
    tgt_len, bsz, embed_dim = query.shape
    heads = mha.num_heads
    head_dim = embed_dim // heads
    if self_attention:
        key = value = query
    q, k, v = _in_projections(mha, project, query, key, value, self_attention, layers)
    src_len = k.shape[0]
    mask = _merged_mask(attn_mask, key_padding_mask, (bsz, heads, tgt_len, src_len), q, is_causal)
    q = q.contiguous().view(tgt_len, bsz * heads, head_dim).transpose(0, 1)
    k = k.contiguous().view(src_len, bsz * heads, head_dim).transpose(0, 1)
    v = v.contiguous().view(src_len, bsz * heads, head_dim).transpose(0, 1)
    q_scaled = q / math.sqrt(head_dim)
    if mask is not None:
        weights = torch.baddbmm(mask, q_scaled, k.transpose(-2, -1))
    else:
        weights = torch.bmm(q_scaled, k.transpose(-2, -1))
    weights = F.softmax(weights, dim=-1)
    if mha.training and mha.dropout > 0.0:
        weights = F.dropout(weights, p=mha.dropout)
    out = torch.bmm(weights, v).transpose(0, 1).contiguous().view(tgt_len * bsz, embed_dim)
    out = project(out, mha.out_proj.weight, mha.out_proj.bias, layers["out_proj.weight"])
    out = out.view(tgt_len, bsz, out.size(1))
    if not batched:
        out = out.squeeze(1)
    elif mha.batch_first:
        out = out.transpose(0, 1)
    if not need_weights:
        return out, None
    weights = weights.view(bsz, heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.sum(dim=1) / heads
    return out, weights.squeeze(0) if not batched else weights
