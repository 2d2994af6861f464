"""The embedded agent's training stages: split, teach, SFT data and SFT, GRPO, held-out
evaluation. Each resumes: a finished stage is skipped when run again."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factrl.recipes.embedded_agent.settings import AGENT, CONTEXT_SENTENCES, SOURCES, EmbeddedAgentSettings

__all__ = ["evaluate_model", "grpo", "make_env", "sft", "sft_data", "splits", "teach"]

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def splits(out: Path, source: str) -> tuple[list, list]:
    """A source's seeded, label-stratified ``(training, held-out)`` claims (``OUT/splits/SOURCE``)."""
    from factrl.datasets.prepare import DataSettings, prepare_splits
    from factrl.labels import Label

    dataset, data_dir, split, frac = SOURCES[source]
    train, held = prepare_splits(DataSettings(dataset=dataset, data_dir=data_dir, split=split,
                                              held_out_fraction=frac, split_seed=0), out / "splits" / source)
    # The Veri-R1 label set has no CONFLICTING (Climate-FEVER's DISPUTED): such claims are
    # neither taught nor scored.
    keep = lambda cs: [c for c in cs if c.label is not Label.CONFLICTING]  # noqa: E731
    return keep(train), keep(held)


def _components(settings: EmbeddedAgentSettings, mode: str, index: Any, *,
                context_sentences: int = CONTEXT_SENTENCES, rollout: Any = None) -> Any:
    """The run builder's environment factory and reward for the recipe's agent (no model
    loads: the teacher or the evaluated model plays it)."""
    from factrl.components import RunSpec, build_components
    from factrl.rollout import RolloutConfig

    spec = RunSpec(agent=settings.agent(mode), context_sentences=context_sentences, load_policy=False,
                   rollout=rollout or RolloutConfig())
    return build_components(spec, index=index)


def make_env(settings: EmbeddedAgentSettings, mode: str, index: Any,
             context_sentences: int = CONTEXT_SENTENCES) -> Callable[[], Any]:
    """Fresh environments of the recipe's agent in ``mode`` over ``index``."""
    return _components(settings, mode, index, context_sentences=context_sentences).make_env


def teach(settings: EmbeddedAgentSettings) -> list[Path]:
    """The template teacher (quoting, honest single search) on training claims of every
    source, offline and online, label-balanced; offline and online use different claims."""
    from factrl.datasets.sampling import interleave_labels
    from factrl.evaluate import evaluate
    from factrl.retrieval.index import load_index
    from factrl.rollout import RolloutConfig
    from factrl.teachers import TemplateTeacher

    out, files = settings.out, []
    for source, (n_off, n_on) in settings.teach_counts().items():
        train, _ = splits(out, source)
        index = load_index(settings.indexes[source])
        order = interleave_labels(train)
        for mode, claims in (("offline", order[:n_off]), ("online", order[n_off:n_off + n_on])):
            if not claims:
                continue
            run = out / "teacher" / f"{source}-{mode}"
            rollout = RolloutConfig(temperature=0.0, batch_size=64, max_new_tokens=4096, max_total_tokens=1_000_000)
            built = _components(settings, mode, index, rollout=rollout)
            evaluate(claims, built.make_env, TemplateTeacher(claims, online=mode == "online", quote=True,
                                                             gold_requery=False), run,
                     rollout=rollout,
                     run_info={"model": "template-teacher", "dataset": source, "purpose": "teach",
                               "agent": built.spec.agent.model_dump(mode="json"),
                               "teacher": {"quote": True, "gold_requery": False},
                               "context_sentences": CONTEXT_SENTENCES}, progress=False)
            files.append(run / "trajectories.jsonl")
    return files


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


def sft_data(settings: EmbeddedAgentSettings) -> list[Path]:
    """The first N fully correct teacher trajectories of each run (label-interleaved order):
    the SFT budget on CPU is about 170k tokens."""
    from factrl.runs.trajectories import read_trajectories
    from factrl.train.sft import select_correct

    out, caps, files = settings.out, settings.sft_take(), []
    for run in sorted((out / "teacher").glob("*/trajectories.jsonl")):
        name = run.parent.name
        keep = _round_robin(select_correct(read_trajectories(run)))[: caps.get(name, 0)]
        dest = out / "sft_data" / f"{name}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("".join(t.model_dump_json() + "\n" for t in keep))
        say(f"SFT data: {len(keep)} trajectories of {name}")
        files.append(dest)
    return files


