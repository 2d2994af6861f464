"""The baseline agents (direct, rag, decompose, react): each protocol on scripted model
outputs, malformed ones included, through the real episode machine and rewards."""

import pytest

from factrl.envs import EnvDeps, EnvSpec, build
from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.metrics.failures import format_failure_kinds
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_0", "nile_1"], sentences=["The Nile is long.", "It flows north."]),
    Passage(id="amazon#0", doc_id="amazon", title="Amazon", text="The Amazon carries the most water.",
            sentence_ids=["amazon_0"], sentences=["The Amazon carries the most water."]),
    Passage(id="paris#0", doc_id="paris", title="Paris", text="Paris is the capital of France.",
            sentence_ids=["paris_0"], sentences=["Paris is the capital of France."]),
]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORT",
              evidence=[EvidenceRef(id="nile_1", doc_id="nile")])


def run(agent, respond, claim=CLAIM, retriever=None, **params):
    """One episode of ``agent`` with a scripted model; returns (trajectory, retriever)."""
    retriever = retriever or WordOverlapRetriever(PASSAGES)
    deps = EnvDeps(retriever=retriever)
    (traj,) = run_episodes(lambda: build(EnvSpec(name=agent, params=params), deps), [claim], ScriptedLM(respond),
                           RolloutConfig(temperature=0))
    return traj, retriever


def fixed(text):
    return lambda context: text


def kinds(traj):
    return format_failure_kinds(traj.verdict, traj.retrieved_ids)


# -- direct ---------------------------------------------------------------------------
def test_direct_answer_without_evidence():
    traj, retriever = run("direct", fixed("Label: SUPPORT\nReason: The Nile flows north to the sea."))
    assert traj.error is None and retriever.queries == []
    assert "Claim: The Nile flows north." in traj.prompt[0].content
    v = traj.verdict
    assert v.label is Label.SUPPORT and v.evidence_ids == [] and v.answered
    assert v.format_ok, v.format_errors
    # label_only: format 1 + 2 × label correct; the reward declares its parts.
    assert traj.reward.total == 3.0
    assert traj.reward.components == {"label": 2.0, "format": 1.0, "label_correct": 1.0, "total": 3.0}
    assert [t.source for t in traj.turns] == ["model"] and set(traj.turns[0].mask) == {1}


@pytest.mark.parametrize("text, label, answered, kind, total", [
    ("Label: REFUTE", Label.REFUTE, True, None, 1.0),  # wrong label, format ok
    ("**Label:** not enough info", Label.NEI, True, None, 1.0),
    ("I think it is true.", None, False, "no_answer", 0.0),
    ("", None, False, "no_answer", 0.0),
    ("Label: probably", None, True, "unparseable_label", 0.0),
    ("Label: SUPPORT\nEvidence: [[nile_1]]", Label.SUPPORT, True, "text_outside_tags", 2.0),
    ("Sure! Here it is.\nLabel: SUPPORT", Label.SUPPORT, True, "text_outside_tags", 2.0),
])
def test_direct_malformed_outputs_never_raise(text, label, answered, kind, total):
    traj, _ = run("direct", fixed(text))
    v = traj.verdict
    assert traj.error is None
    assert v.label == label and v.answered == answered
    assert v.format_ok == (kind is None)
    if kind is not None:
        assert kind in kinds(traj)
    assert traj.reward.total == total


def test_direct_label_line_given_twice_keeps_the_first():
    traj, _ = run("direct", fixed("Label: REFUTE\nLabel: SUPPORT"))
    assert traj.verdict.label is Label.REFUTE and not traj.verdict.format_ok
    assert traj.verdict.format_errors == ["'Label:' line given more than once"]


def test_label_only_reward_is_configurable_and_scores_errors_zero():
    from factrl.rewards import RewardSpec, build_reward
    from factrl.types import Trajectory, Verdict

    reward = build_reward(RewardSpec(name="label_only", params={"label_correct": 1.0}))
    assert reward.components == ("label", "format") and reward.diagnostics == ("label_correct",)
    good = Trajectory(claim_id="c1", env="direct", claim=CLAIM, prompt=[],
                      verdict=Verdict(label="SUPPORT", format_ok=True, answered=True))
    broken = good.model_copy(update={"error": "env step failed: TimeoutError: x"})
    unlabelled = good.model_copy(update={"claim": Claim(id="u", text="t")})
    a, b, c = reward.score([good, broken, unlabelled])
    assert a.total == 2.0 and b.total == 0.0 and c.total == 0.0 and c.components == {}
    with pytest.raises(ValueError, match="label_only"):
        build_reward(RewardSpec(name="label_only", params={"nope": 1}))


