"""Binary RAR's reward as its authors' released code computes it
(``chentong0/rl-binary-rar``, ``binary_rar_tinker/train.py`` and ``prompts.py``) — the
``released`` convention of the ``rar`` reward (``params = {convention = "released"}``).
The ``paper`` convention (:mod:`factrl.rewards.rar`) stays the default.

What the released code does, and this module with it:

- a response that did not stop (cut at its token limit: the renderer's parse fails)
  scores 0 without a verifier call; so does a failed episode;
- the response is the text after the first ``</think>`` (``<think>(.*?)</think>(.*)``,
  unstripped), else all of it; an empty one is still verified;
- evidence: the prompt's documents, each ``title + "\\n\\n" + text`` cut into fixed
  windows of ``chunk_tokens`` (512) tokens of the *verifier's* tokenizer and decoded, so
  a title appears only in its document's first chunk; Okapi BM25 (rank_bm25's: k1 1.5,
  b 0.75) over lower-cased whitespace tokens, queried with the response alone; always the
  top ``k`` (8) chunks, zero scores included, ranked as ``np.argsort(scores)[::-1]``;
  rendered ``Document i: chunk`` and joined by blank lines;
- the verifier prompt is :data:`VERIFIER_RELEASED` (``prompts.py``, word for word), the
  prompt being the user messages joined by blank lines; one user message, Qwen3 thinking
  disabled (the ``qwen3_disable_thinking`` renderer: the reply opens after an empty
  ``<think>\\n\\n</think>\\n\\n``), at most 512 new tokens, temperature 1.0 (tinker's
  default: the released code passes none);
- the reward is ``float(json.loads(out.strip("```json").strip("```"))["SCORE"])`` of the
  stripped output, ``SCORE`` missing → 0, anything that raises → 0 (so prose before the
  JSON, single quotes or ``SCORE: 1`` are 0, and ``"SCORE": 2`` is 2.0).

One departure, counted: a non-finite SCORE (JSON's ``NaN``/``Infinity``, which the
released code would pass on as the reward) scores 0 with ``verifier_failed`` = 1.
Every verifier output that did not parse is counted (``verifier_failed``), though it
scores 0 as released.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factrl.lm.base import GenerationConfig
from factrl.lm.rows import NO_THINKING, complete_rows
from factrl.types import Message, RewardBreakdown, Trajectory

__all__ = ["VERIFIER_RELEASED", "NO_THINKING", "ChunkCodec", "ReleasedEvidence", "load_chunk_codec",
           "parse_released_score", "released_chunks", "released_content", "released_instruction",
           "render_documents", "complete_rows", "score_released", "verifier_prompt_released"]

# chentong0/rl-binary-rar, binary_rar_tinker/prompts.py, word for word (literal braces doubled
# for str.format); the paper's Figure 9 (factrl.rewards.rar_verifier) drops its five "## " headers.
VERIFIER_RELEASED = """You are a professional fact-checker tasked with evaluating a language model's response for accuracy. Your job is to systematically compare the response against the provided web search results to identify any factual errors or contradictions. A response deserves a full score if every claim it makes is factually correct, even if it doesn't include every available detail. Omitting information is not a factual error. If a response contains anything that contradicts the world knowledge shown in the search results, it should be considered an error and get a low score.

## EVALUATION PROCESS:
1. Read the search results thoroughly to understand the factual baseline
2. Examine each factual claim in the language model's response
3. Cross-reference each claim against the search results
4. Classify each discrepancy according to the guidelines below

## CONSIDER CORRECT (No Factual Error): 
- Paraphrasing: Same facts expressed in different words
- Reasonable inferences: Logical conclusions drawn from search results
- Partial information: Incomplete but accurate subsets of available information
- Contextual additions: Background information that doesn't contradict search results
- Minor formatting differences: Different ways of presenting same data

