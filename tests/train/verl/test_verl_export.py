import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from factrl.envs.veri_r1 import VeriR1Config, VeriR1Env
from factrl.labels import Label
from factrl.train.verl.export import (
    VERL_COLUMNS,
    VerlDataError,
    claim_from_row,
    context_from_row,
    export_verl_parquet,
    read_verl_parquet,
)
from factrl.types import Claim, EvidenceRef

from _support import WordOverlapRetriever

CLAIMS = [
    Claim(id="c1", text="The Nile flows north.", label="SUPPORTS", dataset="toy",
          evidence=[EvidenceRef(id="nile_sentence_1", doc_id="nile", text="It flows north.")],
          meta={"cited_doc_ids": ["nile"], "note": "é"}),
    Claim(id="c2", text="The Amazon is in Africa.", label="CONTRADICT", dataset="toy",
          evidence=[EvidenceRef(id="amazon_sentence_0", doc_id="amazon", text="The Amazon is in South America."),
                    EvidenceRef(id="amazon_sentence_2", doc_id="amazon", text="It reaches the Atlantic.")]),
    Claim(id="c3", text="Bees can count to nine.", label="NOT_ENOUGH_INFO", dataset="toy"),
]


def test_online_round_trip_and_prompt_equals_env_reset(tmp_path):
    out = tmp_path / "train.parquet"
    result = export_verl_parquet(CLAIMS, out, split="train")
    assert result.rows == 3 and result.skipped == [] and out.is_file()
    assert read_verl_parquet(out) == CLAIMS

    rows = pq.read_table(out).to_pylist()
    assert tuple(pq.read_schema(out).names) == VERL_COLUMNS
    env = VeriR1Env(WordOverlapRetriever([]))
    for i, (row, claim) in enumerate(zip(rows, CLAIMS)):
        assert row["prompt"] == [{"content": m.content, "role": m.role} for m in env.reset(claim)]
        assert row["reward_model"] == {"ground_truth": {"evidence": claim.evidence_ids, "label": claim.label.value},
                                       "style": "rule"}
        assert row["golden_answers"] == row["reward_model"]["ground_truth"]
        assert row["extra_info"]["index"] == i and row["extra_info"]["split"] == "train"
        assert row["extra_info"]["claim_id"] == claim.id and row["extra_info"]["mode"] == "online"
        assert (row["id"], row["question"], row["data_source"]) == (claim.id, claim.text, "toy")
    # Paper spellings, whatever the dataset wrote.
    assert [r["reward_model"]["ground_truth"]["label"] for r in rows] == ["SUPPORT", "REFUTE", "NOT ENOUGH INFO"]


def test_offline_export_keeps_context_for_the_agent_loop(tmp_path):
    extra = [EvidenceRef(id="nile_sentence_0", doc_id="nile", text="The Nile is long.")]
    out = tmp_path / "off.parquet"
    export_verl_parquet(CLAIMS[:2], out, env_kwargs={"mode": "offline"}, split="dev", data_source="toy-off",
                        context=lambda c: extra if c.id == "c1" else [])
    rows = pq.read_table(out).to_pylist()
    assert "[[nile_sentence_0]]: The Nile is long." in rows[0]["prompt"][0]["content"]
    assert "[[nile_sentence_1]]: It flows north." in rows[0]["prompt"][0]["content"]
    assert rows[0]["data_source"] == "toy-off" and rows[0]["extra_info"]["mode"] == "offline"
    assert context_from_row(rows[0]) == extra
    assert context_from_row(rows[1]) == []
    # The stored context rebuilds the same prompt.
    env = VeriR1Env(None, VeriR1Config(mode="offline"), context=lambda c: extra)
    assert rows[0]["prompt"][0]["content"] == env.reset(CLAIMS[0])[0].content
    assert read_verl_parquet(out) == CLAIMS[:2]


def test_unusable_claims_raise_or_are_skipped_and_counted(tmp_path):
    unlabelled = Claim(id="u1", text="No gold here.")
    with pytest.raises(VerlDataError, match="u1.*no gold label"):
        export_verl_parquet([CLAIMS[0], unlabelled], tmp_path / "a.parquet", split="train")
    assert not (tmp_path / "a.parquet").exists()
    # Offline needs evidence text.
    no_text = Claim(id="t1", text="Text-less evidence.", label="SUPPORT", evidence=[EvidenceRef(id="x_sentence_0")])
    result = export_verl_parquet([unlabelled, no_text, CLAIMS[1]], tmp_path / "b.parquet",
                                 env_kwargs={"mode": "offline"},
                                 split="train", skip_invalid=True)
    assert result.rows == 1
    assert [cid for cid, _ in result.skipped] == ["u1", "t1"]
    assert "evidence text" in result.skipped[1][1]
    assert pq.read_table(tmp_path / "b.parquet").column("extra_info").to_pylist()[0]["index"] == 0
    with pytest.raises(VerlDataError, match="nothing to write"):
        export_verl_parquet([unlabelled], tmp_path / "c.parquet", split="train", skip_invalid=True)


def test_agent_name_column(tmp_path):
    out = tmp_path / "a.parquet"
    export_verl_parquet(CLAIMS[:1], out, split="train", agent_name="factrl_env")
    assert pq.read_table(out).column("agent_name").to_pylist() == ["factrl_env"]
    assert read_verl_parquet(out) == CLAIMS[:1]


