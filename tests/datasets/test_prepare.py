import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from factrl.datasets import DataSettings, SplitMismatchError, prepare_splits
from factrl.datasets.prepare import HELD_OUT_IDS, TRAIN_IDS
from factrl.labels import Label


def write_claims(path: Path, n: int = 20, *, extra: list[dict] | None = None) -> Path:
    labels = ["SUPPORT", "REFUTE", "NOT ENOUGH INFO"]
    rows = [{"id": f"c{i}", "claim": f"Claim number {i}.", "label": labels[i % 3]} for i in range(n)]
    rows += extra or []
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def data(tmp_path: Path) -> DataSettings:
    src = write_claims(tmp_path / "claims.jsonl", extra=[{"id": "u", "claim": "No label."}])
    return DataSettings(dataset="jsonl", data_dir=str(src), split="train", held_out_fraction=0.25, split_seed=3)


def ids(claims) -> list[str]:
    return [c.id for c in claims]


def test_first_call_splits_and_writes_the_ids(data: DataSettings, tmp_path: Path) -> None:
    run = tmp_path / "run"
    train, held_out = prepare_splits(data, run)
    assert len(train) + len(held_out) == 20  # the unlabelled claim is dropped
    assert not set(ids(train)) & set(ids(held_out))
    assert {c.label for c in held_out} == {Label.SUPPORT, Label.REFUTE, Label.NEI}  # stratified
    assert (run / TRAIN_IDS).read_text() == "".join(f"{i}\n" for i in ids(train))
    assert (run / HELD_OUT_IDS).read_text() == "".join(f"{i}\n" for i in ids(held_out))
    assert sorted(p.name for p in run.iterdir()) == [HELD_OUT_IDS, TRAIN_IDS]  # no temporary files left


def test_second_call_reads_the_recorded_split_back(data: DataSettings, tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = prepare_splits(data, run)
    before = {name: (run / name).read_bytes() for name in (TRAIN_IDS, HELD_OUT_IDS)}
    mtimes = {name: (run / name).stat().st_mtime_ns for name in before}
    # Other split settings would give another split: the recorded one wins.
    changed = replace(data, split_seed=99, held_out_fraction=0.5, limit=2)
    fresh = prepare_splits(changed, tmp_path / "other")
    assert ids(fresh[0]) != ids(first[0])
    again = prepare_splits(changed, run)
    assert again == first
    assert {name: (run / name).read_bytes() for name in before} == before
    assert {name: (run / name).stat().st_mtime_ns for name in before} == mtimes


def test_limit_caps_the_training_part_only_keeping_label_shares(data: DataSettings, tmp_path: Path) -> None:
    """The training part is label-grouped; a cap takes evenly spaced claims, not the first
    ones (which would all share one label)."""
    full_train, full_held = prepare_splits(data, tmp_path / "full")
    train, held_out = prepare_splits(replace(data, limit=6), tmp_path / "capped")
    assert len(train) == 6 and set(ids(train)) <= set(ids(full_train))
    assert sorted(Counter(c.label for c in train).values()) == [2, 2, 2]
    assert ids(held_out) == ids(full_held)
    assert _read(tmp_path / "capped" / TRAIN_IDS) == ids(train)
    assert prepare_splits(replace(data, limit=6), tmp_path / "capped") == (train, held_out)


def test_held_out_limit_caps_the_evaluated_part_keeping_label_shares(data: DataSettings, tmp_path: Path) -> None:
    full_train, full_held = prepare_splits(replace(data, held_out_fraction=0.5), tmp_path / "full")
    train, held_out = prepare_splits(replace(data, held_out_fraction=0.5, held_out_limit=6), tmp_path / "capped")
    assert ids(train) == ids(full_train)  # the claims left out are not trained on either
    assert len(held_out) == 6 and set(ids(held_out)) <= set(ids(full_held))
    assert sorted(Counter(c.label for c in held_out).values()) == [2, 2, 2]
    assert _read(tmp_path / "capped" / HELD_OUT_IDS) == ids(held_out)
    assert prepare_splits(replace(data, held_out_fraction=0.5, held_out_limit=50), tmp_path / "big")[1] == full_held
    with pytest.raises(ValueError, match="held_out_limit must be >= 1"):
        prepare_splits(replace(data, held_out_limit=0), tmp_path / "zero")


def test_recorded_ids_missing_from_the_dataset_raise(data: DataSettings, tmp_path: Path) -> None:
    run = tmp_path / "run"
    train, _ = prepare_splits(data, run)
    gone = train[0].id
    rows = [json.loads(line) for line in Path(data.data_dir).read_text().splitlines()]
    Path(data.data_dir).write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] != gone))
    before = (run / TRAIN_IDS).read_bytes()
    with pytest.raises(SplitMismatchError, match=rf"{TRAIN_IDS} names 1 claim id.*{gone}"):
        prepare_splits(data, run)
    assert (run / TRAIN_IDS).read_bytes() == before  # never rewritten


def test_half_a_recorded_split_is_an_error(data: DataSettings, tmp_path: Path) -> None:
    run = tmp_path / "run"
    prepare_splits(data, run)
    (run / HELD_OUT_IDS).unlink()
    with pytest.raises(FileNotFoundError, match=f"has {TRAIN_IDS} but not {HELD_OUT_IDS}"):
        prepare_splits(data, run)


def test_a_zero_training_cap_is_refused(tmp_path: Path) -> None:
    src = write_claims(tmp_path / "c.jsonl", n=3)
    with pytest.raises(ValueError, match="limit must be >= 1"):
        prepare_splits(DataSettings(dataset="jsonl", data_dir=str(src), limit=0), tmp_path / "run")
    assert not (tmp_path / "run" / TRAIN_IDS).exists()


def test_run_config_data_table_is_the_same_settings_class() -> None:
    from factrl.train.config import DataSettings as FromConfig, GRPORunConfig

    assert FromConfig is DataSettings and isinstance(GRPORunConfig().data, DataSettings)


def _read(path: Path) -> list[str]:
    return path.read_text().split()


def test_no_held_out_part_trains_on_every_claim(data: DataSettings, tmp_path: Path) -> None:
    # The HARIS and ProFact papers train on their whole training sets (evaluation is on
    # other splits): held_out_fraction = 0 keeps every usable claim for training.
    train, held_out = prepare_splits(replace(data, held_out_fraction=0.0), tmp_path / "all")
    assert len(train) == 20 and held_out == []
    assert (tmp_path / "all" / HELD_OUT_IDS).read_text() == ""
    assert prepare_splits(replace(data, held_out_fraction=0.0), tmp_path / "all") == (train, [])
    with pytest.raises(ValueError, match="held_out_fraction|test_fraction"):
        prepare_splits(replace(data, held_out_fraction=1.0), tmp_path / "none")
