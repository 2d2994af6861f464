"""Binary RAR's hallucination evaluation over finished ``rar`` episodes (001, §4.1).

- long-form prompts: the response's atomic claims are extracted by an LM, each claim is
  judged against the top ``k`` chunks of the prompt's documents retrieved for that claim
  (:mod:`factrl.metrics.atomic_claims`, Figures 11–12), and the hallucination rate is
  1 − precision (:func:`~factrl.metrics.hallucination.long_form_hallucination`);
- short-form questions: correct / wrong / abstained by string matching
  (:func:`~factrl.metrics.hallucination.short_form_hallucination`); wrong among the
  non-abstained is ``hallucination_rate_attempted``, the abstention rate apart.
  Questions without gold answers count for the abstention rate only
  (``short_form_without_answers``).

:func:`write_rar_metrics` writes ``hallucination.json`` (both summaries, the verifier
reward's mean and its failures) and ``hallucination_per_prompt.jsonl`` (one line per
prompt: response, reward, claims with their judgements, or the short-form outcome). Its
``params`` (``factrl eval --metric-param key=value``) are ``extract`` (``lm`` |
``sentences``), ``judge`` (``generate`` | ``choice`` | ``verifier``: the trained cross-encoder,
also picked by ``--verifier factrl-verifier``), ``extract_max_new_tokens``,
``judge_max_new_tokens``, and the evidence each claim is judged against:
``evidence_k`` chunks (default 10) of ``evidence_chunk_words`` words (default 100) — the
paper's evaluation setting (App. B.1), not the reward's 8 chunks of 512 tokens.

``convention=released`` scores as the authors' released evaluation instead
(:mod:`factrl.metrics.rar_eval_released`: its prompts, a code fence anywhere, 100-word
windows searched with rank_bm25's Okapi, only an exact "supported" counts, one verdict
per distinct claim; short-form answers abstain only when wholly "I don't know");
``thinking`` (default false) then says whether the judge may think (false: each reply
opens after an empty reasoning block, as the released calls disable Qwen3's thinking;
true for a model behind an API that takes no partial reply).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from factrl.lm.base import LM, GenerationConfig
from factrl.metrics.atomic_claims import extract_atomic_claims, judge_claims, judge_claims_by_choice, sentence_claims
from factrl.metrics.hallucination import (ResponseClaims, ShortFormAnswer, long_form_hallucination,
                                          short_form_hallucination)
from factrl.metrics.run_metrics import RUN_METRIC_PARAMS, RUN_METRICS
from factrl.types import Passage, Trajectory

__all__ = ["rar_hallucination", "write_rar_metrics", "SUMMARY_FILE", "DETAIL_FILE"]

SUMMARY_FILE = "hallucination.json"
DETAIL_FILE = "hallucination_per_prompt.jsonl"

Retrieve = Callable[[Trajectory, str], Sequence[str | Passage]]
EXTRACT_MODES = ("lm", "sentences")
JUDGE_MODES = ("generate", "choice", "verifier")  # verifier: the trained cross-encoder (factrl-verifier)
_PARAMS = ("extract", "judge", "extract_max_new_tokens", "judge_max_new_tokens", "evidence_k", "evidence_chunk_words",
           "convention", "thinking")
CONVENTIONS = ("paper", "released")
EVIDENCE_K = 10  # App. B.1: "retrieve the top 10 evidence chunks (100 words each) for each claim"
EVIDENCE_CHUNK_WORDS = 100


def _response(t: Trajectory) -> str:
    from factrl.protocol.rar import response_of

    return str(t.meta.get("response", response_of(t.model_text)))


def _long_form(trajs: Sequence[Trajectory], lm: LM, judge: LM, retrieve: Retrieve,
               configs: tuple[GenerationConfig | None, GenerationConfig | None],
               modes: tuple[str, str]) -> tuple[list[ResponseClaims], list[dict]]:
    # A failed episode has no response to judge: it is kept as an extraction failure.
    ok = [t for t in trajs if t.error is None]
    responses = [_response(t) for t in ok]
    if modes[0] == "sentences":
        extracted = sentence_claims(responses)
    else:
        extracted = extract_atomic_claims(lm, responses, [t.claim.text for t in ok], config=configs[0]) if ok else []
    flat = [(t, c) for t, e in zip(ok, extracted) for c in e.claims]
    claims, evidence = [c for _, c in flat], [list(retrieve(t, c)) for t, c in flat]
    if not flat:
        verdicts = []
    elif modes[1] == "choice":
        verdicts = judge_claims_by_choice(judge, claims, evidence)
    elif modes[1] == "verifier":
        from factrl.verifier.judge import judge_claims_by_verifier

        verdicts = judge_claims_by_verifier(judge, claims, evidence)
    else:
        verdicts = judge_claims(judge, claims, evidence, config=configs[1])
    judged = iter(verdicts)
    by_id = {t.claim_id: ResponseClaims(tuple(next(judged) for _ in e.claims), e.error) for t, e in zip(ok, extracted)}
    responses = [by_id.get(t.claim_id) or ResponseClaims((), f"episode failed: {t.error}") for t in trajs]
    details = []
    for t, r in zip(trajs, responses):
        details.append({"claims": [{"claim": c.claim, "support": c.support.value if c.support else None,
                                    **({"error": c.error} if c.error else {})} for c in r.claims],
                        "extraction_error": r.extraction_error})
    return responses, details


def _check_modes(extract: str, judge_mode: str) -> None:
    if extract not in EXTRACT_MODES:
        raise ValueError(f"extract must be one of {', '.join(EXTRACT_MODES)}, got {extract!r}")
    if judge_mode not in JUDGE_MODES:
        raise ValueError(f"judge must be one of {', '.join(JUDGE_MODES)}, got {judge_mode!r}")


def rar_hallucination(
    trajectories: Sequence[Trajectory], lm: LM, retrieve: Retrieve, *, judge: LM | None = None,
    extract_config: GenerationConfig | None = None, judge_config: GenerationConfig | None = None,
    extract: str = "lm", judge_mode: str = "generate",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(summary, per_prompt)`` for finished ``rar`` episodes: ``lm`` extracts claims and
    (unless ``judge`` is given) judges them; ``retrieve(trajectory, claim)`` gives the
    evidence a claim is judged against. The configs default to
    :mod:`~factrl.metrics.atomic_claims`' (greedy, room for a reasoning trace).
    ``extract="sentences"`` takes each sentence as a claim (no LM); ``judge_mode="choice"``
    judges by scoring the three answer words instead of generating."""
    _check_modes(extract, judge_mode)
    trajs = list(trajectories)
    long_ = [t for t in trajs if t.meta.get("kind", t.claim.meta.get("kind", "long")) != "short"]
    short = [t for t in trajs if t not in long_]
    responses, long_details = _long_form(long_, lm, judge or lm, retrieve, (extract_config, judge_config),
                                         (extract, judge_mode))
    lf = long_form_hallucination(responses)
    per_long = {t.claim_id: (d, r) for t, d, r in zip(long_, long_details, lf.per_response)}

    answers, no_gold = [], 0
    for t in short:
        if t.error is not None or t.meta.get("correct") is None and not t.meta.get("abstained"):
            no_gold += 1
            continue
        abstained = bool(t.meta.get("abstained"))
        answers.append(ShortFormAnswer(_response(t), abstained, bool(t.meta.get("correct")) and not abstained))
    sf = short_form_hallucination(answers)
    abstained_all = sum(bool(t.meta.get("abstained")) for t in short)

    rewards = [t.reward.total for t in trajs if t.reward.components]
    failed = sum(t.reward.components.get("verifier_failed", 0.0) for t in trajs)
    summary: dict[str, Any] = {
        "n": len(trajs),
        "n_long": len(long_),
        "n_short": len(short),
        "extraction": "sentences" if extract == "sentences" else "lm (Figure 11)",
        "judge": {"choice": "choice (scored answer words)", "verifier": "verifier (cross-encoder)"}.get(
            judge_mode, "generate (Figure 12)"),
        "long_form": lf.to_dict(),
        "short_form": sf.to_dict(),
        "short_form_without_answers": no_gold,
        "short_form_abstention_rate_all": abstained_all / len(short) if short else None,
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "verifier_failures": int(failed),
        "episode_errors": sum(t.error is not None for t in trajs),
    }
    per_prompt = []
    for t in trajs:
        row: dict[str, Any] = {"id": t.claim_id, "kind": "long" if t in long_ else "short", "prompt": t.claim.text,
                               "response": _response(t), "reward": t.reward.components or None, "error": t.error}
        if t.claim_id in per_long:
            d, r = per_long[t.claim_id]
            row.update(d, precision=r.precision, hallucination_rate=r.hallucination_rate)
        else:
            row.update(abstained=t.meta.get("abstained"), correct=t.meta.get("correct"),
                       answers=t.claim.meta.get("answers", []))
        per_prompt.append(row)
    return summary, per_prompt


