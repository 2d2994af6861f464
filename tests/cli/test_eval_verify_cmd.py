"""``factrl verify`` and ``factrl eval`` end to end with a tiny real model."""

import json

import pytest
from typer.testing import CliRunner

from factrl.cli import _load_commands, app

from _support import REPO, LockHolderProcess

pytest.importorskip("torch")
_load_commands()
runner = CliRunner()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model
    from factrl.retrieval.index import build_index

    tmp = tmp_path_factory.mktemp("cli")
    model = build_tiny_model(tmp / "tiny", layers=1, hidden=32, heads=2)
    index = tmp / "index"
    build_index(REPO / "tests" / "fixtures" / "mini_corpus.jsonl", index, progress=False)
    claims = tmp / "claims.jsonl"
    claims.write_text("".join(json.dumps({"id": f"c{i}", "claim": f"Claim number {i} about rivers.", "label": lab}) + "\n"
                              for i, lab in enumerate(["SUPPORT", "REFUTE", "NEI", "SUPPORT"])))
    return model, index, claims


def test_verify_json(setup):
    model, index, _ = setup
    r = runner.invoke(app, ["verify", "Rivers flow to the sea.", "--index", str(index), "--model", str(model),
                            "--json", "--max-new-tokens", "8", "--trajectory"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["claim"] == "Rivers flow to the sea."
    assert set(out) >= {"label", "evidence", "format_ok", "format_errors", "searches", "trajectory"}
    assert out["trajectory"]["turns"][0]["source"] == "model"
    # A random model never answers in protocol: the verdict is forced, and says so.
    assert out["forced"] and out["label"] in ("SUPPORT", "REFUTE", "NOT ENOUGH INFO") and not out["format_ok"]
    shown = set(out["trajectory"]["retrieved_ids"])
    assert all(e["id"] in shown for e in out["evidence"])
    r = runner.invoke(app, ["verify", "Rivers flow to the sea.", "--index", str(index), "--model", str(model),
                            "--json", "--max-new-tokens", "8", "--no-force-answer"])
    out = json.loads(r.stdout)
    assert out["label"] is None and not out["forced"]
    r = runner.invoke(app, ["verify", "Rivers flow to the sea.", "--index", str(index), "--model", str(model),
                            "--max-new-tokens", "8"])
    assert "(forced: no labelled <answer> in the episode" in r.stdout


def test_verify_and_eval_apply_the_repetition_guard(setup, tmp_path):
    """--no-repeat-ngram reaches the model: no turn repeats a 2-gram of its own, and
    eval records the setting with the run."""
    model, index, claims = setup
    r = runner.invoke(app, ["verify", "Rivers flow to the sea.", "--index", str(index), "--model", str(model),
                            "--json", "--max-new-tokens", "24", "--trajectory", "--no-repeat-ngram", "2"])
    assert r.exit_code == 0, r.output
    for turn in json.loads(r.stdout)["trajectory"]["turns"]:
        if turn["source"] == "model":
            ids = turn["token_ids"]
            grams = [tuple(ids[i : i + 2]) for i in range(len(ids) - 1)]
            assert len(grams) == len(set(grams)) and len(ids) > 4
    r = runner.invoke(app, ["eval", "--dataset", "jsonl", "--data-dir", str(claims), "--index", str(index),
                            "--model", str(model), "--out", str(tmp_path / "run"), "--max-new-tokens", "8",
                            "--limit", "1", "--no-repeat-ngram", "3"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "run" / "run.json").read_text())["no_repeat_ngram"] == 3


def test_verify_rejects_empty_claim(setup):
    model, index, _ = setup
    r = runner.invoke(app, ["verify", "   ", "--index", str(index), "--model", str(model)])
    assert r.exit_code != 0 and "empty" in r.output


def test_eval_writes_results_and_resumes(setup, tmp_path):
    model, index, claims = setup
    args = ["eval", "--dataset", "jsonl", "--data-dir", str(claims), "--index", str(index), "--model", str(model),
            "--max-new-tokens", "8", "--batch-size", "2", "--out", str(tmp_path)]
    r = runner.invoke(app, args + ["--limit", "2"])
    assert r.exit_code == 0, r.output
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 2
    r = runner.invoke(app, args)  # the rest of the claims; the first two are not redone
    assert r.exit_code == 0, r.output
    ids = [json.loads(x)["claim_id"] for x in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert ids == ["c0", "c1", "c2", "c3"]
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["n"] == 4 and set(m["per_label"]) <= {"SUPPORT", "REFUTE", "NOT ENOUGH INFO"}


def test_eval_bad_dataset_row_is_a_clear_error(setup, tmp_path):
    model, index, _ = setup
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "claim": "ok"}\n{"id": "b"}\n')
    r = runner.invoke(app, ["eval", "--dataset", "jsonl", "--data-dir", str(bad), "--index", str(index),
                            "--model", str(model), "--out", str(tmp_path / "run")])
    assert r.exit_code == 1
    assert "bad.jsonl:2" in r.output


def _eval_args(setup, out, data=None):
    model, index, claims = setup
    return ["eval", "--dataset", "jsonl", "--data-dir", str(data or claims), "--index", str(index),
            "--model", str(model), "--max-new-tokens", "8", "--batch-size", "2", "--out", str(out)]


def test_eval_corrupt_trajectories_line_is_a_one_line_error(setup, tmp_path):
    r = runner.invoke(app, _eval_args(setup, tmp_path) + ["--limit", "3"])
    assert r.exit_code == 0, r.output
    p = tmp_path / "trajectories.jsonl"
    lines = p.read_text().splitlines()
    lines[1] = "not json"
    p.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, _eval_args(setup, tmp_path))
    assert r.exit_code == 1
    assert r.exception is None or isinstance(r.exception, SystemExit)  # no traceback
    err = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and err[0].startswith(f"error: {p}:2: not a trajectory record")


def test_eval_on_a_directory_another_process_holds_fails_at_once(setup, tmp_path):
    holder = LockHolderProcess(tmp_path)
    try:
        r = runner.invoke(app, _eval_args(setup, tmp_path))
    finally:
        holder.release()
    assert r.exit_code == 1
    assert f"in use by another run (pid {holder.pid} on " in r.output
    assert not (tmp_path / "trajectories.jsonl").exists()


def test_eval_with_no_claims_is_a_clear_error(setup, tmp_path):
    r = runner.invoke(app, _eval_args(setup, tmp_path / "run") + ["--limit", "0"])
    assert r.exit_code == 1 and "error: no claims" in r.output
    assert not (tmp_path / "run").exists()


def test_eval_counts_skipped_rows(setup, tmp_path):
    data = tmp_path / "claims.jsonl"
    data.write_text('{"id": "a", "claim": "Rivers flow.", "label": "SUPPORT"}\n{"id": "b"}\n'
                    '{"id": "c", "claim": "Seas are salty.", "label": "NEI"}\n')
    r = runner.invoke(app, _eval_args(setup, tmp_path / "run", data) + ["--skip-bad-rows"])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["n"] == 2 and m["skipped_rows"] == 1
    assert json.loads((tmp_path / "run" / "run.json").read_text())["skipped_rows"] == 1
    assert "skipped" in (tmp_path / "run" / "report.md").read_text()


def test_verify_with_a_model_behind_an_openai_compatible_api(setup, tmp_path):
    """--model openai:MODEL --base-url URL: the episode's turns come from the HTTP server."""
    from fastapi import FastAPI, Request

    from _support import AppServers

    _, index, _ = setup
    seen = []
    fake = FastAPI()

    @fake.post("/v1/chat/completions")
    async def chat(request: Request):
        seen.append(await request.json())
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{
            "index": 0, "finish_reason": "stop", "stop_reason": "</answer>",
            "message": {"role": "assistant", "content": "<answer>\nLabel: NEI\nEvidence:\n"}}]}

    servers = AppServers()
    try:
        url = servers.start(fake) + "/v1"
        args = ["verify", "Rivers flow to the sea.", "--index", str(index), "--model", "openai:m", "--base-url", url,
                "--json", "--param", "mode=offline", "--lm-cache", str(tmp_path / "lm.sqlite")]
        r = runner.invoke(app, args)
        again = runner.invoke(app, args)
    finally:
        servers.stop()
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["error"] is None and out["label"] == "NOT ENOUGH INFO"
    assert len(seen) == 1 and seen[0]["model"] == "m" and seen[0]["stop"] == ["</search>", "</answer>"]
    assert again.exit_code == 0 and json.loads(again.stdout) == out  # answered from the cache
    bad = runner.invoke(app, ["verify", "x", "--index", str(index), "--model", "smollm2", "--base-url", url])
    assert bad.exit_code == 2 and "--base-url needs --model openai:MODEL" in bad.output
    bad = runner.invoke(app, ["verify", "x", "--index", str(index), "--model", "smollm2", "--lm-cache", "c.sqlite"])
    assert bad.exit_code == 2 and "--lm-cache needs --model openai:MODEL" in bad.output
    bad = runner.invoke(app, ["verify", "x", "--index", str(index), "--model", "smollm2", "--lm-timeout", "300"])
    assert bad.exit_code == 2 and "--lm-timeout needs --model openai:MODEL" in bad.output
    bad = runner.invoke(app, args + ["--no-repeat-ngram", "4"])  # an HTTP model cannot apply the guard
    assert bad.exit_code == 2 and "openai:m cannot apply it" in bad.output and len(seen) == 1


