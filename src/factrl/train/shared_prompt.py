"""Run the instructions that SFT examples share once, not once per example.

Every context an agent's teacher writes begins with the agent's instructions: in a HARIS
warm-up the reasoner's 351 tokens and the search agent's 199, 47 % of all the tokens SFT
reads (Veri-R1's and ProFact's teachers alike). A causal model's states over those tokens
do not depend on what follows them, so they need computing once per optimiser step, not
once per row:

- the frozen blocks below the trained ones (``lora_layers``) never change, so their keys
  and values over a shared prompt, and its hidden state at the first trained block, are
  computed once for the whole run (:meth:`SharedPromptRunner.prompt_cache`);
- the trained blocks change every step, so they run over the prompt once per step, as a
  single row, with gradients; every row of the step then attends to those keys and values
  (expanded over the batch: their gradients sum over the rows, as the full forward's do)
  and the model runs only on what follows the prompt.

The loss is the same: a shared prompt is cut where no position inside it predicts a
labelled token (:func:`find_shared_prompts`). Only the float rounding of other shapes
differs (a tiny model in float32 trains the same weights within 1e-5; the tests). Only the
Llama layout is supported; other models run every row whole.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from factrl.train.prefix_cache import only_blocks

__all__ = ["SharedPrompts", "SharedPromptRunner", "find_shared_prompts", "MIN_SHARED_TOKENS"]

SUPPORTED = ("llama",)
MIN_SHARED_TOKENS = 64  # a shorter shared prompt is not worth a second pass
KEY_TOKENS = 32  # examples are grouped by their first tokens, then cut to what all share


@dataclass(frozen=True)
class SharedPrompts:
    """The distinct prompts examples share, and which one each example begins with."""

    prompts: list[list[int]]
    of: list[int]  # per example: an index into ``prompts``, -1 for none

    def length(self, example: int) -> int:
        i = self.of[example]
        return len(self.prompts[i]) if i >= 0 else 0

    @property
    def shared_tokens(self) -> int:
        """Prompt tokens that the examples' rows no longer carry."""
        return sum(self.length(e) for e in range(len(self.of)))


def _common(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = 0
    for x, y in zip(a[:limit], b[:limit]):
        if x != y:
            break
        n += 1
    return n


def find_shared_prompts(examples: Sequence[dict[str, list]], *, min_tokens: int = MIN_SHARED_TOKENS) -> SharedPrompts:
    """Group ``examples`` (``input_ids`` / ``labels`` as :func:`factrl.train.weighted_sft.
    weighted_examples` writes them) by their first tokens; a group of two or more shares
    its longest common prefix, cut before the position that predicts the first labelled
    token of any member (so the prompt carries no loss), when at least ``min_tokens``
    long. ``min_tokens`` 0 finds none."""
    of = [-1] * len(examples)
    prompts: list[list[int]] = []
    if min_tokens <= 0:
        return SharedPrompts(prompts, of)
    key = min(KEY_TOKENS, min_tokens)  # a shared prompt is at least this long anyway
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        if len(ex["input_ids"]) > key:
            groups[tuple(ex["input_ids"][:key])].append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        first = examples[members[0]]["input_ids"]
        n = len(first)
        for i in members:
            n = _common(first, examples[i]["input_ids"], n)
            labelled = next((j for j, x in enumerate(examples[i]["labels"]) if x != -100), len(examples[i]["labels"]))
            n = min(n, labelled - 1)  # position labelled - 1 predicts the first labelled token: keep it
        if n < max(min_tokens, 1):
            continue
        for i in members:
            of[i] = len(prompts)
        prompts.append(list(first[:n]))
    return SharedPrompts(prompts, of)


def supported(causal_lm: Any) -> bool:
    return getattr(getattr(causal_lm, "config", None), "model_type", None) in SUPPORTED


class SharedPromptRunner:
    """The shared prompts' keys and values for a step's rows (see the module's docstring).

    ``frozen`` is how many bottom blocks hold no trainable parameter
    (:func:`factrl.train.prefix_cache.frozen_blocks`); 0 runs the whole model over a
    prompt every step."""

    def __init__(self, causal_lm: Any, shared: SharedPrompts, *, frozen: int) -> None:
        self.lm, self.shared, self.k = causal_lm, shared, int(frozen)
        self._frozen: dict[int, tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]] = {}

    def _frozen_part(self, prompt: int, device: torch.device) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """The prompt's hidden state at the first trained block and the frozen blocks'
        keys and values over it, computed once (in the caller's autocast)."""
        if prompt not in self._frozen:
            from transformers import DynamicCache

            backbone = self.lm.model
            ids = torch.tensor([self.shared.prompts[prompt]], device=device)
            cache = DynamicCache(config=self.lm.config)
            held: list[torch.Tensor] = []
            hook = backbone.layers[self.k].register_forward_pre_hook(
                lambda _m, args, kwargs: held.append((args[0] if args else kwargs["hidden_states"]).detach()),
                with_kwargs=True)
            try:
                with only_blocks(backbone, 0, self.k + 1), torch.no_grad():  # up to the hook, no further
                    backbone(input_ids=ids, past_key_values=cache, use_cache=True)
            finally:
                hook.remove()
            kv = [(cache.layers[j].keys.detach(), cache.layers[j].values.detach()) for j in range(self.k)]
            self._frozen[prompt] = (held[0], kv)
        return self._frozen[prompt]

    def prompt_cache(self, prompt: int, rows: int, device: torch.device) -> Any:
        """A KV cache holding prompt ``prompt`` at every layer for ``rows`` rows: the
        frozen blocks' from the run's store, the trained blocks' computed now with
        gradients (one row, expanded)."""
        from transformers import DynamicCache

        backbone = self.lm.model
        cache = DynamicCache(config=self.lm.config)
        if self.k == 0:
            ids = torch.tensor([self.shared.prompts[prompt]], device=device)
            backbone(input_ids=ids, past_key_values=cache, use_cache=True)
        else:
            hidden, kv = self._frozen_part(prompt, device)
            with only_blocks(backbone, self.k):  # the trained blocks write their own layers of the cache
                backbone(inputs_embeds=hidden, past_key_values=cache, use_cache=True)
            for j, (keys, values) in enumerate(kv):
                cache.layers[j].update(keys, values)
        for layer in cache.layers:
            layer.keys = layer.keys.expand(rows, -1, -1, -1)
            layer.values = layer.values.expand(rows, -1, -1, -1)
        return cache
