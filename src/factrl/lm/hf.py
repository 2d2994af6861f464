"""The transformers backend: batched generation with a custom sampling loop that keeps token truth.

Every sampled id is kept as sampled, with its log-probability under ``logits /
temperature`` over the full vocabulary (no top-k): exactly what a GRPO trainer such as
TRL recomputes from the same ids. Nothing is re-tokenised.

Text convention: ``Generation.text == lm.decode(token_ids)``, and :meth:`HFLM.decode`
drops special tokens by default, so a sampled EOS (``<|im_end|>`` for SmolLM2) stays in
``token_ids``/``logprobs`` but not in ``text``. Tags such as ``</search>`` are plain text
for the chat models we use, so they appear in ``text`` unchanged.

Sampling: each prompt (its index in the request) gets its own ``torch.Generator`` seeded
from ``(config.seed, index)`` — or, with one config per row, from that row's own seed —
so a row's sample does not depend on which other rows share its batch, on
``max_batch_size`` or on when other rows finish. Each row stops at its own
``max_new_tokens`` and stop strings. ``temperature ==
0`` is greedy decoding; its logprobs are recorded at temperature 1 (and
:meth:`HFLM.token_logprobs` treats temperature 0 as 1 likewise). A row's
``no_repeat_ngram`` guard bans the tokens that would repeat one of its own n-grams.

Speed (CPU-minded): prompts are left-padded and batched (``max_batch_size`` rows at a
time, sorted by length); identical prompts are prefilled once; the KV cache is written
into a reserved buffer instead of re-concatenated every step; finished rows leave the
batch and the cache, and padding columns no remaining row needs are cut. Generation and
scoring run in eval mode under ``torch.inference_mode()``; thread count is the caller's
(``torch.set_num_threads``).
"""

from __future__ import annotations

import copy
import math
import os
import weakref

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from factrl.lm.engine.rng import uniform
from factrl.lm.engine.sampling import choose_tokens
from factrl.lm.base import LM_BACKENDS, Generation, GenerationConfig, RowFailures, row_configs
from factrl.lm.device import DeviceError, default_batch_size, resolve_device, resolve_dtype, torch_dtype
from factrl.lm.kv_cache import drop_shared_padding, new_cache
from factrl.lm.loader import LMLoadError
from factrl.lm.text import TokenTextMixin
from factrl.types import Message

__all__ = ["HFLM", "StopChecker", "ENGINE_MODES"]

# "auto": the decode engine on CUDA when the model and tokenizer allow it, else eager;
# "on": the engine wherever it can run (CPU too; an unsupported model is an error); "off": eager.
# Default: $FACTRL_DECODE_ENGINE, else "auto".
ENGINE_MODES = ("auto", "on", "off")
# Upper bound on the logits tensor materialised at once by score/token_logprobs (floats).
_LOGIT_BUDGET = 64 * 1024 * 1024


def _parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    try:
        return torch_dtype(dtype)
    except DeviceError as err:
        raise ValueError(str(err)) from None


def _row_seed(seed: int, row: int) -> int:
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


