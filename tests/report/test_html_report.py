"""The HTML report: metrics of metrics.json on the page, escaping of hostile text,
confusion counts, differences between runs, and the `factrl report` command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _support import best_seconds
from factrl.cli import _load_commands, app
from factrl.report import RunDirError, html_report, load_run, write_html_report
from factrl.report._items import split_blocks

from report_runs import CLAIMS, HOSTILE_IMG, _answer, _traj, run_a, write_run

_load_commands()


def _cell(v: float) -> str:
    return f'<td class="num" title="{v!r}">{v:.3f}</td>'


def _blob(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def _confusion(page: str, run: str) -> dict[str, list[int]]:
    """``{gold: [count per predicted column..., no label]}`` of one run's matrix."""
    m = re.search(rf'<h3>{re.escape(run)}</h3><table class="confusion">(.*?)</table>', page, re.S)
    assert m is not None, f"no confusion matrix for {run}"
    rows = {}
    for gold, cells in re.findall(r"<tr><th>([^<]*)</th>(.*?)</tr>", m.group(1)):
        rows[gold] = [int(x) for x in re.findall(r'<td class="num (?:diag|off)"[^>]*>(\d+)</td>', cells)]
    return rows


def test_metrics_of_metrics_json_appear(two_runs):
    a, _ = two_runs
    page = html_report([load_run(a)])
    saved = json.loads((a / "metrics.json").read_text())
    for key in ("label_acc", "verification_acc", "joint_acc", "evidence_score", "evidence_score_authors",
                "format_ok_rate", "macro_f1", "macro_precision", "macro_recall", "mean_reward"):
        assert _cell(saved[key]) in page, key
    for label, row in saved["per_label"].items():
        assert f"gold {label}" in page
        for key in ("label_acc", "joint_acc", "evidence_score"):
            assert _cell(row[key]) in page
    for hops, row in saved["per_hops"].items():
        assert f"{hops} hops" in page and _cell(row["macro_f1"]) in page
    assert "no answer" in page and "generate/LMRequestError" in page  # failure tables
    assert "Δ" not in page.split('id="trajectories"')[0]  # one run: nothing to compare


def test_several_runs_give_difference_columns(two_runs):
    a, b = two_runs
    page = html_report([load_run(a), load_run(b)])
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in two_runs)
    row = re.search(r"<tr><th>label accuracy</th>(.*?)</tr>", page).group(1)
    assert _cell(ma["label_acc"]) in row and _cell(mb["label_acc"]) in row
    assert f'class="num delta better">+{mb["label_acc"] - ma["label_acc"]:.3f}</td>' in row
    errors = re.search(r"<tr><th>episodes ended in error \(counted wrong\)</th>(.*?)</tr>", page).group(1)
    assert 'class="num delta better">−1</td>' in errors  # fewer errors is better
    assert page.count('<th class="num delta"') == 4  # overall, per label, per hops, failures
    assert 'class="differs">qwen</td>' in page  # settings that differ from the reference


def test_hostile_text_is_escaped(tmp_path):
    hostile_dir = tmp_path / "run<b>x</b>"
    write_run(hostile_dir, run_a(), {"dataset": "<i>ds</i>", "model": "m</script><script>alert(1)//"})
    page = html_report([load_run(hostile_dir)])
    assert page.count("<script") == 2  # the data blob and the page's own script
    assert "<img" not in page and "<b>x" not in page and "<i>ds" not in page
    assert "run&lt;b&gt;x&lt;/b&gt;" in page and "&lt;i&gt;ds&lt;/i&gt;" in page
    blob = _blob(page)  # the model's text survives intact as data
    texts = [b[2] for it in blob["runs"][0]["items"] for c in it["ctx"] for b in c["blocks"]]
    assert "document.body.setAttribute('data-pwned','1')" in texts
    assert any(HOSTILE_IMG in t for t in texts)


def test_confusion_matrix_counts(two_runs):
    a, b = two_runs
    page = html_report([load_run(a), load_run(b)])
    # Columns SUPPORT, REFUTE, NOT ENOUGH INFO, no label. Run A: c1 right, c2 REFUTE→SUPPORT,
    # c3 unanswered, c4 ended in an error (its parsed label does not count).
    assert _confusion(page, "smollm2-run") == {"SUPPORT": [1, 0, 0, 1], "REFUTE": [1, 0, 0, 0],
                                               "NOT ENOUGH INFO": [0, 0, 0, 1]}
    assert _confusion(page, "qwen-run") == {"SUPPORT": [1, 1, 0, 0], "REFUTE": [0, 1, 0, 0],
                                            "NOT ENOUGH INFO": [0, 0, 1, 0]}


