import json

import pytest

from factrl.envs.veri_r1 import VeriR1Env
from factrl.evaluate import EmptyRunError, RunMismatchError, TrajectoryFileError, evaluate, read_trajectories
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import RolloutConfig
from factrl.types import Claim, EvidenceRef, Passage

from factrl.runs.lock import LOCK_FILE, RunLockedError

from _support import LockHolderProcess, WordOverlapRetriever

PASSAGES = [
    Passage(id=f"d{i}#0", doc_id=f"d{i}", title=f"Doc {i}", text=f"Fact number {i} holds.",
            sentence_ids=[f"d{i}_sentence_0"], sentences=[f"Fact number {i} holds."])
    for i in range(10)
]
CLAIMS = [
    Claim(id=f"c{i}", text=f"Fact number {i} holds.", label="SUPPORT",
          evidence=[EvidenceRef(id=f"d{i}_sentence_0")])
    for i in range(10)
]


def respond(context: str) -> str:
    if context.count("<information>") < 2:
        return "<plan>look it up</plan><search>" + context.rsplit("Verify the claim:\n", 1)[1].split("\n")[0] + "</search>"
    sid = context.rsplit("[[", 1)[1].split("]]")[0]
    return f"<think>found</think><answer>Label: SUPPORT\nEvidence: [[{sid}]]</answer>"


class CrashAfter(ScriptedLM):
    """Dies on the n-th generate call, like a killed process mid-run."""

    def __init__(self, n):
        super().__init__(respond)
        self.n = n

    def generate(self, prompts, config):
        if self.calls >= self.n:
            raise KeyboardInterrupt("simulated crash")
        return super().generate(prompts, config)


def run(lm, out, **kw):
    return evaluate(CLAIMS, lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), lm, out,
                    rollout=RolloutConfig(batch_size=3), run_info={"model": "scripted"}, **{"progress": False, **kw})


def test_eval_writes_metrics_and_trajectories(tmp_path):
    m = run(ScriptedLM(respond), tmp_path)
    assert m["n"] == 10 and m["label_acc"] == 1.0 and m["format_ok_rate"] == 1.0
    saved = json.loads((tmp_path / "metrics.json").read_text())
    for key in ["n", "label_acc", "verification_acc", "joint_acc", "evidence_score", "format_ok_rate", "per_label"]:
        assert key in saved
    assert (tmp_path / "report.md").read_text().strip()
    page = (tmp_path / "report.html").read_text()
    assert '<td class="num">10</td>' in page and page.count('"claim":"Fact number') == 10
    assert len(read_trajectories(tmp_path / "trajectories.jsonl")) == 10


def test_eval_resumes_without_losing_or_duplicating(tmp_path):
    # Batches of 3 episodes, 2 generate calls per batch: crash during the 3rd batch.
    with pytest.raises(KeyboardInterrupt):
        run(CrashAfter(5), tmp_path)
    first = [t.claim_id for t in read_trajectories(tmp_path / "trajectories.jsonl")]
    assert first == ["c0", "c1", "c2", "c3", "c4", "c5"]
    # A crash in the middle of writing a line leaves a torn tail: it must be redone.
    with (tmp_path / "trajectories.jsonl").open("a") as fh:
        fh.write('{"claim_id": "c6", "env": "veri_r1", "cla')
    lm = ScriptedLM(respond)
    m = run(lm, tmp_path)
    ids = [t.claim_id for t in read_trajectories(tmp_path / "trajectories.jsonl")]
    assert sorted(ids) == sorted(c.id for c in CLAIMS) and len(ids) == 10
    assert lm.calls == 4  # only c6..c9 were run again: 2 batches x 2 turns
    assert m["n"] == 10 and m["label_acc"] == 1.0


def test_eval_refuses_mixing_settings(tmp_path):
    run(ScriptedLM(respond), tmp_path)
    with pytest.raises(RunMismatchError, match="model"):
        evaluate(CLAIMS, lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path,
                 run_info={"model": "other"}, progress=False)


def test_corrupt_line_in_the_middle_is_an_error(tmp_path):
    p = tmp_path / "trajectories.jsonl"
    run(ScriptedLM(respond), tmp_path)
    lines = p.read_text().splitlines()
    lines[3] = "garbage"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"trajectories.jsonl:4"):
        read_trajectories(p)


