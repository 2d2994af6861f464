"""``factrl train embedded-agent``: the shipped agent's recipe (:mod:`factrl.recipes.embedded_agent`)."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli.app import train_app


@train_app.command("embedded-agent")
def embedded_agent(
    stages: list[str] = typer.Argument(..., help="Stages in order: split teach sft grpo eval ship table probe."),
    out: Path = typer.Option(Path("runs/agent"), "--out", help="The recipe's run directory."),
    index: list[str] = typer.Option([], "--index", metavar="SOURCE=DIR", help="An index other than the default."),
    teach: list[str] = typer.Option([], "--teach", metavar="SOURCE=OFFLINE,ONLINE",
                                    help="Claims taught per source and setting (default scifact=110,110 "
                                         "feverous_s=25,25 climate_fever=25,25)."),
    sft_take: list[str] = typer.Option([], "--sft-take", metavar="RUN=N",
                                       help="Fully correct teacher trajectories used per run (e.g. scifact-online=60)."),
    sft_lr: float = typer.Option(2e-4, "--sft-lr"),
    sft_epochs: float = typer.Option(1.0, "--sft-epochs"),
    sft_max_length: int = typer.Option(1150, "--sft-max-length"),
    lora_r: int = typer.Option(16, "--lora-r"),
    sft_decision_weight: float = typer.Option(None, "--sft-decision-weight", metavar="W",
                                              help="sft: decision-weighted SFT, the judgement tokens weighing W."),
    sft_from: str = typer.Option(None, "--sft-from", metavar="ADAPTER_DIR",
                                 help="sft (with --sft-decision-weight): continue this exported adapter."),
    sft_tokens_per_batch: int = typer.Option(4096, "--sft-tokens-per-batch"),
    grpo_minutes: float = typer.Option(40.0, "--grpo-minutes"),
    grpo_lr: float = typer.Option(1e-5, "--grpo-lr"),
    grpo_from: str = typer.Option(None, "--grpo-from", metavar="ADAPTER_DIR",
                                  help="grpo: start from this exported warm-up adapter instead of OUT/sft/final."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="grpo: a run-config override."),
    agent_param: list[str] = typer.Option([], "--agent-param", metavar="KEY=VALUE",
                                          help="An agent parameter for teach/eval/ship, e.g. prompt=short."),
    model: str = typer.Option(None, "--model", help="eval/ship/probe: the model (a directory, 'factrl-agent', ...)."),
    tag: str = typer.Option(None, "--tag", help="eval: the results' folder name (default: the model's name)."),
    sources: str = typer.Option("scifact,feverous_s,climate_fever", "--sources"),
    modes: str = typer.Option("offline,online", "--modes"),
    eval_tokens: int = typer.Option(128, "--eval-tokens"),
    no_repeat_ngram: int = typer.Option(0, "--no-repeat-ngram", min=0, help="eval: the repetition guard (0 = off)."),
    limit: int = typer.Option(None, "--limit", help="eval: N label-interleaved held-out claims of each source."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what each stage would do; run nothing."),
) -> None:
    """Rebuild the shipped agent: split, teach, SFT (and GRPO), evaluate, ship an adapter
    with its manifest. Each stage resumes; see factrl.recipes.embedded_agent."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from factrl.recipes.embedded_agent import EmbeddedAgentSettings, plan, run_stages

    try:
        settings = EmbeddedAgentSettings(
            out=out, index_items=index, teach_items=teach, sft_take_items=sft_take, sft_lr=sft_lr,
            sft_epochs=sft_epochs, sft_max_length=sft_max_length, lora_r=lora_r,
            sft_decision_weight=sft_decision_weight, sft_from=sft_from, sft_tokens_per_batch=sft_tokens_per_batch,
            grpo_minutes=grpo_minutes, grpo_lr=grpo_lr, grpo_from=grpo_from, set_items=set_,
            agent_param_items=agent_param, model=model, tag=tag, sources=sources.split(","), modes=modes.split(","),
            eval_tokens=eval_tokens, no_repeat_ngram=no_repeat_ngram, limit=limit)
        lines = plan(settings, stages)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if dry_run:
        typer.echo("\n".join(lines))
        return
    run_stages(settings, stages)
