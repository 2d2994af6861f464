"""Stop strings as a token-level automaton, so a decode step checks them on the device.

An Aho–Corasick automaton over the stop strings' UTF-8 bytes is lifted to tokens: for
every automaton state ``q`` and token ``t``, ``next_state[q, t]`` is the state after
reading ``t``'s bytes and ``hit[q, t]`` the stop string that completes first inside
them (-1 for none). One gather per step then replaces decoding the tail of every row.

It agrees with :class:`factrl.lm.hf.StopChecker` (decode the newest tokens, skipping
special tokens, and look for a stop): a stop ending inside the newest token is found;
of several, the one ending first wins, then the first in the list. Special tokens have
no bytes (they are skipped when decoded), and the token bytes come from the byte-level
vocabulary, so this needs a byte-level BPE tokenizer (:func:`token_bytes` returns None
otherwise and the engine is not used).
"""

from __future__ import annotations

import json
import weakref
from collections import deque
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["StopTables", "token_bytes", "build_stop_tables"]


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    # GPT-2's reversible byte <-> printable-unicode map used by byte-level BPE vocabularies.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTES_CACHE: "weakref.WeakKeyDictionary[Any, dict[int, list[bytes] | None]]" = weakref.WeakKeyDictionary()


def token_bytes(tokenizer: Any, vocab_size: int) -> list[bytes] | None:
    """Each token id's bytes as decoding shows them (special tokens: none), or None
    when the tokenizer is not byte-level BPE. Cached per tokenizer."""
    try:
        per = _BYTES_CACHE.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable
        return _token_bytes(tokenizer, vocab_size)
    if vocab_size not in per:
        per[vocab_size] = _token_bytes(tokenizer, vocab_size)
    return per[vocab_size]


def _token_bytes(tokenizer: Any, vocab_size: int) -> list[bytes] | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        spec = json.loads(backend.to_str())
    except Exception:
        return None
    decoder = spec.get("decoder") or {}
    kinds = {decoder.get("type")} | {d.get("type") for d in decoder.get("decoders", []) or []}
    if "ByteLevel" not in kinds:
        return None
    table = _byte_decoder()
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = {int(a["id"]): a for a in spec.get("added_tokens", [])}
    out: list[bytes] = []
    for i in range(vocab_size):
        if i in special or (i in added and added[i].get("special")):
            out.append(b"")
            continue
        if i in added:
            out.append(str(added[i]["content"]).encode("utf-8"))
            continue
        piece = tokenizer.convert_ids_to_tokens(i)
        if piece is None:
            out.append(b"")
            continue
        try:
            out.append(bytes(table[ch] for ch in piece))
        except KeyError:
            return None
    return out


class StopTables:
    """``next_state`` and ``hit`` (both ``[states, vocab]`` int32) for one stop list."""

    def __init__(self, stops: Sequence[str], next_state: np.ndarray, hit: np.ndarray) -> None:
        self.stops = list(stops)
        self.next_state = next_state
        self.hit = hit

    @property
    def states(self) -> int:
        return int(self.next_state.shape[0])


def _automaton(patterns: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte transition table ``delta[state, byte]`` and ``first[state]``: the pattern
    (lowest index) that ends at this state, -1 for none. Patterns are non-empty."""
    goto: list[dict[int, int]] = [{}]
    ends: list[list[int]] = [[]]
    for pi, pat in enumerate(patterns):
        s = 0
        for b in pat:
            if b not in goto[s]:
                goto.append({})
                ends.append([])
                goto[s][b] = len(goto) - 1
            s = goto[s][b]
        ends[s].append(pi)
    n = len(goto)
    fail = [0] * n
    delta = np.zeros((n, 256), dtype=np.int32)
    order = deque()
    for b in range(256):
        if b in goto[0]:
            s = goto[0][b]
            delta[0, b] = s
            order.append(s)
    while order:
        s = order.popleft()
        ends[s] = sorted(set(ends[s]) | set(ends[fail[s]]))
        for b in range(256):
            if b in goto[s]:
                t = goto[s][b]
                fail[t] = int(delta[fail[s], b])
                delta[s, b] = t
                order.append(t)
            else:
                delta[s, b] = delta[fail[s], b]
    # Among patterns ending at the same byte, the first in the caller's list wins.
    first = np.array([min(e) if e else -1 for e in ends], dtype=np.int32)
    return delta, first


def build_stop_tables(stops: Sequence[str], tokens: Sequence[bytes]) -> StopTables:
    """Lift the byte automaton of ``stops`` to the token vocabulary ``tokens``."""
    stops = [s for s in stops if s]
    vocab = len(tokens)
    if not stops:
        return StopTables([], np.zeros((1, vocab), dtype=np.int32), np.full((1, vocab), -1, dtype=np.int32))
    delta, first = _automaton([s.encode("utf-8") for s in stops])
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    width = int(lengths.max()) if vocab else 0
    data = np.zeros((vocab, max(width, 1)), dtype=np.int64)
    for i, t in enumerate(tokens):
        if t:
            data[i, : len(t)] = np.frombuffer(t, dtype=np.uint8)
    n = delta.shape[0]
    next_state = np.zeros((n, vocab), dtype=np.int32)
    hit = np.full((n, vocab), -1, dtype=np.int32)
    for q in range(n):
        cur = np.full(vocab, q, dtype=np.int64)
        got = np.full(vocab, -1, dtype=np.int32)
        for j in range(width):
            live = (j < lengths) & (got < 0)
            if not live.any():
                break
            cur[live] = delta[cur[live], data[live, j]]
            matched = live & (first[cur] >= 0)
            got[matched] = first[cur[matched]]
        next_state[q] = cur
        hit[q] = got
    return StopTables(stops, next_state, hit)
