"""The transformers backend's eager decode loop and its helpers: per-row seeds, stop
strings found in the decoded tail, the n-gram repetition guard, and the check that
sampled logprobs are finite. :class:`~factrl.lm.hf.HFLM` runs this loop where the decode
engine (:mod:`factrl.lm.engine`) does not apply (see :mod:`factrl.lm.hf`)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import torch

from factrl.lm.base import Generation, GenerationConfig, RowFailures
from factrl.lm.engine.rng import uniform
from factrl.lm.engine.sampling import choose_tokens
from factrl.lm.f32_attention import store_dtype
from factrl.lm.hf_rows import HFRows
from factrl.lm.kv_cache import drop_shared_padding, is_buffered, new_cache
from factrl.lm.turn_cache import weights_key

__all__ = ["EagerDecode", "StopChecker", "active_dtype", "ban_repeats", "banned_next", "finite_rows", "row_seed"]


def row_seed(seed: int, row: int) -> int:
    # A hash, not seed + row: consecutive seeds of consecutive calls must not share streams.
    digest = hashlib.blake2b(f"{seed}:{row}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class StopChecker:
    """Finds a stop string in the decoded tail of one sequence's generated ids.

    Only the last few tokens are decoded: a stop string of ``n`` UTF-8 bytes that ends in
    the newest token spans at most ``n`` tokens (every byte-level token holds at least
    one byte), and an occurrence that ended earlier would have stopped the row then.
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.stops = [s for s in stops if s]
        self.window = max((len(s.encode("utf-8")) for s in self.stops), default=0) + 2

    def __call__(self, ids: Sequence[int]) -> str | None:
        if not self.stops:
            return None
        tail = self.tokenizer.decode(list(ids[-self.window :]), skip_special_tokens=True,
                                     clean_up_tokenization_spaces=False)
        found: tuple[int, str] | None = None
        for stop in self.stops:
            at = tail.find(stop)
            if at >= 0 and (found is None or at + len(stop) < found[0]):
                found = (at + len(stop), stop)
        return None if found is None else found[1]


def banned_next(out: Sequence[int], n: int) -> set[int]:
    """The tokens that would complete an ``n``-gram already in ``out`` (a repeat)."""
    if n <= 0 or len(out) < n - 1:
        return set()
    if n == 1:
        return set(out)
    tail = list(out[len(out) - n + 1 :])
    first = tail[0]
    return {out[i + n - 1] for i in range(len(out) - n + 1) if out[i] == first and list(out[i : i + n - 1]) == tail}


def ban_repeats(logits: torch.Tensor, outs: list[list[int]], sizes: list[int]) -> torch.Tensor:
    """A copy of ``logits`` with each row's repeat-making tokens at -inf, to choose
    from; the recorded logprobs stay those of ``logits`` (see GenerationConfig)."""
    bans = [banned_next(out, n) for out, n in zip(outs, sizes)]
    if not any(bans):
        return logits
    guarded = logits.clone()
    for b, ban in enumerate(bans):
        if ban and len(ban) < guarded.shape[-1]:  # never ban the whole vocabulary
            guarded[b, list(ban)] = float("-inf")
    return guarded


def finite_rows(gens: list[Generation]) -> list[Generation]:
    """``gens``, or a :class:`RowFailures` failing the rows whose logprobs are not finite:
    a model whose weights or activations went NaN/inf samples noise, and its episodes
    must end as counted errors, not as trajectories no JSON reader accepts."""
    bad = [i for i, g in enumerate(gens) if g.logprobs and not all(math.isfinite(x) for x in g.logprobs)]
    if not bad:
        return gens
    err = FloatingPointError("the model's log-probabilities are not finite (NaN/inf logits: are its weights NaN?)")
    raise RowFailures([None if i in bad else g for i, g in enumerate(gens)],
                      [err if i in bad else None for i in range(len(gens))])


def active_dtype(model: Any, device: torch.device) -> torch.dtype:
    """The dtype generation computes in: autocast's when it is on (a trainer's mixed
    precision), else the parameters'."""
    if device.type in ("cuda", "cpu") and torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return next(model.parameters()).dtype


