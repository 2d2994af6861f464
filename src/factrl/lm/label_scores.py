"""The LM label scorer: how probable each label is, given a claim and some documents.

FFRR (§4.1, App. A Table 4) reads a black-box LM's next-token distribution after

    The following evidence is given: DOC DOC .... Among LABEL, LABEL, ..., the claim
    "CLAIM" is classified as:

and keeps the probabilities of the label words, renormalised over the label set. One
function serves FFRR's document-level, question-level and final rewards, REPLUG's LM
supervision and inference (label = argmax), and confidence read-outs elsewhere.

Two forms of the same prompt:

* ``"completion"`` — the text itself, no chat template, the label word read as the next
  token with a leading space (``" true"``); the paper's form (text-davinci-003 is a
  completion model). A backend with a tokenizer and ``next_token_logprobs`` (the
  transformers backend; every label word's first token must differ), or one with
  ``score_text_choices_batch`` (an OpenAI-compatible server's completions endpoint, e.g.
  ``openai:gpt-3.5-turbo-instruct``).
* ``"chat"`` — the text as the user turn, the label word as the start of the assistant
  reply, through the text-level ``score_choices`` seam (an OpenAI-compatible server's
  first-position ``top_logprobs``; the transformers backend's summed label logprobs).
  Backends with ``score_choices_batch`` get all rows in one call (concurrent requests).

``"auto"`` picks completion where the backend has ``next_token_logprobs``, chat otherwise.

A label word counts in any case: "True", "true" and "TRUE" are one label, and the label's
probability is the sum over its variants (the servers' top tokens are matched without
case; the token path sums the variants' first tokens, each counted once and only for one
label; the exact-continuation path scores each variant).

Label continuations after a token context. Where the context is the model's own token
stream (an episode's prompt, turns and observations, then ``<answer>\nLabel:``), a label
is scored as the summed log-probability of its whole continuation (``" SUPPORT\n"``, EOS
dropped), exactly as written: :func:`label_continuations` encodes the label words once,
:func:`label_logprobs` scores every label after every context in one ``score`` call (the
transformers backend runs each context once and scores its labels on the KV cache),
:func:`pick_labels` takes the best label per context (optionally after removing a label
bias, :func:`label_bias`: contextual calibration). Forced answering
(:mod:`factrl.forced`) and the label probes of the embedded agent's recipe read labels
this way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from factrl.lm.text import choice_probs
from factrl.types import Message

__all__ = ["FFRR_TEMPLATE", "LabelScoreError", "LabelScorer", "case_variants", "can_score_continuations",
           "label_bias", "label_continuations", "label_logprobs", "pick_labels"]

FFRR_TEMPLATE = 'The following evidence is given: {evidence}. Among {label_set}, the claim "{claim}" is classified as:'
NO_EVIDENCE = "(none)"

Form = Literal["auto", "completion", "chat"]


def case_variants(word: str) -> list[str]:
    """``word`` as written, lower-cased, capitalised and upper-cased (distinct, in that order)."""
    return list(dict.fromkeys([word, word.lower(), word.capitalize(), word.upper()]))


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values, default=-math.inf)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


class LabelScoreError(ValueError):
    """The scorer cannot be set up or an input cannot be scored (empty claim, label words
    sharing a first token, a backend giving no finite score to any label)."""


@dataclass
class ScoreItem:
    """One row to score: a claim and the documents shown with it (in order)."""

    claim: str
    documents: Sequence[str]


class LabelScorer:
    """``probs(items)`` → one distribution over ``label_words`` per item (rows sum to 1).

    ``label_words`` are the words the LM is asked to choose among, in the order of the
    returned probabilities (e.g. ``["true", "half", "false"]`` for RAWFC).
    ``max_doc_chars`` cuts each document (a character budget keeps prompts within the
    LM's context and CPU time bounded); ``batch_size`` rows go to the LM per call.
    """

    def __init__(self, lm: Any, label_words: Sequence[str], *, form: Form = "auto",
                 template: str = FFRR_TEMPLATE, max_doc_chars: int | None = 1500, batch_size: int = 8) -> None:
        words = [str(w).strip() for w in label_words]
        if len(words) < 2:
            raise LabelScoreError(f"need at least two label words, got {words}")
        if any(not w for w in words) or len({w.lower() for w in words}) != len(words):
            raise LabelScoreError(f"label words must be non-empty and distinct, got {words}")
        if batch_size < 1:
            raise LabelScoreError(f"batch_size must be >= 1, got {batch_size}")
        for key in ("{evidence}", "{label_set}", "{claim}"):
            if key not in template:
                raise LabelScoreError(f"the template must contain {key}")
        if form == "auto":
            form = "completion" if hasattr(lm, "next_token_logprobs") and hasattr(lm, "encode") else "chat"
        if form not in ("completion", "chat"):
            raise LabelScoreError(f"form must be 'auto', 'completion' or 'chat', got {form!r}")
        if form == "completion" and not (hasattr(lm, "next_token_logprobs") or hasattr(lm, "score_text_choices_batch")):
            raise LabelScoreError(f"{getattr(lm, 'name', lm)!r} cannot read next-token logprobs; use form='chat'")
        self.lm = lm
        self.label_words = words
        self.form = form
        self.template = template
        self.max_doc_chars = max_doc_chars
        self.batch_size = int(batch_size)
        tokens = form == "completion" and hasattr(lm, "next_token_logprobs")
        self._label_tokens = self._first_tokens() if tokens else None

    def _first_tokens(self) -> list[list[int]]:
        """Per label, the first tokens of its case variants (with a leading space), each
        counted for one label only; the label word as written must have its own."""
        firsts = []
        for word in self.label_words:
            ids = self.lm.encode(" " + word)
            if not ids:
                raise LabelScoreError(f"label word {word!r} encodes to no tokens")
            firsts.append(int(ids[0]))
        if len(set(firsts)) != len(firsts):
            clash = [w for w, t in zip(self.label_words, firsts) if firsts.count(t) > 1]
            raise LabelScoreError(f"label words {clash} share their first token, so the next-token "
                                  "distribution cannot tell them apart; choose other words")
        variants = [[int(ids[0]) for v in case_variants(w) if (ids := self.lm.encode(" " + v))]
                    for w in self.label_words]
        owners: dict[int, set[int]] = {}
        for j, toks in enumerate(variants):
            for t in toks:
                owners.setdefault(t, set()).add(j)
        return [list(dict.fromkeys(t for t in toks if owners[t] == {j})) for j, toks in enumerate(variants)]

    # -- prompts ---------------------------------------------------------------------------

    def prompt_text(self, claim: str, documents: Sequence[str]) -> str:
        """The paper's prompt for one claim and its documents."""
        if isinstance(documents, str):
            raise TypeError("documents must be a list of texts, not one string")
        claim = " ".join(str(claim).split())
        if not claim:
            raise LabelScoreError("cannot score an empty claim")
        docs = [" ".join(str(d).split()) for d in documents]
        if self.max_doc_chars is not None:
            docs = [d[: self.max_doc_chars] for d in docs]
        evidence = " ".join(d for d in docs if d) or NO_EVIDENCE
        return self.template.format(evidence=evidence, label_set=", ".join(self.label_words), claim=claim)

    # -- scoring ---------------------------------------------------------------------------

    def probs(self, items: Sequence[ScoreItem | tuple[str, Sequence[str]]]) -> list[list[float]]:
        """One probability list per item, over ``label_words`` in order; each sums to 1.
        Raises :class:`LabelScoreError` for an empty claim or when the LM gives no label a
        finite score; a backend's own errors (a failing server) propagate."""
        rows = [it if isinstance(it, ScoreItem) else ScoreItem(it[0], it[1]) for it in items]
        texts = [self.prompt_text(r.claim, r.documents) for r in rows]
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._logprob_rows(texts[start : start + self.batch_size]))
        result = []
        for text, lps in zip(texts, out):
            if not any(math.isfinite(x) for x in lps):
                raise LabelScoreError(f"{getattr(self.lm, 'name', 'the LM')} gave no label a finite score "
                                      f"for the prompt {text[:120]!r}...")
            result.append(choice_probs([x if not math.isnan(x) else -math.inf for x in lps]))
        return result

    def predict(self, items: Sequence[ScoreItem | tuple[str, Sequence[str]]]) -> list[int]:
        """Index of the most probable label word per item (FFRR's inference)."""
        return [max(range(len(p)), key=p.__getitem__) for p in self.probs(items)]

    def _logprob_rows(self, texts: list[str]) -> list[list[float]]:
        if self.form == "completion" and self._label_tokens is not None:
            prompts = [self.lm.encode(t) for t in texts]
            flat = [t for toks in self._label_tokens for t in toks]
            rows = self.lm.next_token_logprobs(prompts, flat)
            out = []
            for row in rows:
                at, labels = 0, []
                for toks in self._label_tokens:
                    labels.append(_logsumexp(row[at : at + len(toks)]))
                    at += len(toks)
                out.append(labels)
            return out
        if self.form == "completion":  # a server's completions endpoint (matches without case)
            return [list(r) for r in self.lm.score_text_choices_batch(texts, self.label_words)]
        conversations = [[Message(role="user", content=t)] for t in texts]
        batch = getattr(self.lm, "score_choices_batch", None)
        if batch is not None:  # a server's top tokens (matched without case)
            return [list(r) for r in batch(conversations, self.label_words)]
        # exact continuation scores: every case variant scored, summed per label
        variants = [case_variants(w) for w in self.label_words]
        flat = [v for vs in variants for v in vs]
        out = []
        for conv in conversations:
            row = list(self.lm.score_choices(conv, flat))
            at, labels = 0, []
            for vs in variants:
                labels.append(_logsumexp(row[at : at + len(vs)]))
                at += len(vs)
            out.append(labels)
        return out