@LM_BACKENDS.register("hf")
class HFLM(TokenTextMixin):
    """A transformers causal LM behind the :class:`~factrl.lm.base.LM` protocol."""

    repetition_guard = True  # honours GenerationConfig.no_repeat_ngram

    def __init__(self, model: Any, tokenizer: Any, *, name: str | None = None,
                 max_batch_size: int | None = None, engine: str | None = None) -> None:
        if max_batch_size is None:  # the generation batch follows the device (factrl.lm.device)
            max_batch_size = default_batch_size(next(model.parameters()).device)
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        engine = engine or os.environ.get("FACTRL_DECODE_ENGINE", "auto")
        if engine not in ENGINE_MODES:
            raise ValueError(f"engine must be one of {', '.join(ENGINE_MODES)}, got {engine!r}")
        self.engine = engine
        self.model = model
        self.tokenizer = tokenizer
        self.name = name or str(getattr(model.config, "_name_or_path", "") or type(model).__name__)
        self.max_batch_size = max_batch_size
        if tokenizer.eos_token_id is None:
            raise LMLoadError(f"the tokenizer of {self.name} defines no EOS token")
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.eos_token_id: int = int(tokenizer.eos_token_id)
        self.pad_token_id: int = int(tokenizer.pad_token_id)
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        extra = gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos]
        self.eos_token_ids = frozenset([self.eos_token_id, *(int(e) for e in extra if e is not None)])
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)

    @classmethod
    def load(
        cls,
        source: str,
        *,
        device: str = "auto",
        dtype: str | torch.dtype = "auto",
        name: str | None = None,
        max_batch_size: int | None = None,
        **from_pretrained_kw: Any,
    ) -> HFLM:
        """Load a ``save_pretrained`` directory or a hub id (hub ids need the local cache when offline).

        ``device``/``dtype`` as :func:`factrl.lm.device.resolve_device`/``resolve_dtype``
        take them (``auto``: CUDA when available, bf16 there); ``max_batch_size`` None
        follows the device (32 rows on CPU, 256 on CUDA)."""
        try:
            device = resolve_device(device)
            weights_dtype = _parse_dtype(resolve_dtype(dtype, device))
        except DeviceError as err:
            raise LMLoadError(str(err)) from None
        local = Path(source).is_dir()
        if local and not (Path(source) / "config.json").is_file():
            raise LMLoadError(f"directory {source} does not hold a loadable model: no config.json "
                              "(expected the model and tokenizer written by save_pretrained)")
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **from_pretrained_kw)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=weights_dtype, **from_pretrained_kw)
        except (OSError, ValueError) as err:  # hub errors (offline, unknown repo, missing files) are OSErrors
            if local:
                raise LMLoadError(f"directory {source} does not hold a loadable model and tokenizer "
                                  f"(written by save_pretrained): {err}") from err
            if not isinstance(err, OSError):
                raise
            raise LMLoadError(
                f"could not load model {source!r}: it is not a local directory and not in the Hugging Face "
                f"cache, or the hub is unreachable ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}). "
                "Download it where the hub is reachable (`huggingface-cli download "
                f"{source}`), pass a local directory written by save_pretrained, or use the embedded 'smollm2'."
            ) from err
        return cls(model.to(device), tokenizer, name=name or source, max_batch_size=max_batch_size)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> str:
        """The weights' dtype name (``"float32"``, ``"bfloat16"``, ...)."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def runtime_info(self) -> dict[str, Any]:
        """Where and how this model runs, as a run records it: device, dtype and the
        rows per forward pass (``max_batch_size``)."""
        return {"device": str(self.device), "dtype": self.dtype, "max_batch_size": self.max_batch_size}

    # -- text <-> ids --------------------------------------------------------------------

    def chat_prompt_ids(self, messages: Sequence[Message | dict[str, str]]) -> list[int]:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"the tokenizer of {self.name} has no chat template; build prompt ids with encode()")
        chat = [m if isinstance(m, dict) else {"role": m.role, "content": m.content} for m in messages]
        out = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=False)
        if not isinstance(out, list):  # some tokenizer versions return a BatchEncoding regardless
            out = out["input_ids"]
        return [int(i) for i in out]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens,
                                     clean_up_tokenization_spaces=False)

    # -- generation ----------------------------------------------------------------------

    def generate(
        self, prompts: Sequence[Sequence[int]], config: GenerationConfig | Sequence[GenerationConfig]
    ) -> list[Generation]:
        rows = self._check_prompts(prompts, "prompt")
        cfgs = row_configs(len(rows), config)
        for c in cfgs[:1] if isinstance(config, GenerationConfig) else cfgs:
            if c.max_new_tokens < 0:
                raise ValueError(f"max_new_tokens must be >= 0, got {c.max_new_tokens}")
            if c.temperature < 0:
                raise ValueError(f"temperature must be >= 0, got {c.temperature}")
            if not 0 < c.top_p <= 1:
                raise ValueError(f"top_p must be in (0, 1], got {c.top_p}")
        limit = getattr(self.model.config, "max_position_embeddings", None)
        for i, (p, c) in enumerate(zip(rows, cfgs)):
            if limit and len(p) + c.max_new_tokens > limit:
                raise ValueError(f"prompt {i}: {len(p)} tokens + max_new_tokens {c.max_new_tokens} "
                                 f"exceeds the model's context of {limit}")
        seeds = self._row_seeds(config, cfgs)
        stops: dict[tuple[str, ...], StopChecker] = {}
        results: list[Generation | None] = [None] * len(rows)
        # Rows of similar length share a chunk: less padding, and per-row seeds keep the
        # samples independent of the grouping.
        order = sorted((i for i in range(len(rows)) if cfgs[i].max_new_tokens > 0), key=lambda i: len(rows[i]))
        for i in range(len(rows)):
            if cfgs[i].max_new_tokens == 0:
                results[i] = Generation([], [], "", "length")
        engine = self._decode_engine(cfgs) if order else None
        if engine is not None:
            was_training = self.model.training
            self.model.eval()
            try:
                outs = engine.generate([rows[i] for i in order], [cfgs[i] for i in order], [seeds[i] for i in order])
            finally:
                self.model.train(was_training)
            for i, g in zip(order, outs):
                results[i] = g
            return _finite_rows([r for r in results if r is not None])
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for chunk in _chunks(order, self.max_batch_size):
                    gens = [seeds[i] for i in chunk]
                    checkers = [stops.setdefault(tuple(cfgs[i].stop), StopChecker(self.tokenizer, cfgs[i].stop))
                                for i in chunk]
                    outs = self._generate_chunk([rows[i] for i in chunk], gens, [cfgs[i] for i in chunk], checkers)
                    for i, g in zip(chunk, outs):
                        results[i] = g
        finally:
            self.model.train(was_training)
        return _finite_rows([r for r in results if r is not None])

    @staticmethod
    def _row_seeds(config: GenerationConfig | Sequence[GenerationConfig], cfgs: list[GenerationConfig]) -> list[int]:
        """One generator seed per row: from the shared seed and the row's index, or from
        the row's own seed (a per-row config), so a seeded row samples the same whatever
        batch it is in; unseeded rows follow torch's global RNG (torch.manual_seed)."""
        if isinstance(config, GenerationConfig) and config.seed is not None:
            return [_row_seed(int(config.seed), i) for i in range(len(cfgs))]
        base = int(torch.randint(0, 2**62, ()).item())
        return [_row_seed(base, i) if c.seed is None or isinstance(config, GenerationConfig) else _row_seed(int(c.seed), 0)
                for i, c in enumerate(cfgs)]

    def _decode_engine(self, cfgs: list[GenerationConfig]) -> Any:
        """The decode engine for this call, or None for the eager loop (see ENGINE_MODES)."""
        if self.engine == "off" or any(c.no_repeat_ngram for c in cfgs):
            return None
        if self.engine == "auto" and self.device.type != "cuda":
            return None
        from factrl.lm.engine import engine_unsupported
        from factrl.lm.engine.engine import DecodeEngine

        cached = _ENGINES.get(self.model)
        dtype = _active_dtype(self.model, self.device)
        if cached is not None and cached.dtype == dtype and cached.max_slots == self.max_batch_size:
            return cached
        reason = engine_unsupported(self.model, self.tokenizer)
        if reason is not None:
            if self.engine == "on":
                raise ValueError(f"engine='on' but the decode engine cannot run {self.name}: {reason}")
            return None
        engine = DecodeEngine(self.model, self.tokenizer, sorted(self.eos_token_ids),
                              max_slots=self.max_batch_size, dtype=dtype)
        _ENGINES[self.model] = engine
        return engine

    def _generate_chunk(
        self, prompts: list[list[int]], gens: list[int], cfgs: list[GenerationConfig],
        stops: list[StopChecker],
    ) -> list[Generation]:
        caps = [c.max_new_tokens for c in cfgs]
        sampling = cfgs[0]  # temperature and top_p are shared by every row (row_configs checks)
        # Identical prompts (a GRPO group) are prefilled once and their cache rows copied.
        slot: dict[tuple[int, ...], int] = {}
        row_slot = [slot.setdefault(tuple(p), len(slot)) for p in prompts]
        ids, attn = self._left_pad([list(p) for p in slot])
        cache = new_cache(self.model.config, reserve=min(max(caps), 256))
        logits = self._forward(ids, attn, cache, (attn.cumsum(-1) - 1).clamp(min=0))
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
                choose = _ban_repeats(logits, [out_ids[r] for r in live], [guards[r] for r in live])
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

    def _forward(self, ids: torch.Tensor, attn: torch.Tensor, cache: Any, pos: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
                         use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float()

    def _left_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, width - len(r):] = torch.tensor(r, dtype=torch.long)
            attn[b, width - len(r):] = 1
        return ids.to(self.device), attn.to(self.device)

    def _check_prompts(self, prompts: Sequence[Sequence[int]], what: str) -> list[list[int]]:
        if isinstance(prompts, (str, bytes)):
            raise TypeError(f"{what}s must be a list of token-id lists, got a string")
        rows = []
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                raise TypeError(f"{what} {i} is a string; pass token ids (see chat_prompt_ids/encode)")
            row = [int(t) for t in p]
            if not row and what == "prompt":
                raise ValueError(f"{what} {i} is empty; a prompt needs at least one token")
            bad = [t for t in row if not 0 <= t < self.vocab_size]
            if bad:
                raise ValueError(f"{what} {i} has token id {bad[0]} outside the vocabulary (size {self.vocab_size})")
            rows.append(row)
        return rows

    # -- scoring -------------------------------------------------------------------------

    def token_logprobs(self, prompt_ids: Sequence[int], completion_ids: Sequence[int],
                       temperature: float = 1.0) -> list[float]:
        """Log-probability of each completion token given the prompt and the tokens before it."""
        return self.batch_token_logprobs([prompt_ids], [completion_ids], temperature)[0]

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[float]:
        """Summed logprob of each continuation given its prompt. Rows that repeat one
        prompt (``score_choices``: a verifier's two answers, a forced label's three) run
        that prompt once and score their continuations against its KV cache."""
        ps, cs = self._check_prompts(prompts, "prompt"), self._check_prompts(continuations, "completion")
        if len(ps) != len(cs):
            raise ValueError(f"{len(ps)} prompts but {len(cs)} completions")
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, p in enumerate(ps):
            if cs[i]:
                groups.setdefault(tuple(p), []).append(i)
        out = [0.0] * len(ps)
        single = [i for rows in groups.values() if len(rows) == 1 for i in rows]
        for i, lps in zip(single, self.batch_token_logprobs([ps[i] for i in single], [cs[i] for i in single], 1.0)):
            out[i] = sum(lps)
        for prompt, rows in groups.items():
            if len(rows) > 1:
                for i, lps in zip(rows, self.shared_prefix_logprobs(list(prompt), [cs[i] for i in rows])):
                    out[i] = sum(lps)
        return out

    def shared_prefix_logprobs(self, prompt_ids: Sequence[int], completions: Sequence[Sequence[int]]) -> list[list[float]]:
        """Per-token logprobs (temperature 1) of several completions of one prompt: the
        prompt's forward pass runs once, each completion is scored on a copy of its KV
        cache (right-padded, so padding sits after every real token). Equal to
        :meth:`batch_token_logprobs` on the repeated prompt, for the prompt's cost once."""
        prompt = self._check_prompts([prompt_ids], "prompt")[0]
        cs = self._check_prompts(completions, "completion")
        out: list[list[float]] = [[] for _ in cs]
        rows = [i for i, c in enumerate(cs) if c]
        if not rows:
            return out
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                ids = torch.tensor([prompt], dtype=torch.long, device=self.device)
                first = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
                head = torch.log_softmax(first.logits[0, -1].float(), dim=-1)
                for i in rows:
                    out[i] = [float(head[cs[i][0]])]
                rest = [i for i in rows if len(cs[i]) > 1]
                for chunk in self._score_chunks(rest, cs):
                    width = max(len(cs[i]) - 1 for i in chunk)
                    tail = torch.full((len(chunk), width), self.pad_token_id, dtype=torch.long)
                    attn = torch.ones((len(chunk), len(prompt) + width), dtype=torch.long)
                    for b, i in enumerate(chunk):
                        tail[b, : len(cs[i]) - 1] = torch.tensor(cs[i][:-1], dtype=torch.long)
                        attn[b, len(prompt) + len(cs[i]) - 1 :] = 0
                    cache = copy.deepcopy(first.past_key_values)
                    cache.batch_repeat_interleave(len(chunk))
                    pos = torch.arange(len(prompt), len(prompt) + width, device=self.device).expand(len(chunk), -1)
                    logits = self.model(input_ids=tail.to(self.device), attention_mask=attn.to(self.device),
                                        position_ids=pos, past_key_values=cache, use_cache=True).logits
                    for b, i in enumerate(chunk):
                        n = len(cs[i]) - 1
                        lp = torch.log_softmax(logits[b, :n].float(), dim=-1)
                        target = torch.tensor(cs[i][1:], device=lp.device)[:, None]
                        out[i] += lp.gather(-1, target).squeeze(-1).tolist()
        finally:
            self.model.train(was_training)
        return out

    def batch_token_logprobs(self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                             temperature: float = 1.0) -> list[list[float]]:
        """Per-token logprobs of each completion given its prompt, under ``logits / temperature``."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        temp = temperature if temperature > 0 else 1.0
        ps, cs = self._check_prompts(prompts, "prompt"), self._check_prompts(completions, "completion")
        out: list[list[float]] = [[] for _ in ps]
        order = sorted((i for i in range(len(ps)) if cs[i]), key=lambda i: len(ps[i]) + len(cs[i]))
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for chunk in self._score_chunks(order, cs):
                    ids, attn = self._left_pad([ps[i] + cs[i] for i in chunk])
                    keep = max(len(cs[i]) for i in chunk) + 1
                    pos = (attn.cumsum(-1) - 1).clamp(min=0)
                    logits = self.model(input_ids=ids, attention_mask=attn, position_ids=pos,
                                        use_cache=False, logits_to_keep=keep).logits
                    for b, i in enumerate(chunk):
                        n = len(cs[i])  # continuation sits at the right end; logit t predicts token t+1
                        lp = torch.log_softmax(logits[b, keep - 1 - n : keep - 1].float() / temp, dim=-1)
                        target = torch.tensor(cs[i], device=lp.device)[:, None]
                        out[i] = lp.gather(-1, target).squeeze(-1).tolist()
        finally:
            self.model.train(was_training)
        return out

    def next_token_logprobs(self, prompts: Sequence[Sequence[int]], token_ids: Sequence[int]) -> list[list[float]]:
        """Log-probability of each of ``token_ids`` as the next token after each prompt
        (full-vocabulary softmax at temperature 1): one forward pass per prompt, batched
        ``max_batch_size`` rows at a time. Row ``i`` holds prompt ``i``'s logprobs of
        ``token_ids`` in order (label scoring reads a few label tokens this way)."""
        ps = self._check_prompts(prompts, "prompt")
        wanted = [int(t) for t in token_ids]
        bad = [t for t in wanted if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary (size {self.vocab_size})")
        out: list[list[float]] = [[] for _ in ps]
        order = sorted(range(len(ps)), key=lambda i: len(ps[i]))
        index = torch.tensor(wanted, dtype=torch.long)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for chunk in _chunks(order, self.max_batch_size):
                    ids, attn = self._left_pad([ps[i] for i in chunk])
                    pos = (attn.cumsum(-1) - 1).clamp(min=0)
                    logits = self.model(input_ids=ids, attention_mask=attn, position_ids=pos,
                                        use_cache=False, logits_to_keep=1).logits[:, -1, :].float()
                    lp = torch.log_softmax(logits, dim=-1)[:, index.to(logits.device)].cpu()
                    for b, i in enumerate(chunk):
                        out[i] = lp[b].tolist()
        finally:
            self.model.train(was_training)
        return out

    def _score_chunks(self, order: list[int], cs: list[list[int]]) -> Iterator[list[int]]:
        """Group rows so a chunk's kept logits (rows x longest continuation x vocab) stay in budget."""
        chunk: list[int] = []
        longest = 0
        for i in order:
            need = len(cs[i]) + 1
            grown = max(longest, need)
            if chunk and (len(chunk) >= self.max_batch_size
                          or (len(chunk) + 1) * grown * self.vocab_size > _LOGIT_BUDGET):
                yield chunk
                chunk, grown = [], need
            chunk.append(i)
            longest = grown
        if chunk:
            yield chunk