class EagerDecode(HFRows):
    """The eager sampling loop (a transformers forward per step), one chunk of rows at a time."""

    _turns: Any = None  # a TurnCache while HFLM.reuse_turns() is open
    _casts: Any = None  # frozen weights' autocast casts while it is open (factrl.lm.autocast_weights)

    def _generate_chunk(
        self, prompts: list[list[int]], gens: list[int], cfgs: list[GenerationConfig],
        stops: list[StopChecker],
    ) -> list[Generation]:
        caps = [c.max_new_tokens for c in cfgs]
        sampling = cfgs[0]  # temperature and top_p are shared by every row (row_configs checks)
        # Identical prompts (a GRPO group) are prefilled once and their cache rows copied.
        slot: dict[tuple[int, ...], int] = {}
        row_slot = [slot.setdefault(tuple(p), len(slot)) for p in prompts]
        cache, logits, attn = self._prefill([list(p) for p in slot], reserve=min(max(caps), 256))
        if len(slot) < len(prompts):
            index = torch.tensor(row_slot, device=attn.device)
            cache.batch_select_indices(index)
            logits, attn = logits[index], attn[index]
        next_pos = attn.sum(-1, keepdim=True)  # position of each row's next token
        live = list(range(len(prompts)))  # chunk row of each batch row still generating
        out_ids: list[list[int]] = [[] for _ in prompts]
        out_lp: list[list[float]] = [[] for _ in prompts]
        finish: list[Any] = [("length", None)] * len(prompts)
        guards = [c.no_repeat_ngram for c in cfgs]
        for step in range(max(caps)):
            choose = None
            if any(guards):
                choose = ban_repeats(logits, [out_ids[r] for r in live], [guards[r] for r in live])
            u = torch.tensor([uniform(gens[r], len(out_ids[r])) for r in live], dtype=torch.float64)
            tok, lp = choose_tokens(logits, sampling.temperature, sampling.top_p, u, choose)
            keep = []
            for b, (t, p) in enumerate(zip(tok.tolist(), lp.tolist())):
                r = live[b]
                out_ids[r].append(t)
                out_lp[r].append(p)
                if t in self.eos_token_ids:
                    finish[r] = ("eos", None)
                elif (hit := stops[r](out_ids[r])) is not None:
                    finish[r] = ("stop", hit)
                elif len(out_ids[r]) < caps[r]:  # each row stops at its own budget
                    keep.append(b)
            turns = self._turns
            if turns is not None and len(keep) < len(live):
                kept = set(keep)
                self._store_finished(turns, cache, attn, {b: prompts[live[b]] + out_ids[live[b]][:-1]
                                                          for b in range(len(live)) if b not in kept})
            if not keep:
                break
            if len(keep) < len(live):
                # Finished rows leave the batch and the KV cache: long tails get cheaper.
                index = torch.tensor(keep, device=attn.device)
                cache.batch_select_indices(index)
                attn, next_pos, tok = attn[index], next_pos[index], tok[index]
                live = [live[b] for b in keep]
                attn = drop_shared_padding(attn, cache)
            attn = torch.cat([attn, attn.new_ones((len(live), 1))], dim=-1)
            logits = self._forward(tok[:, None].to(attn.device), attn, cache, next_pos)
            next_pos = next_pos + 1
        return [
            Generation(token_ids=out_ids[r], logprobs=out_lp[r], text=self.decode(out_ids[r]),
                       finish_reason=finish[r][0], stop=finish[r][1])
            for r in range(len(prompts))
        ]

    def _prefill(self, prompts: list[list[int]], reserve: int) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """A KV cache holding ``prompts`` (left-padded), the last position's logits and
        the attention mask. Inside :meth:`~factrl.lm.hf.HFLM.reuse_turns`, a prompt that
        starts like a stored context (:mod:`factrl.lm.turn_cache`) runs only what follows
        that prefix: the prefixes are laid right-aligned before the left-padded rests, the
        mask's holes cover both paddings, and positions are given per row."""
        cache = new_cache(self.model.config, reserve=reserve, store_dtype=self._store_dtype())
        turns = self._turns
        taken: list[Any] = [None] * len(prompts)
        lengths = [0] * len(prompts)
        if turns is not None and is_buffered(cache):
            turns.check((*weights_key(self.model), active_dtype(self.model, self.device), self._store_dtype()))
            for b, p in enumerate(prompts):  # one at a time: an entry taken whole is gone for the next
                if (found := turns.lookup(p)) is not None:
                    taken[b], lengths[b] = turns.take(*found), found[1]
        width = max(lengths)
        if not width:
            ids, attn = self._left_pad(prompts)
            return cache, self._forward(ids, attn, cache, (attn.cumsum(-1) - 1).clamp(min=0)), attn
        like = next(t for t in taken if t is not None)
        for i, layer in enumerate(cache.layers):
            k0, v0 = like[i]
            keys = k0.new_zeros((len(prompts), k0.shape[0], width, k0.shape[-1]))
            values = v0.new_zeros((len(prompts), v0.shape[0], width, v0.shape[-1]))
            for b, t in enumerate(taken):
                if t is not None:
                    keys[b, :, width - lengths[b]:] = t[i][0]
                    values[b, :, width - lengths[b]:] = t[i][1]
            layer.update(keys.to(self.device), values.to(self.device))
        ids, rest = self._left_pad([p[n:] for p, n in zip(prompts, lengths)])
        head = torch.zeros((len(prompts), width), dtype=rest.dtype, device=rest.device)
        for b, n in enumerate(lengths):
            head[b, width - n:] = 1
        start = torch.tensor(lengths, device=rest.device)[:, None]
        pos = start + (rest.cumsum(-1) - 1).clamp(min=0)
        attn = torch.cat([head, rest], dim=-1)
        return cache, self._forward(ids, attn, cache, pos), attn

    def _store_dtype(self) -> torch.dtype | None:
        """float32 for a CPU model computing in bf16/fp16 with SDPA (:mod:`factrl.lm.f32_attention`)."""
        if getattr(self.model.config, "_attn_implementation", None) != "sdpa":
            return None
        return store_dtype(self.device, active_dtype(self.model, self.device))

    def _store_finished(self, turns: Any, cache: Any, attn: torch.Tensor, finished: dict[int, list[int]]) -> None:
        """Leave in ``turns`` the keys and values of the batch rows that just finished
        (batch row -> its tokens: the prompt and every generated token but the last, not yet run)."""
        if not is_buffered(cache) or cache.layers[0].length != attn.shape[1]:
            return
        layers = cache.layers
        for b, tokens in finished.items():
            valid = attn[b].bool()
            if int(valid.sum()) != len(tokens):
                continue  # a count mismatch means the mask no longer maps to these tokens
            turns.put(tokens, [(layer.keys[b][:, valid].clone(), layer.values[b][:, valid].clone()) for layer in layers])

    def _forward(self, ids: torch.Tensor, attn: torch.Tensor, cache: Any, pos: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
                         use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float()