def test_eval_after_an_lm_outage_fails_loudly_then_runs_the_errored_episodes_again(setup, tmp_path):
    """Every episode failing is exit status 1 with the counts on stderr; the same command
    once the server is back runs those episodes again, and only those."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from _support import AppServers

    _, index, claims = setup
    state = {"down": True, "requests": 0}
    fake = FastAPI()

    @fake.post("/v1/chat/completions")
    async def chat(request: Request):
        await request.json()
        state["requests"] += 1
        if state["down"]:  # a 4xx is not retried: the outage costs no backoff here
            return JSONResponse({"error": {"message": "model not loaded"}}, status_code=400)
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{
            "index": 0, "finish_reason": "stop", "stop_reason": "</answer>",
            "message": {"role": "assistant", "content": "<plan>p</plan><answer>\nLabel: NEI\nEvidence:\n"}}]}

    servers = AppServers()
    try:
        url = servers.start(fake) + "/v1"
        args = ["eval", "--dataset", "jsonl", "--data-dir", str(claims), "--index", str(index), "--model", "openai:m",
                "--base-url", url, "--batch-size", "2", "--out", str(tmp_path / "run")]
        down = runner.invoke(app, args)
        state["down"] = False
        up = runner.invoke(app, args)
        after_up = json.loads((tmp_path / "run" / "metrics.json").read_text())
        again = runner.invoke(app, args)
    finally:
        servers.stop()
    assert down.exit_code == 1, down.output
    assert "episode errors: 4 of 4 episodes (generate/LMRequestError 4)" in down.stderr
    assert "error: every episode ended in an error (generate/LMRequestError 4)" in down.stderr
    assert up.exit_code == 0, up.output
    assert "running again 4 that ended in an LM error" in up.stderr and "episode errors" not in up.stderr
    records = [json.loads(x) for x in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert [r["claim_id"] for r in records] == ["c0", "c1", "c2", "c3"] and not any(r["error"] for r in records)
    m = after_up
    assert m["errors"] == 0 and m["errors_retried_this_run"] == 4 and m["duplicates_ignored"] == 0
    assert again.exit_code == 0 and state["requests"] == 8  # 4 refused, 4 answered, then nothing to run


def test_lm_options_pass_the_timeout_to_an_openai_model_only() -> None:
    import typer

    from factrl.cli._common import lm_options
    from factrl.lm.loader import load_lm

    opts = lm_options("openai:m", "http://127.0.0.1:9/v1", None, 300.0)
    assert opts == {"base_url": "http://127.0.0.1:9/v1", "timeout": 300.0}
    assert load_lm("openai:m", **opts).timeout == 300.0
    assert lm_options("smollm2", None, None, None) == {}
    with pytest.raises(typer.BadParameter, match="--lm-timeout needs --model openai:MODEL"):
        lm_options("smollm2", None, None, 5.0)


def test_verify_gives_a_sub_agent_role_its_own_model(setup, tmp_path):
    """--role-model searcher=openai:s: HARIS's search agent is served by its own model,
    the reasoner by --model; both answer through one OpenAI-compatible server here."""
    from fastapi import FastAPI, Request

    from _support import AppServers

    _, index, _ = setup
    seen = []
    fake = FastAPI()

    @fake.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append(body["model"])
        if body["model"] == "s":
            text = "<report>Rivers flow to the sea.</report>"
        elif seen.count("r") > 1:  # the reasoner's second turn comes after the report
            text = "<think>The report says so.</think>\n<verification>\\boxed{Support}</verification>"
        else:
            text = "<think>Ask.</think>\n<question>Where do rivers flow?</question>"
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [{
            "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}

    servers = AppServers()
    try:
        url = servers.start(fake) + "/v1"
        r = runner.invoke(app, ["verify", "Rivers flow to the sea.", "--index", str(index), "--agent", "haris",
                                "--model", "openai:r", "--role-model", "searcher=openai:s", "--base-url", url,
                                "--json"])
    finally:
        servers.stop()
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["error"] is None and out["label"] == "SUPPORT", out
    assert seen[0] == "r" and "s" in seen and seen[-1] == "r"
    bad = runner.invoke(app, ["verify", "x", "--index", str(index), "--role-model", "searcher"])
    assert bad.exit_code == 2 and "ROLE=MODEL" in bad.output


def test_verify_runs_on_the_requested_device_and_dtype(setup):
    model, index, _ = setup
    r = runner.invoke(app, ["verify", "Rivers flow to the sea.", "--index", str(index), "--model", str(model),
                            "--json", "--max-new-tokens", "4", "--device", "cpu", "--dtype", "bf16"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["runtime"] == {"device": "cpu", "dtype": "bfloat16", "max_batch_size": 32, "turn_cache_gb": 2.0, "cpu_attention": "native"}


def test_eval_records_device_dtype_and_batch_and_resumes_only_in_the_same_dtype(setup, tmp_path):
    """run.json says where the episodes ran; a resumption may move device or batch, not
    precision; a run recorded before these keys existed (float32) resumes as it was."""
    args = _eval_args(setup, tmp_path)[:-4] + ["--out", str(tmp_path)]  # no --batch-size: the device's
    r = runner.invoke(app, args + ["--limit", "1", "--dtype", "bfloat16"])
    assert r.exit_code == 0, r.output
    info = json.loads((tmp_path / "run.json").read_text())
    assert (info["device"], info["dtype"], info["max_batch_size"], info["batch_size"]) == ("cpu", "bfloat16", 32, 16)
    r = runner.invoke(app, args + ["--limit", "2"])  # auto: float32 here
    assert r.exit_code == 1 and "dtype: 'bfloat16' → 'float32'" in r.output
    r = runner.invoke(app, args + ["--limit", "2", "--dtype", "bf16", "--device", "cpu", "--batch-size", "40"])
    assert r.exit_code == 0, r.output
    info = json.loads((tmp_path / "run.json").read_text())
    assert (info["dtype"], info["batch_size"], info["max_batch_size"]) == ("bfloat16", 40, 40)
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 2
    old = tmp_path / "old"
    r = runner.invoke(app, args[:-1] + [str(old), "--limit", "1"])
    assert r.exit_code == 0, r.output
    legacy = {k: v for k, v in json.loads((old / "run.json").read_text()).items()
              if k not in ("device", "dtype", "max_batch_size", "batch_size")}
    (old / "run.json").write_text(json.dumps(legacy))
    r = runner.invoke(app, args[:-1] + [str(old), "--limit", "2"])
    assert r.exit_code == 0, r.output


def test_mode_is_a_deprecated_alias_of_the_param_and_runs_record_the_canonical_agent(setup, tmp_path):
    """--mode offline warns once and runs as --param mode=offline; --agent veri_r1_offline
    (an alias) runs and records the same agent: veri_r1 with mode=offline."""
    model, index, claims = setup
    base = ["eval", "--dataset", "jsonl", "--data-dir", str(claims), "--index", str(index), "--model", str(model),
            "--max-new-tokens", "4", "--batch-size", "2", "--limit", "1"]
    runs = {"mode": ["--mode", "offline"], "param": ["--param", "mode=offline"], "alias": ["--agent", "veri_r1_offline"]}
    agents = {}
    for name, extra in runs.items():
        r = runner.invoke(app, base + extra + ["--out", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        assert r.output.count("--mode is deprecated") == (1 if name == "mode" and not agents else 0)
        agents[name] = json.loads((tmp_path / name / "run.json").read_text())["agent"]
    assert agents["mode"] == agents["param"] == agents["alias"] == {"name": "veri_r1", "params": {"mode": "offline"}}
    # an explicit --param wins over the deprecated flag
    r = runner.invoke(app, base + ["--mode", "online", "--param", "mode=offline", "--out", str(tmp_path / "both")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "both" / "run.json").read_text())["agent"]["params"] == {"mode": "offline"}


def test_only_an_agent_that_declares_answer_forcing_is_forced(setup):
    """Veri-R1 declares its "<answer>\\nLabel:" forcing; the direct baseline declares none,
    so its unanswered episode keeps no label instead of getting Veri-R1's answer appended."""
    from factrl.envs import EnvDeps, build
    from factrl.forced import answer_forcing
    from factrl.protocol.forcing import VERI_R1_FORCING

    assert answer_forcing(build("veri_r1", EnvDeps(retriever=object()))) is VERI_R1_FORCING
    assert answer_forcing(build("direct")) is None
    model, index, _ = setup
    r = runner.invoke(app, ["verify", "Rivers flow to the sea.", "--index", str(index), "--model", str(model),
                            "--agent", "direct", "--json", "--max-new-tokens", "8"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert not out["forced"] and (out["label"] is None or out["format_ok"])
