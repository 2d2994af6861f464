"""Does the RL teach? A learning recipe on a generated world (``factrl train factworld``).

Stages, each written under ``out/`` and skipped when already done (so a crashed run
resumes where it stopped):

1. ``worlds``: a training world (seed ``train_seed``) and a held-out world of another seed
   (new names, new facts: nothing memorised carries over), each with a BM25 index.
2. ``teach``: the preset agent's rule-based teacher runs its environment on training
   claims (Veri-R1: :class:`~factrl.recipes.noisy_teacher.NoisyTeacher`; others: the
   agent's registered teacher, e.g. ProFact's gold-question one, given noisy labels); a
   share ``teacher_noise`` of its verdicts is a random label, so the warm-up it teaches can
   be deliberately far from perfect.
3. ``warmup``: LoRA SFT of the embedded model on the teacher's trajectories (merged).
4. ``grpo``: the preset's GRPO from the warm-up, with checkpoints at 25/50/100 % of the
   updates; ``controls`` repeat it with a broken trainer (:mod:`factrl.train.controls`).
5. ``eval``: greedy (or ``eval_temperature``) evaluation of every stage on the held-out
   world's claims; with ``val_claims`` > 0 also of the warm-up and the real run's
   checkpoints on a validation world, which picks the checkpoint the report names
   (:mod:`factrl.recipes.factworld_eval`).
6. ``report``: accuracy with 95 % Wilson intervals, exact McNemar tests paired by claim
   against the warm-up, and the reward curves (``report.md``, ``results.json``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factrl.recipes.factworld_config import env_factory as _env_factory
from factrl.recipes.factworld_config import env_name as _env_name
from factrl.recipes.factworld_config import grpo_config as _grpo_config
from factrl.recipes.factworld_config import is_rar as _is_rar
from factrl.recipes.factworld_config import say as _say
from factrl.recipes.factworld_eval import evaluate_heldout as _evaluate
from factrl.recipes.factworld_eval import exact_reward as _exact_reward
from factrl.recipes.factworld_eval import heldout_claims, validate, worlds_of
from factrl.types import Claim

__all__ = ["FactworldRecipe", "run_recipe", "recipe_json", "STAGES", "heldout_claims"]

STAGES = ("worlds", "teach", "warmup", "grpo", "eval", "report")


@dataclass
class FactworldRecipe:
    """Every setting of one recipe run (recorded in ``out/recipe.json``)."""

    preset: str = "veri_r1_factworld_cpu"  # the GRPO run config (env, reward, rollout, grpo)
    model: str = "smollm2"  # the student's starting model
    train_seed: int = 101
    heldout_seed: int = 202
    entities: int = 300
    claims: int = 1500  # training-world claims (all splits)
    heldout_claims: int = 300  # evaluated, label-balanced, from the held-out world
    hops: str = "1"
    paraphrase_rate: float = 0.5
    distractors: float = 0.2
    teacher_claims: int = 300
    teacher_noise: float = 0.5
    teacher_seed: int = 0
    # Systematic teacher errors, "GOLD->SAID:RATE,..." (recipes.noisy_teacher.parse_confusion):
    # "REFUTE->SUPPORT:0.6" teaches a warm-up whose greedy verdict on REFUTE claims is wrong.
    teacher_confusion: str = ""
    # The teacher's reasoning: "quote" (Veri-R1: quote the cited sentence, then judge; ProFact:
    # a bare verdict) or "compare" (the claimed and the stated value side by side, then judge).
    teacher_reasoning: str = "quote"
    # Where wrong verdicts go wrong (recipes.noisy_teacher): "consistent" (the reasoning
    # agrees with the wrong label) or "verdict" (it reads right; only the conclusion is wrong).
    teacher_errors: str = "consistent"
    # ProFact's teacher asks a seeded share of its claims as the claim restated ("Is it true
    # that ...?") instead of the gold question: a question stage the process reward can fix.
    teacher_question_noise: float = 0.0
    # ... and in which form (teachers.profact.QUESTION_FORMS): "restated" (the claim, its
    # value included) or "subject" ("What is known about X?": neither attribute nor value).
    teacher_question_form: str = "restated"
    # HARIS's teacher after a hop the search missed: "refute" (nothing supports the claim)
    # or "label" (the label anyway: a guess; runs before this setting existed).
    teacher_missed_hop: str = "refute"
    # HARIS's teacher writes the claimed value in its first thought too ("The claim says V."),
    # so the final comparison repeats the student's own words (teachers.haris, claim_first).
    teacher_claim_first: bool = False
    # HARIS's warm-up also trains, per comparing teacher episode, a copy whose last report
    # found another value, so each context is seen read both Same and Different
    # (teachers.haris.comparison_copies).
    teacher_comparison_copies: bool = False
    sft_learning_rate: float = 2e-4
    sft_epochs: float = 1.0
    sft_max_minutes: float | None = 12.0
    sft_decision_weight: float = 1.0
    sft_comparison_weight: float = 1.0  # the comparison's word (Same / Different) in the warm-up's loss
    sft_tokens_per_batch: int = 4096  # padded tokens per optimiser step
    sft_lora_layers: int | None = None  # LoRA in the top N blocks only (train.lora); unset: all
    sft_seed: int = 0  # the warm-up's batch order and LoRA initialisation (a replicate: another)
    checkpoints: tuple[float, ...] = (0.25, 0.5, 1.0)
    controls: tuple[str, ...] = ()  # e.g. ("flip_advantage", "invert_mask", "shuffle_rewards")
    grpo_overrides: dict[str, Any] = field(default_factory=dict)  # --set keys of the preset
    eval_batch: int = 32
    # Held-out decoding: 0 = greedy (the default); > 0 samples at this temperature with
    # ``eval_seed`` — Binary RAR's contradiction rate is a property of the policy's
    # distribution, which greedy decoding of a copying warm-up hides.
    eval_temperature: float = 0.0
    eval_seed: int = 0
    eval_base: bool = False  # also evaluate the untrained model
    # A validation world (a third seed) that picks the reported GRPO checkpoint: 0 = none
    # (recipes.factworld_eval); the held-out figures never choose.
    val_claims: int = 0
    val_seed: int = 303
    # Binary RAR's utility early stop on the validation world (the paper stops at a drop of
    # more than 10 %): a checkpoint whose supported facts per response fall more than this
    # share below the warm-up's, and every later one, cannot be picked.
    val_utility_drop: float = 0.1
    # Binary RAR: also ask every evaluated stage this many answerable and this many
    # unanswerable short-form questions of the held-out world (recipes.factworld_short).
    short_questions: int = 0
    # Binary RAR: the teacher and GRPO also get the training world's answerable short-form
    # questions, one for each long-form prompt (recipes.factworld_short.write_mixed_prompts).
    train_short: bool = False
    # Where every stage trains and evaluates (factrl.lm.device): auto = CUDA when available;
    # dtype auto = bf16 mixed precision on a GPU that has it, else float32. A resumed run may
    # change either.
    device: str = "auto"
    dtype: str = "auto"

    def __post_init__(self) -> None:
        from factrl.recipes.settings import check_settings

        check_settings(self, "recipe setting")
        if not 0.0 <= self.val_utility_drop <= 1.0:
            raise ValueError(f"recipe setting val_utility_drop must be a share in [0, 1], got {self.val_utility_drop}")
        if not 0.0 <= self.teacher_question_noise <= 1.0:
            raise ValueError("recipe setting teacher_question_noise must be a share in [0, 1], "
                             f"got {self.teacher_question_noise}")
        from factrl.teachers.profact import QUESTION_FORMS

        if self.teacher_question_form not in QUESTION_FORMS:
            raise ValueError(f"recipe setting teacher_question_form must be one of {', '.join(QUESTION_FORMS)}, "
                             f"got {self.teacher_question_form!r}")
        if self.teacher_question_form != "restated" and self.teacher_question_noise == 0:
            raise ValueError("recipe setting teacher_question_form is the form of the planted questions; "
                             "it needs a share of them (teacher_question_noise > 0)")


# -- stages -----------------------------------------------------------------------------

def _worlds(r: FactworldRecipe, out: Path) -> None:
    from factrl.datasets.factworld import WorldConfig, parse_hops, write_world
    from factrl.datasets.factworld.claims import TooFewClaims
    from factrl.datasets.factworld.generator import refused_seed_message
    from factrl.retrieval.index import build_index

    if r.train_short and not _is_rar(r):
        raise ValueError("recipe setting train_short is Binary RAR's (its short-form questions); "
                         f"the preset {r.preset} trains another agent")
    if r.teacher_question_noise > 0 and _env_name(r) != "profact":
        raise ValueError("recipe setting teacher_question_noise is ProFact's (its question stage); "
                         f"the preset {r.preset} trains another agent")
    for name, seed, claims in worlds_of(r):
        d = out / name
        # a resumed run that raised val_claims needs a larger validation world than it wrote
        fresh = not (d / "manifest.json").is_file() or _world_claims(d) < claims
        # a world written before short-form questions existed: the same files again, and rar_short/
        short = (name == "heldout" and r.short_questions > 0) or (name == "world" and r.train_short)
        fresh = fresh or (short and not (d / "rar_short").is_dir())
        if fresh:
            cfg = WorldConfig(seed=seed, entities=r.entities, claims=claims, hops=parse_hops(r.hops),
                              paraphrase_rate=r.paraphrase_rate, distractors=r.distractors)
            try:
                write_world(cfg, d, overwrite=True)
            except TooFewClaims as exc:
                what, field = {"world": ("training", "train_seed"), "heldout": ("held-out", "heldout_seed"),
                               "validation": ("validation", "val_seed")}[name]
                raise TooFewClaims(f"the {what} world (recipe setting {field} = {seed}): "
                                   + refused_seed_message(exc, cfg, f"--recipe {field}=")) from None
        if fresh or not (d / "index" / "manifest.json").is_file():
            build_index(d / "corpus.jsonl", d / "index", overwrite=True, progress=False)
        if name == "world" and r.train_short:
            from factrl.recipes.factworld_short import write_mixed_prompts

            write_mixed_prompts(d)
    _say(f"worlds: training seed {r.train_seed}, held-out seed {r.heldout_seed}"
         + (f", validation seed {r.val_seed}" if r.val_claims > 0 else ""))


def _world_claims(d: Path) -> float:
    """How many claims the world in ``d`` was written with (unknown, when its manifest does
    not say: infinity, so a world is never rewritten on a guess)."""
    try:
        return int(json.loads((d / "manifest.json").read_text())["config"]["claims"])
    except (OSError, ValueError, KeyError, TypeError):
        return float("inf")


def _teach(r: FactworldRecipe, out: Path) -> Path:
    from factrl.datasets.prepare import prepare_splits
    from factrl.datasets.sampling import interleave_labels
    from factrl.evaluate import evaluate
    from factrl.rollout import RolloutConfig

    d = out / "teach"
    cfg = _grpo_config(r, out, "none")
    train, _ = prepare_splits(cfg.data, Path(cfg.output_dir))
    from factrl.recipes.factworld_haris import label_mix

    claims = interleave_labels(train, seed=r.teacher_seed, weights=label_mix(cfg.env.name))[: r.teacher_claims]
    teacher = _teacher(r, cfg, claims)
    evaluate(claims, _env_factory(cfg, out / "world" / "index"), teacher, d, reward=_exact_reward(r, out / "world"),
             # the teacher's ids are characters: budgets in characters, far above a student's
             rollout=RolloutConfig(temperature=0.0, max_new_tokens=2048, max_total_tokens=16384, batch_size=64),
             run_info={"teacher": "noisy", "noise": r.teacher_noise, "seed": r.teacher_seed,
                       "confusion": r.teacher_confusion, "errors": r.teacher_errors}, progress=False)
    return d / "trajectories.jsonl"


def _teacher(r: FactworldRecipe, cfg: Any, claims: list[Claim]) -> Any:
    """The preset agent's rule-based teacher, wrong on purpose for ``teacher_noise`` (and
    ``teacher_confusion``) of the claims: Veri-R1's templated one (``teacher_reasoning``),
    or the agent's registered teacher (:mod:`factrl.teachers`) given the noisy labels."""
    from factrl.recipes.noisy_teacher import NoisyTeacher, noisy_label, parse_confusion, seeded_share
    from factrl.teachers import make_teacher

    if r.teacher_claim_first and cfg.env.name != "haris":
        raise ValueError(f"teacher_claim_first is a setting of HARIS's teacher; the {cfg.env.name} teacher has no "
                         "first thought to write the claimed value in")
    if r.teacher_comparison_copies and cfg.env.name != "haris":
        raise ValueError(f"teacher_comparison_copies copies HARIS's teacher episodes; the {cfg.env.name} teacher's "
                         "are not copied")
    if cfg.env.name == "rar":  # wrong statements, not wrong labels: the noise swaps stated values
        from factrl.teachers.rar import RarTeacher

        return RarTeacher(world=out_world(cfg), noise=r.teacher_noise, seed=r.teacher_seed)
    if cfg.env.name == "veri_r1":
        return NoisyTeacher(claims, noise=r.teacher_noise, seed=r.teacher_seed, confusion=r.teacher_confusion,
                            errors=r.teacher_errors,
                            quote=True, compare=r.teacher_reasoning == "compare", gold_requery=False,
                            online=cfg.env.params.get("mode", "online") == "online")
    # ProFact's justification (with compare) and HARIS's final think read what was found
    reads = (cfg.env.name == "profact" and r.teacher_reasoning == "compare") or cfg.env.name == "haris"
    if r.teacher_errors != "consistent" and not reads:
        raise ValueError(f"teacher_errors={r.teacher_errors!r} needs a teacher whose reasoning reads the evidence "
                         f"(Veri-R1's, HARIS's, ProFact's with teacher_reasoning=compare); the {cfg.env.name} "
                         "teacher's wrong verdicts come with consistent reasoning")
    conf = parse_confusion(r.teacher_confusion)
    noisy = [c.model_copy(update={"label": noisy_label(c, r.teacher_noise, r.teacher_seed, conf)}) for c in claims]
    params = dict(cfg.env.params) | ({"missed_hop": r.teacher_missed_hop, "claim_first": r.teacher_claim_first}
                                       if cfg.env.name == "haris" else {})
    if cfg.env.name == "profact" and reads:
        params["reasoning"] = "compare"
    if r.teacher_errors == "verdict":
        params["read_labels"] = {c.id: c.label for c in claims}
    if r.teacher_question_noise > 0:
        params["restate"] = seeded_share(claims, r.teacher_question_noise, r.teacher_seed, "question")
        params["question_form"] = r.teacher_question_form
    return make_teacher(cfg.env.name, noisy, params)