## CONSIDER INCORRECT (Factual Error):
- Direct contradictions: Response states opposite of what search results show
- Numerical errors: Wrong dates, statistics, quantities, percentages
- Categorical errors: Wrong classifications, locations, names, titles
- Causal errors: Incorrect cause-and-effect relationships
- Timeline errors: Events placed in wrong chronological order
- Attribution errors: Wrong sources, authors, or speakers cited

## SCORING RULES:
Your evaluation will result in a binary score: 0 or 1.
- SCORE 1 (No Contradiction): Assign this score if:
    1.  The response is fully supported by the document.
    2.  The response contains information that is NOT in the document, but DOES NOT contradict it.
- SCORE 0 (Contradiction): Assign this score ONLY if you find a clear, factual contradiction between the response and the supporting document. A contradiction occurs when the response states the opposite of what the document says (e.g., wrong dates, names, events, or outcomes).

## OUTPUT FORMAT:
You must respond ONLY in a valid JSON format with exactly these two fields:
- "REASONING": A brief explanation for your score.
    - For SCORE 0, specify the contradiction (e.g., "The response states the event was in 2022, but the document says it was in 2023.").
    - For SCORE 1, simply state "No contradiction found."
- "SCORE": An integer, either 0 or 1.

>>> Begin of search results <<<
{documents}
<<< End of search results >>>

>>> Begin of the prompt <<<
{instruction}
<<< End of the prompt >>>

>>> Begin of the response <<<
{response}
<<< End of the response >>>

Respond in JSON format. {{"REASONING": "[...]", "SCORE": "<your-score>"}}"""



def released_content(text: str) -> str:
    """The response the released code verifies (``re.search(r"<think>(.*?)</think>(.*)")``'s
    second group, DOTALL): what follows the first ``</think>`` after the first ``<think>``,
    unstripped; the whole text when there is none. Two ``find`` calls: linear, where the
    regex is quadratic on many unclosed ``<think>``."""
    start = text.find("<think>")
    end = -1 if start < 0 else text.find("</think>", start + len("<think>"))
    return text if end < 0 else text[end + len("</think>"):]


def released_instruction(messages: Sequence[Message]) -> str:
    """The prompt as the verifier sees it: the user messages joined by blank lines."""
    return "\n\n".join(m.content for m in messages if m.role == "user")


def parse_released_score(text: str) -> tuple[float, str | None]:
    """``(reward, None)`` as the released verifier reads ``text``, or ``(0.0, why)`` when
    that raised (or gave a non-finite score)."""
    try:
        value = json.loads(text.strip().strip("```json").strip("```"))
        score = float(value.get("SCORE", 0))
    except Exception as exc:  # noqa: BLE001 - the released code catches everything: 0
        return 0.0, f"{type(exc).__name__}: {exc}"[:200]
    if not math.isfinite(score):
        return 0.0, f"SCORE is {score} (not finite)"
    return score, None


def render_documents(chunks: Sequence[str]) -> str:
    return "\n\n".join(f"Document {i + 1}: {c}" for i, c in enumerate(chunks))


def verifier_prompt_released(instruction: str, response: str, chunks: Sequence[str]) -> str:
    return VERIFIER_RELEASED.format(documents=render_documents(chunks), instruction=instruction, response=response)


class ChunkCodec:
    """A Hugging Face tokenizer used as the released code uses it to cut documents:
    ``encode`` without special tokens or truncation, ``decode`` with its defaults."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))


def load_chunk_codec(spec: str | None, verifier: Any) -> ChunkCodec:
    """The tokenizer that cuts documents: ``spec`` (a tokenizer directory or hub id, or
    ``smollm2`` for the embedded model's), else the verifier's own Hugging Face tokenizer
    (the released code chunks with the verifier's). A verifier without one (an HTTP or a
    scripted LM) needs ``spec``."""
    if spec:
        from transformers import AutoTokenizer

        from factrl.lm.loader import resolve_model_path

        return ChunkCodec(AutoTokenizer.from_pretrained(str(resolve_model_path(spec))))
    tokenizer = getattr(verifier, "tokenizer", None)
    if tokenizer is None or not hasattr(tokenizer, "decode"):
        raise ValueError("the released convention cuts documents with the verifier's tokenizer, and this verifier "
                         f"({getattr(verifier, 'name', type(verifier).__name__)}) has none here: set the reward "
                         "parameter chunk_tokenizer to a tokenizer directory or hub id (e.g. Qwen/Qwen3-8B)")
    return ChunkCodec(tokenizer)


