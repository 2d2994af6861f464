"""Does factrl's GRPO teach? A small Veri-R1 recipe on a generated world, trained on the
CPU from a teacher's warm-up, evaluated on claims of another world seed.

The margin and the control's limit were fixed here before the test was first run. The
warm-up is taught by a teacher that is wrong only at the conclusion
(``teacher_errors=verdict``): it sets the claimed and the stated value side by side and
reads them right (``Same`` / ``Different``), but on 70 % of the REFUTE claims concludes
SUPPORT anyway (``teacher_confusion=REFUTE->SUPPORT:0.7``). Its student reads the
evidence and, greedily, never answers REFUTE: only a signal from the gold label can make
its verdict follow its reading. The same recipe on held-out world seed 505 (150 claims):
warm-up 0.420, GRPO 0.593 (34 fixed / 8 broken, p = 7e-5; REFUTE 0 -> 34 of 50, the
reading kept), the sign-flipped control 0.340 (docs/benchmarks.md, "A warm-up wrong only
at the verdict"). Budgets are in steps, not minutes, so the result does not depend on the
machine's load. Slow: ``pytest -m slow tests/learning``. The real run and the control
train side by side, one process and one torch thread each (``side_by_side=True``): on the
idle 2-core box the test passed in 13 min 34 s, warm-up 0.356, GRPO 0.533 (22 fixed /
6 broken, p = 0.0037), control 0.344 (2026-11-29). One after the other on both cores, as before, the
same test took 14 min 54 s and 16 min 38 s in two runs (warm-up 0.322, GRPO 0.533, 25 / 6,
p = 0.0009, control 0.344); bf16 sums depend on the thread count and bf16 SFT is not
bit-reproducible, so figures move by a few claims between runs. In float32 (the test's
choice where the CPU has no bf16 units) 22 minutes idle one after the other: warm-up
0.378, GRPO 0.533, p = 0.0094, control 0.333 (deterministic). On the AMD EPYC box, after
TRL's LM head scored only the completion on the CPU and the second SFT epoch reused the
frozen blocks' states: 12 min 39 s, warm-up 0.322, GRPO 0.544 (27 / 7, p = 0.0008),
control 0.344 (2026-12-03; 15:55 before).

The recipe before this one (a clean but under-trained warm-up) passed on its own held-out
sample (+0.100) and gained no more than its control on two fresh ones."""

import pytest

pytest.importorskip("torch")

from factrl.recipes.factworld import FactworldRecipe, run_recipe  # noqa: E402
from factrl.retrieval.encoders import native_bf16  # noqa: E402

# bf16 mixed precision where the CPU multiplies bf16 natively (AVX512-BF16, AMX): about
# twice as fast; float32 elsewhere. Both were run with the margin below (figures above).
DTYPE = "bfloat16" if native_bf16(cpu=True) else "float32"
MARGIN = 0.10  # held-out label accuracy GRPO must add to its warm-up
CONTROL = "flip_advantage"  # advantages with the sign flipped: must not gain MARGIN / 2

RECIPE = FactworldRecipe(
    preset="veri_r1_factworld_offline_cpu", entities=100, claims=900, heldout_claims=90, paraphrase_rate=0.0,
    teacher_claims=240, teacher_noise=0.0, teacher_reasoning="compare", teacher_confusion="REFUTE->SUPPORT:0.7",
    teacher_errors="verdict", sft_learning_rate=1e-3, sft_epochs=2.0,
    sft_max_minutes=None, sft_tokens_per_batch=1024, sft_lora_layers=10,
    checkpoints=(1.0,), controls=(CONTROL,), device="cpu", dtype=DTYPE,
    grpo_overrides={"env.context_sentences": 3, "env.params.offline_lines": 3, "rollout.temperature": 0.8,
                    "rollout.max_new_tokens": 96, "rollout.max_total_tokens": 96, "model.lora_layers": 10,
                    "grpo.max_steps": 12, "grpo.max_minutes": None, "grpo.prompts_per_generation": 3,
                    "grpo.prompts_per_update": 3, "grpo.num_generations": 4, "grpo.micro_batch_size": 6,
                    "rollout.batch_size": 12, "grpo.learning_rate": 2e-4},
)
EPS = 1e-9  # accuracies are counts over the same claims: a gain of exactly MARGIN passes


def _last(stages: dict[str, float], prefix: str) -> float:
    """The accuracy of the run's last checkpoint."""
    named = sorted((int(name.split("@")[1].rstrip("%")), acc) for name, acc in stages.items() if name.startswith(prefix))
    assert named, f"no {prefix} stage evaluated: {sorted(stages)}"
    return named[-1][1]


@pytest.mark.slow
def test_grpo_beats_its_warmup_on_a_held_out_world_and_the_sign_flipped_control_does_not(tmp_path) -> None:
    report = run_recipe(RECIPE, tmp_path / "run", side_by_side=True)
    acc = {row["stage"]: row["accuracy"] for row in report["stages"]}
    warm, real, control = acc["warmup"], _last(acc, "grpo@"), _last(acc, f"control-{CONTROL}@")
    assert real - warm >= MARGIN - EPS, f"GRPO {real:.3f} vs warm-up {warm:.3f}: {report['stages']}"
    assert control - warm < MARGIN / 2, f"control {control:.3f} vs warm-up {warm:.3f}: {report['stages']}"
