"""``FactworldRecipe`` (through ``factrl.recipes.settings.check_settings``) refuses settings of the wrong type when it is made (the CLI's
``--recipe k=v`` gives text where JSON does not parse), not hours later in a stage."""

import pytest

from factrl.recipes.factworld import FactworldRecipe


def test_optional_settings_read_none_text_and_tuples_read_lists():
    r = FactworldRecipe(sft_max_minutes="None", sft_lora_layers="null", checkpoints=[0.5, 1.0], teacher_noise=0)
    assert r.sft_max_minutes is None and r.sft_lora_layers is None
    assert r.checkpoints == (0.5, 1.0)
    assert r.teacher_noise == 0.0 and isinstance(r.teacher_noise, float)


def test_a_number_for_a_text_setting_is_its_text():
    # ``--recipe hops=3`` reaches the recipe as the JSON number 3; hops is text ("1,2,3")
    assert FactworldRecipe(hops=3).hops == "3"
    with pytest.raises(ValueError, match="recipe setting hops must be str"):
        FactworldRecipe(hops=True)


@pytest.mark.parametrize(("setting", "value"), [("entities", "100x"), ("teacher_noise", "0.1"),
                                                ("sft_max_minutes", "soon"), ("eval_base", 1),
                                                ("heldout_claims", 2.5), ("grpo_overrides", "grpo.beta=0")])
def test_a_setting_of_the_wrong_type_is_refused_by_name(setting, value):
    with pytest.raises(ValueError, match=f"recipe setting {setting} must be"):
        FactworldRecipe(**{setting: value})


def test_a_run_recorded_before_a_setting_existed_resumes_and_another_seed_does_not():
    from dataclasses import asdict

    from factrl.recipes.settings import changed_settings

    defaults = asdict(FactworldRecipe())
    recorded = {k: v for k, v in defaults.items() if k != "sft_seed"}  # a recipe.json from before sft_seed
    assert changed_settings(recorded, asdict(FactworldRecipe()), defaults) == []
    assert changed_settings(recorded, asdict(FactworldRecipe(sft_seed=1)), defaults) == ["sft_seed"]
    # where it runs may change on resume; what its stages make may not
    assert changed_settings(defaults, asdict(FactworldRecipe(device="cpu", dtype="bfloat16")), defaults) == []
