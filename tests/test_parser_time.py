"""Every parser of every registered environment, reward and run metric, and the named
module-level parse functions, on about 100 kB of what a small model (or an LM judge
behind a server that ignores max_tokens) can emit: each must stay linear.

Environments, rewards and metrics are found through their registries, so a new one is
timed here without being listed. Times are relative to a plain text of the same size
through the same parser (the machine's speed and load cancel out), plus a floor scaled by
a plain Python pass over the text; a parser that backtracks or re-scans quadratically
takes seconds to hours here."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from factrl.envs import ENVS, EnvDeps, build
from factrl.labels import Label, UnknownLabelError, normalise_label
from factrl.lm.base import Generation, GenerationConfig
from factrl.metrics.atomic_claims import EXTRACT_PROMPT
from factrl.metrics.run_metrics import RUN_METRICS
from factrl.rewards import REWARDS, RewardDeps, RewardSpec, build_reward
from factrl.types import Claim, EvidenceRef, Hit, Message, Passage, Trajectory, Turn, Verdict

from _factworld import write_hand_world

SIZE = 100_000


def _fill(unit: str, size: int, head: str = "", tail: str = "") -> str:
    body = size - len(head) - len(tail)
    return head + (unit * (body // len(unit) + 1))[:body] + tail


# (unit repeated, text before it, text after it): the tags, brackets, fences, keys and
# blank runs the parsers look for, alone or after the opening that makes a pattern try.
_HOSTILE: dict[str, tuple[str, str, str]] = {
    name or unit: (unit, "", "") for name, unit in [
        ("", "<think>"), ("", "</think>"), ("", "<answer>"), ("", "</answer>"), ("", "<search>"),
        ("", "</search>"), ("", "</question>"), ("", "</verification>"), ("", "</report>"), ("", "<questions>"),
        ("", "<verdict>"), ("", "[["), ("", "]]"), ("", "["), ("", "{"), ("", "}"), ("", '"'), ("", "'"),
        ("", "\\"), ("", "```"), ("newlines", "\n"), ("blank lines", " \n"), ("spaces", " "), ("", "*"),
        ("", "<"), ("", "</"), ("", "Label:"), ("", "Evidence: "), ("", "SCORE: 1 "), ("", '{"SCORE": 1}'),
        ("", "1. "), ("", "Action: search["), ("", "Thought:\n"), ("", "\\boxed{"), ("", "yes no "),
        ("", "<answer>Label: SUPPORT\nEvidence: [[a]]</answer>"), ("", "{}"), ("", '{"'), ("", "```json\n"),
    ]
}
_HOSTILE.update({
    "unclosed think": ("a", "<think>", ""),
    "fence and a long language name": ("a", "```", ""),
    "fence and spaces": (" ", "```json", "x"),
    "score and spaces": (" ", "SCORE:", "x"),
    "reasoning and escapes": ("\\a", "REASONING: '", ""),
    "label and spaces": (" ", "Label:", "x"),
    "answer label and blank lines": (" \n", "<answer>Label: ", ""),
    "boxed and spaces": (" ", "\\boxed{", ""),
    "object of strings": ('"x", ', "{", ""),
    "python literal": ("1, ", "{'SCORE': [", "]}"),
    "verification with boxed and spaces": (" ", "<verification>\\boxed{", "</verification>"),
})

PLAIN = _fill("The Nile flows north through Egypt into the Mediterranean Sea. It is 6,650 km long.\n", SIZE)


def hostile(name: str, size: int = SIZE) -> str:
    unit, head, tail = _HOSTILE[name]
    return _fill(unit, size, head, tail)


# -- what the registered components need ------------------------------------------------

CLAIM = Claim(
    id="c1", text="The Nile flows north.", label=Label.SUPPORT,
    evidence=[EvidenceRef(id="nile_0", text="The Nile flows north into the Mediterranean.")],
    meta={"kind": "long", "documents": [{"id": "nile", "title": "Nile", "text": "The Nile flows north."}],
          "questions": [{"question": "Where does the Nile flow?", "answers": [{"answer": "North."}]}],
          "pseudo_answer": "North.", "answers": ["north"]},
)
SHORT = CLAIM.model_copy(update={"id": "c2", "meta": {**CLAIM.meta, "kind": "short"}})


class OneHitRetriever:
    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        p = Passage(id="nile", doc_id="nile", title="Nile", text="The Nile flows north.",
                    sentences=["The Nile flows north."], sentence_ids=["nile_0"])
        return [[Hit(passage=p, score=1.0)] for _ in queries]


class EchoLM:
    """A text-level LM (a verifier, a judge) that answers every conversation with one
    fixed text, however long: what a server that ignores ``max_tokens`` may send. Asked
    for atomic claims, it lists that text as one claim, so the judge sees it too."""

    name = "echo"
    eos_token_id = 0

    def __init__(self, text: str) -> None:
        self.text = text

    def complete(self, conversations: list[list[Message]], config: GenerationConfig) -> list[Generation]:
        return [Generation([], None, json.dumps([self.text]) if EXTRACT_PROMPT[:60] in conv[-1].content else self.text,
                           "eos") for conv in conversations]

    def score_choices(self, conversation: list[Message], choices: list[str]) -> list[float]:
        return [0.0] * len(choices)


def _trajectory(text: str, claim: Claim = CLAIM) -> Trajectory:
    """A finished episode whose model wrote ``text``, with the meta its environment
    would have filled from it (ProFact's questions and answers, Binary RAR's response),
    the report a HARIS search agent wrote (``text``)."""
    from factrl.protocol.profact import parse_answer, parse_questions
    from factrl.envs.rar import response_meta

    answer = parse_answer(text).answer
    questions = parse_questions(text, 5).questions
    return Trajectory(
        claim_id=claim.id, env="test", claim=claim, prompt=[],
        turns=[Turn(source="model", text=text, token_ids=[], mask=[])],
        verdict=Verdict(label=Label.SUPPORT, evidence_ids=["nile_0"], format_ok=True, answered=True),
        retrieved_ids=["nile_0"],
        meta={"questions": questions, "qa": [{"question": q, "answer": answer} for q in questions if answer],
              "report": text, **response_meta(claim, text)},
    )


def _deps(text: str) -> RewardDeps:
    lm = EchoLM(text)
    return RewardDeps(retriever=OneHitRetriever(), lms={"verifier": lm, "judge": lm})


# -- the cases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """``run(prepare(text))`` is timed without ``prepare`` (a fresh environment, a built
    reward, the trajectory it scores)."""

    run: Callable[[Any], object]
    prepare: Callable[[str], Any] = lambda text: text


def _env_cases() -> dict[str, Case]:
    deps = EnvDeps(retriever=OneHitRetriever())

    def fresh(name: str) -> Callable[[str], Any]:
        def prepare(text: str) -> Any:
            env = build(name, deps)
            env.reset(CLAIM)
            return env, text

        return prepare

    out = {}
    for name in [*ENVS.names(), *ENVS.aliases()]:
        out[f"env {name}: parse_verdict"] = Case(lambda a: a[0].parse_verdict(a[1]), fresh(name))
        out[f"env {name}: step"] = Case(lambda a: a[0].step(a[1]), fresh(name))
    return out


# Rewards that cannot be built without parameters: what each needs, made under a tmp path.
REWARD_PARAMS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "rar_factworld": lambda tmp: {"world": str(write_hand_world(tmp))},
}


def _reward_cases(tmp: Path | None = None) -> dict[str, Case]:
    def prepare(name: str) -> Callable[[str], Any]:
        params = REWARD_PARAMS[name](tmp) if name in REWARD_PARAMS and tmp is not None else {}
        return lambda text: (build_reward(RewardSpec(name=name, params=params), _deps(text)), [_trajectory(text)])

    return {f"reward {name}": Case(lambda a: a[0].score(a[1]), prepare(name)) for name in REWARDS.names()}


class _TmpDirs:
    """Fresh output directories for run metrics, made on demand under one tmp path."""

    def __init__(self, root: Path | None) -> None:
        self.root, self.n = root, 0

    def __call__(self) -> Path:
        assert self.root is not None
        self.n += 1
        path = self.root / f"run{self.n}"
        path.mkdir()
        return path


def _metric_cases(tmp_dir: _TmpDirs) -> dict[str, Case]:
    from factrl.metrics.veri_r1 import compute_metrics

    def prepare(name: str) -> Callable[[str], Any]:
        def args(text: str) -> Any:
            deps = _deps(text)
            return (RUN_METRICS.get(name), tmp_dir(), [_trajectory(text), _trajectory(text, SHORT)],
                    {"policy": deps.lms["judge"]}, build_reward("rar", deps))

        return args

    def veri_r1(text: str) -> list[Trajectory]:
        verdict = build("veri_r1", EnvDeps(retriever=OneHitRetriever())).parse_verdict(text)
        return [_trajectory(text).model_copy(update={"verdict": verdict})]

    out = {f"run metric {name}": Case(lambda a: a[0](a[1], a[2], lms=a[3], reward=a[4]), prepare(name))
           for name in RUN_METRICS.names()}
    out["metric veri_r1"] = Case(compute_metrics, veri_r1)
    return out


def _function_cases() -> dict[str, Case]:
    from factrl.envs.baselines import answer, decompose, react
    from factrl.envs.haris import reasoner, single
    from factrl.protocol import haris as protocol
    from factrl.protocol import profact, tags
    from factrl.protocol import text as textparse
    from factrl.envs.veri_r1 import parse_verdict
    from factrl.metrics import atomic_claims, failures, hallucination
    from factrl.rewards import haris, rar_verifier

    def label(text: str) -> object:
        try:
            return normalise_label(text)
        except UnknownLabelError:
            return None

    functions: dict[str, Callable[[str], object]] = {
        "tags.scan_blocks": tags.scan_blocks,
        "tags.last_block": lambda t: tags.last_block(t, "answer"),
        "tags.parse_answer": tags.parse_answer,
        "tags.parse_evidence_ids": tags.parse_evidence_ids,
        "tags.answer_label_span": tags.answer_label_span,
        "tags.check_protocol": lambda t: tags.check_protocol(t, allowed=("plan", "search", "answer"), first="plan"),
        "textparse.strip_think": textparse.strip_think,
        "textparse.code_fences": textparse.code_fences,
        "textparse.numbered_items": lambda t: textparse.numbered_items(t, "items"),
        "veri_r1.parse_verdict": lambda t: parse_verdict(t, online=True, max_searches=3),
        "profact.parse_questions": lambda t: profact.parse_questions(t, 5),
        "profact.parse_search_call": profact.parse_search_call,
        "profact.parse_answer": profact.parse_answer,
        "profact.parse_verdict_turn": profact.parse_verdict_turn,
        "baselines.answer_verdict": lambda t: answer.answer_verdict(t, evidence=True),
        "baselines.parse_evidence": answer.parse_evidence,
        "baselines.parse_label": answer.parse_label,
        "baselines.parse_subclaims": lambda t: decompose.parse_subclaims(t, 4),
        "baselines.split_model_text": decompose.split_model_text,
        "baselines.parse_action": react.parse_action,
        "baselines.parse_react": lambda t: react.parse_react(t, max_steps=3),
        "haris.parse_turn": lambda t: protocol.parse_turn(t, ("question", "verification")),
        "haris.parse_boxed": protocol.parse_boxed,
        "haris.split_turns": lambda t: protocol.split_turns(t, ("</question>", "</verification>")),
        "haris.parse_single_text": lambda t: single.parse_single_text(t, 5),
        "haris.parse_reasoner_text": lambda t: reasoner.parse_reasoner_text(t, 5),
        "haris.parse_judge": haris.parse_judge,
        "rar_verifier.parse_verifier_output": rar_verifier.parse_verifier_output,
        "rar_verifier.parse_verifier_output (rating)": lambda t: rar_verifier.parse_verifier_output(t, scale=10),
        "atomic_claims.parse_claim_list": atomic_claims.parse_claim_list,
        "atomic_claims.parse_judgement": atomic_claims.parse_judgement,
        "hallucination.is_abstention": hallucination.is_abstention,
        "hallucination.matches_gold": lambda t: hallucination.matches_gold(t, ["nile river"]),
        "failures.classify_format_error": failures.classify_format_error,
        "failures.episode_error_type": failures.episode_error_type,
        "labels.normalise_label": label,
    }
    return {name: Case(f) for name, f in functions.items()}


def _all_cases(tmp: Path | None = None) -> dict[str, Case]:
    return {**_env_cases(), **_reward_cases(tmp), **_metric_cases(_TmpDirs(tmp)), **_function_cases()}


_CASES = list(_all_cases())


def _best(case: Case, text: str, repeats: int, budget: float = 0.0) -> float:
    """The best time of up to ``repeats`` runs, stopping at the first under ``budget``."""
    best = float("inf")
    for _ in range(repeats):
        arg = case.prepare(text)
        start = time.perf_counter()
        case.run(arg)
        best = min(best, time.perf_counter() - start)
        if best < budget:
            break
    return best


def _char_loop(text: str) -> int:
    return sum(1 for ch in text if ch == "<")


# Each hostile text is timed at growing sizes, each against the plain text's time at that
# size, so a cubic parser fails in milliseconds at 100 characters instead of running for
# hours at 100 kB.
SIZES = (100, 1_000, 10_000, SIZE)


@pytest.mark.parametrize("name", list(_CASES))
def test_every_parser_is_linear_on_hostile_text(name: str, tmp_path) -> None:
    _assert_linear(name, _all_cases(tmp_path)[name])


def test_a_parser_quadratic_on_hostile_text_fails_the_check() -> None:
    import re

    def rescan(text: str) -> int:  # every <think> finds each '<' after it: quadratic
        # (a regex pass, not str.count: count's per-call cost hides the n² term up to 10 kB,
        # so it grew only ~50x from 10 kB to 100 kB here and could pass as linear)
        return sum(len(re.findall("<", text[m.start():])) for m in re.finditer("<think>", text))

    with pytest.raises(AssertionError, match="on '<think>'"):
        _assert_linear("rescan", Case(rescan))


def _assert_linear(name: str, case: Case) -> None:
    case.run(case.prepare(PLAIN[:1000]))  # warm-up: lazy imports, first-call caches
    before: dict[str, float] = {}  # each hostile text's time at the size before
    for size in SIZES:
        plain = PLAIN[:size]
        budget = _budget(case, plain, 3)
        for kind in _HOSTILE:
            seconds = _best(case, hostile(kind, size), 3, budget)
            if seconds >= budget:  # a near miss on a loaded box: measure both again, longer
                budget = max(budget, _budget(case, plain, 10))
                seconds = _best(case, hostile(kind, size), 10, budget)
            # over the budget but grown less than 50x from a 10x smaller text: a slow
            # constant on a loaded box (linear grows 10x; load adds a few x), not a
            # super-linear parser (quadratic grows 100x, cubic 1000x)
            linear = kind in before and seconds < 50 * max(before[kind], 1e-3)
            assert seconds < budget or linear, (
                f"{name}: {seconds:.3f} s on {kind!r} ({size} chars), budget {budget:.3f} s"
                + (f", {before[kind]:.4f} s at a tenth of the size" if kind in before else ""))
            before[kind] = seconds


def _budget(case: Case, plain: str, repeats: int) -> float:
    """50x the plain text's time (a text of tiny sentences or many tags costs a linear
    parser up to ~15x prose), plus 20 plain Python passes over every character (what a
    parser that is linear but unhurried may spend) and 5 ms for timer noise and load; a
    super-linear parser is far past it at one size or another."""
    return 50 * _best(case, plain, repeats) + 20 * _best(Case(_char_loop), plain, repeats) + 0.005


def _package_names(registry: Any) -> list[str]:
    """The registry's entries that factrl itself provides: test modules collected in the
    same session register their own toy agents (plugin tests), which are not timed here."""
    out = []
    for name in registry.names():
        if name in registry._lazy:
            out.append(name)
            continue
        obj = registry._items[name]
        if str(getattr(obj, "__module__", "factrl")).startswith("factrl"):
            out.append(name)
    return out


def test_the_registries_are_all_covered() -> None:
    """The cases above come from the registries: every environment, reward and run
    metric is timed (a registry that stopped listing its entries would time nothing)."""
    assert {f"env {n}: parse_verdict" for n in _package_names(ENVS)} <= set(_CASES)
    assert {f"reward {n}" for n in _package_names(REWARDS)} <= set(_CASES)
    assert {f"run metric {n}" for n in _package_names(RUN_METRICS)} <= set(_CASES)
    assert {"veri_r1", "rag", "react", "decompose", "direct", "haris", "profact", "rar"} <= set(ENVS.names())
    assert {"veri_r1", "rar", "haris_low", "profact"} <= set(REWARDS.names()) and "rar" in RUN_METRICS.names()
