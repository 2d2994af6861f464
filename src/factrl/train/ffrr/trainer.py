"""``factrl train ffrr``: train the dense retriever from the LM's label scores.

One loop for the three comparison trainers of FFRR's Table 2: ``ffrr`` (REINFORCE on
fine-grained rewards, §4–5), ``replug`` (KL to the LM's distribution over the top
documents) and ``frozen`` (no update). Batches of ``batch_size`` claims make one Adam
update (lr 1e-5, linear warm-up over the first 10 %, then linear decay). The hybrid level
(``d+q``, §4.3) alternates one question-level step with ``doc_steps_per_question_step``
document-level steps on the same claims, whose queries are the questions q̃_i that the
question-level step sampled for each claim (one ε-greedy document episode per sampled
question: the rewards r_{d̃_{i,j}} "for any sampled intermediate question q̃_i").
``ffrr.estimator = "exact"``
replaces the sampled episodes by the expectation over every scored candidate
(``episodes.exact_doc_level``).

Writes to the output directory: the split (``train_ids.txt``/``held_out_ids.txt``),
``questions.jsonl`` (when questions are used), ``metrics.jsonl`` (one row per update),
``final/`` (a sentence-transformers model: ``factrl index build --model OUT/final``),
``summary.json`` and, after a held-out evaluation, ``eval.json``.
A claim whose scoring fails (a server error, an unscorable prompt) is skipped and counted
in ``failures`` by error type; a claim whose gold label has no label word is counted in
``skipped_labels``.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from factrl.train.ffrr.config import FFRRRunConfig

__all__ = ["gold_index", "load_scorer", "train_ffrr"]


def _say(msg: str) -> None:
    print(f"[factrl ffrr] {msg}", file=sys.stderr, flush=True)


def gold_index(claim: Any, cfg: FFRRRunConfig) -> int | None:
    """Position of the claim's gold label among ``scorer.label_words`` (None: no word for it)."""
    from factrl.labels import UnknownLabelError, normalise_grade, normalise_label

    keys = list(cfg.scorer.label_words)
    raw = claim.meta.get("grade") if cfg.scorer.label_field == "grade" else claim.label
    if raw is None:
        return None
    try:
        norm = normalise_grade if cfg.scorer.label_field == "grade" else normalise_label
        wanted = norm(raw)
        canon = [norm(k) for k in keys]
    except UnknownLabelError:
        return None
    return canon.index(wanted) if wanted in canon else None


def load_scorer(cfg: FFRRRunConfig, *, reward: bool = False) -> Any:
    """The label scorer (held-out labels; the paper's reward) or, with ``reward=True``
    and ``scorer.reward = "claim_likelihood"``, the claim-likelihood scorer."""
    from factrl.lm.label_scores import LabelScorer
    from factrl.lm.loader import load_lm

    s = cfg.scorer
    kw: dict[str, Any] = {"base_url": s.base_url} if s.model.startswith("openai:") and s.base_url else {}
    device, dtype = cfg.runtime()
    lm = load_lm(s.model, device=device, dtype=dtype, **kw)
    if reward and s.reward == "claim_likelihood":
        from factrl.lm.claim_likelihood import ClaimLikelihoodScorer

        return ClaimLikelihoodScorer(lm, template=s.likelihood_template, max_doc_chars=s.max_doc_chars,
                                     batch_size=s.batch_size)
    return LabelScorer(lm, list(s.label_words.values()), form=s.form, max_doc_chars=s.max_doc_chars,
                       batch_size=s.batch_size)


