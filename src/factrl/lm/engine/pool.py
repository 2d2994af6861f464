"""The decode engine's slots and its decode window: :class:`SlotPool` holds the static KV
cache and every per-slot tensor of ``slots`` rows; :func:`decode_window` builds the body
the engine runs (eagerly, or captured as a CUDA graph) between two host syncs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from factrl.lm.engine.forward import decode_step
from factrl.lm.engine.rng import uniform_tensor
from factrl.lm.engine.sampling import choose_tokens
from factrl.lm.engine.weights import DecoderWeights

__all__ = ["EOS", "LENGTH", "LIVE", "REASONS", "STOP", "SlotPool", "decode_window", "pow2"]

# A slot's finish code: still generating, or why it ended.
LIVE, EOS, STOP, LENGTH = 0, 1, 2, 3
REASONS = {EOS: "eos", STOP: "stop", LENGTH: "length"}


def pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (>= 1)."""
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


class SlotPool:
    """KV cache and per-slot state for ``slots`` rows of ``length`` positions."""

    def __init__(self, w: DecoderWeights, slots: int, length: int, device: torch.device) -> None:
        layers, kv, d = len(w.layers), w.kv_heads, w.head_dim
        self.slots, self.length = slots, length
        self.cache_k = torch.zeros((layers, slots, kv, length, d), dtype=w.dtype, device=device)
        self.cache_v = torch.zeros_like(self.cache_k)
        self.cos, self.sin = w.rotary(length, device)
        i64 = {"dtype": torch.long, "device": device}
        self.tok = torch.zeros(slots, **i64)
        self.pos = torch.zeros(slots, **i64)
        self.count = torch.zeros(slots, **i64)
        self.cap = torch.zeros(slots, **i64)
        self.seed = torch.zeros(slots, **i64)
        self.sstate = torch.zeros(slots, **i64)
        self.sset = torch.zeros(slots, **i64)
        self.finish = torch.zeros(slots, **i64)
        self.which = torch.full((slots,), -1, **i64)
        self.done = torch.ones(slots, dtype=torch.bool, device=device)
        self.out_tok = torch.zeros((slots, length), **i64)
        self.out_lp = torch.zeros((slots, length), dtype=torch.float32, device=device)
        self.logits = torch.zeros((slots, w.vocab), dtype=torch.float32, device=device)
        self.graphs: dict[tuple, Any] = {}  # (bucket, sampling, stops) -> CUDAGraph

    def rows(self) -> list[torch.Tensor]:
        """Every per-slot tensor (slot is dim 0), cache excluded."""
        return [self.tok, self.pos, self.count, self.cap, self.seed, self.sstate, self.sset, self.finish,
                self.which, self.done, self.out_tok, self.out_lp, self.logits]


def decode_window(pool: SlotPool, w: DecoderWeights, eos_mask: torch.Tensor, bucket: int, key: tuple,
                  tables: tuple[torch.Tensor, torch.Tensor], steps: int) -> Callable[[], None]:
    """The body of one decode window over the first ``bucket`` slots: ``steps`` steps of
    sample, record, advance the stop automata, end rows and feed the live ones, with no
    host work (so it can be captured as one CUDA graph). ``key`` is (temperature, top_p,
    stop sets); ``tables`` the stop automata's (next state, hit) tables."""
    temperature, top_p, _ = key
    next_state, hit_table = tables
    sl = slice(0, bucket)
    ck, cv = pool.cache_k[:, sl], pool.cache_v[:, sl]
    tok, pos, count, cap, seed = pool.tok[sl], pool.pos[sl], pool.count[sl], pool.cap[sl], pool.seed[sl]
    sstate, sset, finish, which, done = pool.sstate[sl], pool.sset[sl], pool.finish[sl], pool.which[sl], pool.done[sl]
    out_tok, out_lp, logits = pool.out_tok[sl], pool.out_lp[sl], pool.logits[sl]
    cos, sin = pool.cos, pool.sin
    rows = torch.arange(bucket, device=pool.tok.device)
    last_col = pool.length - 1
    # The body closes over tensors only (not the pool or the engine), so dropping a pool
    # frees its graphs and cache at once instead of at the next garbage collection.

    def body() -> None:
        for _ in range(steps):
            u = uniform_tensor(seed, count)
            new, lp = choose_tokens(logits, temperature, top_p, u)
            live = ~done
            col = count.clamp(max=last_col)
            out_tok[rows, col] = torch.where(live, new, out_tok[rows, col])
            out_lp[rows, col] = torch.where(live, lp.float(), out_lp[rows, col])
            hit = hit_table[sset, sstate, new]
            nxt = next_state[sset, sstate, new]
            grown = count + live.long()
            reason = torch.where(eos_mask[new], EOS,
                                 torch.where(hit >= 0, STOP, torch.where(grown >= cap, LENGTH, LIVE)))
            reason = torch.where(live, reason, finish)
            which.copy_(torch.where(live & (reason == STOP), hit, which))
            finish.copy_(reason)
            sstate.copy_(torch.where(live, nxt, sstate))
            count.copy_(grown)
            tok.copy_(torch.where(live, new, tok))
            done.copy_(done | (reason != LIVE))
            logits.copy_(decode_step(w, ck, cv, tok, pos, cos, sin))
            pos.copy_(pos + live.long())

    return body