def released_chunks(documents: Sequence[Mapping[str, Any]], codec: Any, chunk_tokens: int = 512) -> list[str]:
    """Each document's ``title + "\\n\\n" + text`` in fixed windows of ``chunk_tokens``
    tokens, decoded; in document order."""
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    out = []
    for doc in documents:
        ids = codec.encode(f"{doc.get('title') or ''}\n\n{doc.get('text') or ''}")
        out.extend(codec.decode(ids[i : i + chunk_tokens]) for i in range(0, len(ids), chunk_tokens))
    return out


@dataclass
class ReleasedEvidence:
    """One prompt's chunks and their Okapi BM25 index (lower-cased whitespace tokens)."""

    chunks: list[str]

    def __post_init__(self) -> None:
        from factrl.retrieval.okapi import OkapiBM25

        if not self.chunks:
            raise ValueError("no chunks to search (the prompt's documents are empty)")
        self.index = OkapiBM25([c.lower().split() for c in self.chunks])

    def top(self, query: str, k: int = 8) -> list[str]:
        from factrl.retrieval.okapi import top_indices

        return [self.chunks[i] for i in top_indices(self.index.get_scores(query.lower().split()), k)]


def _nonstop(traj: Trajectory) -> bool:
    last = next((t for t in reversed(traj.turns) if t.source == "model"), None)
    return last is not None and last.finish_reason == "length"


def score_released(reward: Any, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
    """The released reward of each trajectory (module doc); ``reward`` is the
    :class:`~factrl.rewards.rar.RarReward` that holds the verifier, the documents and the
    parameters (``k``, ``chunk_tokens``, ``chunk_tokenizer``, ``max_new_tokens``,
    ``verifier_temperature``, ``verifier_thinking``)."""
    trajs = list(trajectories)
    if reward.verifier is None:
        raise RuntimeError(f"reward {reward.name!r} needs a verifier LM: build it with "
                           "RewardDeps(lms={'verifier': lm}) (training: reward.verifier; eval: --verifier)")
    todo = [i for i, t in enumerate(trajs) if t.error is None and not _nonstop(t)]
    convs = []
    for i in todo:
        t = trajs[i]
        response = released_content(t.model_text)
        chunks = reward.released_evidence(t).top(response, reward.k)
        convs.append([Message(role="user", content=verifier_prompt_released(
            released_instruction(t.prompt) or t.claim.text, response, chunks))])
    config = GenerationConfig(max_new_tokens=reward.max_new_tokens or 512,
                              temperature=1.0 if reward.verifier_temperature is None else reward.verifier_temperature)
    gens = complete_rows(reward.verifier, convs, config, thinking=bool(reward.verifier_thinking))
    got: dict[int, tuple[float, str | None]] = {}
    for i, gen in zip(todo, gens):
        if isinstance(gen, BaseException):
            got[i] = (0.0, f"LM failed: {type(gen).__name__}: {gen}")
        else:
            got[i] = parse_released_score(gen.text)
    out = []
    for i, t in enumerate(trajs):
        value, why = got.get(i, (0.0, None))
        comps = {"no_contradiction": value, "verifier_failed": float(why is not None),
                 "empty_response": float(i in got and not released_content(t.model_text).strip()),
                 "episode_error": float(t.error is not None), "nonstop": float(t.error is None and _nonstop(t)),
                 "total": value}
        out.append(RewardBreakdown(components=comps, total=value))
    return out