def out_world(cfg: Any) -> Path:
    """The training world's directory of a recipe's GRPO config."""
    return Path(cfg.env.index).parent


def _warmup(r: FactworldRecipe, out: Path, trajectories: Path) -> Path:
    from transformers import AutoTokenizer

    from factrl.lm.loader import resolve_model_path
    from factrl.runs.trajectories import read_trajectories
    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft, weighted_examples

    final = out / "warmup" / "final"
    if (final / "config.json").is_file():
        return final
    # Every well-formed teacher episode, wrong verdicts included: the noise is the point.
    trajs = [t for t in read_trajectories(trajectories) if not t.error and t.verdict.format_ok]
    if r.teacher_comparison_copies:
        from factrl.teachers.haris import comparison_copies

        copies, missing = comparison_copies(trajs, seed=r.teacher_seed)
        _say(f"warm-up: {len(copies)} comparison copies ({missing} episodes with no other value to swap in)")
        trajs = [*trajs, *copies]
    path = resolve_model_path(r.model)
    examples, skipped = weighted_examples(trajs, AutoTokenizer.from_pretrained(path),
                                          decision_weight=r.sft_decision_weight, max_length=1024,
                                          comparison_weight=r.sft_comparison_weight)
    _say(f"warm-up: {len(examples)} teacher episodes ({skipped} too long)")
    return train_weighted_sft(examples, path, out / "warmup", WeightedSFTSettings(
        learning_rate=r.sft_learning_rate, epochs=r.sft_epochs, decision_weight=r.sft_decision_weight,
        max_minutes=r.sft_max_minutes, max_length=1024, lora_layers=r.sft_lora_layers,
        tokens_per_batch=r.sft_tokens_per_batch, device=r.device, dtype=r.dtype, seed=r.sft_seed))


