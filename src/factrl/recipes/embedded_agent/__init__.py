"""The shipped embedded agent's recipe (``factrl train embedded-agent``): warm-up SFT on
several sources, optional GRPO, held-out evaluation, export with a manifest.

Stages (each resumes: run the same command again after an interruption; a finished
stage is skipped):

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
- ``table``   the held-out metrics of the tags side by side;
- ``ship``    ``factrl export adapter`` of a model against the base (one LoRA) with the
              manifest (the commands that rebuild it, seed, data, the held-out metrics of
              ``eval --tag``).

    factrl train embedded-agent --out runs/agent teach sft
    factrl train embedded-agent --out runs/agent eval --model runs/agent/sft/final --tag sft
    factrl train embedded-agent --out runs/agent ship --model runs/agent/sft/final --tag sft

Indexes: ``runs/scifact-index`` (``factrl index build`` over the SciFact corpus) and the
closed pools of FEVEROUS-S / Climate-FEVER (``factrl corpus pool`` + ``factrl index
build``, see docs/benchmarks.md); pass others with ``--index SOURCE=DIR``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from factrl.recipes.embedded_agent.settings import (AGENT, COMMAND, CONTEXT_SENTENCES, INDEX_COMMANDS, SOURCES,
                                                    STAGES, EmbeddedAgentSettings)

__all__ = ["AGENT", "COMMAND", "CONTEXT_SENTENCES", "INDEX_COMMANDS", "SOURCES", "STAGES", "EmbeddedAgentSettings",
           "plan", "run_stages"]


def _needs(settings: EmbeddedAgentSettings, stage: str) -> None:
    if stage in ("ship", "probe") and not (settings.model and settings.tag):
        raise ValueError(f"{stage} needs --model and --tag" + (" (an eval run of that model)" if stage == "probe" else ""))
    if stage == "eval" and not settings.model:
        raise ValueError("eval needs --model")


def plan(settings: EmbeddedAgentSettings, stages: Sequence[str]) -> list[str]:
    """What :func:`run_stages` would do, one line per stage, without loading or writing
    anything; an unknown stage or a stage without the options it needs is a ValueError."""
    lines = []
    for stage in stages:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
        _needs(settings, stage)
        where = {
            "split": f"{settings.out}/splits/{{{','.join(SOURCES)}}}",
            "teach": f"{settings.out}/teacher ({settings.teach_counts()})",
            "sft": f"{settings.out}/sft (lr {settings.sft_lr}, epochs {settings.sft_epochs}, LoRA r {settings.lora_r})",
            "grpo": f"{settings.out}/grpo ({settings.grpo_minutes} min, lr {settings.grpo_lr})",
            "eval": f"{settings.out}/eval/{settings.tag or Path(settings.model or '').name} "
                    f"({','.join(settings.sources)} x {','.join(settings.modes)})",
            "ship": f"{settings.out}/adapter-{settings.tag}",
            "table": "stdout",
            "probe": f"{settings.out}/eval/{settings.tag}/probe-scifact.json",
        }[stage]
        lines.append(f"{stage}: {where}")
    lines.append(f"agent: {settings.agent('offline').model_dump(mode='json')} (and mode=online)")
    return lines


def run_stages(settings: EmbeddedAgentSettings, stages: Sequence[str]) -> None:
    """Run ``stages`` in order (see the module docstring)."""
    from factrl.recipes.embedded_agent import probe as analysis
    from factrl.recipes.embedded_agent import ship as shipping
    from factrl.recipes.embedded_agent import stages as steps

    plan(settings, stages)  # refuse a bad stage list before any work
    for stage in stages:
        if stage == "split":
            for s in SOURCES:
                tr, ho = steps.splits(settings.out, s)
                steps.say(f"{s}: {len(tr)} training, {len(ho)} held-out claims")
        elif stage == "teach":
            steps.teach(settings)
        elif stage == "sft":
            files = steps.sft_data(settings)
            steps.say(f"SFT on {len(files)} teacher runs: {', '.join(f.stem for f in files)}")
            steps.say(f"saved {steps.sft(settings, files)}")
        elif stage == "grpo":
            steps.say(f"saved {steps.grpo(settings)}")
        elif stage == "ship":
            steps.say(f"wrote {shipping.ship(settings, str(settings.model), str(settings.tag))}")
        elif stage == "table":
            print(analysis.tables(settings.out, (settings.tag or "base,sft").split(",")))
        elif stage == "probe":
            print(json.dumps(analysis.probe(settings.out, str(settings.model), str(settings.tag)), indent=1))
        elif stage == "eval":
            res = steps.evaluate_model(settings, str(settings.model), settings.tag or Path(str(settings.model)).name)
            print(json.dumps({k: {m: v.get(m) for m in ("n", "format_ok_rate", "label_acc", "macro_f1")}
                              for k, v in res.items()}, indent=1))
