"""Does factrl's GRPO teach? A small Veri-R1 recipe on a tiny generated world, trained on
the CPU from a noisy teacher's warm-up, evaluated on claims of another world seed.

The margin and the control's limit were fixed here before the test was first run. Slow
(20 minutes on the 2-core box): ``pytest -m slow tests/learning``. It fails today: the
figures of its first run are in docs/benchmarks.md ("Does the RL teach?")."""

import pytest

pytest.importorskip("torch")

from factrl.recipes.factworld import FactworldRecipe, run_recipe  # noqa: E402

MARGIN = 0.10  # held-out label accuracy GRPO must add to its warm-up
CONTROL = "flip_advantage"  # advantages with the sign flipped: must not gain MARGIN / 2

RECIPE = FactworldRecipe(
    preset="veri_r1_factworld_offline_cpu", entities=60, claims=300, heldout_claims=60,
    teacher_claims=120, teacher_noise=0.5, sft_learning_rate=5e-4, sft_epochs=2.0, sft_max_minutes=4.0,
    checkpoints=(1.0,), controls=(CONTROL,), device="cpu", dtype="float32",
    grpo_overrides={"grpo.max_steps": 8, "grpo.max_minutes": 5, "grpo.prompts_per_generation": 2,
                    "grpo.prompts_per_update": 2, "rollout.batch_size": 12, "env.context_sentences": 2,
                    "rollout.max_new_tokens": 96, "rollout.max_total_tokens": 96},
)


def _last(stages: dict[str, float], prefix: str) -> float:
    """The accuracy of the run's last checkpoint (a time budget may stop it before 100 %)."""
    named = sorted((int(name.split("@")[1].rstrip("%")), acc) for name, acc in stages.items() if name.startswith(prefix))
    assert named, f"no {prefix} stage evaluated: {sorted(stages)}"
    return named[-1][1]


@pytest.mark.slow
def test_grpo_beats_its_warmup_on_a_held_out_world_and_the_sign_flipped_control_does_not(tmp_path) -> None:
    report = run_recipe(RECIPE, tmp_path / "run")
    acc = {row["stage"]: row["accuracy"] for row in report["stages"]}
    warm, real, control = acc["warmup"], _last(acc, "grpo@"), _last(acc, f"control-{CONTROL}@")
    assert real >= warm + MARGIN, f"GRPO {real:.3f} vs warm-up {warm:.3f}: {report['stages']}"
    assert control < warm + MARGIN / 2, f"control {control:.3f} vs warm-up {warm:.3f}: {report['stages']}"