def sft(settings: EmbeddedAgentSettings, files: list[Path]) -> Path:
    """LoRA SFT of the embedded SmolLM2 on ``files`` (decision-weighted with
    ``sft_decision_weight``, continuing ``sft_from`` when given)."""
    from factrl.train.sft import SFTSettings, train_sft

    out, s = settings.out, settings
    final = out / "sft" / "final"
    if (final / "config.json").exists():
        return final
    t0 = time.perf_counter()
    if s.sft_decision_weight is not None:
        from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft_on

        train_weighted_sft_on(files, "smollm2", out / "sft", WeightedSFTSettings(
            learning_rate=s.sft_lr, epochs=s.sft_epochs, tokens_per_batch=s.sft_tokens_per_batch,
            max_length=s.sft_max_length, lora_r=s.lora_r, lora_alpha=2 * s.lora_r,
            decision_weight=s.sft_decision_weight, warmup_steps=3,
            init_adapter=str(s.sft_from) if s.sft_from else None))
    else:
        train_sft(files, "smollm2", out / "sft", SFTSettings(
            learning_rate=s.sft_lr, epochs=s.sft_epochs, batch_size=4, max_length=s.sft_max_length,
            save_steps=20, gradient_checkpointing=False, lora=True, lora_r=s.lora_r, lora_alpha=2 * s.lora_r,
            lora_target_modules=LORA_TARGETS, lr_scheduler_type="cosine", warmup_steps=3))
    (out / "sft" / "time.json").write_text(json.dumps({"sft_s": time.perf_counter() - t0}) + "\n")
    return final


def grpo(settings: EmbeddedAgentSettings) -> Path:
    """GRPO (preset ``veri_r1_offline_cpu`` with LoRA) from this run's SFT model, or from a
    shipped warm-up adapter (``grpo_from``), on the SciFact training claims of the split."""
    from factrl.train.config import load_run_config, parse_overrides
    from factrl.train.grpo import train_grpo

    out, s = settings.out, settings
    sft_final = out / "sft" / "final"
    if s.grpo_from and not (sft_final / "config.json").exists():
        # Start from a shipped warm-up adapter (merged into the embedded model) instead
        # of this run's own SFT: the shipped one is what users have and was evaluated.
        import shutil

        from factrl.lm.agent import ensure_agent_model

        sft_final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(ensure_agent_model(Path(s.grpo_from)), sft_final)
    overrides = {
        "output_dir": str(out / "grpo"), "model.id": str(sft_final), "model.lora": True,
        "model.lora_r": 8, "model.lora_alpha": 16, "model.lora_dropout": 0.0, "model.lora_target_modules": LORA_TARGETS,
        "data.held_out_fraction": SOURCES["scifact"][3], "grpo.max_minutes": s.grpo_minutes,
        "grpo.bf16": False, "grpo.learning_rate": s.grpo_lr, "env.index": str(s.indexes["scifact"]),
        "env.context_sentences": CONTEXT_SENTENCES, "env.name": AGENT,
        **{f"env.params.{k}": v for k, v in s.agent_params.items()}, **parse_overrides(s.set_items),
    }
    cfg = load_run_config("veri_r1_offline_cpu", overrides)
    final = Path(cfg.output_dir) / "final"
    if (final / "config.json").exists():
        return final
    train, _ = splits(out, "scifact")  # the same held-out claims as the split stage
    t0 = time.perf_counter()
    train_grpo(cfg, claims=train, resume=any(Path(cfg.output_dir).glob("checkpoint-*")))
    (out / "grpo" / "time.json").write_text(json.dumps({"grpo_s": time.perf_counter() - t0}) + "\n")
    return final


def evaluate_model(settings: EmbeddedAgentSettings, model: str, tag: str) -> dict[str, Any]:
    """``model`` on the held-out claims of each source and setting (greedy), into
    ``OUT/eval/TAG/SOURCE-MODE``; a finished one is read back. The model loads once."""
    from factrl.components import load_model
    from factrl.datasets.sampling import interleave_labels
    from factrl.evaluate import evaluate
    from factrl.retrieval.index import load_index
    from factrl.rollout import RolloutConfig

    s, lm, results = settings, None, {}
    rollout = RolloutConfig(temperature=0.0, max_new_tokens=s.eval_tokens, batch_size=32,
                            no_repeat_ngram=s.no_repeat_ngram)
    for source in s.sources:
        _, held = splits(s.out, source)
        if s.limit:  # label-interleaved, so a limited run is as balanced as the part allows
            held = interleave_labels(held)[:s.limit]
        index = load_index(s.indexes[source])
        for mode in s.modes:
            run = s.out / "eval" / tag / f"{source}-{mode}"
            if (run / "metrics.json").exists():
                results[f"{source}-{mode}"] = json.loads((run / "metrics.json").read_text())
                continue
            built = _components(s, mode, index, rollout=rollout)  # the recipe's own parameters, whatever the model
            lm = lm or load_model(model)
            t0 = time.perf_counter()
            results[f"{source}-{mode}"] = m = evaluate(
                held, built.make_env, lm, run, rollout=rollout,
                run_info={"model": model, "dataset": source,
                          **({"no_repeat_ngram": s.no_repeat_ngram} if s.no_repeat_ngram else {}),
                          "agent": built.spec.agent.model_dump(mode="json"),
                          "context_sentences": CONTEXT_SENTENCES, "index": str(s.indexes[source])})
            say(f"{tag} {source} {mode}: label_acc {m.get('label_acc')} format {m.get('format_ok_rate')} "
                f"({time.perf_counter() - t0:.0f}s)")
    return results