def scorer_fingerprint(cfg: FFRRRunConfig, dtype: str = "float32") -> dict[str, Any]:
    """What makes two scorers' rows interchangeable (kept beside the score cache): a
    local LM's weights in another ``dtype`` than float32 (every earlier cache's) score
    differently, so such a dtype is part of it."""
    from factrl.lm.label_scores import FFRR_TEMPLATE
    from factrl.lm.loader import remote_backend

    s = cfg.scorer
    local = {"dtype": dtype} if dtype != "float32" and remote_backend(s.model) is None else {}
    if s.reward == "claim_likelihood":
        return {"model": s.model, "base_url": s.base_url, "reward": s.reward, "max_doc_chars": s.max_doc_chars,
                "template": s.likelihood_template, **local}
    return {"model": s.model, "base_url": s.base_url, "form": s.form, "label_words": list(s.label_words.values()),
            "max_doc_chars": s.max_doc_chars, "template": FFRR_TEMPLATE,
            "label_match": "any case, variants summed", **local}


def open_score_cache(cfg: FFRRRunConfig, scorer: Any) -> Any:
    """The run's persistent LM score cache (``scorer.cache``, else ``OUT/lm_scores.jsonl``)."""
    from factrl.train.ffrr.episodes import ScoreCache

    path = Path(cfg.scorer.cache) if cfg.scorer.cache else Path(cfg.output_dir) / "lm_scores.jsonl"
    cache = ScoreCache(scorer, path, scorer_fingerprint(cfg, getattr(getattr(scorer, "lm", None), "dtype", "float32")))
    _say(f"LM score cache {path}: {len(cache)} rows" + (f" ({cache.torn} torn lines skipped)" if cache.torn else ""))
    return cache


def precompute_scores(cands: Any, scores: Any, claims: list[Any], questions: dict[str, list[str]],
                      chunk: int = 64) -> None:
    """Score every (claim, one candidate) pair of the training queries (the claim, and its
    questions when used) into the cache, ``chunk`` rows at a time, with progress. A claim
    whose rows cannot be scored is reported and left to the update loop, which counts it."""
    jobs = []
    for c in claims:
        for q in [c.text, *questions.get(c.id, [])]:
            jobs.extend((c.text, p) for p in cands.get([q])[0])
    todo = list(dict.fromkeys((t, p.id) for t, p in jobs if not scores.has(t, [p])))
    by_id = {p.id: p for _, p in jobs}
    from factrl.lm.label_scores import LabelScoreError
    from factrl.lm.remote import LMRequestError

    _say(f"precompute: {len(jobs)} (claim, document) rows, {len(todo)} not yet scored")
    t0 = time.perf_counter()
    failed = 0
    for start in range(0, len(todo), chunk):
        part = todo[start : start + chunk]
        groups: dict[str, list[Any]] = {}
        for claim, pid in part:
            groups.setdefault(claim, []).append([by_id[pid]])
        for claim, sets in groups.items():
            try:
                scores.probs(claim, sets)
            except (LabelScoreError, LMRequestError, ValueError) as exc:  # the update loop counts it again
                failed += 1
                _say(f"precompute: {claim[:60]!r}: {type(exc).__name__}: {exc}")
        done = start + len(part)
        rate = done / max(1e-9, time.perf_counter() - t0)
        _say(f"precompute: {done}/{len(todo)} rows, {rate:.2f} rows/s, "
             f"~{(len(todo) - done) / max(rate, 1e-9) / 60:.1f} min left"
             + (f", {failed} claim batch(es) failed" if failed else ""))


def _train_label_filter(cfg: FFRRRunConfig) -> set[int] | None:
    """Label-word positions ``ffrr.train_labels`` keeps (None: every label)."""
    if not cfg.ffrr.train_labels:
        return None
    from factrl.labels import UnknownLabelError, normalise_grade, normalise_label

    norm = normalise_grade if cfg.scorer.label_field == "grade" else normalise_label
    keys = [norm(k) for k in cfg.scorer.label_words]
    keep = set()
    for lab in cfg.ffrr.train_labels:
        try:
            keep.add(keys.index(norm(lab)))
        except (UnknownLabelError, ValueError):
            raise ValueError(f"ffrr.train_labels: {lab!r} is not one of {list(cfg.scorer.label_words)}") from None
    return keep