def _grpo(r: FactworldRecipe, out: Path, control: str) -> Path:
    from factrl.train.grpo import latest_checkpoint, train_grpo

    cfg = _grpo_config(r, out, control)
    if cfg.env.name == "haris":
        from factrl.recipes import factworld_haris

        return factworld_haris.grpo(cfg)
    run = Path(cfg.output_dir)
    if (run / "final" / "config.json").is_file():
        return run / "final"
    _say(f"GRPO ({control}): {cfg.grpo.max_steps} updates, checkpoints every {cfg.grpo.save_steps}")
    return train_grpo(cfg, resume=latest_checkpoint(run) is not None)


def _stage_models(r: FactworldRecipe, out: Path, only: str | None = None) -> dict[str, Path]:
    """Name -> model directory of every stage to evaluate (checkpoints merged on demand);
    ``only``: the warm-up (and base) with the real run's stages, or one control's."""
    stages: dict[str, Path] = {}
    if only not in (None, "none"):
        return _run_stages(r, out, only, stages)
    if r.eval_base:
        from factrl.lm.loader import resolve_model_path

        stages["base"] = Path(resolve_model_path(r.model))
    stages["warmup"] = out / "warmup" / "final"
    for control in ("none",) if only == "none" else ("none", *r.controls):
        _run_stages(r, out, control, stages)
    return stages