# -- rag ------------------------------------------------------------------------------
def test_rag_retrieves_for_the_claim_and_cites_ids():
    traj, retriever = run("rag", fixed("Label: SUPPORT\nEvidence: [[nile_1]]\nReason: It says so."))
    assert traj.error is None
    assert retriever.queries == ["The Nile flows north."] and traj.searches == ["The Nile flows north."]
    prompt = traj.prompt[0].content
    assert "[[nile_0]]: Nile — The Nile is long.\n[[nile_1]]: It flows north." in prompt
    assert prompt.rstrip().endswith("Claim: The Nile flows north.")
    assert traj.retrieved_ids[:2] == ["nile_0", "nile_1"]
    v = traj.verdict
    assert v.format_ok and v.label is Label.SUPPORT and v.evidence_ids == ["nile_1"]
    # veri_r1: label 2 · validity 1 + IoU 1 + format 1.
    assert traj.reward.total == pytest.approx(4.0)
    assert [t.source for t in traj.turns] == ["model"]


def test_rag_top_k_bounds_the_units_shown():
    traj, _ = run("rag", fixed("Label: SUPPORT\nEvidence: none"), top_k=1)
    assert traj.retrieved_ids == ["nile_0", "nile_1"]  # one unit, both its sentences
    assert "[[amazon_0]]" not in traj.prompt[0].content
    assert traj.verdict.format_ok and traj.verdict.evidence_ids == []


@pytest.mark.parametrize("text, label, ids, kind", [
    ("Label: SUPPORT", Label.SUPPORT, [], "bad_evidence_ids"),  # no Evidence line
    ("Label: SUPPORT\nReason: see [[nile_1]]", Label.SUPPORT, ["nile_1"], "bad_evidence_ids"),
    ("Label: SUPPORT\nEvidence: nile_1", Label.SUPPORT, [], "bad_evidence_ids"),
    ("Label: SUPPORT\nEvidence: [[made_up]]", Label.SUPPORT, ["made_up"], "bad_evidence_ids"),  # never shown
    ("Label: TRUE\nEvidence: [[nile_1]]", None, ["nile_1"], "unparseable_label"),
    ("", None, [], "no_answer"),
    ("Evidence: [[nile_1]]", None, [], "no_answer"),
    ("Let me think.\nLabel: SUPPORT\nEvidence: [[nile_1]]", Label.SUPPORT, ["nile_1"], "text_outside_tags"),
])
def test_rag_malformed_answers(text, label, ids, kind):
    traj, _ = run("rag", fixed(text))
    v = traj.verdict
    assert traj.error is None
    assert v.label == label and v.evidence_ids == ids
    assert kind in kinds(traj)
    if kind != "bad_evidence_ids" or v.format_errors:  # a never-shown id is a metric, not a format error
        assert not v.format_ok
    assert traj.reward.components["format"] == (1.0 if v.format_ok else 0.0)


def test_rag_needs_a_retriever_and_knows_its_params():
    with pytest.raises(ValueError, match="needs a retriever"):
        build("rag", EnvDeps())
    with pytest.raises(ValueError, match="'rag'"):
        build(EnvSpec(name="rag", params={"max_searches": 2}), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))


# -- decompose ------------------------------------------------------------------------
TWO_PART = Claim(id="c2", text="The Nile flows north and Paris is the capital of France.", label="SUPPORT",
                 evidence=[EvidenceRef(id="nile_1"), EvidenceRef(id="paris_0")])


def decomposer(split, answers):
    """Turn 1 answers ``split``; a sub-claim context answers ``answers[sub-claim]``."""
    seen = []

    def respond(context):
        seen.append(context)
        if "Break the claim" in context:
            return split
        sub = context.rsplit("Sub-claim: ", 1)[1].split("<", 1)[0].strip()
        return answers[sub]
    return respond, seen


