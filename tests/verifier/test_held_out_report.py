"""Held-out evaluation: per-source blocks, SciFact's rationale subset (titled or not)."""

from __future__ import annotations

import numpy as np

from factrl.labels import Label
from factrl.verifier.evaluate import evaluate_pairs
from factrl.verifier.pairs import Pair


class _ByWord:
    """Reads the label off the evidence's first word (SUPPORT / REFUTE / anything else)."""

    def predict(self, claims, evidence):
        rows = {"SUPPORT": [0.8, 0.1, 0.1], "REFUTE": [0.1, 0.8, 0.1]}
        return np.array([rows.get(e.split()[0], [0.1, 0.1, 0.8]) for e in evidence])


def _pairs(source: str) -> list[Pair]:
    rows = [("1", "SUPPORT x", Label.SUPPORT, "gold"), ("2", "REFUTE y", Label.REFUTE, "gold"),
            ("3", "other z", Label.NEI, "cited"), ("1", "REFUTE w", Label.NEI, "hard_negative")]
    return [Pair(source, cid, "claim", ev, label, kind, cid, "held_out") for cid, ev, label, kind in rows]


def test_the_rationale_subset_is_reported_for_both_scifact_sources_only():
    pairs = _pairs("scifact") + _pairs("scifact_titled") + _pairs("climate_fever")
    report = evaluate_pairs(_ByWord(), pairs, rounds=20)["sources"]
    for source in ("scifact", "scifact_titled"):
        assert report[source]["rationale"]["n"] == 3  # gold and cited, not the hard negative
        assert report[source]["rationale"]["macro_f1"] == 1.0
        assert report[source]["all"]["n"] == 4 and report[source]["all"]["accuracy"] == 0.75
    assert set(report["climate_fever"]) == {"all"}