# -- label continuations after a token context ---------------------------------------------


def can_score_continuations(lm: Any) -> bool:
    """Whether ``lm`` has the token-level calls :func:`label_logprobs` needs (``encode``
    and ``score``): local backends do, chat APIs do not."""
    return all(callable(getattr(lm, name, None)) for name in ("encode", "score"))


def label_continuations(lm: Any, words: Sequence[str], *, prefix: str = " ", suffix: str = "\n") -> list[list[int]]:
    """The token ids of each label word as the continuation of a label slot: ``prefix +
    word + suffix`` encoded, the LM's EOS token dropped (a tokenizer that appends it would
    otherwise make every label end the text). Raises :class:`LabelScoreError` for fewer
    than two words, a word that encodes to nothing, or two words with the same ids."""
    if isinstance(words, str):
        raise TypeError("words must be a list of label words, not one string")
    if len(words) < 2:
        raise LabelScoreError(f"need at least two label words, got {list(words)}")
    if not can_score_continuations(lm):
        raise LabelScoreError(f"{getattr(lm, 'name', type(lm).__name__)} has no token-level encode/score; "
                              "label continuations need a local backend")
    eos = getattr(lm, "eos_token_id", None)
    out = []
    for word in words:
        ids = [int(x) for x in lm.encode(f"{prefix}{word}{suffix}") if x != eos]
        if not ids:
            raise LabelScoreError(f"label word {word!r} encodes to no tokens")
        out.append(ids)
    if len({tuple(ids) for ids in out}) != len(out):
        raise LabelScoreError(f"label words {list(words)} do not all encode differently")
    return out


