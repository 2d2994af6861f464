"""``python -m factrl.demo`` (what ``make demo`` runs): build a BM25 index over the
bundled corpus, verify the bundled claims with the trained embedded agent (SmolLM2-135M
with factrl's shipped LoRA adapter, Veri-R1 protocol, greedy decoding), and print each
verdict with its evidence, how many it got right, and a summary. Beside each agent verdict
it prints the trained verifier's (``retrieve_verify``: the same index's top units, each
sentence read by the ``factrl-verifier`` cross-encoder; ``--no-verifier`` leaves it out)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from importlib.resources import files
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m factrl.demo", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("demo_out"), help="where the index and run go")
    ap.add_argument("--model", default="factrl-agent",
                    help="'factrl-agent' (the trained embedded agent), 'smollm2-base' (untrained), a local path "
                         "or a hub id")
    ap.add_argument("--limit", type=int, default=None, help="only the first N claims")
    ap.add_argument("--no-force-answer", dest="force_answer", action="store_false",
                    help="leave a claim without a verdict when the model gives no <answer> (default: force one, "
                         "read from the model's label probabilities, and mark it)")
    ap.add_argument("--verifier", default="factrl-verifier",
                    help="the verifier whose retrieve_verify verdict is printed beside the agent's "
                         "('factrl-verifier', the shipped one, or a folder from `factrl train verifier`)")
    ap.add_argument("--no-verifier", dest="with_verifier", action="store_false",
                    help="print the agent's verdicts only")
    args = ap.parse_args(argv)
    from factrl.lm.loader import is_packaged

    if is_packaged(args.model):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from factrl.datasets import DATASETS
    from factrl.components import RunSpec, build_components
    from factrl.envs import DEFAULT_AGENT, POLICY, EnvSpec
    from factrl.evaluate import evaluate
    from factrl.report.markdown import format_summary_line
    from factrl.retrieval.base import IndexMismatchError
    from factrl.retrieval.index import build_index, corpus_sha256, load_index
    from factrl.rollout import RolloutConfig

    data = files("factrl.demo")
    corpus = Path(str(data / "corpus.jsonl"))
    claims_file = Path(str(data / "claims.jsonl"))
    index_dir = args.out / "index"
    try:
        index = load_index(index_dir, expect={"corpus_sha256": corpus_sha256(corpus)})
        print(f"using index {index_dir} ({len(index)} passages)")
    except (IndexMismatchError, FileNotFoundError):
        shutil.rmtree(index_dir, ignore_errors=True)
        t0 = time.perf_counter()
        index = build_index(corpus, index_dir, corpus_format="jsonl", retriever="bm25", unit_sentences=3)
        print(f"built BM25 index over {len(index)} passages in {time.perf_counter() - t0:.1f}s")

    claims = DATASETS.get("jsonl")().load(claims_file, "demo").claims
    if args.limit:
        claims = claims[: args.limit]
    print(f"loading {args.model} ...", flush=True)
    t0 = time.perf_counter()
    # the shipped agent runs with its own settings (its manifest's parameters)
    run = build_components(RunSpec(agent=EnvSpec(name=DEFAULT_AGENT), models={POLICY: args.model},
                                   rollout=RolloutConfig(temperature=0.0, max_new_tokens=256, batch_size=len(claims))),
                           index=index)
    lm, spec = run.policy, run.spec.agent
    print(f"loaded in {time.perf_counter() - t0:.1f}s; verifying {len(claims)} claims", flush=True)
    run_dir = args.out / "run"
    shutil.rmtree(run_dir, ignore_errors=True)  # the demo always starts fresh
    metrics = evaluate(
        claims,
        run.make_env,
        lm,
        run_dir,
        rollout=run.spec.rollout,
        run_info={"dataset": "demo", "model": args.model, "agent": spec.model_dump(mode="json")},
    )

    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    from factrl.forced import FORCED_NOTE, answer_forcing, with_forced

    trajs = read_trajectories(run_dir / TRAJ_FILE)
    if args.force_answer:  # a verdict for every claim: unanswered episodes get a forced one, marked
        trajs = with_forced(trajs, lm, answer_forcing(run.make_env()))
    by_id = {t.claim_id: t for t in trajs}
    forced = [t for t in trajs if t.verdict.forced]
    with open(run_dir / "forced.jsonl", "w") as fh:
        for t in forced:
            fh.write(json.dumps({"claim_id": t.claim_id, "verdict": t.verdict.model_dump(mode="json")}) + "\n")
    best = index.search([c.text for c in claims], 1)
    side = _verifier_verdicts(claims, index, args.verifier) if args.with_verifier else {}
    right = right_forced = 0
    for claim, top in zip(claims, best):
        t = by_id[claim.id]
        v = t.verdict
        ok = claim.label is not None and v.label == claim.label
        right += ok
        right_forced += ok and v.forced
        got = v.label.value if v.label else "(no verdict: the model did not follow the answer protocol)"
        if v.forced:
            got += f"  {FORCED_NOTE}"
        mark = "✓" if claim.label is not None and v.label == claim.label else "✗"
        print(f"\n{mark} [{claim.id}] {claim.text}")
        print(f"    gold: {claim.label.value if claim.label else '-'}   verdict: {got}")
        if claim.id in side:
            vt = side[claim.id]
            vmark = "✓" if claim.label is not None and vt.verdict.label == claim.label else "✗"
            vlabel = vt.verdict.label.value if vt.verdict.label else f"(failed: {vt.error})"
            conf = f" (confidence {vt.meta['confidence']:.2f})" if "confidence" in vt.meta else ""
            print(f"    agent: {v.label.value if v.label else '(none)'} {mark}   |   verifier: {vlabel}{conf} {vmark}"
                  + (f"  [[{vt.verdict.evidence_ids[0]}]]" if vt.verdict.evidence_ids else ""))
        if t.searches:
            print("    searched: " + " | ".join(t.searches))
        for eid in v.evidence_ids or []:
            text = index.sentence_text(eid)
            print(f"    [[{eid}]] {text if text is not None else '(not a corpus id)'}")
        if not v.evidence_ids:
            print("    evidence: (none cited)")
        if not v.format_ok:
            print("    format problems: " + "; ".join(v.format_errors[:3]))
        if top:  # what the index itself finds for the claim text
            p = top[0].passage
            print(f"    index's best match: [[{p.sentence_ids[0]}]] {p.sentences[0]}")
    labelled = sum(c.label is not None for c in claims)
    answered = sum(by_id[c.id].verdict.label is not None for c in claims)
    print(f"\n{args.model}: a verdict for {answered} of {len(claims)} claims ({len(forced)} forced); "
          f"{right} of {labelled} right ({right_forced} of them forced)")
    if side:
        vright = sum(c.label is not None and side[c.id].verdict.label == c.label for c in claims if c.id in side)
        seconds = sum(side[c.id].timings.get("search_s", 0.0) + side[c.id].timings.get("verify_s", 0.0)
                      for c in claims if c.id in side)
        print(f"{args.verifier} (retrieve_verify): {vright} of {labelled} right, "
              f"{seconds / max(len(side), 1):.2f} s per claim")
    print("summary: " + format_summary_line(metrics))
    if not metrics.get("format_ok_rate"):
        print("note: this model does not follow the Veri-R1 tag protocol; the default --model factrl-agent "
              "(trained, shipped with factrl) does, or pass a larger instruct model.")
    print(f"details: {run_dir}/trajectories.jsonl, {run_dir}/metrics.json, {run_dir}/report.md")
    return 0


def _verifier_verdicts(claims: list, index: object, verifier: str) -> dict:
    """``retrieve_verify``'s trajectory per claim id ({} with a note when the verifier
    cannot load)."""
    from factrl.envs import EnvDeps, EnvSpec, env_factory
    from factrl.lm.scripted import null_lm
    from factrl.rollout import RolloutConfig, run_episodes
    from factrl.verifier.asset import VerifierAssetError, load_verifier

    try:
        loaded = load_verifier(verifier)
    except VerifierAssetError as exc:
        print(f"note: no verifier verdicts ({exc})")
        return {}
    make_env = env_factory(EnvSpec(name="retrieve_verify", params={"verifier": verifier}),
                           EnvDeps(retriever=index, lms={"verifier": loaded}))
    trajs = run_episodes(make_env, claims, null_lm(), RolloutConfig(temperature=0.0, max_new_tokens=4,
                                                                   batch_size=len(claims)), score=False)
    return {t.claim_id: t for t in trajs}


if __name__ == "__main__":
    sys.exit(main())
