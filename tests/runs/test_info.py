"""run.json: a run recorded under an environment's alias resumes under its canonical record."""

import json

import pytest

from factrl.runs.info import RunMismatchError, check_run_info


def test_a_run_recorded_under_an_alias_resumes_under_the_canonical_agent(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"agent": {"name": "veri_r1_offline", "params": {}}, "model": "m"}))
    check_run_info(path, {"agent": {"name": "veri_r1", "params": {"mode": "offline"}}, "model": "m"}, force=False)
    assert json.loads(path.read_text())["agent"] == {"name": "veri_r1", "params": {"mode": "offline"}}
    with pytest.raises(RunMismatchError, match="agent"):
        check_run_info(path, {"agent": {"name": "veri_r1", "params": {"mode": "online"}}, "model": "m"}, force=False)


def test_json_is_replaced_whole_never_left_half_written(tmp_path) -> None:
    from factrl.runs.info import write_json_atomic

    path = tmp_path / "recipe.json"
    path.write_text('{"old": 1}\n')
    write_json_atomic(path, {"new": [1, 2]})
    assert json.loads(path.read_text()) == {"new": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["recipe.json"]  # no temporary file left behind


def test_a_run_from_before_the_turn_cache_resumes_with_it_and_a_dtype_change_is_still_refused(tmp_path):
    path = tmp_path / "run.json"
    before = {"model": "m", "dtype": "bfloat16", "max_batch_size": 32}  # recorded before turn_cache_gb existed
    path.write_text(json.dumps(before))
    check_run_info(path, {**before, "turn_cache_gb": 2.0}, force=False)
    check_run_info(path, {**before, "turn_cache_gb": 0.0}, force=False)
    check_run_info(path, {**before, "turn_cache_gb": 2.0, "cpu_attention": "float32"}, force=False)
    with pytest.raises(RunMismatchError, match="dtype"):
        check_run_info(path, {**before, "dtype": "float32", "turn_cache_gb": 0.0}, force=False)
