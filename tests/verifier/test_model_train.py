"""The cross-encoder on a tiny random base: delta, merge, training, resumption, shipping."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.labels import Label  # noqa: E402
from factrl.verifier.pairs import Pair  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> str:
    from factrl.verifier.model import build_tiny_encoder

    return str(build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder")))


def _pairs(n: int = 48) -> list[Pair]:
    """Separable toy pairs: the label is written in the evidence."""
    words = {Label.SUPPORT: "indeed true", Label.REFUTE: "never false", Label.NEI: "unrelated weather"}
    out = []
    for i in range(n):
        label = [Label.SUPPORT, Label.REFUTE, Label.NEI][i % 3]
        split = "validation" if i % 8 == 0 else ("held_out" if i % 8 == 1 else "train")
        out.append(Pair("toy", f"c{i}", f"claim number {i}", f"evidence {words[label]} {i}", label, "gold",
                        f"g{i}", split))
    return out


def test_only_the_delta_trains_and_merging_keeps_the_outputs(tiny_base):
    from factrl.verifier.model import CrossEncoderConfig, build_cross_encoder, delta_state, load_delta, merge_lora

    cfg = CrossEncoderConfig(base=tiny_base, lora_r=4, lora_alpha=8)
    model, tok = build_cross_encoder(cfg)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(("lora_" in n or "LayerNorm" in n or "token_type" in n or n.startswith("head."))
                             for n in trainable)
    assert not any(n.endswith("query.base.weight") for n in trainable)  # the base stays frozen
    with torch.no_grad():  # make the adapters non-zero, then merge
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    delta = delta_state(model)
    model.eval()
    enc = tok(["a claim"], ["some evidence"], return_tensors="pt")
    with torch.no_grad():
        before = model(**enc)
    other, _ = build_cross_encoder(cfg)
    load_delta(other, delta)
    assert merge_lora(other) == 2 * 6  # 2 layers x (q, k, v, attention out, intermediate, out)
    other.eval()
    with torch.no_grad():
        after = other(**enc)
    assert torch.allclose(before, after, atol=1e-5)
    with pytest.raises(ValueError, match="does not fit"):
        load_delta(other, {"head.4.weight": delta["head.4.weight"]})


def _config(tiny_base: str, **kw):
    from factrl.verifier.train import VerifierTrainConfig

    base = dict(base=tiny_base, lora_r=4, lora_alpha=8, batch_size=4, epochs=2.0, learning_rate=5e-3,
                max_length=32, log_seconds=0.0, save_minutes=100.0, sources=("toy",))
    return VerifierTrainConfig(**{**base, **kw})


def test_training_learns_calibrates_and_never_reads_held_out(tiny_base, tmp_path):
    from factrl.verifier.train import train_verifier

    pairs = _pairs()
    logs: list[str] = []
    outcome = train_verifier(_config(tiny_base, epochs=6.0), tmp_path / "run", pairs=pairs, log=logs.append)
    assert outcome.status == "done" and outcome.final_dir is not None
    info = json.loads((outcome.final_dir / "verifier.json").read_text())
    assert info["temperature"] > 0 and set(info["thresholds"]) == {"support", "refute"}
    n_train = sum(p.split == "train" for p in pairs)
    assert f"{n_train} training pairs" in logs[0]
    assert info["data"]["sources"]["toy"]["pairs"]["held_out"] == {"SUPPORT": 2, "REFUTE": 2, "NOT ENOUGH INFO": 2}
    progress = [json.loads(x) for x in (tmp_path / "run" / "progress.jsonl").read_text().splitlines()]
    assert progress[-1]["loss_ema"] < progress[0]["loss_ema"]


def test_a_budgeted_run_resumes_to_the_same_delta(tiny_base, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    import factrl.verifier.train as train_mod
    from factrl.verifier.train import train_verifier

    pairs = _pairs(24)
    whole = train_verifier(_config(tiny_base), tmp_path / "whole", pairs=pairs, log=lambda s: None)
    assert whole.status == "done"

    # a clock that advances 1 s per reading: the 10 s budget ends a few steps in
    ticks = iter(range(10**6))
    with monkeypatch.context() as m:
        m.setattr(train_mod.time, "monotonic", lambda: float(next(ticks)))
        cut = train_verifier(_config(tiny_base, max_minutes=10 / 60), tmp_path / "cut", pairs=pairs,
                             log=lambda s: None)
    assert cut.status == "budget" and 0 < cut.step < cut.total_steps
    assert (tmp_path / "cut" / "checkpoint.pt").is_file()
    logs: list[str] = []
    resumed = train_verifier(_config(tiny_base), tmp_path / "cut", pairs=pairs, log=logs.append)
    assert resumed.status == "done" and any("resumed at step" in s for s in logs)
    a = load_file(str(whole.final_dir / "delta.safetensors"))
    b = load_file(str(resumed.final_dir / "delta.safetensors"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)



def test_finish_calibrates_the_checkpoint_without_more_steps(tiny_base, tmp_path, monkeypatch):
    """--finish: a run cut by its budget writes final/ from the checkpoint's delta, takes
    no step, and records the steps done against those planned."""
    from safetensors.torch import load_file

    import factrl.verifier.train as train_mod
    from factrl.verifier.asset import load_verifier
    from factrl.verifier.train import train_verifier

    pairs = _pairs(24)
    ticks = iter(range(10**6))
    with monkeypatch.context() as m:
        m.setattr(train_mod.time, "monotonic", lambda: float(next(ticks)))
        cut = train_verifier(_config(tiny_base, max_minutes=10 / 60), tmp_path / "cut", pairs=pairs,
                             log=lambda s: None)
    assert cut.status == "budget" and 0 < cut.step < cut.total_steps
    saved = torch.load(tmp_path / "cut" / "checkpoint.pt", map_location="cpu", weights_only=True)
    logs: list[str] = []
    done = train_verifier(_config(tiny_base), tmp_path / "cut", pairs=pairs, log=logs.append, finish=True)
    assert done.status == "done" and done.step == cut.step < done.total_steps
    assert any("finishing early" in s for s in logs)
    info = json.loads((done.final_dir / "verifier.json").read_text())
    assert info["training"]["steps"] == cut.step and info["training"]["planned_steps"] == cut.total_steps
    assert info["training"]["finished_early"] is True and info["temperature"] > 0
    final = load_file(str(done.final_dir / "delta.safetensors"))
    assert all(torch.equal(final[k], saved["delta"][k]) for k in final)  # the checkpoint's delta, untouched
    assert load_verifier(str(done.final_dir)).predict(["a claim"], ["some evidence"]).shape == (1, 3)

def test_resuming_with_other_settings_or_data_is_refused(tiny_base, tmp_path):
    from factrl.verifier.train import train_verifier

    pairs = _pairs(24)
    train_verifier(_config(tiny_base, max_minutes=1e-9), tmp_path / "r", pairs=pairs, log=lambda s: None)
    with pytest.raises(ValueError, match="learning_rate"):
        train_verifier(_config(tiny_base, learning_rate=1e-4), tmp_path / "r", pairs=pairs, log=lambda s: None)
    with pytest.raises(ValueError, match="other data"):
        train_verifier(_config(tiny_base), tmp_path / "r", pairs=pairs[:-3], log=lambda s: None)


def test_ship_load_and_checksum(tiny_base, tmp_path, monkeypatch):
    from factrl.verifier.asset import VerifierAssetError, is_verifier_name, load_verifier, ship_verifier
    from factrl.verifier.evaluate import evaluate_pairs
    from factrl.verifier.train import train_verifier

    pairs = _pairs(24)
    run = train_verifier(_config(tiny_base), tmp_path / "run", pairs=pairs, log=lambda s: None)
    verifier = load_verifier(str(run.final_dir), precision="fp32")
    held = [p for p in pairs if p.split == "held_out"]
    report = evaluate_pairs(verifier, held, rounds=50)
    assert report["sources"]["toy"]["all"]["n"] == len(held) and "ci95" in report["sources"]["toy"]["all"]
    asset = tmp_path / "asset"
    manifest = ship_verifier(run.final_dir, asset, held_out=report, commands=["factrl train verifier"])
    assert manifest["bytes"] < 10 * 1024 * 1024 and manifest["held_out"]["n"] == len(held)
    monkeypatch.setenv("FACTRL_VERIFIER_DIR", str(asset))
    assert is_verifier_name("factrl-verifier") and is_verifier_name(str(asset)) and not is_verifier_name("smollm2")
    shipped = load_verifier("factrl-verifier", precision="fp32")
    probs = shipped.predict(["claim number 3"], ["evidence indeed true 3"])
    assert probs.shape == (1, 3) and np.isclose(probs.sum(), 1.0)
    np.testing.assert_allclose(probs, verifier.predict(["claim number 3"], ["evidence indeed true 3"]), atol=1e-6)
    # scoring order does not change a pair's probabilities (length-sorted batches)
    many = shipped.predict(["x", "claim number 3", "a much longer claim " * 5], ["y", "evidence indeed true 3", "z"])
    np.testing.assert_allclose(many[1], probs[0], atol=1e-5)
    # the agent's thresholds, recorded in the manifest, load beside the pair thresholds
    from factrl.verifier.asset import record_agent_thresholds, verifier_manifest
    from factrl.verifier.scoring import Thresholds

    assert shipped.agent_thresholds is None and shipped.info()["agent_thresholds"] is None
    record_agent_thresholds(asset, Thresholds(0.6, 0.7), {"chosen_on": "test claims"})
    again = load_verifier("factrl-verifier", precision="fp32")
    assert again.agent_thresholds == Thresholds(0.6, 0.7) and again.thresholds == shipped.thresholds
    assert verifier_manifest(asset)["agent"] == {"thresholds": {"support": 0.6, "refute": 0.7},
                                                 "chosen_on": "test claims"}
    # shipping the same delta again keeps them; they belong to that delta
    assert ship_verifier(run.final_dir, asset, held_out=report, commands=["again"])["agent"]["thresholds"] == {
        "support": 0.6, "refute": 0.7}
    manifest = json.loads((asset / "manifest.json").read_text())
    manifest["agent"]["thresholds"]["refute"] = 1.5
    (asset / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(VerifierAssetError, match="agent thresholds"):
        load_verifier("factrl-verifier", precision="fp32")
    # a replaced delta is refused
    data = bytearray((asset / "delta.safetensors").read_bytes())
    data[-1] ^= 1
    (asset / "delta.safetensors").write_bytes(bytes(data))
    with pytest.raises(VerifierAssetError, match="SHA-256"):
        load_verifier("factrl-verifier")



def test_a_shallower_verifier_keeps_the_first_blocks_and_starts_from_a_deeper_delta(tmp_path):
    from factrl.verifier.asset import load_verifier
    from factrl.verifier.model import CrossEncoderConfig, build_cross_encoder, build_tiny_encoder, delta_state
    from factrl.verifier.train import VerifierTrainConfig, train_verifier

    base = str(build_tiny_encoder(tmp_path / "base3", layers=3))
    pairs = _pairs(24)
    deep = train_verifier(_config(base, epochs=0.5), tmp_path / "deep", pairs=pairs, log=lambda s: None)
    shallow = train_verifier(_config(base, epochs=0.5, layers=2, init_from=str(deep.final_dir)),
                             tmp_path / "shallow", pairs=pairs, log=lambda s: None)
    verifier = load_verifier(str(shallow.final_dir), precision="fp32")
    assert len(verifier.model.encoder.encoder.layer) == 2 and verifier.model.encoder.config.num_hidden_layers == 2
    assert verifier.predict(["claim number 3"], ["evidence indeed true 3"]).shape == (1, 3)
    model, _ = build_cross_encoder(CrossEncoderConfig(base=base, lora_r=4, lora_alpha=8, layers=2))
    assert not any(".layer.2." in n for n in delta_state(model))  # the dropped block leaves no delta
    # the shallow run starts from the deep delta's first two blocks, which fit it exactly
    from safetensors.torch import load_file

    from factrl.verifier.model import delta_for_blocks, load_delta

    start = load_file(str(deep.final_dir / "delta.safetensors"))
    assert any(".layer.2." in k for k in start)
    first_two = delta_for_blocks(start, 2)
    assert set(first_two) == set(delta_state(model)) and delta_for_blocks(start, None) == start
    load_delta(model, first_two)
    with pytest.raises(ValueError, match="does not fit"):
        load_delta(model, start)
    with pytest.raises(ValueError, match="layers=4, but the base encoder .* has 3 blocks"):
        build_cross_encoder(CrossEncoderConfig(base=base, layers=4))
    with pytest.raises(ValueError, match="layers is a count of blocks"):
        VerifierTrainConfig(base=base, layers=0)


def test_the_base_weights_are_hashed_once_per_process(tiny_base, tmp_path, monkeypatch):
    """retrieve_verify builds an environment per claim, each loading the verifier by name:
    the delta's checksum is checked every time, the ~90 MB base weights' once."""
    import factrl.lm.agent as agent_mod
    from factrl.envs import EnvDeps, build
    from factrl.verifier.asset import ship_verifier
    from factrl.verifier.train import train_verifier

    run = train_verifier(_config(tiny_base, epochs=0.2), tmp_path / "run", pairs=_pairs(24), log=lambda s: None)
    asset = tmp_path / "asset"
    ship_verifier(run.final_dir, asset, held_out={"n": 0}, commands=["factrl train verifier"])
    monkeypatch.setenv("FACTRL_VERIFIER_DIR", str(asset))
    hashed: list[str] = []
    real = agent_mod.file_sha256
    monkeypatch.setattr(agent_mod, "file_sha256", lambda p: hashed.append(Path(p).name) or real(p))
    for _ in range(3):
        build("retrieve_verify", EnvDeps(retriever=object()))
    assert hashed.count("delta.safetensors") >= 3  # every load checks the delta
    assert hashed.count("model.safetensors") <= 1

def test_bad_pairs_are_refused_clearly(tiny_base, tmp_path):
    from factrl.verifier.train import train_verifier

    run = train_verifier(_config(tiny_base, epochs=0.2), tmp_path / "run", pairs=_pairs(24), log=lambda s: None)
    from factrl.verifier.asset import load_verifier

    v = load_verifier(str(run.final_dir))
    with pytest.raises(ValueError, match="2 claims but 1"):
        v.predict(["a", "b"], ["c"])
    with pytest.raises(TypeError, match="not one string"):
        v.predict("a", "b")
    with pytest.raises(TypeError, match="pair 0"):
        v.predict([None], ["b"])
    assert v.predict([], []).shape == (0, 3)


def test_distill_loss_is_zero_at_the_teacher_and_scaled_by_t_squared():
    from factrl.verifier.train import _distill_loss

    t = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
    assert float(_distill_loss(t.clone(), t, 2.0)) == pytest.approx(0.0, abs=1e-7)
    s = torch.zeros(2, 3)
    p = torch.softmax(t / 2.0, -1)
    kl = float((p * (p.log() - torch.log(torch.full_like(p, 1 / 3)))).sum(-1).mean())
    assert float(_distill_loss(s, t, 2.0)) == pytest.approx(4.0 * kl, rel=1e-5)


def test_a_student_moves_toward_its_teacher(tmp_path, tiny_base):
    """A shallower student distilled from a trained teacher only (distill_weight 1) ends
    nearer the teacher's distributions than the same run without the teacher."""
    from factrl.verifier.asset import load_verifier
    from factrl.verifier.model import build_tiny_encoder
    from factrl.verifier.train import train_verifier

    base = str(build_tiny_encoder(tmp_path / "base3", layers=3))
    pairs = _pairs(48)
    teacher = train_verifier(_config(base, epochs=6.0), tmp_path / "teacher", pairs=pairs, log=lambda s: None)
    logs: list[str] = []
    student = train_verifier(_config(base, epochs=3.0, layers=2, teacher=str(teacher.final_dir), distill_weight=1.0),
                             tmp_path / "student", pairs=pairs, log=logs.append)
    plain = train_verifier(_config(base, epochs=3.0, layers=2), tmp_path / "plain", pairs=pairs, log=lambda s: None)
    assert any("with the teacher" in s for s in logs)
    info = json.loads((student.final_dir / "verifier.json").read_text())
    assert info["training"]["teacher"] == str(teacher.final_dir) and info["training"]["distill_weight"] == 1.0
    claims, evidence = [p.claim for p in pairs], [p.evidence for p in pairs]
    target = torch.softmax(torch.from_numpy(load_verifier(str(teacher.final_dir), precision="fp32")
                                            .logits(claims, evidence)), -1)

    def kl(run) -> float:
        q = torch.log_softmax(torch.from_numpy(load_verifier(str(run.final_dir), precision="fp32")
                                               .logits(claims, evidence)), -1)
        return float((target * (target.log() - q)).sum(-1).mean())

    assert kl(student) < kl(plain)
    # the same settings with another delta behind the teacher's name are other data: no resumption
    _swap(teacher.final_dir, plain.final_dir)
    with pytest.raises(ValueError, match="teacher's logits changed"):
        train_verifier(_config(base, epochs=3.0, layers=2, teacher=str(teacher.final_dir), distill_weight=1.0),
                       tmp_path / "student", pairs=pairs, log=lambda s: None)


def _swap(a: Path, b: Path) -> None:
    """Put run ``b``'s delta and calibration where run ``a``'s were."""
    import shutil

    for name in ("delta.safetensors", "verifier.json"):
        shutil.copy(Path(b) / name, Path(a) / name)


def test_bad_distillation_settings_are_refused(tiny_base):
    with pytest.raises(ValueError, match="distill_weight must be in"):
        _config(tiny_base, distill_weight=1.5)