def _options(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``rar_hallucination``'s keyword arguments from the hook's ``params``."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise ValueError(f"unknown rar metric parameter(s) {', '.join(unknown)}; known: {', '.join(_PARAMS)}")
    out: dict[str, Any] = {"extract": str(params.get("extract", "lm")), "judge_mode": str(params.get("judge", "generate"))}
    _check_modes(out["extract"], out["judge_mode"])
    out["convention"] = str(params.get("convention", "paper"))
    if out["convention"] not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {out['convention']!r}")
    if out["convention"] == "released" and ("extract" in params or "judge" in params):
        raise ValueError("the released convention extracts and judges with an LM as released (no extract/judge modes)")
    if "thinking" in params:
        if out["convention"] != "released" or not isinstance(params["thinking"], bool):
            raise ValueError(f"thinking (true or false) applies to convention=released only, got {params['thinking']!r}")
    out["thinking"] = bool(params.get("thinking", False))
    for key, name in (("extract_max_new_tokens", "extract_config"), ("judge_max_new_tokens", "judge_config")):
        if key in params:
            out[name] = GenerationConfig(max_new_tokens=_positive(params, key), temperature=0.0)
    out["evidence_k"] = _positive(params, "evidence_k") if "evidence_k" in params else EVIDENCE_K
    out["evidence_chunk_words"] = (_positive(params, "evidence_chunk_words") if "evidence_chunk_words" in params
                                   else EVIDENCE_CHUNK_WORDS)
    return out


def _positive(params: Mapping[str, Any], key: str) -> int:
    n = params[key]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{key} must be a positive integer, got {n!r}")
    return n


def write_rar_metrics(out_dir: Path, trajectories: Sequence[Trajectory], *, lms: Mapping[str, LM],
                      reward: Any, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run-level hook of ``factrl eval --agent rar``: ``lms["judge"]`` (default
    ``lms["policy"]``) extracts and judges; evidence per claim comes from the reward's
    evidence source (the prompt's documents, a pools file, or a retriever). ``params``:
    see the module's docstring; an unknown key or value is a ValueError."""
    lm = lms.get("judge") or lms["policy"]
    options = _options(params)
    from factrl.verifier.scoring import PairVerifier

    if isinstance(lm, PairVerifier) or options["judge_mode"] == "verifier":
        if options["convention"] == "released":
            raise ValueError("the released convention judges with an LM and the released prompts; a cross-encoder "
                             "judge (factrl-verifier, judge=verifier) takes convention=paper")
        # A cross-encoder judges (it cannot extract: the policy LM does, or sentences).
        verifier = lm if isinstance(lm, PairVerifier) else getattr(reward, "verifier", None)
        if not isinstance(verifier, PairVerifier):
            from factrl.verifier.asset import load_verifier

            verifier = load_verifier()
        options["judge_mode"], options["judge"] = "verifier", verifier
        lm = lms["policy"]
    k, words = options.pop("evidence_k"), options.pop("evidence_chunk_words")
    convention, thinking = options.pop("convention"), options.pop("thinking")
    if convention == "released":
        summary, per_prompt = _released(trajectories, lm, reward, k=k, words=words, thinking=thinking,
                                        configs=(options.get("extract_config"), options.get("judge_config")))
        return _write(Path(out_dir), summary, per_prompt)
    source = getattr(reward, "with_evidence", None)
    if source is None:
        raise ValueError(f"reward {getattr(reward, 'name', reward)!r} has no evidence source for the judge; use --reward rar")
    summary, per_prompt = rar_hallucination(trajectories, lm, source(k=k, chunk_tokens=words).evidence, **options)
    summary["evidence"] = {"k": k, "chunk_words": words}
    return _write(Path(out_dir), summary, per_prompt)


def _write(out_dir: Path, summary: dict[str, Any], per_prompt: list[dict[str, Any]]) -> dict[str, Any]:
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    with (out_dir / DETAIL_FILE).open("w", encoding="utf-8") as fh:
        for row in per_prompt:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return summary


def _released(trajectories: Sequence[Trajectory], lm: LM, reward: Any, *, k: int, words: int, thinking: bool,
              configs: tuple[GenerationConfig | None, GenerationConfig | None]) -> tuple[dict[str, Any], list[dict]]:
    """The released evaluation's summary and rows (module doc)."""
    from factrl.metrics.rar_eval_released import long_form_released
    from factrl.protocol.rar import final_answer, is_sole_abstention, matches_gold

    documents = getattr(reward, "documents", None)
    if documents is None:
        raise ValueError(f"reward {getattr(reward, 'name', reward)!r} holds no prompt documents for the judge; "
                         "use --reward rar")
    trajs = list(trajectories)
    long_ = [t for t in trajs if t.meta.get("kind", t.claim.meta.get("kind", "long")) != "short"]
    short = [t for t in trajs if t not in long_]
    lf, per_long = long_form_released(long_, lm, lambda t: documents(t.claim), k=k, chunk_words=words,
                                      extract_config=configs[0], judge_config=configs[1], thinking=thinking)
    answers, no_gold, rows = [], 0, {r["id"]: r for r in per_long}
    for t in short:
        response = str(t.meta.get("response", final_answer(t.model_text)))
        abstained = is_sole_abstention(response)
        gold = list(t.claim.meta.get("answers") or [])
        correct = (not abstained and matches_gold(response, gold)) if gold else None
        rows[t.claim_id] = {"id": t.claim_id, "abstained": abstained, "correct": correct, "answers": gold}
        if t.error is not None or correct is None and not abstained:
            no_gold += 1
            continue
        answers.append(ShortFormAnswer(response, abstained, bool(correct)))
    rewards = [t.reward.total for t in trajs if t.reward.components]
    summary = {"n": len(trajs), "n_long": len(long_), "n_short": len(short), "convention": "released",
               "long_form": lf, "short_form": short_form_hallucination(answers).to_dict(),
               "short_form_without_answers": no_gold, "evidence": {"k": k, "chunk_words": words},
               "reward_mean": sum(rewards) / len(rewards) if rewards else None,
               "verifier_failures": int(sum(t.reward.components.get("verifier_failed", 0.0) for t in trajs)),
               "episode_errors": sum(t.error is not None for t in trajs)}
    per_prompt = [{"kind": "long" if t in long_ else "short", "prompt": t.claim.text, "response": _response(t),
                   "reward": t.reward.components or None, "error": t.error, **rows.get(t.claim_id, {"id": t.claim_id})}
                  for t in trajs]
    return summary, per_prompt



RUN_METRICS.register("rar")(write_rar_metrics)
RUN_METRIC_PARAMS.register("rar")(_options)
