"""The trained verifier shipped in factrl/assets/verifier: intact, small, documented by its
manifest, loads offline by name, reads an obvious pair the right way round, and runs the
retrieve_verify agent from `factrl verify` with its defaults."""

import json
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

from factrl.lm.agent import file_sha256
from factrl.verifier.asset import DELTA_FILE, MAX_BYTES, verifier_asset_dir, verifier_manifest


def test_the_delta_matches_its_manifest_and_is_small():
    d = verifier_asset_dir()
    manifest = verifier_manifest(d)  # raises on a checksum mismatch (delta or base weights)
    assert manifest["sha256"] == file_sha256(d / DELTA_FILE)
    assert (d / DELTA_FILE).stat().st_size == manifest["bytes"] <= MAX_BYTES
    assert isinstance(manifest.get("seed"), int)
    for key in ("commands", "data", "held_out", "validation", "thresholds", "temperature"):
        assert manifest.get(key) not in (None, {}, []), f"the manifest lacks {key!r}"
    assert any(c.startswith("factrl train verifier") for c in manifest["commands"])
    held = manifest["held_out"]["sources"]
    # every training source with held-out claims is scored (training-only sources have none)
    scored = {s for s in manifest["training"]["sources"] if manifest["data"]["sources"][s]["claims"]["held_out"]}
    assert held and set(held) == scored
    for source, block in held.items():
        assert block["all"]["n"] > 0 and 0.0 <= block["all"]["macro_f1"] <= 1.0, source
    assert held["scifact"]["rationale"]["n"] > 0


def test_the_shipped_verifier_loads_by_name_and_reads_a_pair():
    from factrl.verifier.asset import load_verifier

    v = load_verifier("factrl-verifier")
    evidence = "Mount Kilimanjaro is located in Tanzania and is the highest mountain in Africa."
    probs = v.predict(["Mount Kilimanjaro is in Tanzania.", "Mount Kilimanjaro is in Kenya."], [evidence, evidence])
    assert probs.shape == (2, 3) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    # the claim with the wrong country is the more refuted one, the faithful one the more supported
    assert probs[1, 1] > probs[0, 1] and probs[0, 0] > probs[1, 0]


def test_bf16_scoring_keeps_the_labels_and_auto_picks_it_only_where_native():
    """bf16 (the default where the CPU multiplies it natively) gives fp32's labels and
    probabilities within a few hundredths; an unknown precision is refused."""
    from factrl.retrieval.encoders import native_bf16
    from factrl.verifier.asset import load_verifier

    claims = ["Vitamin D lowers the risk of fractures.", "The river flows north.", "Aspirin raises blood pressure.",
              "Smoking causes lung cancer."] * 3
    evidence = ["In the trial, vitamin D supplements reduced fractures by a third.",
                "The river flows south into the sea.", "The weather in Paris was mild this spring.",
                "Smoking is the leading cause of lung cancer."] * 3
    fp32 = load_verifier("factrl-verifier", precision="fp32")
    bf16 = load_verifier("factrl-verifier", precision="bf16")
    assert fp32.info()["precision"] == "fp32" and bf16.info()["precision"] == "bf16"
    ref, got = fp32.predict(claims, evidence), bf16.predict(claims, evidence)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert (got.argmax(1) == ref.argmax(1)).all()
    assert np.abs(got - ref).max() < 0.05
    auto = load_verifier("factrl-verifier")
    assert auto.info()["precision"] == ("bf16" if native_bf16(cpu=True) else "fp32")  # it runs on the CPU
    with pytest.raises(ValueError, match="precision"):
        load_verifier("factrl-verifier", precision="fp16")


def test_the_precision_variable_replaces_auto_and_a_bad_value_is_named(monkeypatch):
    """A reward or judge that names the verifier alone gets ``auto``; the variable
    pins it (fp32 to reproduce float32 figures on a bf16 CPU); an explicit precision wins."""
    from factrl.verifier.asset import PRECISION_ENV, VerifierAssetError, load_verifier

    monkeypatch.setenv(PRECISION_ENV, "fp32")
    assert load_verifier("factrl-verifier").info()["precision"] == "fp32"
    assert load_verifier("factrl-verifier", precision="bf16").info()["precision"] == "bf16"
    monkeypatch.setenv(PRECISION_ENV, " BF16 ")
    assert load_verifier("factrl-verifier").info()["precision"] == "bf16"
    monkeypatch.setenv(PRECISION_ENV, "fp16")
    with pytest.raises(VerifierAssetError, match=PRECISION_ENV):
        load_verifier("factrl-verifier")


@pytest.mark.data
@pytest.mark.slow  # rebuilds SciFact's pairs (BM25 hard negatives) and scores 359 of them: ~30 s
def test_the_manifest_held_out_scifact_figures_are_reproduced():
    """The manifest's held-out SciFact metrics are what the shipped delta gives on the
    held-out SciFact pairs rebuilt from the data (the split is seeded by claim group)."""
    from factrl.verifier.asset import load_verifier
    from factrl.verifier.evaluate import evaluate_pairs
    from factrl.verifier.pairs import SplitFractions
    from factrl.verifier.sources import SciFactPairs

    data = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not (data / "scifact" / "claims_train.jsonl").is_file():
        pytest.skip("../shared/data/scifact is not here")
    manifest = verifier_manifest()
    t = manifest["training"]
    fractions = SplitFractions(t["held_out"], t["validation"], t["split_seed"])
    held = [p for p in SciFactPairs().pairs(data, fractions) if p.split == "held_out"]
    report = evaluate_pairs(load_verifier("factrl-verifier", precision="fp32"), held, rounds=10)["sources"]["scifact"]
    for subset in ("all", "rationale"):
        want = manifest["held_out"]["sources"]["scifact"][subset]
        assert report[subset]["n"] == want["n"]
        assert report[subset]["macro_f1"] == pytest.approx(want["macro_f1"], abs=1e-3)
        assert report[subset]["contradiction_roc_auc"] == pytest.approx(want["contradiction_roc_auc"], abs=1e-3)


def test_verify_with_retrieve_verify_and_the_shipped_verifier(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app
    from factrl.retrieval.index import build_index

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("FACTRL_VERIFIER_DIR", raising=False)
    corpus = Path(str(files("factrl.demo") / "corpus.jsonl"))
    index = tmp_path / "index"
    build_index(corpus, index, corpus_format="jsonl", retriever="bm25", unit_sentences=3)
    _load_commands()
    r = CliRunner().invoke(app, ["verify", "Mount Kilimanjaro, the highest mountain in Africa, stands in Tanzania.",
                                 "--index", str(index), "--agent", "retrieve_verify", "--json", "--trajectory"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["error"] is None and out["label"] in ("SUPPORT", "REFUTE", "NOT ENOUGH INFO"), out
    assert out["trajectory"]["meta"]["verifier"] == "factrl-verifier" and out["trajectory"]["meta"]["scored"]
