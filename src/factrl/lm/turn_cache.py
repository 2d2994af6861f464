"""Keys and values of a multi-turn context, kept from one turn to the next (eager decoding).

An agent's context grows by turns: the next prompt is the last one, what the model
generated and the observation after it, as the same token ids (the rollout runner
appends ids; nothing is re-tokenised). Without a cache every turn prefills the whole
context again, and on a CPU prefill costs as much as decoding (SmolLM2-135M in bf16 on
two cores: 16 rows of 800 tokens prefill in 15 s, 60 decode steps over them take 18 s).
Inside :meth:`factrl.lm.hf.HFLM.reuse_turns` (which :func:`factrl.rollout.drive` opens
for the whole of a batch of episodes) each row that finishes leaves its keys and values
here; a later prompt that starts with the same tokens takes the longest stored prefix
and prefills only the rest. A shared system prompt is found the same way, from another
context's entry.

Keys and values are valid only for the weights and compute dtype that made them:
:meth:`TurnCache.check` clears the cache when the parameters' version counters change
(every in-place update bumps one, an optimizer step included) or the dtype does. Entries
are bounded by a byte budget, least recently used first out.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["TurnCache", "TurnCacheStats", "weights_key", "turn_cache_gb", "MIN_REUSE_TOKENS"]

MIN_REUSE_TOKENS = 32  # a shorter shared prefix is not worth a ragged prefill

def turn_cache_gb() -> float:
    """The default budget in GB: ``$FACTRL_TURN_CACHE_GB``, else 2 (0 turns reuse off)."""
    raw = os.environ.get("FACTRL_TURN_CACHE_GB", "2")
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise ValueError(f"FACTRL_TURN_CACHE_GB must be a number of GB, got {raw!r}") from None


Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [kv_heads, tokens, head_dim]


@dataclass
class TurnCacheStats:
    """Counters since the cache was made (benchmarks, tests)."""

    lookups: int = 0  # prompts looked up
    hits: int = 0  # prompts that took a stored prefix
    reused_tokens: int = 0  # prompt tokens not prefilled
    prompt_tokens: int = 0  # prompt tokens looked up
    stored: int = 0
    evicted: int = 0
    cleared: int = 0  # times the weights or dtype changed under it


@dataclass
class _Entry:
    tokens: np.ndarray
    layers: Layers
    nbytes: int


def weights_key(model: Any) -> tuple[int, int, int]:
    """What changes when the weights do: the model's identity, its parameter count and
    the sum of the parameters' in-place version counters."""
    params = list(model.parameters())
    return id(model), len(params), sum(int(p._version) for p in params)


@dataclass
class TurnCache:
    budget_bytes: int
    min_tokens: int = MIN_REUSE_TOKENS
    stats: TurnCacheStats = field(default_factory=TurnCacheStats)

    def __post_init__(self) -> None:
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next = 0
        self._bytes = 0
        self._valid_for: tuple[Any, ...] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def check(self, key: tuple[Any, ...]) -> None:
        """Clear the cache when ``key`` (weights and dtype) differs from the last call's."""
        if self._valid_for is not None and key != self._valid_for and self._entries:
            self.clear()
            self.stats.cleared += 1
        self._valid_for = key

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def lookup(self, prompt: Sequence[int]) -> tuple[int, int] | None:
        """``(entry, length)``: the stored entry sharing the longest prefix with
        ``prompt`` and that prefix's length (at most ``len(prompt) - 1``: the last prompt
        token is always run, for its logits), or None below ``min_tokens``."""
        self.stats.lookups += 1
        self.stats.prompt_tokens += len(prompt)
        if not self._entries or len(prompt) <= self.min_tokens:
            return None
        query = np.asarray(prompt, dtype=np.int64)
        best: tuple[int, int] | None = None
        for key, entry in self._entries.items():
            n = min(len(entry.tokens), len(query) - 1)
            if n < self.min_tokens or (best is not None and n <= best[1]):
                continue
            differ = np.flatnonzero(entry.tokens[:n] != query[:n])
            common = int(differ[0]) if len(differ) else n
            if common >= self.min_tokens and (best is None or common > best[1]):
                best = (key, common)
        return best

    def take(self, key: int, length: int) -> Layers:
        """The first ``length`` positions of an entry's keys and values. An entry taken
        whole is dropped: its context has moved on and will be stored again, longer."""
        entry = self._entries[key]
        self.stats.hits += 1
        self.stats.reused_tokens += length
        if length >= len(entry.tokens):
            del self._entries[key]
            self._bytes -= entry.nbytes
            return entry.layers
        self._entries.move_to_end(key)
        return [(k[:, :length], v[:, :length]) for k, v in entry.layers]

    def put(self, tokens: Sequence[int], layers: Layers) -> None:
        """Store the keys and values of ``tokens`` (each layer's ``[kv_heads, len(tokens), head_dim]``)."""
        if len(tokens) < self.min_tokens:
            return
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if nbytes > self.budget_bytes:
            return
        while self._entries and self._bytes + nbytes > self.budget_bytes:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.nbytes
            self.stats.evicted += 1
        self._entries[self._next] = _Entry(np.asarray(tokens, dtype=np.int64), layers, nbytes)
        self._next += 1
        self._bytes += nbytes
        self.stats.stored += 1
