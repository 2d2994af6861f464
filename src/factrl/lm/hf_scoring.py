"""The transformers backend's scoring: per-token logprobs of given continuations
(batched, or several continuations of one prompt on a shared KV cache), summed scores,
and next-token logprobs of a few label tokens (:class:`HFScoring`, a base of
:class:`~factrl.lm.hf.HFLM`). Every call runs in eval mode under ``torch.inference_mode()``
and restores the model's training flag."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

import torch

from factrl.lm.hf_rows import HFRows, chunks

__all__ = ["HFScoring"]

# Upper bound on the logits tensor materialised at once by score/token_logprobs (floats).
_LOGIT_BUDGET = 64 * 1024 * 1024


class HFScoring(HFRows):
    """Scoring calls of the LM protocol for a transformers model."""

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
                for chunk in chunks(order, self.max_batch_size):
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
