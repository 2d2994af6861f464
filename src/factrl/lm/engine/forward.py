"""The Llama-family forward pass over a static KV cache, written for the engine.

Two entry points: :func:`prefill` runs whole prompts (right-padded, causal) and writes
their keys/values into chosen cache rows; :func:`decode_step` runs one token per row at
its own position — rows need not be aligned, which is what lets a finished row's slot be
refilled while the others go on. Every op of ``decode_step`` has static shapes and no
host synchronisation, so it can be captured in a CUDA graph. Numerics follow
transformers' Llama/Qwen2 modules (fp32 RMSNorm, fp32 softmax, rotary tables from the
model's own rotary module).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from factrl.lm.engine.weights import DecoderWeights

__all__ = ["prefill", "decode_step"]


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _mlp(h: torch.Tensor, lw) -> torch.Tensor:  # noqa: ANN001 - LayerWeights
    return F.linear(F.silu(F.linear(h, lw.w_gate)) * F.linear(h, lw.w_up), lw.w_down)


def decode_step(
    w: DecoderWeights, cache_k: torch.Tensor, cache_v: torch.Tensor, tok: torch.Tensor, pos: torch.Tensor,
    cos_t: torch.Tensor, sin_t: torch.Tensor,
) -> torch.Tensor:
    """Logits (fp32, ``[B, vocab]``) after feeding ``tok[b]`` at position ``pos[b]`` of
    cache row ``b``; writes that token's keys/values. ``cache_*``: ``[layers, B, kv, L, d]``;
    positions past the cache are clamped (only dead rows reach them)."""
    n, length = tok.shape[0], cache_k.shape[3]
    nh, kvh, d = w.heads, w.kv_heads, w.head_dim
    group = nh // kvh
    scale = d ** -0.5
    posw = pos.clamp(max=length - 1)
    rows = torch.arange(n, device=tok.device)
    cos, sin = cos_t[posw][:, None, :], sin_t[posw][:, None, :]
    visible = torch.arange(length, device=tok.device)[None, :] <= pos[:, None]
    bias = torch.zeros((n, length), dtype=torch.float32, device=tok.device).masked_fill(~visible, float("-inf"))
    bias = bias[:, None, None, :]
    x = w.embed[tok]
    for layer, lw in enumerate(w.layers):
        h = _rms(x, lw.ln_in, lw.eps_in)
        q = F.linear(h, lw.wq, lw.bq).view(n, nh, d)
        k = F.linear(h, lw.wk, lw.bk).view(n, kvh, d)
        v = F.linear(h, lw.wv, lw.bv).view(n, kvh, d)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        kc, vc = cache_k[layer], cache_v[layer]
        kc[rows, :, posw] = k
        vc[rows, :, posw] = v
        scores = torch.matmul(q.view(n, kvh, group, d), kc.transpose(-1, -2)) * scale
        probs = torch.softmax(scores.float() + bias, dim=-1).to(q.dtype)
        o = torch.matmul(probs, vc).reshape(n, nh * d)
        x = x + F.linear(o, lw.wo, lw.bo)
        x = x + _mlp(_rms(x, lw.ln_post, lw.eps_post), lw)
    x = _rms(x, w.norm, w.norm_eps)
    return F.linear(x, w.lm_head).float()


def prefill(
    w: DecoderWeights, cache_k: torch.Tensor, cache_v: torch.Tensor, slots: torch.Tensor, ids: torch.Tensor,
    lengths: torch.Tensor, cos_t: torch.Tensor, sin_t: torch.Tensor,
) -> torch.Tensor:
    """Run right-padded prompts ``ids`` (``[n, P]``, real lengths ``lengths``) from position
    0, write their keys/values into cache rows ``slots`` and return each prompt's last
    logits (fp32, ``[n, vocab]``). Padding sits after every real token, so causal attention
    never lets a real token see it; the cache entries it leaves are overwritten by decoding
    before any row can attend to them."""
    n, width = ids.shape
    nh, kvh, d = w.heads, w.kv_heads, w.head_dim
    cos, sin = cos_t[:width][None, None], sin_t[:width][None, None]
    x = w.embed[ids]
    for layer, lw in enumerate(w.layers):
        h = _rms(x, lw.ln_in, lw.eps_in)
        q = F.linear(h, lw.wq, lw.bq).view(n, width, nh, d).transpose(1, 2)
        k = F.linear(h, lw.wk, lw.bk).view(n, width, kvh, d).transpose(1, 2)
        v = F.linear(h, lw.wv, lw.bv).view(n, width, kvh, d).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        cache_k[layer][slots, :, :width] = k
        cache_v[layer][slots, :, :width] = v
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=d ** -0.5, enable_gqa=kvh != nh)
        x = x + F.linear(o.transpose(1, 2).reshape(n, width, nh * d), lw.wo, lw.bo)
        x = x + _mlp(_rms(x, lw.ln_post, lw.eps_post), lw)
    last = x[torch.arange(n, device=ids.device), lengths - 1]
    return F.linear(_rms(last, w.norm, w.norm_eps), w.lm_head).float()