def label_logprobs(lm: Any, contexts: Sequence[Sequence[int]], choices: Sequence[Sequence[int]]) -> list[list[float]]:
    """Summed log-probability of each label's continuation (``choices``, from
    :func:`label_continuations`) after each context (token ids): row ``i`` holds context
    ``i``'s scores in ``choices`` order. One ``lm.score`` call with each context repeated
    once per label, so a backend that shares a repeated prompt runs it once."""
    if isinstance(contexts, (str, bytes)) or any(isinstance(c, (str, bytes)) for c in contexts):
        raise TypeError("contexts must be lists of token ids, not text (encode them first)")
    if not can_score_continuations(lm):
        raise LabelScoreError(f"{getattr(lm, 'name', type(lm).__name__)} has no token-level score")
    if not contexts:
        return []
    k = len(choices)
    flat = list(lm.score([list(c) for c in contexts for _ in range(k)], [list(ch) for _ in contexts for ch in choices]))
    if len(flat) != k * len(contexts):
        raise LabelScoreError(f"the LM returned {len(flat)} scores for {k * len(contexts)} label rows")
    return [[float(x) for x in flat[i * k:(i + 1) * k]] for i in range(len(contexts))]


def label_bias(rows: Sequence[Sequence[float]]) -> list[float]:
    """Each label's mean log-probability over ``rows`` (contextual calibration: the bias a
    label has whatever the context), over the finite scores only; 0.0 for a label with
    none."""
    if not rows:
        return []
    out = []
    for k in range(len(rows[0])):
        finite = [r[k] for r in rows if math.isfinite(r[k])]
        out.append(math.fsum(finite) / len(finite) if finite else 0.0)
    return out


def pick_labels(rows: Sequence[Sequence[float]], bias: Sequence[float] | None = None) -> list[int | None]:
    """Index of the most probable label per row (the first on a tie), after subtracting
    ``bias`` (per label, e.g. :func:`label_bias`); None for a row where no label has a
    finite score (a NaN or -inf everywhere: the model read nothing)."""
    out: list[int | None] = []
    for row in rows:
        shift = bias if bias is not None else [0.0] * len(row)
        if len(shift) != len(row):
            raise ValueError(f"bias has {len(shift)} entries for {len(row)} labels")
        scores = [x - b if math.isfinite(x) else -math.inf for x, b in zip(row, shift)]
        best = max(range(len(scores)), key=scores.__getitem__, default=None)
        out.append(None if best is None or scores[best] == -math.inf else best)
    return out
