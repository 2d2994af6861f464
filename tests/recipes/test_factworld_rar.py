"""The factworld recipe with Binary RAR's preset: the prompts show the entity's notes,
the teacher restates them (swapping a share of stated values: contradictions the exact
verifier catches), and the report gives the contradiction rate and the informative share
with paired tests against the warm-up."""

import json
import shutil

import pytest

from factrl.datasets.factworld import FactWorld
from factrl.recipes.factworld import FactworldRecipe, _grpo_config, heldout_claims, run_recipe
from factrl.recipes.factworld_report import write_report
from factrl.runs.trajectories import read_trajectories

TINY = dict(preset="binary_rar_factworld_cpu", entities=40, claims=60, heldout_claims=20, teacher_claims=24,
            device="cpu")


def _teach(tmp_path, name, **kw):
    out = tmp_path / name
    run_recipe(FactworldRecipe(**TINY, **kw), out, stages=("worlds", "teach"))
    return out, read_trajectories(out / "teach" / "trajectories.jsonl")


def test_the_recipe_trains_and_evaluates_on_the_worlds_prompts(tmp_path):
    r = FactworldRecipe(**TINY)
    run_recipe(r, tmp_path, stages=("worlds",))
    cfg = _grpo_config(r, tmp_path, "none")
    assert (cfg.data.dataset, cfg.data.data_dir) == ("rar_prompts", str(tmp_path / "world" / "rar"))
    assert cfg.reward.name == "rar_factworld" and cfg.reward.params["world"] == str(tmp_path / "world")
    held = heldout_claims(r, tmp_path)
    assert len(held) == 20 and all(c.meta["kind"] == "long" and c.meta["documents"] for c in held)
    assert all(c.id.startswith("fw202-rar-") for c in held)  # the held-out world's own prompts


def test_the_cross_encoder_reward_replaces_the_exact_one_in_grpo_only(tmp_path):
    """``--from binary_rar_verifier``: GRPO's reward is ``rar`` with ``factrl-verifier``
    (no world handed to it), while the held-out figures stay the exact verifier's."""
    from factrl.recipes.factworld_eval import exact_reward
    from factrl.recipes.named import read_recipe_source

    fields, overrides = read_recipe_source("binary_rar_verifier")
    assert (fields["preset"], fields["train_short"], overrides["reward.verifier"]) == (
        "binary_rar_factworld_cpu", True, "factrl-verifier")
    r = FactworldRecipe(**{**fields, **TINY, "train_short": False}, grpo_overrides=overrides)
    run_recipe(r, tmp_path, stages=("worlds",))
    cfg = _grpo_config(r, tmp_path, "none")
    assert (cfg.reward.name, cfg.reward.verifier) == ("rar", "factrl-verifier")
    assert cfg.reward.params == {"k": 3, "chunk_tokens": 128, "min_documents": 1, "nonstop_penalty": False}
    assert exact_reward(r, tmp_path / "heldout").name == "rar_factworld"



    out, clean = _teach(tmp_path, "clean", teacher_noise=0.0)
    assert len(clean) == 24 and all(t.verdict.format_ok and not t.error for t in clean)
    assert "Notes:" in clean[0].prompt[0].content and clean[0].claim.meta["entity"] in clean[0].prompt[0].content
    assert all(t.reward.total == 1.0 and t.reward.components["supported_sentences"] >= 1 for t in clean)
    _, noisy = _teach(tmp_path, "noisy", teacher_noise=1.0)
    contradicted = [t for t in noisy if t.reward.total == 0.0]
    assert len(contradicted) >= 18  # nearly every response states a swapped value
    world = FactWorld.load(out / "world")
    swapped = [j for t in contradicted for j in world.check_text(t.meta["response"]) if j.verdict == "contradicted"]
    assert swapped and all(j.expected and j.asserted != j.expected for j in swapped)