def test_duplicate_claim_ids_rejected(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        evaluate([CLAIMS[0], CLAIMS[0]], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path, progress=False)


def test_second_run_on_a_locked_directory_fails_at_once(tmp_path):
    holder = LockHolderProcess(tmp_path)
    try:
        lm = ScriptedLM(respond)
        with pytest.raises(RunLockedError, match=rf"in use by another run \(pid {holder.pid} on "):
            run(lm, tmp_path)
        assert lm.calls == 0 and not (tmp_path / "trajectories.jsonl").exists()
    finally:
        holder.release()
    assert run(ScriptedLM(respond), tmp_path)["n"] == 10  # released: the next run goes ahead


def test_lock_left_by_a_killed_run_does_not_block(tmp_path):
    holder = LockHolderProcess(tmp_path)
    holder.kill()
    assert str(holder.pid) in (tmp_path / LOCK_FILE).read_text()  # the file stays behind
    m = run(ScriptedLM(respond), tmp_path)
    assert m["n"] == 10 and (tmp_path / LOCK_FILE).read_text() == ""


def test_duplicate_records_are_counted_once_first_wins(tmp_path):
    run(ScriptedLM(respond), tmp_path)
    p = tmp_path / "trajectories.jsonl"
    lines = p.read_text().splitlines()
    # Two later copies of c0 and c1 (as two unlocked runs used to write), both wrong
    dup = [line.replace('"label":"SUPPORT"', '"label":"REFUTE"', 1) for line in lines[:2]]
    assert all('"REFUTE"' in d for d in dup)
    p.write_text("\n".join(lines + dup) + "\n")
    m = run(ScriptedLM(respond), tmp_path)
    assert m["n"] == 10 and m["duplicates_ignored"] == 2 and m["label_acc"] == 1.0
    assert json.loads((tmp_path / "metrics.json").read_text())["duplicates_ignored"] == 2
    page = (tmp_path / "report.html").read_text()
    assert page.count('"id":"c0"') == 1 and page.count('"ok":true') == 10  # the first record of each


def test_report_html_shows_only_the_claims_evaluated(tmp_path):
    run(ScriptedLM(respond), tmp_path)
    evaluate(CLAIMS[:3], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path,
             run_info={"model": "scripted"}, progress=False)
    page = (tmp_path / "report.html").read_text()
    assert page.count('"claim":"Fact number') == 3 and '<td class="num">3</td>' in page


def test_no_claims_is_an_error_not_an_empty_run(tmp_path):
    with pytest.raises(EmptyRunError, match="no claims"):
        evaluate([], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path, progress=False)
    assert not (tmp_path / "trajectories.jsonl").exists()


def test_skipped_rows_reach_metrics_and_run_json(tmp_path):
    m = evaluate(CLAIMS[:2], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path,
                 run_info={"model": "scripted", "skipped_rows": 3}, progress=False)
    assert m["skipped_rows"] == 3 and m["duplicates_ignored"] == 0
    assert json.loads((tmp_path / "run.json").read_text())["skipped_rows"] == 3
    # A resumed run may skip a different number of rows (e.g. another --limit): not a mismatch
    m = evaluate(CLAIMS[:3], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path,
                 run_info={"model": "scripted", "skipped_rows": 1}, progress=False)
    assert m["n"] == 3 and m["skipped_rows"] == 1


def test_corrupt_line_error_is_one_line(tmp_path):
    p = tmp_path / "trajectories.jsonl"
    run(ScriptedLM(respond), tmp_path)
    lines = p.read_text().splitlines()
    lines[2] = '{"claim_id": "c2"}'
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TrajectoryFileError) as info:
        read_trajectories(p)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{p}:3: not a trajectory record (")


class Outage(ScriptedLM):
    """A server that is down (every generate call fails) for the calls numbered in ``down``."""

    def __init__(self, down):
        super().__init__(respond)
        self.down = set(down)

    def generate(self, prompts, config):
        self.calls += 1
        if self.calls in self.down:
            raise ConnectionError("server down")
        self.calls -= 1  # ScriptedLM counts this call itself
        return super().generate(prompts, config)


class StepFails(VeriR1Env):
    """An environment whose step raises (an error that is not the LM's)."""

    def step(self, model_text):
        raise ValueError("broken tool")


def test_episodes_that_ended_in_an_lm_error_run_again_on_resumption(tmp_path, capsys):
    # Batches of 3, 2 generate calls each: the 3rd call (batch 2's first turn) fails.
    m = run(Outage({3}), tmp_path, progress=True)
    assert m["errors"] == 3 and m["episode_errors"] == {"generate/ConnectionError": 3}
    err = capsys.readouterr().err
    assert "episode errors: 3 of 10 episodes (generate/ConnectionError 3)" in err
    lm = ScriptedLM(respond)
    m = run(lm, tmp_path, progress=True)
    assert "running again 3 that ended in an LM error" in capsys.readouterr().err
    # only c3..c5 ran again (one batch, 2 turns), and the file keeps one record per claim
    assert lm.calls == 2 and m["errors_retried_this_run"] == 3 and m["claims_this_run"] == 3
    records = read_trajectories(tmp_path / "trajectories.jsonl")
    assert sorted(t.claim_id for t in records) == sorted(c.id for c in CLAIMS)
    assert m["errors"] == 0 and m["duplicates_ignored"] == 0 and m["label_acc"] == 1.0
    # nothing errored: a third run sends nothing
    lm = ScriptedLM(respond)
    m = run(lm, tmp_path)
    assert lm.calls == 0 and m["errors_retried_this_run"] == 0 and m["claims_this_run"] == 0


def test_other_errors_run_again_only_when_asked(tmp_path):
    def run_with(env, lm, **kw):
        return evaluate(CLAIMS[:4], lambda: env(WordOverlapRetriever(PASSAGES)), lm, tmp_path,
                        rollout=RolloutConfig(batch_size=4), run_info={"model": "scripted"}, progress=False, **kw)

    m = run_with(StepFails, ScriptedLM(respond))
    assert m["errors"] == 4 and m["episode_errors"] == {"env_step/ValueError": 4}
    lm = ScriptedLM(respond)
    m = run_with(VeriR1Env, lm)  # an environment error is no outage: kept as it was
    assert lm.calls == 0 and m["errors"] == 4 and m["errors_retried_this_run"] == 0
    m = run_with(VeriR1Env, lm, retry_errors=True)
    assert lm.calls == 2 and m["errors"] == 0 and m["errors_retried_this_run"] == 4
    assert len(read_trajectories(tmp_path / "trajectories.jsonl")) == 4


def test_metrics_follow_the_reward_convention(tmp_path):
    from factrl.rewards import VeriR1Reward, VeriR1RewardConfig

    code = run(ScriptedLM(respond), tmp_path / "code", reward=VeriR1Reward(VeriR1RewardConfig(convention="authors_code")))
    paper = run(ScriptedLM(respond), tmp_path / "paper")
    assert (code["convention"], paper["convention"]) == ("authors_code", "paper")
    # The scripted agent follows the protocol, so both conventions judge it alike.
    for key in ("label_acc", "verification_acc", "joint_acc", "evidence_cover", "format_ok_rate"):
        assert code[key] == paper[key], key
    assert code["evidence_convention"].startswith("authors_code")


@pytest.fixture
def toy_agent_metric(monkeypatch):
    """A run metric registered for the agent ``toy`` for one test: it records its call."""
    from factrl.metrics.run_metrics import RUN_METRICS

    calls = []

    def metric(out_dir, trajs, *, lms, reward, params=None):
        if params and params.get("refuse"):
            raise ValueError("toy metric refuses")
        calls.append({"n": len(trajs), "roles": sorted(lms), "judge": lms["judge"], "params": params})
        (out_dir / "toy.json").write_text("{}")
        return {"n": len(trajs)}

    monkeypatch.setitem(RUN_METRICS._items, "toy", metric)
    return calls


def test_evaluate_applies_the_agents_own_metrics(tmp_path, toy_agent_metric):
    from factrl.evaluate import AgentMetricsError

    lm, judge = ScriptedLM(respond), ScriptedLM(respond)
    m = run(lm, tmp_path / "a", agent="toy", metric_lms={"judge": judge}, metric_params={"k": 1})
    assert m["agent_metrics"] == {"n": 10} and (tmp_path / "a" / "toy.json").exists()
    assert toy_agent_metric == [{"n": 10, "roles": ["judge", "policy"], "judge": judge, "params": {"k": 1}}]
    # No judge given: the policy LM judges (the reward here has no verifier).
    assert run(lm, tmp_path / "b", agent="toy")["agent_metrics"] == {"n": 10}
    assert toy_agent_metric[-1]["judge"] is lm
    # Agents without metrics of their own, or no agent named: nothing more.
    assert "agent_metrics" not in run(lm, tmp_path / "c", agent="veri_r1")
    assert "agent_metrics" not in run(lm, tmp_path / "d")
    with pytest.raises(AgentMetricsError, match="toy metric refuses"):
        run(lm, tmp_path / "e", agent="toy", metric_params={"refuse": True})
    assert (tmp_path / "e" / "metrics.json").exists()  # the run's own metrics were written first