def test_decompose_verifies_each_subclaim_in_its_own_context():
    respond, seen = decomposer("1. The Nile flows north.\n2. Paris is the capital of France.", {
        "The Nile flows north.": "Label: SUPPORT\nEvidence: [[nile_1]]",
        "Paris is the capital of France.": "Label: SUPPORT\nEvidence: [[paris_0]]\nReason: stated.",
    })
    traj, retriever = run("decompose", respond, claim=TWO_PART, top_k=1)
    assert traj.error is None
    assert retriever.queries == ["The Nile flows north.", "Paris is the capital of France."]
    assert traj.searches == retriever.queries and traj.meta["subclaims"] == retriever.queries
    # The opening context is the decomposition; one segment per sub-claim, each a fresh
    # policy context with only its own search results.
    assert [t.text for t in traj.turns] == ["1. The Nile flows north.\n2. Paris is the capital of France."]
    assert [s.role for s in traj.segments] == ["policy", "policy"]
    first, second = (s.prompt[0].content for s in traj.segments)
    assert "[[nile_1]]: It flows north." in first and "[[paris_0]]" not in first
    assert "[[paris_0]]: Paris — Paris is the capital of France." in second
    assert "[[nile_1]]" not in second and "Nile flows" not in second
    # What the model saw when answering sub-claim 2: none of the episode before it.
    assert "Break the claim" not in seen[2] and "[[nile" not in seen[2] and "Evidence: [[nile_1]]" not in seen[2]
    for seg in traj.segments:
        assert [t.source for t in seg.turns] == ["model"] and set(seg.turns[0].mask) == {1}
        assert seg.prompt_ids and seg.turns[0].token_ids
    v = traj.verdict
    assert v.format_ok, v.format_errors
    assert v.label is Label.SUPPORT and v.evidence_ids == ["nile_1", "paris_0"]
    assert traj.meta["sub_labels"] == ["SUPPORT", "SUPPORT"]
    assert traj.reward.total == pytest.approx(4.0)
    # The text-only parse (turns joined by newlines) gives the same verdict.
    env = build("decompose", EnvDeps(retriever=retriever))
    joined = "\n".join(t.text for ctx in [traj, *traj.segments] for t in ctx.turns)
    assert env.parse_verdict(joined) == v


@pytest.mark.parametrize("labels, expected", [
    (["SUPPORT", "SUPPORT"], Label.SUPPORT),
    (["SUPPORT", "REFUTE"], Label.REFUTE),
    (["NOT ENOUGH INFO", "REFUTE"], Label.REFUTE),
    (["SUPPORT", "NOT ENOUGH INFO"], Label.NEI),
    (["SUPPORT", "MAYBE"], Label.NEI),  # an unknown label counts as not supported
])
def test_decompose_and_aggregation(labels, expected):
    respond, _ = decomposer("1. The Nile flows north.\n2. Paris is the capital of France.", {
        "The Nile flows north.": f"Label: {labels[0]}\nEvidence: none",
        "Paris is the capital of France.": f"Label: {labels[1]}\nEvidence: none",
    })
    traj, _ = run("decompose", respond, claim=TWO_PART)
    assert traj.verdict.label is expected and traj.verdict.answered


def test_decompose_too_many_subclaims_verifies_the_first_max():
    split = "\n".join(f"{i}. The Nile flows north {i}." for i in range(1, 5))
    respond, _ = decomposer(split, {f"The Nile flows north {i}.": "Label: SUPPORT\nEvidence: [[nile_1]]"
                                    for i in range(1, 5)})
    traj, retriever = run("decompose", respond, max_subclaims=2)
    assert len(retriever.queries) == 2 and len(traj.segments) == 2
    assert traj.verdict.label is Label.SUPPORT and not traj.verdict.format_ok
    assert traj.verdict.format_errors == ["too many sub-claims: 4 (at most 2; the first 2 were verified)"]
    assert traj.reward.components["format"] == 0.0


def test_decompose_without_a_list_is_no_answer():
    traj, retriever = run("decompose", fixed("The claim is true."))
    assert retriever.queries == [] and traj.segments == [] and traj.searches == []
    v = traj.verdict
    assert not v.answered and v.label is None
    assert v.format_errors[0].startswith("no answer: no sub-claims")
    assert {"no_answer", "text_outside_tags"} <= kinds(traj)
    assert traj.reward.total == 0.0


def test_decompose_empty_output_is_no_answer():
    traj, _ = run("decompose", fixed(""))
    assert not traj.verdict.answered and traj.reward.total == 0.0