def test_the_report_gives_contradiction_rate_and_informative_share_with_paired_tests(tmp_path):
    clean, _ = _teach(tmp_path, "clean", teacher_noise=0.0)
    noisy, _ = _teach(tmp_path, "noisy", teacher_noise=1.0)
    out = tmp_path / "report"
    shutil.copytree(noisy / "teach", out / "eval" / "warmup")
    shutil.copytree(clean / "teach", out / "eval" / "grpo-100pct")
    result = write_report(FactworldRecipe(**TINY), {}, out, {"warmup": None, "grpo@100%": None})
    warm, grpo = result["stages"]
    assert warm["contradiction_rate"] >= 0.75 and grpo["contradiction_rate"] == 0.0
    assert grpo["fixed_vs_warmup"] >= 18 and grpo["broken_vs_warmup"] == 0 and grpo["mcnemar_p"] < 0.001
    assert grpo["informative"] == 1.0 and grpo["informative_broken"] == 0
    # the same notes restated: as many facts said, the wrong ones now right
    assert grpo["contradicted_sentences"] == 0.0 and grpo["contradicted_sentences_p"] < 0.01
    assert grpo["supported_sentences"] > warm["supported_sentences"]
    text = (out / "report.md").read_text()
    assert "contradiction rate" in text and "24 prompts" in text
    json.dumps(result)  # JSON-ready


def test_a_prompt_without_notes_is_a_recorded_failure_not_a_crash():
    from factrl.envs.rar import RarEnv
    from factrl.lm.scripted import ScriptedLM
    from factrl.rollout import RolloutConfig, run_episodes
    from factrl.types import Claim

    bare = Claim(id="bare", text="Describe X.", meta={"kind": "long", "documents": []})
    noted = Claim(id="noted", text="Describe X.", meta={"kind": "long", "documents": [{"id": "x", "text": "X is a city."}]})
    trajs = run_episodes(lambda: RarEnv(show_documents=True), [bare, noted], ScriptedLM(lambda ctx: "X is a city."),
                         RolloutConfig(temperature=0.0, max_new_tokens=32, max_total_tokens=32), score=False)
    by_id = {t.claim_id: t for t in trajs}
    assert "no documents to show" in by_id["bare"].error
    assert by_id["noted"].error is None and by_id["noted"].prompt[0].content == "Notes:\nX is a city.\n\nDescribe X."


def test_held_out_decoding_samples_at_the_recipes_temperature_with_its_seed(tmp_path, fake_evaluation):
    from factrl.recipes import factworld

    for temperature, seed in ((0.8, 3), (0.0, None)):
        r = FactworldRecipe(**TINY, eval_temperature=temperature, eval_seed=3)
        run_recipe(r, tmp_path / str(temperature), stages=("worlds",))
        factworld._evaluate(r, tmp_path / str(temperature), "warmup", tmp_path / "model")
        seen = fake_evaluation[-1]
        assert (seen["rollout"].temperature, seen["rollout"].seed) == (temperature, seed)
        assert seen["run_info"]["temperature"] == temperature and len(seen["claims"]) == 20
        assert seen["reward"].name == "rar_factworld"  # the held-out world's exact verifier


def test_a_response_that_only_names_the_type_is_not_informative_even_in_an_old_evaluation(tmp_path):
    from factrl.runs.trajectories import TRAJ_FILE

    out, clean = _teach(tmp_path, "clean", teacher_noise=0.0)
    shutil.copytree(out / "teach", out / "eval" / "warmup")
    shutil.rmtree(out / "heldout")  # the report re-reads with the held-out world: here the teacher's own
    shutil.copytree(out / "world", out / "heldout")
    typed = []
    for i, t in enumerate(clean):  # an evaluation written before supported_facts existed: every other
        # response only names the type ("X is a person.": true, and says nothing asked), the rest are the teacher's
        response = f"{t.claim.meta['entity']} is a {t.claim.meta['entity_type']}." if i % 2 else t.meta["response"]
        parts = {k: v for k, v in t.reward.components.items() if k != "supported_facts"}
        typed.append(t.model_copy(update={"meta": {**t.meta, "response": response},
                                          "reward": t.reward.model_copy(update={"components": parts})}))
    (out / "eval" / "grpo-100pct").mkdir(parents=True)
    (out / "eval" / "grpo-100pct" / TRAJ_FILE).write_text("".join(t.model_dump_json() + "\n" for t in typed))
    (out / "eval" / "grpo-100pct" / "metrics.json").write_text("{}")
    result = write_report(FactworldRecipe(**TINY), {}, out, {"warmup": None, "grpo@100%": None})
    warm, grpo = result["stages"]
    assert warm["informative"] == 1.0 and warm["supported_facts"] >= 1
    assert grpo["informative"] == 0.5 and grpo["informative_broken"] == 12  # re-read with the held-out world
    assert 0 < grpo["supported_facts"] < warm["supported_facts"] and grpo["supported_facts_p"] < 0.01