def _chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def banned_next(out: Sequence[int], n: int) -> set[int]:
    """The tokens that would complete an ``n``-gram already in ``out`` (a repeat)."""
    if n <= 0 or len(out) < n - 1:
        return set()
    if n == 1:
        return set(out)
    tail = list(out[len(out) - n + 1 :])
    first = tail[0]
    return {out[i + n - 1] for i in range(len(out) - n + 1) if out[i] == first and list(out[i : i + n - 1]) == tail}


def _ban_repeats(logits: torch.Tensor, outs: list[list[int]], sizes: list[int]) -> torch.Tensor:
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


def _finite_rows(gens: list[Generation]) -> list[Generation]:
    """``gens``, or a :class:`RowFailures` failing the rows whose logprobs are not finite:
    a model whose weights or activations went NaN/inf samples noise, and its episodes
    must end as counted errors, not as trajectories no JSON reader accepts."""
    bad = [i for i, g in enumerate(gens) if g.logprobs and not all(math.isfinite(x) for x in g.logprobs)]
    if not bad:
        return gens
    err = FloatingPointError("the model's log-probabilities are not finite (NaN/inf logits: are its weights NaN?)")
    raise RowFailures([None if i in bad else g for i, g in enumerate(gens)],
                      [err if i in bad else None for i in range(len(gens))])


def _active_dtype(model: Any, device: torch.device) -> torch.dtype:
    """The dtype generation computes in: autocast's when it is on (a trainer's mixed
    precision), else the parameters'."""
    if device.type in ("cuda", "cpu") and torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return next(model.parameters()).dtype


# One engine per live model (the TRL rollout hook builds a new HFLM each update).
_ENGINES: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