def test_claim_from_authors_style_row_with_numpy_values():
    """verl hands rows over with numpy arrays; the authors' files have no factrl claim."""
    content = "…protocol…\n\nVerify the claim:\nThe tower is granite.\n"
    row = {
        "data_source": "feverous",
        "prompt": np.array([{"content": content, "role": "user"}], dtype=object),
        "reward_model": {"ground_truth": {"evidence": np.array(["Tower_sentence_2"], dtype=object), "label": "SUPPORTS"},
                         "style": "rule"},
        "extra_info": {"index": 7, "split": "train_online"},
    }
    claim = claim_from_row(row)
    assert claim.text == "The tower is granite."
    assert claim.label is Label.SUPPORT and claim.evidence_ids == ["Tower_sentence_2"]
    assert claim.id == "feverous-7" and claim.dataset == "feverous"
    assert claim.meta == {"split": "train_online", "index": 7}
    row["raw_prompt"] = row.pop("prompt")  # verl's name for the prompt column
    assert claim_from_row(row) == claim
    row["question"], row["id"] = "The tower is granite!", "t7"
    assert claim_from_row(row).text == "The tower is granite!" and claim_from_row(row).id == "t7"


@pytest.mark.parametrize(
    "row, message",
    [
        ({"extra_info": {"index": 0}}, "no reward_model.ground_truth"),
        ({"reward_model": {"ground_truth": {"label": "MAYBE", "evidence": []}}, "question": "q"}, "bad ground truth"),
        ({"reward_model": {"ground_truth": {"label": "SUPPORT", "evidence": []}},
          "prompt": [{"role": "user", "content": "no marker"}]}, "no claim text"),
        ({"extra_info": {"claim": json.dumps({"id": "x"})}}, "not a claim record"),
    ],
)
def test_bad_rows_name_where_and_why(row, message):
    with pytest.raises(VerlDataError, match=f"somefile row 3: .*{message}"):
        claim_from_row(row, where="somefile row 3")


def test_reader_rejects_non_verl_files(tmp_path):
    import pyarrow as pa

    pq.write_table(pa.table({"x": [1]}), tmp_path / "x.parquet")
    with pytest.raises(VerlDataError, match="not a verl file"):
        read_verl_parquet(tmp_path / "x.parquet")
    with pytest.raises(FileNotFoundError):
        read_verl_parquet(tmp_path / "missing.parquet")


@pytest.mark.data
def test_reads_the_authors_files_and_reproduces_their_layout(shared_data, tmp_path):
    path = shared_data / "veri_r1" / "test_online.parquet"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    claims = read_verl_parquet(path)
    assert len(claims) == 512 and len({c.id for c in claims}) == 512
    assert {c.label for c in claims} == {Label.SUPPORT, Label.REFUTE, Label.NEI}
    assert all(c.evidence for c in claims) and {c.dataset for c in claims} == {"exfever", "feverous"}
    first = claims[0]
    assert first.id == "exfever_3803" and first.label is Label.REFUTE
    assert first.evidence_ids == ["London", "River Thames", "Tilbury"]

    # Exporting the same claims gives the authors' columns, types and prompts back.
    out = tmp_path / "again.parquet"
    export_verl_parquet(claims, out, split="test_on")
    theirs, ours = pq.read_table(path), pq.read_table(out)
    for name in VERL_COLUMNS:
        if name != "extra_info":
            assert ours.schema.field(name).type == theirs.schema.field(name).type, name
    for name in ("index", "split"):
        their_type = theirs.schema.field("extra_info").type.field(name).type
        assert ours.schema.field("extra_info").type.field(name).type == their_type
    for name in ("id", "question", "golden_answers", "data_source", "prompt", "ability", "reward_model"):
        assert ours.column(name).to_pylist() == theirs.column(name).to_pylist(), name
    assert read_verl_parquet(out) == claims


def test_mode_is_a_deprecated_alias_of_the_mode_parameter(tmp_path, monkeypatch):
    import warnings

    from factrl import components

    monkeypatch.setattr(components, "_MODE_WARNED", set())
    extra = [EvidenceRef(id="nile_sentence_0", doc_id="nile", text="The Nile is long.")]
    kw = dict(split="dev", context=lambda c: extra)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = export_verl_parquet(CLAIMS[:2], tmp_path / "a.parquet", mode="offline", **kw)
        export_verl_parquet(CLAIMS[:2], tmp_path / "b.parquet", mode="offline", **kw)
    deprecations = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(deprecations) == 1 and "mode='offline'" in str(deprecations[0].message)  # one warning
    export_verl_parquet(CLAIMS[:2], tmp_path / "c.parquet", env_kwargs={"mode": "offline"}, **kw)
    assert old.rows == 2
    assert pq.read_table(tmp_path / "a.parquet").to_pylist() == pq.read_table(tmp_path / "c.parquet").to_pylist()
    # An explicit mode parameter wins over the deprecated shorthand.
    export_verl_parquet(CLAIMS[:2], tmp_path / "d.parquet", mode="offline", env_kwargs={"mode": "online"}, split="dev")
    assert pq.read_table(tmp_path / "d.parquet").to_pylist()[0]["extra_info"]["mode"] == "online"


def test_an_environment_alias_is_recorded_under_its_registry_name(tmp_path):
    extra = [EvidenceRef(id="nile_sentence_0", doc_id="nile", text="The Nile is long.")]
    export_verl_parquet(CLAIMS[:1], tmp_path / "a.parquet", env="veri_r1_offline", split="dev", context=lambda c: extra)
    info = pq.read_table(tmp_path / "a.parquet").to_pylist()[0]["extra_info"]
    assert (info["env"], json.loads(info["env_params"]), info["mode"]) == ("veri_r1", {"mode": "offline"}, "offline")