def _run_stages(r: FactworldRecipe, out: Path, control: str, stages: dict[str, Path]) -> dict[str, Path]:
    """Add the evaluated checkpoints of one GRPO run (real or control) that exist."""
    cfg = _grpo_config(r, out, control)
    if cfg.env.name == "haris":  # coordinated stages: (reasoner, search agent) pairs
        from factrl.recipes import factworld_haris

        stages.update(factworld_haris.stages(cfg, out, control, out / "warmup" / "final", r.checkpoints))
        return stages
    from factrl.recipes.checkpoints import last_step, merged_model, saved_marks

    run = Path(cfg.output_dir)
    steps = cfg.grpo.max_steps
    done = last_step(run)  # a time budget can end a run before max_steps
    marks = saved_marks(run, steps, r.checkpoints, done)
    if (run / "final" / "config.json").is_file() or (run / "final" / "adapter_config.json").is_file():
        marks.append(done)
    for m in marks if control == "none" else marks[-1:]:
        name = ("grpo" if control == "none" else f"control-{control}") + f"@{round(100 * m / steps)}%"
        src = run / "final" if m == done else run / f"checkpoint-{m}"
        stages[name] = merged_model(src, out / "warmup" / "final", out / "models" / name.replace("@", "-").replace("%", "pct"))
    return stages


