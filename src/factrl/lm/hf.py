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

Modules: this one loads the model and routes a generate call (the decode engine,
:mod:`factrl.lm.engine`, or the eager loop); :mod:`factrl.lm.hf_decode` holds the eager
loop and its stop strings, seeds and repetition guard; :mod:`factrl.lm.hf_scoring` the
scoring calls; :mod:`factrl.lm.hf_rows` what both share.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from factrl.lm.base import LM_BACKENDS, Generation, GenerationConfig, row_configs
from factrl.lm.device import DeviceError, default_batch_size, resolve_device, resolve_dtype, torch_dtype
from factrl.lm.hf_decode import EagerDecode, StopChecker, active_dtype, banned_next, finite_rows, row_seed
from factrl.lm.hf_rows import chunks
from factrl.lm.hf_scoring import HFScoring
from factrl.lm.loader import LMLoadError
from factrl.lm.text import TokenTextMixin
from factrl.lm.autocast_weights import cast_frozen_weights
from factrl.lm.f32_attention import cpu_attention
from factrl.lm.turn_cache import TurnCache, turn_cache_gb
from factrl.types import Message

# StopChecker and banned_next live in factrl.lm.hf_decode; re-exported for code importing them from here.
__all__ = ["HFLM", "StopChecker", "ENGINE_MODES", "banned_next"]

# "auto": the decode engine on CUDA when the model and tokenizer allow it, else eager;
# "on": the engine wherever it can run (CPU too; an unsupported model is an error); "off": eager.
# Default: $FACTRL_DECODE_ENGINE, else "auto".
ENGINE_MODES = ("auto", "on", "off")


def _parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    try:
        return torch_dtype(dtype)
    except DeviceError as err:
        raise ValueError(str(err)) from None


@LM_BACKENDS.register("hf")
class HFLM(EagerDecode, HFScoring, TokenTextMixin):
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
    def dtype(self) -> str:
        """The weights' dtype name (``"float32"``, ``"bfloat16"``, ...)."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def runtime_info(self) -> dict[str, Any]:
        """Where and how this model runs, as a run records it: device, dtype, the rows
        per forward pass (``max_batch_size``), the turn cache's budget (GB; 0: off) and the
        CPU's attention precision under bf16 (:mod:`factrl.lm.f32_attention`)."""
        return {"device": str(self.device), "dtype": self.dtype, "max_batch_size": self.max_batch_size,
                "turn_cache_gb": turn_cache_gb(), "cpu_attention": cpu_attention()}

    # -- turns ---------------------------------------------------------------------------

    @property
    def turn_cache(self) -> TurnCache | None:
        """The open :meth:`reuse_turns` block's cache (its ``stats``), or None."""
        return self._turns

    @contextlib.contextmanager
    def reuse_turns(self, budget_gb: float | None = None) -> Iterator[TurnCache | None]:
        """Within this block, a prompt that extends an earlier context prefills only the
        new tokens (:mod:`factrl.lm.turn_cache`; the eager path: CPU, or ``engine="off"``).
        ``budget_gb`` bounds the stored keys and values (default ``$FACTRL_TURN_CACHE_GB``,
        else 2; 0 turns it off). Under CPU autocast the frozen weights are cast once for
        the block, not once a call (:mod:`factrl.lm.autocast_weights`). Nested blocks share
        the outermost one's cache; it is emptied when that block ends. Yields the cache
        (None when off)."""
        if self._turns is not None or self._casts is not None:  # nested: the outermost block's
            yield self._turns
            return
        gb = turn_cache_gb() if budget_gb is None else float(budget_gb)
        self._casts = {}  # frozen weights cast once for the block (factrl.lm.autocast_weights)
        if gb <= 0:
            try:
                yield None
            finally:
                self._casts = None
            return
        self._turns = TurnCache(int(gb * 2**30))
        try:
            yield self._turns
        finally:
            self._turns.clear()
            self._turns = None
            self._casts = None

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
            return finite_rows([r for r in results if r is not None])
        was_training = self.model.training
        self.model.eval()
        try:
            with cast_frozen_weights(self.model, self.device, self._casts), torch.inference_mode():
                for chunk in chunks(order, self.max_batch_size):
                    gens = [seeds[i] for i in chunk]
                    checkers = [stops.setdefault(tuple(cfgs[i].stop), StopChecker(self.tokenizer, cfgs[i].stop))
                                for i in chunk]
                    outs = self._generate_chunk([rows[i] for i in chunk], gens, [cfgs[i] for i in chunk], checkers)
                    for i, g in zip(chunk, outs):
                        results[i] = g
        finally:
            self.model.train(was_training)
        return finite_rows([r for r in results if r is not None])

    @staticmethod
    def _row_seeds(config: GenerationConfig | Sequence[GenerationConfig], cfgs: list[GenerationConfig]) -> list[int]:
        """One generator seed per row: from the shared seed and the row's index, or from
        the row's own seed (a per-row config), so a seeded row samples the same whatever
        batch it is in; unseeded rows follow torch's global RNG (torch.manual_seed)."""
        if isinstance(config, GenerationConfig) and config.seed is not None:
            return [row_seed(int(config.seed), i) for i in range(len(cfgs))]
        base = int(torch.randint(0, 2**62, ()).item())
        return [row_seed(base, i) if c.seed is None or isinstance(config, GenerationConfig) else row_seed(int(c.seed), 0)
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
        dtype = active_dtype(self.model, self.device)
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


# One engine per live model (the TRL rollout hook builds a new HFLM each update).
_ENGINES: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
