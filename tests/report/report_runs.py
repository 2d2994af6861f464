"""Run directories written by hand for the HTML report's tests: a few trajectories with
hostile model text, confidences, hop counts, an episode error and a multi-context one."""

from __future__ import annotations

import json
from pathlib import Path

from factrl.metrics import compute_metrics
from factrl.types import Claim, EvidenceRef, Message, RewardBreakdown, Segment, Trajectory, Turn, Verdict

HOSTILE = "<script>document.body.setAttribute('data-pwned','1')</script>"
HOSTILE_IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">"

CLAIMS = [
    Claim(id="c1", text="The Nile flows through Egypt.", label="SUPPORT",
          evidence=[EvidenceRef(id="Nile_sentence_0", text="The Nile flows north through Egypt.")],
          meta={"num_hops": 1}),
    Claim(id="c2", text="Paris is the capital of Spain.", label="REFUTE",
          evidence=[EvidenceRef(id="Paris_sentence_0", text="Paris is the capital of France.")],
          meta={"num_hops": 2}),
    Claim(id="c3", text="The Danube has exactly 300 tributaries.", label="NEI", meta={"num_hops": 2}),
    Claim(id="c4", text="Mount Everest is in Nepal.", label="SUPPORT",
          evidence=[EvidenceRef(id="Everest_sentence_1", text="Everest lies on the Nepal–China border.")],
          meta={"num_hops": 1}),
]


def _turn(source: str, text: str) -> Turn:
    return Turn(source=source, text=text, token_ids=[], mask=[])


def _traj(claim: Claim, label: str | None, cited: list[str], text: str, *, conf: float | None = None,
          error: str | None = None, segments: list[Segment] | None = None) -> Trajectory:
    answered = label is not None
    verdict = Verdict(label=label, evidence_ids=cited, format_ok=answered and error is None,
                      format_errors=[] if answered else ["no <answer> block"], answered=answered)
    gold = set(claim.evidence_ids)
    ok = label is not None and label == claim.label.value
    iou = len(gold & set(cited)) / len(gold | set(cited)) if gold | set(cited) else 1.0
    reward = RewardBreakdown(components={"format": 1.0 if answered else 0.0, "evidence": iou, "label": 2.0 * ok},
                             total=(1.0 if answered else 0.0) + iou + 2.0 * ok)
    info = ("\n\n<information>\n[[Nile_sentence_0]]: Nile — The Nile flows north through Egypt.\n"
            "[[Nile_sentence_1]]: It is long.\n</information>\n\n")
    turns = [_turn("model", "<plan>Find where the river flows.</plan><search>river egypt</search>"),
             _turn("env", info), _turn("model", text)]
    return Trajectory(claim_id=claim.id, env="veri_r1", claim=claim,
                      prompt=[Message(role="user", content=f"Verify the claim:\n{claim.text}")],
                      turns=turns, verdict=verdict, reward=reward, searches=["river egypt"],
                      retrieved_ids=["Nile_sentence_0", "Nile_sentence_1"], error=error,
                      meta={} if conf is None else {"confidence": conf}, segments=segments or [],
                      timings={"total_s": 1.5})


def _answer(label: str, ids: list[str]) -> str:
    return f"<think>reasoning</think><answer>Label: {label}\nEvidence: {' '.join(f'[[{i}]]' for i in ids)}</answer>"


def run_a() -> list[Trajectory]:
    c1, c2, c3, c4 = CLAIMS
    seg = Segment(role="searcher", prompt=[Message(role="user", content="Search for: Everest")],
                  turns=[_turn("model", "<search>everest nepal</search>")])
    return [
        _traj(c1, "SUPPORT", ["Nile_sentence_0"], _answer("SUPPORT", ["Nile_sentence_0"]), conf=0.9),
        _traj(c2, "SUPPORT", ["Nile_sentence_1"], HOSTILE + HOSTILE_IMG + _answer("SUPPORT", ["Nile_sentence_1"]),
              conf=0.8),
        _traj(c3, None, [], "<think>no idea</think> rambling without an answer", conf=0.3),
        _traj(c4, "SUPPORT", ["Everest_sentence_1"], _answer("SUPPORT", ["Everest_sentence_1"]),
              error="generate failed: LMRequestError: server said 500", segments=[seg]),
    ]


def run_b() -> list[Trajectory]:
    c1, c2, c3, c4 = CLAIMS
    return [
        _traj(c1, "SUPPORT", ["Nile_sentence_0"], _answer("SUPPORT", ["Nile_sentence_0"])),
        _traj(c2, "REFUTE", ["Paris_sentence_0"], _answer("REFUTE", ["Paris_sentence_0"])),
        _traj(c3, "NOT ENOUGH INFO", [], _answer("NOT ENOUGH INFO", [])),
        _traj(c4, "REFUTE", [], _answer("REFUTE", [])),
    ]


def write_run(path: Path, trajs: list[Trajectory], info: dict) -> dict:
    """A run directory as evaluate() leaves it (without report files); returns metrics."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "trajectories.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trajs))
    metrics = compute_metrics(trajs)
    (path / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (path / "run.json").write_text(json.dumps(info))
    return metrics


def write_two_runs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "smollm2-run", tmp_path / "qwen-run"
    write_run(a, run_a(), {"dataset": "jsonl", "model": "smollm2", "agent": {"name": "veri_r1", "params": {}},
                           "temperature": 0.0, "seed": 0})
    write_run(b, run_b(), {"dataset": "jsonl", "model": "qwen", "agent": {"name": "veri_r1", "params": {}},
                           "temperature": 0.0, "seed": 0})
    return a, b
