import json
import math

import pytest

from factrl.envs.veri_r1 import VeriR1Env
from factrl.evaluate import evaluate, read_trajectories
from factrl.lm.scripted import ScriptedLM
from factrl.train.sft import select_correct
from factrl.train.weighted_sft import decision_spans, length_batches, weighted_examples

from _support import WordOverlapRetriever
from test_sft import GOOD, PASSAGES, WRONG, respond

ANSWER = ('<think>[[s1]] says: "It flows north." This contradicts the claim, so it refutes the claim.</think>\n'
          "<answer>\nLabel: REFUTE\nEvidence: [[s1]]\n</answer>")


def test_decision_spans_are_the_tokens_that_decide():
    got = [ANSWER[a:b] for a, b in decision_spans(ANSWER)]
    assert got == ["[", "contradicts", "R"]
    nei = "<think>None of the information states or contradicts what the claim says.</think>"
    assert [nei[a:b] for a, b in decision_spans(nei)] == ["N"]
    assert [x[a:b] for x in ["This states it. Label: SUPPORT"] for a, b in decision_spans(x)] == ["states", "S"]
    assert decision_spans("<plan>p</plan><search>q</search>") == []


def test_length_batches_keep_every_index_once_within_the_budget():
    lengths = [5, 100, 7, 50, 51, 6, 300, 8]
    batches = length_batches(lengths, 110, seed=0)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:  # rows × longest within the budget, unless one row alone exceeds it
        assert len(b) * max(lengths[i] for i in b) <= 110 or len(b) == 1
    assert batches == length_batches(lengths, 110, seed=0)
    assert batches != length_batches(lengths, 110, seed=1) or len(batches) == 1


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    evaluate([GOOD, WRONG], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), ScriptedLM(respond), out, progress=False)
    return out / "trajectories.jsonl"


def test_weighted_examples_weigh_only_model_decision_tokens(teacher_run, tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from factrl.lm.tiny import build_tiny_model

    tok = AutoTokenizer.from_pretrained(str(build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)))
    trajs = select_correct(read_trajectories(teacher_run))
    (ex,), skipped = weighted_examples(trajs, tok, decision_weight=5.0)
    assert skipped == 0
    ids, labels, weights = ex["input_ids"], ex["labels"], ex["weights"]
    assert len(ids) == len(labels) == len(weights)
    assert all(w == 0.0 for lab, w in zip(labels, weights) if lab == -100)  # prompt and observations
    heavy = tok.decode([i for i, w in zip(ids, weights) if w == 5.0])
    assert heavy == "t SUP"  # the first token of its <think>t</think> and of the label

    assert {w for lab, w in zip(labels, weights) if lab != -100} == {1.0, 5.0}
    # the same text as the plain SFT examples: only the weights are new
    assert tok.decode([i for i, lab in zip(ids, labels) if lab != -100]).startswith(respond(""))
    _, skipped = weighted_examples(trajs, tok, decision_weight=5.0, max_length=16)
    assert skipped == 1


def test_the_comparison_word_weighs_its_own_weight(tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from factrl.lm.tiny import build_tiny_model
    from factrl.types import Claim, Trajectory, Turn

    tok = AutoTokenizer.from_pretrained(str(build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)))
    text = "<think>The claim says 12. The search agent found 13. Different, so the claim is refuted.</think>"
    traj = Trajectory(claim_id="c", env="haris", claim=Claim(id="c", text="c"),
                      prompt=[{"role": "user", "content": "c"}],
                      turns=[Turn(source="model", text=text, token_ids=[1], mask=[1])])
    (ex,), _ = weighted_examples([traj], tok, decision_weight=2.0, comparison_weight=6.0)
    heavy = {w: tok.decode([i for i, x in zip(ex["input_ids"], ex["weights"]) if x == w]) for w in (2.0, 6.0)}
    assert heavy[6.0].strip() == "Different" and heavy[2.0] == "The"  # the word; the think's first token
    (plain,), _ = weighted_examples([traj], tok, decision_weight=2.0)
    assert 6.0 not in plain["weights"]  # 1 unless asked