def _frozen_retriever(index: Any) -> Any:
    backend = index.backend
    return getattr(backend, "dense", backend) if backend.name in ("dense", "hybrid") else None


def index_vectors(index: Any) -> Any:
    """The frozen index's document vectors (float32, rows in passage order)."""
    import numpy as np

    sub = index.directory / index.manifest.retriever
    path = sub / "dense" / "embeddings.npy" if index.manifest.retriever == "hybrid" else sub / "embeddings.npy"
    vectors = np.load(path, allow_pickle=False)
    if len(vectors) != len(index.passages):
        raise ValueError(f"{path} has {len(vectors)} rows for {len(index.passages)} passages")
    return vectors


def train_ffrr(cfg: FFRRRunConfig) -> Path:
    """Train (or, for ``method = "frozen"``, just save) the encoder; returns ``OUT/final``."""
    import torch

    from factrl.datasets.prepare import prepare_splits
    from factrl.retrieval.index import load_index
    from factrl.train.ffrr.episodes import Candidates, ScoreCache
    from factrl.train.ffrr.policy import DualEncoderPolicy

    from factrl.lm.device import describe_device

    f = cfg.ffrr
    device, dtype = cfg.runtime()  # a device this machine lacks fails here, before anything is written
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({**cfg.to_dict(), "device": device, "dtype": dtype,
                                                 "runtime": describe_device(device)}, indent=2) + "\n",
                                     encoding="utf-8")
    train, _ = prepare_splits(cfg.data, out)
    index = load_index(cfg.retriever.index)
    frozen = _frozen_retriever(index)
    if frozen is None:
        raise ValueError(f"{cfg.retriever.index} is a {index.backend.name} index; FFRR needs a dense or hybrid one "
                         "(its dense side gives the candidates D′)")
    model = cfg.retriever.model or frozen.params()["model"]
    random.seed(f.seed)
    torch.manual_seed(f.seed)
    rng = random.Random(f.seed)
    policy = DualEncoderPolicy(model, tau=f.tau, max_seq_length=cfg.retriever.max_seq_length, device=device)
    if f.method == "frozen":
        final = policy.save(out / "final")
        _write_summary(out, cfg, {"steps": 0, "method": "frozen"})
        return final

    scorer = load_scorer(cfg, reward=True)
    if f.doc_side == "index":
        rows = {p.id: i for i, p in enumerate(index.passages)}
        cands = Candidates(frozen, f.candidates, vectors=index_vectors(index), rows=rows)
    else:
        cands = Candidates(frozen, f.candidates)
    scores = open_score_cache(cfg, scorer)
    skipped = Counter()
    usable = []
    keep = _train_label_filter(cfg)
    for c in train:
        g = gold_index(c, cfg)
        if g is None or (keep is not None and g not in keep):
            skipped[str(c.meta.get("grade") if cfg.scorer.label_field == "grade" else c.label)] += 1
        else:
            usable.append((c, g))
    if not usable:
        raise ValueError(f"no training claim has a label among {list(cfg.scorer.label_words)}"
                         + (f" and in ffrr.train_labels {f.train_labels}" if f.train_labels else ""))
    questions = {}
    if f.level != "d" and f.method == "ffrr":
        from factrl.lm.loader import load_lm
        from factrl.train.ffrr.questions import decompose_claims

        qlm = scorer.lm if cfg.questions_lm is None else load_lm(cfg.questions_lm, device=device, dtype=dtype)
        qs = decompose_claims([c for c, _ in usable], qlm, cache=out / "questions.jsonl",
                              max_questions=f.max_questions)
        questions = qs.questions
        _say(f"questions: {sum(len(v) for v in questions.values())} for {len(questions)} claims "
             f"({qs.fallbacks} fell back to the claim itself)")

    if f.precompute and f.method != "frozen":
        precompute_scores(cands, scores, [c for c, _ in usable], questions)

    per_epoch = math.ceil(len(usable) / f.batch_size)
    total = f.max_steps or max(1, math.ceil(f.epochs * per_epoch))
    optimiser = torch.optim.Adam(policy.parameters(), lr=f.learning_rate)
    warm = math.ceil(f.warmup_ratio * total)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / max(1, total - warm)))
    failures: Counter[str] = Counter()
    t0 = time.perf_counter()
    order: list[int] = []
    batch: list[int] = []
    picks: dict[str, list[str]] = {}  # hybrid: each claim's questions sampled by the last question-level step
    step = 0
    with (out / "metrics.jsonl").open("a", encoding="utf-8") as log:
        while step < total:
            if f.max_minutes is not None and time.perf_counter() - t0 > 60 * f.max_minutes:
                _say(f"time budget of {f.max_minutes} minutes reached after {step} updates")
                break
            if not (_step_kind(cfg, step) == "d" and f.level == "d+q" and batch):
                # a new batch, except for the document-level steps of the hybrid schedule,
                # which go on with the claims of their question-level step
                if len(order) < f.batch_size:
                    more = list(range(len(usable)))
                    rng.shuffle(more)
                    order += more
                batch, order = order[: f.batch_size], order[f.batch_size :]
            t_step = time.perf_counter()
            row = _update(policy, optimiser, cfg, step, [usable[i] for i in batch], questions, cands, scores,
                          rng, failures, picks)
            schedule.step()
            step += 1
            row.update(step=step, lr=schedule.get_last_lr()[0], seconds=round(time.perf_counter() - t_step, 3),
                       lm_rows=scores.lm_rows, failures=sum(failures.values()))
            log.write(json.dumps(row) + "\n")
            log.flush()
            _say(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    final = policy.save(out / "final")
    _write_summary(out, cfg, {"method": f.method, "level": f.level, "steps": step, "planned_steps": total,
                              "train_claims": len(usable), "skipped_labels": dict(skipped),
                              "failures": dict(failures), "lm_rows": scores.lm_rows,
                              "train_seconds": round(time.perf_counter() - t0, 1),
                              "seconds_per_step": round((time.perf_counter() - t0) / max(1, step), 3)})
    return final


def _step_kind(cfg: FFRRRunConfig, step: int) -> str:
    """``replug``, ``q`` (question level) or ``d`` (document level) for update ``step``."""
    f = cfg.ffrr
    if f.method == "replug":
        return "replug"
    cycle = 1 + f.doc_steps_per_question_step
    return "q" if f.level == "q" or (f.level == "d+q" and step % cycle == 0) else "d"


def _doc_level_claim(policy: Any, cands: Any, scores: Any, claim: Any, queries: list[str], gold: int,
                     rng: random.Random, cfg: FFRRRunConfig, likelihood: bool) -> Any:
    """One document-level episode per query (the claim itself, or the hybrid schedule's
    sampled questions), merged into one claim outcome."""
    from factrl.train.ffrr.episodes import ClaimOutcome, doc_level

    f = cfg.ffrr
    outs = [doc_level(policy, cands, scores, claim.text, q, gold, rng, epsilon=f.epsilon, top_k=f.top_k,
                      max_samples=f.max_samples, final_reward=f.final_reward, doc_grad=f.doc_grad,
                      stop=not likelihood, kl_coef=f.kl_coef) for q in queries]
    if len(outs) == 1:
        return outs[0]
    merged = ClaimOutcome(log_probs=[x for o in outs for x in o.log_probs], rewards=[r for o in outs for r in o.rewards])
    losses = [o.loss for o in outs if o.loss is not None]
    merged.loss = sum(losses[1:], losses[0]) / len(outs) if losses else None
    for key in {k for o in outs for k in o.stats}:
        vals = [o.stats[key] for o in outs if key in o.stats]
        merged.stats[key] = sum(vals) / len(vals)
    merged.stats["doc_queries"] = float(len(outs))
    return merged


def _update(policy: Any, optimiser: Any, cfg: FFRRRunConfig, step: int, batch: list[tuple[Any, int]],
            questions: dict[str, list[str]], cands: Any, scores: Any, rng: random.Random,
            failures: Counter[str], picks: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """One optimiser update over a batch of claims; returns the row to log. A
    question-level step records each claim's sampled questions in ``picks``; the hybrid
    schedule's document-level steps query with them."""
    import torch

    from factrl.train.ffrr.episodes import exact_doc_level, question_level, replug_term
    from factrl.train.ffrr.objectives import reinforce_loss

    f = cfg.ffrr
    picks = {} if picks is None else picks
    kind = _step_kind(cfg, step)
    terms, lps, rewards, stats = [], [], [], []
    likelihood = cfg.scorer.reward == "claim_likelihood"  # one-value rows, no label to stop on
    for claim, gold in batch:
        gold = 0 if likelihood else gold
        try:
            if kind == "replug":
                o = replug_term(policy, cands, scores, claim.text, claim.text, gold, n_docs=f.replug_docs,
                                beta=f.replug_beta, doc_grad=f.doc_grad)
                terms.append(o.loss)
            elif f.estimator == "exact":
                o = exact_doc_level(policy, cands, scores, claim.text, claim.text, gold, doc_grad=f.doc_grad,
                                    kl_coef=f.kl_coef)
                terms.append(o.loss)
            elif kind == "q":
                picks.pop(claim.id, None)
                o = question_level(policy, cands, scores, claim.text, questions.get(claim.id) or [claim.text], gold,
                                   rng, epsilon=f.question_epsilon, k=f.questions_k, final_reward=f.final_reward,
                                   doc_grad=f.doc_grad)
                picks[claim.id] = list(o.questions)
            else:
                # hybrid: the questions the question-level step sampled for this claim (the
                # claim itself if that step failed for it); level d: the claim
                queries = (picks.get(claim.id) if f.level == "d+q" else None) or [claim.text]
                o = _doc_level_claim(policy, cands, scores, claim, queries, gold, rng, cfg, likelihood)
                if o.loss is not None:
                    terms.append(o.loss)
        except Exception as exc:  # noqa: BLE001 - one claim's failure is counted, the run goes on
            from factrl.lm.label_scores import LabelScoreError
            from factrl.lm.remote import LMRequestError

            if not isinstance(exc, (LabelScoreError, LMRequestError, NotImplementedError, ValueError)):
                raise
            failures[type(exc).__name__] += 1
            _say(f"claim {claim.id}: {type(exc).__name__}: {exc}")
            continue
        if o.log_probs:
            base = sum(o.rewards) / len(o.rewards) if f.baseline == "mean" else 0.0
            lps.extend(o.log_probs)
            rewards.extend(r - base for r in o.rewards)
        stats.append(o.stats)
    row: dict[str, Any] = {"kind": kind, "claims": len(stats)}
    if not stats:
        return {**row, "loss": None}
    if kind == "replug" or not lps:  # REPLUG's KL, or exact expectations (+ KL): one term per claim
        loss = torch.stack(terms).mean()
    else:
        loss = reinforce_loss(lps, rewards)
        if terms:  # the KL to the frozen retriever (ffrr.kl_coef), averaged over claims
            loss = loss + torch.stack(terms).sum() / len(stats)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    row["loss"] = float(loss.detach())
    for key in sorted({k for s in stats for k in s}):
        vals = [s[key] for s in stats if key in s]
        row[key] = sum(vals) / len(vals)
    return row


def _write_summary(out: Path, cfg: FFRRRunConfig, info: dict[str, Any]) -> None:
    device, dtype = cfg.runtime()
    summary = {"preset": cfg.preset.name, "paper": cfg.preset.paper, "device": device, "dtype": dtype, **info}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