def test_decompose_malformed_subverdicts_keep_their_prefixes():
    respond, _ = decomposer("Sub-claims:\n1. The Nile flows north.\n3. Paris is the capital of France.", {
        "The Nile flows north.": "Label: SUPPORT\nEvidence: nile_1",
        "Paris is the capital of France.": "I cannot say.",
    })
    traj, _ = run("decompose", respond, claim=TWO_PART)
    v = traj.verdict
    assert v.answered and v.label is Label.NEI and v.evidence_ids == []
    assert v.format_errors == [
        "sub-claims not numbered 1, 2, ...: '3. Paris is the capital of France.'",
        "text outside the sub-claim list: 'Sub-claims:'",
        "evidence not in [[id]] format: 'nile_1' (sub-claim 1)",
        "no answer: no 'Label:' line (sub-claim 2)",
        "text outside the answer: 'I cannot say.' (sub-claim 2)",
    ]
    assert {"text_outside_tags", "bad_evidence_ids", "no_answer", "other"} == kinds(traj)


# -- react ----------------------------------------------------------------------------
def stepper(turns):
    """Plays ``turns`` in order: the n-th model turn after n - 1 observations."""
    return lambda context: turns[min(context.count("Observation:"), len(turns) - 1)]


REACT_GOOD = [
    "Thought: I should find where the Nile flows.\nAction: search[Nile flows north]\nThought: (cut by the stop)",
    "Thought: It flows north.\nAction: finish[SUPPORT | [[nile_1]]]",
]


def test_react_searches_observes_and_finishes():
    traj, retriever = run("react", stepper(REACT_GOOD))
    assert traj.error is None
    assert retriever.queries == ["Nile flows north"] and traj.searches == ["Nile flows north"]
    assert [t.source for t in traj.turns] == ["model", "env", "model"]
    # Generation stopped at the end of the Action line; the observation follows it.
    assert traj.turns[0].text == "Thought: I should find where the Nile flows.\nAction: search[Nile flows north]\n"
    assert traj.turns[1].text.startswith("Observation:\n[[nile_0]]: Nile — The Nile is long.\n[[nile_1]]: It flows")
    assert set(traj.turns[1].mask) == {0} and traj.turns[1].logprobs is None
    assert set(traj.turns[0].mask) == set(traj.turns[2].mask) == {1}
    model_ids = [i for i, m in zip(traj.completion_ids, traj.completion_mask) if m == 1]
    assert ScriptedLM(str).decode(model_ids) == traj.model_text
    v = traj.verdict
    assert v.format_ok, v.format_errors
    assert v.label is Label.SUPPORT and v.evidence_ids == ["nile_1"] and "nile_1" in traj.retrieved_ids
    assert traj.reward.total == pytest.approx(4.0)


def test_react_that_never_finishes_has_no_answer():
    traj, retriever = run("react", fixed("Thought: more.\nAction: search[Nile]\n"))
    assert len(retriever.queries) == 3 and traj.searches == ["Nile"] * 3
    assert [t.source for t in traj.turns] == ["model", "env"] * 3 + ["model"]  # max_steps + 1 turns
    assert "search budget is spent" in traj.turns[5].text
    v = traj.verdict
    assert not v.answered and v.label is None
    assert v.format_errors == ["no answer: no Action: finish[...]", "search over budget: more than 3 searches"]
    assert traj.reward.total == 0.0


def test_react_turn_without_an_action_gets_an_observation():
    traj, retriever = run("react", stepper(["I think the claim is true.",
                                            "Thought: ok.\nAction: finish[SUPPORT | none]"]), max_steps=2)
    assert retriever.queries == [] and traj.searches == []
    assert traj.turns[1].source == "env" and traj.turns[1].text.startswith("\nObservation: no valid action.")
    v = traj.verdict
    assert v.answered and v.label is Label.SUPPORT and v.evidence_ids == []
    assert v.format_errors == ["text outside Thought/Action lines: 'I think the claim is true.'"]
    assert kinds(traj) == {"text_outside_tags"}


def test_react_empty_output_is_no_answer():
    traj, _ = run("react", fixed(""), max_steps=1)
    assert sum(t.source == "model" for t in traj.turns) == 2 and traj.searches == []
    assert not traj.verdict.answered and traj.reward.total == 0.0


