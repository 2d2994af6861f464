import pytest

from factrl.datasets import DATASETS
from factrl.envs.veri_r1 import VeriR1Env
from factrl.evaluate import evaluate
from factrl.lm.scripted import EOS, ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes
from factrl.train.filtering import kept_claims, write_claims_jsonl
from factrl.train.sft import select_correct, sft_examples
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [Passage(id="nile#0", doc_id="nile", title="Nile", text="It flows north.",
                    sentence_ids=["nile_sentence_0"], sentences=["It flows north."])]
GOOD = Claim(id="good", text="The Nile flows north.", label="SUPPORT", evidence=[EvidenceRef(id="nile_sentence_0", text="It flows north.")])
WRONG = Claim(id="wrong", text="The Nile flows south.", label="REFUTE", evidence=[EvidenceRef(id="nile_sentence_0", text="It flows north.")])


def respond(ctx):
    if ctx.count("<information>") < 2:
        return "<plan>p</plan><search>Nile</search>"
    return "<think>t</think><answer>Label: SUPPORT\nEvidence: [[nile_sentence_0]]</answer>"


def _trajs():
    return run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [GOOD, WRONG], ScriptedLM(respond), RolloutConfig())


def test_select_correct_keeps_only_fully_correct():
    assert [t.claim_id for t in select_correct(_trajs())] == ["good"]


def test_sft_examples_label_only_teacher_turns():
    lm = ScriptedLM(respond)
    (ex,) = sft_examples(select_correct(_trajs()), lm)
    ids, labels = ex["input_ids"], ex["labels"]
    assert len(ids) == len(labels) and ids[-1] == EOS and labels[-1] == EOS
    trained = lm.decode([i for i, l in zip(ids, labels) if l != -100])
    assert trained == respond("") + respond("<information><information>")
    assert "<information>\n[[nile_sentence_0]]" in lm.decode(ids)
    assert "<information>\n[[nile" not in trained


def test_filter_keeps_solved_claims_and_writes_loadable_jsonl(tmp_path):
    trajs = _trajs()
    kept = kept_claims([GOOD, WRONG], trajs)
    assert [c.id for c in kept] == ["good"]
    write_claims_jsonl(kept, tmp_path / "kept.jsonl")
    back = DATASETS.get("jsonl")().load(tmp_path / "kept.jsonl", "train").claims
    assert back[0].id == "good" and back[0].label == GOOD.label
    assert back[0].evidence[0].text == "It flows north."


def test_sft_trains_a_tiny_model(tmp_path):
    pytest.importorskip("trl")
    import torch
    from transformers import AutoModelForCausalLM

    from factrl.lm.tiny import build_tiny_model
    from factrl.train.sft import SFTSettings, train_sft

    tiny = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    evaluate([GOOD, WRONG], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path / "teacher", progress=False)
    final = train_sft(tmp_path / "teacher" / "trajectories.jsonl", str(tiny), tmp_path / "sft",
                      SFTSettings(learning_rate=1e-2, epochs=2, batch_size=1))
    a = AutoModelForCausalLM.from_pretrained(str(tiny)).state_dict()
    b = AutoModelForCausalLM.from_pretrained(str(final)).state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a)
    import json

    recorded = json.loads((tmp_path / "sft" / "settings.json").read_text())  # auto: the CPU, float32
    assert (recorded["device"], recorded["dtype"], recorded["examples"]) == ("cpu", "float32", 1)


def test_sft_cli_max_length_skips_and_says_so(tmp_path):
    pytest.importorskip("trl")
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app
    from factrl.lm.tiny import build_tiny_model

    _load_commands()
    tiny = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    evaluate([GOOD, WRONG], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), tmp_path / "teacher", progress=False)
    res = CliRunner().invoke(app, ["train", "sft", "--trajectories", str(tmp_path / "teacher" / "trajectories.jsonl"),
                                   "--model", str(tiny), "--out", str(tmp_path / "sft"), "--max-length", "16",
                                   "--no-gradient-checkpointing"])
    assert res.exit_code == 1
    assert "longer than max_length=16" in res.output and "Traceback" not in res.output
