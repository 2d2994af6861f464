"""The recipe's label probe reads labels through lm.label_scores: raw and calibrated
picks, a context with no finite label score counted as wrong, bad input refused."""

import math

import pytest

from factrl.labels import Label
from factrl.recipes.embedded_agent.probe import label_probe

S, R, N = Label.SUPPORT, Label.REFUTE, Label.NEI


class TableLM:
    """Characters as tokens; the score of a label after a context is looked up by the
    context's last character."""

    eos_token_id = 0

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table = table
        self.calls = 0

    def encode(self, text):
        return [ord(c) for c in text]

    def score(self, prompts, continuations):
        self.calls += 1
        return [self.table[chr(p[-1])]["".join(map(chr, c)).strip()] for p, c in zip(prompts, continuations)]


def _row(s, r, n):
    return {"SUPPORT": s, "REFUTE": r, "NOT ENOUGH INFO": n}


def test_raw_and_calibrated_picks_and_an_unread_context_counts_as_wrong():
    inf = math.inf
    # SUPPORT carries a +2 bias everywhere; calibration removes it. "d" gives no finite score.
    lm = TableLM({"a": _row(-1.0, -2.7, -3.5), "b": _row(-1.5, -2.0, -4.0), "c": _row(-1.5, -4.0, -2.0),
                  "d": _row(-inf, -inf, -inf)})
    ctxs = [lm.encode(x) for x in "abcd"]
    out = label_probe(lm, ctxs, [S, R, N, S])
    assert lm.calls == 1  # every context and label in one score call
    assert out["raw"]["predicted"] == {"SUPPORT": 3, "REFUTE": 0, "NOT ENOUGH INFO": 0}
    assert out["raw"]["unread"] == 1 and out["raw"]["acc"] == 0.25
    # bias over the finite scores: S -1.333, R -2.9, N -3.167
    assert out["calibrated"]["predicted"] == {"SUPPORT": 1, "REFUTE": 1, "NOT ENOUGH INFO": 1}
    assert out["calibrated"]["acc"] == 0.75 and out["calibrated"]["unread"] == 1
    assert out["calibrated"]["recall"] == {"SUPPORT": 0.5, "REFUTE": 1.0, "NOT ENOUGH INFO": 1.0}


def test_contexts_without_matching_gold_labels_are_refused():
    lm = TableLM({"a": _row(-1.0, -2.0, -3.0)})
    with pytest.raises(ValueError, match="one gold label per context"):
        label_probe(lm, [lm.encode("a")], [S, R])
    with pytest.raises(ValueError, match="one gold label per context"):
        label_probe(lm, [], [])


def test_the_judgement_drill_imports_the_one_label_choice_api():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "judgement_drill.py"
    spec = importlib.util.spec_from_file_location("judgement_drill", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # its imports resolve (main() only runs as a script)
    from factrl.lm.label_scores import label_continuations

    assert module.label_continuations is label_continuations and module.label_probe is label_probe