def _stage_from(src, dest, contradicted=0, facts=None):
    """A validation evaluation made from teacher episodes: the first ``contradicted`` prompts
    marked contradicted, and with ``facts`` every response's facts beyond the type set to it
    (0: a policy that states only the entity's type)."""
    dest.mkdir(parents=True)
    shutil.copy(src / "metrics.json", dest / "metrics.json")
    rows = []
    for i, line in enumerate((src / "trajectories.jsonl").read_text().splitlines()):
        row = json.loads(line)
        comp = row["reward"]["components"]
        if i < contradicted:
            comp["no_contradiction"] = 0.0
        if facts is not None:
            comp["supported_facts"] = float(facts)
        rows.append(json.dumps(row))
    (dest / "trajectories.jsonl").write_text("\n".join(rows) + "\n")


def test_the_validation_pick_stops_early_where_facts_per_response_fall_as_the_paper_stops_on_utility(tmp_path):
    from factrl.recipes.factworld_eval import eval_dir, pick

    clean, _ = _teach(tmp_path, "clean", teacher_noise=0.0)
    noisy, _ = _teach(tmp_path, "noisy", teacher_noise=1.0)
    r = FactworldRecipe(**TINY, val_claims=24)
    out = tmp_path / "run"
    stages = {"warmup": None, "grpo@33%": None, "grpo@67%": None, "grpo@100%": None}
    # warm-up: contradicts itself; @33: fewer contradictions, facts kept; @67 and @100: never
    # contradicted because they say nothing beyond the type
    _stage_from(noisy / "teach", eval_dir(r, out, "warmup", "validation"))
    _stage_from(clean / "teach", eval_dir(r, out, "grpo@33%", "validation"), contradicted=6)
    _stage_from(clean / "teach", eval_dir(r, out, "grpo@67%", "validation"), facts=0)
    _stage_from(clean / "teach", eval_dir(r, out, "grpo@100%", "validation"), facts=0)
    chosen = pick(r, out, stages)
    v, stop = chosen["validation"], chosen["utility_stop"]
    assert v["grpo@67%"]["right"] == v["grpo@100%"]["right"] == 24 > v["grpo@33%"]["right"] == 18 > v["warmup"]["right"]
    assert v["warmup"]["facts"] > 0 and v["grpo@67%"]["facts"] == 0.0
    assert stop["stopped_at"] == "grpo@67%" and chosen["picked"] == "grpo@33%"  # not the one that says nothing
    assert stop["floor"] == pytest.approx(0.9 * v["warmup"]["facts"])
    # with no limit on the drop the pick is by contradictions alone: the empty checkpoint
    assert pick(FactworldRecipe(**TINY, val_claims=24, val_utility_drop=1.0), out, stages)["picked"] == "grpo@67%"
    # a stopped run stays stopped: a later checkpoint that states facts again cannot be picked
    shutil.rmtree(eval_dir(r, out, "grpo@100%", "validation"))
    _stage_from(clean / "teach", eval_dir(r, out, "grpo@100%", "validation"))
    chosen = pick(r, out, stages)
    assert chosen["validation"]["grpo@100%"]["right"] == 24 and chosen["picked"] == "grpo@33%"
    # the report names the stop and the pick's held-out figures
    for name, src in (("warmup", noisy), ("grpo@33%", clean)):
        shutil.copytree(src / "teach", eval_dir(r, out, name))
    result = write_report(r, {}, out, stages)
    assert result["selection"]["utility_stop"]["stopped_at"] == "grpo@67%"
    text = (out / "report.md").read_text()
    assert "| grpo@67% (stopped: utility) | 0.000 |" in text and "| grpo@100% (stopped: utility) |" in text
    assert "| grpo@33% (picked) | 0.250 |" in text
    assert "Utility early stop: grpo@67% is the first checkpoint with fewer than" in text
    assert "**Picked: grpo@33%**, held-out contradiction rate 0.000" in text and "contradictions removed" in text


