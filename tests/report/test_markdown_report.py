from __future__ import annotations

import pytest

from factrl.labels import Label
from factrl.metrics import compute_metrics
from factrl.report import format_summary_line, metrics_markdown
from factrl.report.markdown import format_failure_lines
from factrl.types import Claim, EvidenceRef, Verdict

METRICS = {
    "n": 14,
    "label_acc": 0.5,
    "verification_acc": 5 / 14,
    "joint_acc": 4 / 14,
    "evidence_score": 0.31,
    "evidence_score_with_gold": 0.4,
    "format_ok_rate": 13 / 14,
    "macro_f1": 0.48,
    "majority_baseline": {"label": "REFUTE", "acc": 6 / 14},
    "errors": 1,
    "per_label": {
        "SUPPORT": {"n": 5, "label_acc": 0.6, "verification_acc": 0.4, "joint_acc": 0.2,
                    "evidence_score": 0.3},
        "NOT ENOUGH INFO": {"n": 3, "label_acc": None, "verification_acc": None,
                            "joint_acc": None, "evidence_score": None},
    },
}


def test_summary_line() -> None:
    assert format_summary_line(METRICS) == (
        "n=14 label_acc=0.500 verification_acc=0.357 joint_acc=0.286 evidence_score=0.310 "
        "format_ok=0.929"
    )


def test_failure_lines() -> None:
    m = {**METRICS, "episode_errors": {"generate/LMRequestError": 1},
         "format_failures": {"no_answer": 2, "text_outside_tags": 0, "bad_evidence_ids": 1},
         "episodes_with_format_failures": 3}
    assert format_failure_lines(m) == ["episode errors: 1 of 14 episodes (generate/LMRequestError 1)",
                                       "format failures: 3 of 14 episodes (no answer 2, bad evidence ids 1)"]
    assert format_failure_lines(compute_metrics([])) == []


def test_summary_line_of_empty_run() -> None:
    assert format_summary_line(compute_metrics([])) == (
        "n=0 label_acc=n/a verification_acc=n/a joint_acc=n/a evidence_score=n/a format_ok=n/a"
    )


def test_markdown_tables() -> None:
    md = metrics_markdown(METRICS, title="FEVER dev, BM25, SmolLM2")
    lines = md.splitlines()
    assert lines[0] == "# FEVER dev, BM25, SmolLM2"
    assert "| joint accuracy | 0.286 |" in lines
    assert "| episodes ended in error (counted wrong) | 1 |" in lines
    assert "| SUPPORT | 5 | 0.600 | 0.400 | 0.200 | 0.300 |" in lines
    assert "| NOT ENOUGH INFO | 3 | n/a | n/a | n/a | n/a |" in lines
    assert any(line.startswith("Majority baseline: always answering `REFUTE`") and "0.429" in line
               for line in lines)
    assert "mean reward" not in md  # absent key, absent row


def test_markdown_of_real_metrics() -> None:
    c = Claim(id="c", text="t", label=Label.SUPPORT, evidence=[EvidenceRef(id="a")])
    m = compute_metrics([(c, Verdict(label=Label.SUPPORT, evidence_ids=["a"], format_ok=True))])
    md = metrics_markdown(m, title="one")
    assert "| SUPPORT | 1 | 1.000 | 1.000 | 1.000 | 1.000 |" in md.splitlines()


def test_rejects_a_dict_that_is_not_metrics() -> None:
    with pytest.raises(ValueError, match="label_acc"):
        metrics_markdown({"n": 3}, title="x")
    with pytest.raises(ValueError, match="compute_metrics"):
        format_summary_line({})


def test_markdown_shows_failure_counts_and_run_counts() -> None:
    m = {**METRICS, "evidence_score_authors": 0.2, "evidence_convention": "paper: IoU(empty, empty) = 1",
         "convention": "authors_code", "evidence_cover": 0.25,
         "format_failures": {"no_answer": 3, "text_outside_tags": 0, "forged_information": 1,
                             "unparseable_label": 0, "bad_evidence_ids": 2, "other": 0},
         "episodes_with_format_failures": 5, "episode_errors": {"env_step/TimeoutError": 1},
         "skipped_rows": 4, "duplicates_ignored": 2}
    lines = metrics_markdown(m, title="t").splitlines()
    assert "| evidence score, authors' convention (IoU 0 when gold is empty) | 0.200 |" in lines
    assert "| episodes with format failures | 5 |" in lines
    assert "| dataset rows skipped (malformed) | 4 |" in lines
    assert "| duplicate records ignored | 2 |" in lines
    assert "Format failures (episodes per kind): no answer 3, forged information 1, bad evidence ids 2.  " in lines
    assert "Episode errors by type: env_step/TimeoutError 1.  " in lines
    assert "Evidence score convention: paper: IoU(empty, empty) = 1." in lines
    assert "Judged under the reward convention: authors_code.  " in lines
    assert "| evidence cover (every gold id cited) | 0.250 |" in lines


def test_markdown_shows_accuracy_by_confidence_tier() -> None:
    from factrl.types import Message, Trajectory

    def traj(i: int, label: str, conf: float) -> Trajectory:
        claim = Claim(id=f"c{i}", text="t", label=Label.SUPPORT)
        return Trajectory(claim_id=claim.id, env="veri_r1", claim=claim, prompt=[Message(role="user", content="t")],
                          verdict=Verdict(label=label, format_ok=True, answered=True), meta={"confidence": conf})

    m = compute_metrics([traj(0, "SUPPORT", 0.99), traj(1, "REFUTE", 0.5), traj(2, "SUPPORT", 0.9)])
    md = metrics_markdown(m, title="conf").splitlines()
    assert "## Confidence of the label (Veri-R1 §4.3)" in md
    assert "| all | 1 | 0.000 | 1 | 1.000 | 1 | 1.000 |" in md
    assert "| REFUTE | 1 | 0.000 | 0 | n/a | 0 | n/a |" in md
    assert "## Confidence of the label (Veri-R1 §4.3)" not in metrics_markdown(METRICS, title="x")