def test_reliability_diagram_or_a_note(two_runs):
    a, b = two_runs
    page = html_report([load_run(a), load_run(b)])
    cal = page.split('id="calibration"')[1].split("</section>")[0]
    assert cal.count('<svg class="rel"') == 1  # run A has confidences
    assert "ECE=" in cal and "No confidences were recorded" in cal  # run B has none


def test_page_is_self_contained(two_runs):
    page = html_report([load_run(d) for d in two_runs])
    assert "<link" not in page and "@import" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert not re.search(r"url\(", page)


def test_trajectory_records(two_runs):
    a, _ = two_runs
    items = {it["id"]: it for it in _blob(html_report([load_run(a)]))["runs"][0]["items"]}
    assert set(items) == {c.id for c in CLAIMS}
    c1, c3, c4 = items["c1"], items["c3"], items["c4"]
    assert c1["ok"] and c1["gold"] == "SUPPORT" and c1["ev"][0][0] == "Nile_sentence_0"
    assert c1["reward"]["parts"]["label"] == 2.0 and c1["conf"] == 0.9 and c1["hops"] == 1
    assert [b[1] for b in c1["ctx"][0]["blocks"]] == ["plan", "search", "information", "think", "answer"]
    assert not c3["ok"] and not c3["fmt_ok"] and c3["fmt"] == ["no <answer> block"] and c3["pred"] is None
    assert c4["err"].startswith("generate failed") and c4["pred"] is None
    assert [c["role"] for c in c4["ctx"]] == ["agent", "searcher"]


def test_split_blocks_is_lenient():
    assert split_blocks("<plan>a</plan> x <search>b</search>") == [("plan", "a"), ("", " x "), ("search", "b")]
    assert split_blocks("<think>unclosed <answer>y") == [("think", "unclosed <answer>y")]
    assert split_blocks("</answer>stray") == [("", "</answer>stray")]
    assert split_blocks("\n\n") == []


def test_metrics_computed_when_metrics_json_is_missing(two_runs):
    a, _ = two_runs
    (a / "metrics.json").unlink()
    run = load_run(a)
    assert run.metrics_computed and run.metrics["n"] == 4
    assert "no metrics.json" in html_report([run])


def test_computed_metrics_follow_the_recorded_reward_convention(two_runs):
    a, _ = two_runs
    (a / "metrics.json").unlink()
    assert load_run(a).metrics["convention"] == "paper"
    info = json.loads((a / "run.json").read_text())
    info["reward"] = {"name": "veri_r1", "params": ["convention=authors_code"]}
    (a / "run.json").write_text(json.dumps(info))
    assert load_run(a).metrics["convention"] == "authors_code"


def test_not_a_run_directory(tmp_path):
    with pytest.raises(RunDirError, match="not an evaluation run directory"):
        load_run(tmp_path)
    with pytest.raises(RunDirError, match="not a directory"):
        load_run(tmp_path / "missing")


def test_thousands_of_trajectories_stay_light(tmp_path):
    claim = CLAIMS[0]
    for name, n in (("small", 150), ("big", 1500)):
        trajs = [_traj(claim.model_copy(update={"id": f"x{i}"}), "SUPPORT", ["Nile_sentence_0"],
                       _answer("SUPPORT", ["Nile_sentence_0"])) for i in range(n)]
        for i, t in enumerate(trajs):
            t.claim_id = f"x{i}"
        write_run(tmp_path / name, trajs, {})
    seconds = {name: best_seconds(write_html_report, [tmp_path / name], tmp_path / f"{name}.html")
               for name in ("small", "big")}
    # Ten times the items: linear work takes ~10x the time, quadratic ~100x (relative, so
    # the machine's load cancels out; 0.5 s for timer noise).
    assert seconds["big"] < 30 * seconds["small"] + 0.5, seconds
    out = tmp_path / "big.html"
    page = out.read_text()
    assert len(_blob(page)["runs"][0]["items"]) == 1500
    assert page.count("<details") == 0  # items are built by the script, on demand


def test_report_command(two_runs, tmp_path):
    a, b = two_runs
    runner = CliRunner()
    out = tmp_path / "out" / "cmp.html"
    r = runner.invoke(app, ["report", str(a), str(b), "--out", str(out), "--title", "A vs B"])
    assert r.exit_code == 0, r.output
    assert out.exists() and "<title>A vs B</title>" in out.read_text()
    r = runner.invoke(app, ["report", str(tmp_path / "nope"), "--out", str(out)])
    assert r.exit_code == 1 and "error:" in r.output and "not a directory" in r.output


def test_same_directory_names_are_told_apart(tmp_path):
    a, b = tmp_path / "x" / "run", tmp_path / "y" / "run"
    for d in (a, b):
        write_run(d, run_a(), {})
    page = write_html_report([a, b], tmp_path / "r.html").read_text()
    assert "<h3>x/run</h3>" in page and "<h3>y/run</h3>" in page