def recipe_json(r: FactworldRecipe) -> dict[str, Any]:
    """The settings as ``recipe.json`` records them (tuples as lists)."""
    d = asdict(r)
    d["checkpoints"] = list(r.checkpoints)
    d["controls"] = list(r.controls)
    return d


def run_recipe(r: FactworldRecipe, out: Path | str, *, stages: tuple[str, ...] = STAGES,
               runs: tuple[str, ...] | None = None, side_by_side: bool = False,
               fork_from: Path | str | None = None) -> dict[str, Any]:
    """Run (or resume) the recipe's ``stages`` in order; returns the report when it ran.
    ``runs`` limits the GRPO runs trained and evaluated to these names ("none" = the real
    one, or controls of ``r.controls``), so runs can go in parallel processes;
    ``side_by_side`` starts those processes itself (cores split, memory-bounded);
    ``fork_from`` first copies another run's stages up to the warm-up
    (:mod:`factrl.recipes.fork`)."""
    from factrl.runs.info import write_json_atomic
    from factrl.train.controls import check_control

    for c in r.controls:
        if check_control(c) == "none":
            raise ValueError("controls name broken trainers; 'none' is the real one and always runs")
    bad = [s for s in stages if s not in STAGES]
    if bad:
        raise ValueError(f"unknown stage(s) {', '.join(bad)}; stages are {', '.join(STAGES)}")
    if r.teacher_reasoning not in ("quote", "compare"):
        raise ValueError(f"teacher_reasoning must be 'quote' or 'compare', got {r.teacher_reasoning!r}")
    from factrl.recipes.noisy_teacher import ERRORS
    from factrl.teachers.haris import MISSED_HOP

    if r.teacher_errors not in ERRORS:
        raise ValueError(f"teacher_errors must be one of {', '.join(ERRORS)}, got {r.teacher_errors!r}")
    if r.teacher_missed_hop not in MISSED_HOP:
        raise ValueError(f"teacher_missed_hop must be one of {', '.join(MISSED_HOP)}, got {r.teacher_missed_hop!r}")
    out = Path(out)
    if fork_from is not None:  # after the checks above, before anything is recorded
        from factrl.recipes.fork import fork_run

        copied = fork_run(Path(fork_from), out, recipe_json(r), recipe_json(FactworldRecipe()))
        _say(f"forked from {fork_from}: " + (f"copied {', '.join(copied)}" if copied else "resuming the fork"))
    out.mkdir(parents=True, exist_ok=True)
    recorded = out / "recipe.json"
    if recorded.is_file():
        from factrl.recipes.settings import changed_settings

        changed = changed_settings(json.loads(recorded.read_text()), recipe_json(r), recipe_json(FactworldRecipe()))
        if changed:
            raise ValueError(f"{out} holds a recipe run with other settings ({', '.join(changed)}); use another --out")
    write_json_atomic(recorded, recipe_json(r))  # parallel processes of one run read it as it is written
    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(name: str, fn: Any, *a: Any) -> Any:
        t = time.perf_counter()
        res = fn(*a)
        timings[name] = round(timings.get(name, 0.0) + time.perf_counter() - t, 1)  # warm-up: evaluated, then re-read
        return res

    if "worlds" in stages:
        timed("worlds", _worlds, r, out)
    if "teach" in stages or "warmup" in stages:
        traj = out / "teach" / "trajectories.jsonl"
        if "teach" in stages:
            traj = timed("teach", _teach, r, out)
        if "warmup" in stages:
            timed("warmup", _warmup, r, out, traj)
    # The real run first, evaluated at once (the warm-up too), then each control: partial
    # results are on disk as early as possible.
    chosen = ("none", *r.controls) if runs is None else tuple(runs)
    unknown = [x for x in chosen if x not in ("none", *r.controls)]
    if unknown:
        raise ValueError(f"unknown run(s) {', '.join(unknown)}: 'none' or one of the controls {', '.join(r.controls) or '(none)'}")
    report = None
    if "eval" in stages and "none" in chosen:  # the starting point(s) first: a weak warm-up shows at once
        from factrl.lm.loader import resolve_model_path

        base = Path(resolve_model_path(r.model)) if r.eval_base else None
        for name, model in (("base", base), ("warmup", out / "warmup" / "final")):
            if model is not None and (model / "config.json").is_file():
                timed(f"eval-{name}", _evaluate, r, out, name, model)
    parallel = tuple(s for s in ("grpo", "eval") if s in stages)
    if side_by_side and len(chosen) > 1 and parallel:  # each run in its own process (recipes.side_by_side)
        from factrl.recipes.side_by_side import run_side_by_side

        timings.update(run_side_by_side(out, chosen, parallel))
        chosen = ()
    for control in chosen:
        if "grpo" in stages:
            timed(f"grpo-{control}", _grpo, r, out, control)
        if "eval" in stages:
            for name, model in _stage_models(r, out, only=control).items():
                timed(f"eval-{name}", _evaluate, r, out, name, model)
            if control == "none":  # the checkpoint to report, picked on the validation world
                timed("eval-validation", validate, r, out, _stage_models(r, out, only="none"))
    if "report" in stages:
        from factrl.recipes.factworld_report import write_report

        report = write_report(r, recipe_json(r), out, _stage_models(r, out))
    log = out / "timings.jsonl"
    with log.open("a") as fh:
        fh.write(json.dumps({"stages": list(stages), "seconds": timings, "total": round(time.perf_counter() - t0, 1)}) + "\n")
    _say(f"done in {time.perf_counter() - t0:.0f}s: {out / 'report.md' if report else out}")
    return report or {}