def test_weighted_sft_trains_checkpoints_and_resumes(teacher_run, tmp_path):
    pytest.importorskip("peft")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from factrl.lm.tiny import build_tiny_model
    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft

    tiny = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    tok = AutoTokenizer.from_pretrained(str(tiny))
    examples, _ = weighted_examples(select_correct(read_trajectories(teacher_run)), tok, decision_weight=4.0)
    examples = examples * 6  # six one-row steps
    settings = WeightedSFTSettings(learning_rate=1e-2, tokens_per_batch=1, lora_r=4, lora_alpha=8,
                                   lora_target_modules=["q_proj", "v_proj"], save_minutes=0.0)
    final = train_weighted_sft(examples, str(tiny), tmp_path / "run", settings)
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert log[-1]["loss"] < log[0]["loss"]
    a = AutoModelForCausalLM.from_pretrained(str(tiny)).state_dict()
    b = AutoModelForCausalLM.from_pretrained(str(final)).state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").exists()

    # an interrupted run (stopped after each checkpointed step) resumes where it stopped,
    # with a new time limit if asked, and ends with the same weights as the straight one
    import shutil

    cut = WeightedSFTSettings(**{**settings.__dict__, "max_minutes": 0.0})
    for expected in (1, 2):
        train_weighted_sft(examples, str(tiny), tmp_path / "cut", cut)
        state = torch.load(tmp_path / "cut" / "checkpoint" / "state.pt", weights_only=False)
        assert state["step"] == expected
        shutil.rmtree(tmp_path / "cut" / "final")
    # a crash after a step was logged but before it was checkpointed: redone, logged once
    with (tmp_path / "cut" / "log.jsonl").open("a") as f:
        f.write(json.dumps({"step": 3, "loss": 0.0}) + "\n")
        f.write('{"step": 4, "lo')  # and a record cut short by the crash
    resumed = train_weighted_sft(examples, str(tiny), tmp_path / "cut", settings)
    steps = [json.loads(x)["step"] for x in (tmp_path / "cut" / "log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]
    c = AutoModelForCausalLM.from_pretrained(str(resumed)).state_dict()
    assert all(torch.allclose(b[k], c[k], atol=1e-6) for k in b)
    # other data (or other training settings) than the checkpoint's: refused
    shutil.rmtree(tmp_path / "cut" / "final")
    with pytest.raises(ValueError, match="another run"):
        train_weighted_sft(examples[:3], str(tiny), tmp_path / "cut", settings)
    with pytest.raises(ValueError, match="another run"):
        train_weighted_sft(examples, str(tiny), tmp_path / "cut",
                           WeightedSFTSettings(**{**settings.__dict__, "decision_weight": 2.0}))


def test_weighted_sft_continues_an_adapter(teacher_run, tmp_path):
    pytest.importorskip("peft")
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from factrl.lm.tiny import build_tiny_model
    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft

    tiny = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    start = get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny)),
                           LoraConfig(r=2, lora_alpha=2, target_modules=["q_proj"], init_lora_weights=False))
    start.save_pretrained(tmp_path / "start")
    tok = AutoTokenizer.from_pretrained(str(tiny))
    examples, _ = weighted_examples(select_correct(read_trajectories(teacher_run)), tok, decision_weight=4.0)
    train_weighted_sft(examples, str(tiny), tmp_path / "run",
                       WeightedSFTSettings(learning_rate=1e-2, init_adapter=str(tmp_path / "start")))
    cfg = json.loads((tmp_path / "run" / "adapter" / "adapter_config.json").read_text())
    assert cfg["r"] == 2 and cfg["target_modules"] == ["q_proj"]
    from safetensors.torch import load_file

    before = load_file(tmp_path / "start" / "adapter_model.safetensors")
    after = load_file(tmp_path / "run" / "adapter" / "adapter_model.safetensors")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_train_sft_cli_decision_weight(teacher_run, tmp_path):
    pytest.importorskip("peft")
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app
    from factrl.lm.tiny import build_tiny_model

    _load_commands()
    tiny = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    args = ["train", "sft", "--trajectories", str(teacher_run), "--model", str(tiny), "--out", str(tmp_path / "sft"),
            "--decision-weight", "3", "--learning-rate", "0.01", "--epochs", "1"]
    res = CliRunner().invoke(app, [*args, "--device", "cpu", "--dtype", "bf16"])  # bf16 autocast on the CPU
    assert res.exit_code == 0, res.output
    assert (tmp_path / "sft" / "final" / "config.json").exists()
    recorded = json.loads((tmp_path / "sft" / "settings.json").read_text())
    assert recorded["decision_weight"] == 3.0
    assert (recorded["device"], recorded["dtype"]) == ("cpu", "bfloat16")
    log = [json.loads(x) for x in (tmp_path / "sft" / "log.jsonl").read_text().splitlines()]
    assert log and all(math.isfinite(r["loss"]) for r in log)
    res = CliRunner().invoke(app, [*args[:-4], "--max-length", "16", "--out", str(tmp_path / "short")])
    assert res.exit_code == 1 and "longer than max_length=16" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["train", "sft", "--trajectories", str(teacher_run), "--out", str(tmp_path / "x"),
                                   "--init-adapter", str(tmp_path)])
    assert res.exit_code == 2 and "needs --decision-weight" in res.output


def test_bf16_sft_frozen_weight_casts_change_no_number(teacher_run, tmp_path, monkeypatch):
    """On a CPU under bf16 autocast the frozen weights are cast once a run (held through
    each backward): the same losses and weights as autocast's casts at every call."""
    pytest.importorskip("peft")
    import contextlib

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import factrl.lm.autocast_weights as aw
    from factrl.lm.tiny import build_tiny_model
    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft

    tiny = build_tiny_model(tmp_path / "tiny", layers=2, hidden=64, heads=4)
    tok = AutoTokenizer.from_pretrained(str(tiny))
    examples, _ = weighted_examples(select_correct(read_trajectories(teacher_run)), tok, decision_weight=4.0)
    settings = WeightedSFTSettings(learning_rate=1e-2, tokens_per_batch=1, lora_r=4, lora_alpha=8, lora_layers=1,
                                   lora_target_modules=["q_proj", "v_proj"], dtype="bfloat16", epochs=2.0)
    swapped = []
    real = aw.cast_frozen_weights

    @contextlib.contextmanager
    def counting(*a, **k):
        with real(*a, **k) as n:
            swapped.append(n)
            yield n

    monkeypatch.setattr(aw, "cast_frozen_weights", counting)
    cast = train_weighted_sft(examples * 2, str(tiny), tmp_path / "cast", settings)
    assert swapped and min(swapped) >= 6  # the bottom block's four attention and three MLP weights, at least
    monkeypatch.setattr(aw, "cast_frozen_weights", lambda *a, **k: contextlib.nullcontext(0))
    plain = train_weighted_sft(examples * 2, str(tiny), tmp_path / "plain", settings)
    logs = [[(r["loss"], r["token_loss"]) for r in map(json.loads, (p.parent / "log.jsonl").read_text().splitlines())]
            for p in (cast, plain)]
    assert len(logs[0]) >= 2 and logs[0] == logs[1]
    a = AutoModelForCausalLM.from_pretrained(str(cast)).state_dict()
    b = AutoModelForCausalLM.from_pretrained(str(plain)).state_dict()
    assert all(a[k].dtype == torch.float32 and torch.equal(a[k], b[k]) for k in a)