@pytest.mark.parametrize("text, label, ids, errors", [
    ("Thought: t\nAction: finish[MAYBE | [[a]]]", None, ["a"], ["unknown label 'MAYBE'"]),
    ("Thought: t\nAction: finish[REFUTE]", Label.REFUTE, [], ["no evidence: finish has no '| [[id]], ...' part"]),
    ("Thought: t\nAction: finish[REFUTE | a, b]", Label.REFUTE, [], ["evidence not in [[id]] format: 'a, b'"]),
    ("Action: finish[NEI | none]", Label.NEI, [], ["action without a thought: 'Action: finish[NEI | none]'"]),
    ("Thought: t\nAction: lookup[x]\nThought: u\nAction: finish[NEI | none]", Label.NEI, [],
     ["invalid action: 'lookup[x]'"]),
    ("Thought: t\nAction: search[x]\nObservation: made up\nThought: u\nAction: finish[SUPPORT | [[a]]]",
     Label.SUPPORT, ["a"], ["model wrote an Observation itself"]),
    ("Thought: t\nThought: u\nAction: finish[SUPPORT | [[a]], [[b]]]\nDone.", Label.SUPPORT, ["a", "b"],
     ["thought without an action", "text outside Thought/Action lines (after finish): 'Done.'"]),
])
def test_react_parser_on_malformed_text(text, label, ids, errors):
    from factrl.envs.baselines.react import parse_react

    v = parse_react(text, max_steps=3)
    assert v.answered and v.label == label and v.evidence_ids == ids
    assert v.format_errors == errors and not v.format_ok


def test_every_baseline_parser_survives_junk():
    junk = ["", "\n\n", "[[" * 500, "Label:" * 300, "Action: finish[" * 200, "1. " * 400, "**:**\n" * 100,
            "Thought:\nAction: search[]\n" * 50, "Label: " + "x" * 5000 + "\nEvidence: [[" + "]]" * 100]
    deps = EnvDeps.offline_only()
    for agent in ("direct", "rag", "decompose", "react"):
        env = build(agent, deps)
        for text in junk:
            v = env.parse_verdict(text)
            assert not v.format_ok and v.format_errors, (agent, text[:20])


# -- the CLI --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_setup(tmp_path_factory):
    pytest.importorskip("torch")
    import json

    from factrl.lm.tiny import build_tiny_model
    from factrl.retrieval.index import build_index

    from _support import REPO

    tmp = tmp_path_factory.mktemp("baselines_cli")
    model = build_tiny_model(tmp / "tiny", layers=1, hidden=32, heads=2)
    index = tmp / "index"
    build_index(REPO / "tests" / "fixtures" / "mini_corpus.jsonl", index, progress=False)
    claims = tmp / "claims.jsonl"
    claims.write_text("".join(json.dumps({"id": f"c{i}", "claim": f"Claim number {i} about rivers.", "label": lab})
                              + "\n" for i, lab in enumerate(["SUPPORT", "REFUTE", "NEI"])))
    return model, index, claims


@pytest.mark.parametrize("agent, reward", [("direct", "label_only"), ("rag", "veri_r1"), ("decompose", "veri_r1"),
                                           ("react", "veri_r1")])
def test_factrl_eval_runs_each_baseline(tiny_setup, tmp_path, agent, reward):
    import json

    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    model, index, claims = tiny_setup
    out = tmp_path / "run"
    index_args = [] if agent == "direct" else ["--index", str(index)]  # direct retrieves nothing
    r = CliRunner().invoke(app, ["eval", "--agent", agent, "--dataset", "jsonl", "--data-dir", str(claims),
                                 *index_args, "--model", str(model), "--max-new-tokens", "6",
                                 "--batch-size", "3", "--out", str(out)])
    assert r.exit_code == 0, r.output
    trajs = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 3 and all(t["env"] == agent for t in trajs)
    assert json.loads((out / "run.json").read_text())["reward"]["name"] == reward
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 3 and "label_acc" in metrics and "format_failures" in metrics


@pytest.mark.parametrize("agent, text, score", [
    ("direct", "Label: SUPPORT\nReason: known.", 3.0),
    ("rag", "Label: SUPPORT\nEvidence: [[nile_1]]", 4.0),
    ("decompose", "1. The Nile flows north.\nLabel: SUPPORT\nEvidence: [[nile_1]]", 4.0),
    ("react", "Thought: t\nAction: search[Nile]\nThought: u\nAction: finish[SUPPORT | [[nile_1]]]", 4.0),
    ("react", "Thought: t\nAction: search[Nile]", 0.0),
])
def test_verl_reward_shim_scores_each_baseline_from_text(agent, text, score):
    from factrl.train.verl.reward import compute_score

    out = compute_score("test", text, {"label": "SUPPORT", "evidence": ["nile_1"]}, {}, env=agent)
    assert out["score"] == pytest.approx(score)