def test_without_a_utility_drop_no_checkpoint_is_stopped(tmp_path):
    from factrl.recipes.factworld_eval import eval_dir, pick

    clean, _ = _teach(tmp_path, "clean", teacher_noise=0.0)
    r = FactworldRecipe(**TINY, val_claims=24)
    out = tmp_path / "run"
    _stage_from(clean / "teach", eval_dir(r, out, "warmup", "validation"), contradicted=12)
    _stage_from(clean / "teach", eval_dir(r, out, "grpo@100%", "validation"), contradicted=3)
    chosen = pick(r, out, {"warmup": None, "grpo@100%": None})
    assert chosen["utility_stop"]["stopped_at"] is None and chosen["picked"] == "grpo@100%"
    with pytest.raises(ValueError, match="val_utility_drop must be float"):
        FactworldRecipe(**TINY, val_utility_drop="a lot")
    with pytest.raises(ValueError, match=r"share in \[0, 1\], got 10.0"):
        FactworldRecipe(**TINY, val_utility_drop=10)


def test_train_short_trains_on_long_prompts_and_answerable_short_questions_alternating(tmp_path):
    from factrl.datasets import load_dataset
    from factrl.protocol.rar import matches_gold

    r = FactworldRecipe(**TINY | {"teacher_claims": 30}, train_short=True, teacher_noise=0.0)
    run_recipe(r, tmp_path, stages=("worlds", "teach"))
    cfg = _grpo_config(r, tmp_path, "none")
    assert cfg.data.data_dir == str(tmp_path / "world" / "rar_mix")
    mixed = load_dataset("rar_prompts", tmp_path / "world" / "rar_mix", "train").claims
    long = load_dataset("rar_prompts", tmp_path / "world" / "rar", "train").claims
    assert [c.meta["kind"] for c in mixed[:4]] == ["long", "short", "long", "short"]
    assert [c.id for c in mixed if c.meta["kind"] == "long"] == [c.id for c in long]
    assert all(c.meta["answerable"] for c in mixed if c.meta["kind"] == "short")
    before = (tmp_path / "world" / "rar_mix" / "train.jsonl").read_bytes()
    run_recipe(r, tmp_path, stages=("worlds",))
    assert (tmp_path / "world" / "rar_mix" / "train.jsonl").read_bytes() == before  # the same world, the same bytes
    taught = read_trajectories(tmp_path / "teach" / "trajectories.jsonl")
    short = [t for t in taught if t.claim.meta["kind"] == "short"]
    assert short and len(short) < len(taught)
    assert all(matches_gold(t.meta["response"], t.claim.meta["answers"]) and t.meta["correct"] for t in short)
    assert all(t.reward.total == 1.0 for t in short)


def test_train_short_is_refused_for_an_agent_without_short_questions(tmp_path):
    r = FactworldRecipe(preset="veri_r1_factworld_offline_cpu", entities=40, claims=120, heldout_claims=30,
                        device="cpu", train_short=True)
    with pytest.raises(ValueError, match="train_short is Binary RAR's"):
        run_recipe(r, tmp_path, stages=("worlds",))
    assert not (tmp_path / "world").exists()
