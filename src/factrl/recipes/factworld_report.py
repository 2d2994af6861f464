"""The report of a factworld learning run (:mod:`factrl.recipes.factworld`): accuracy per
stage with 95 % Wilson intervals, exact McNemar tests paired by claim against the
warm-up and, for each broken-trainer control, the real run against it, and the reward
curves; for a staged agent (ProFact) also the question METEOR per stage with a paired
sign-flip test by claim against the warm-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factrl.recipes.factworld_eval import correct_by_id, facts_by_id, labels_by_id, pick
from factrl.recipes.factworld_short import short_rows, short_table

__all__ = ["write_report"]

Labels = dict[str, tuple[str, str | None, bool]]


def _by_label(labels: Labels, base: Labels) -> dict[str, Any]:
    """Right answers per gold label (with fixed / broken claims and the exact McNemar p
    against the warm-up ``base``) and how often each label was predicted."""
    from factrl.metrics.significance import mcnemar_by_id

    out: dict[str, Any] = {"per_label": {}, "predicted": {}}
    for gold in sorted({g for g, _, _ in labels.values()}):
        ids = [i for i, (g, _, _) in labels.items() if g == gold]
        right = {i: labels[i][2] for i in ids}
        cell: dict[str, Any] = {"n": len(ids), "right": sum(right.values())}
        if base is not labels:
            b, c, p = mcnemar_by_id(right, {i: base[i][2] for i in ids if i in base})
            cell.update({"fixed": b, "broken": c, "mcnemar_p": p})
        out["per_label"][gold] = cell
    for _, pred, _ in labels.values():
        key = "unread" if pred is None else pred
        out["predicted"][key] = out["predicted"].get(key, 0) + 1
    return out


def _label_table(rows: list[dict[str, Any]]) -> list[str]:
    """Right answers per gold label and the predicted labels, per stage: a gain on one
    label paid for by another is a moved prior, not a better judgement."""
    from factrl.labels import Label

    order = [str(lab) for lab in Label] + ["unread"]  # SUPPORT, REFUTE, NOT ENOUGH INFO first

    def ordered(names: set[str]) -> list[str]:
        return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))

    golds = ordered({g for row in rows for g in row.get("per_label", {})})
    if not golds:
        return []
    preds = ordered({p for row in rows for p in row.get("predicted", {})})
    lines = ["", "| stage | " + " | ".join(f"{g} right (fixed / broken, p)" for g in golds)
             + " | predicted " + " / ".join(preds) + " |", "|---" * (len(golds) + 2) + "|"]
    for row in rows:
        cells = []
        for g in golds:
            c = row.get("per_label", {}).get(g)
            if c is None:
                cells.append("-")
                continue
            vs = f" ({c['fixed']} / {c['broken']}, {c['mcnemar_p']:.2g})" if "mcnemar_p" in c else ""
            cells.append(f"{c['right']} of {c['n']}{vs}")
        counts = " / ".join(str(row.get("predicted", {}).get(p, 0)) for p in preds)
        lines.append(f"| {row['stage']} | " + " | ".join(cells) + f" | {counts} |")
    return lines


COLLAPSE_SHARE = 0.9  # one answer for at least this share of the claims: a collapsed policy


def _collapse(row: dict[str, Any]) -> str | None:
    """The one answer (a label, or "unread") a stage gives to at least ``COLLAPSE_SHARE``
    of the claims, else None."""
    predicted = row.get("predicted", {})
    total = sum(predicted.values())
    top = max(predicted, key=predicted.get, default=None)
    return top if total and predicted[top] >= COLLAPSE_SHARE * total else None


def _collapse_notes(rows: list[dict[str, Any]]) -> list[str]:
    """A warning per collapsed stage: its accuracy is that label's share of the claims, and
    a McNemar test against the warm-up then measures a moved prior, not verification."""
    lines = []
    for row in rows:
        top = row.get("collapsed_to")
        if top is None:
            continue
        n, k = sum(row["predicted"].values()), row["predicted"][top]
        what = "reads no label from" if top == "unread" else f"answers {top} to"
        lines.append(f"- **{row['stage']} {what} {k} of {n} claims**: a collapsed policy. Its accuracy is "
                     + ("0 by format alone" if top == "unread" else "that label's share of the claims")
                     + "; fixed / broken against the warm-up measure a moved label prior, not verification.")
    return ["", *lines] if lines else []


def real_vs_controls(correct: dict[str, dict[str, bool]], picked: str | None = None) -> list[dict[str, Any]]:
    """Each evaluated control against the real run, paired by claim (exact McNemar): at the
    real run's last checkpoint (the control's budget) and, when validation picked another,
    at the pick. ``correct``: stage name -> claim id -> right. A control can move a warm-up
    too (a zero-expectation trainer drifts, and its drift flips the warm-up's low-margin
    errors first), so whether the real trainer beats the broken one is asked directly."""
    from factrl.metrics.significance import mcnemar_by_id

    def pct(name: str) -> float:
        return float(name.split("@", 1)[1].rstrip("%"))

    real = sorted((n for n in correct if n.startswith("grpo@")), key=pct)
    if not real:
        return []
    against = [real[-1]] + ([picked] if picked in correct and picked != real[-1] and picked.startswith("grpo@") else [])
    out = []
    for control in (n for n in correct if n.startswith("control-")):
        for stage in against:
            a, b = correct[stage], correct[control]
            common = sorted(set(a) & set(b))
            only_real, only_control, p = mcnemar_by_id(a, b)
            out.append({"control": control, "real": stage, "n": len(common),
                        "real_accuracy": sum(a[i] for i in common) / len(common) if common else None,
                        "control_accuracy": sum(b[i] for i in common) / len(common) if common else None,
                        "real_only_right": only_real, "control_only_right": only_control,
                        "mcnemar_p": p})
    return out


def _real_vs_control_lines(pairs: list[dict[str, Any]], rows: list[dict[str, Any]], rar: bool) -> list[str]:
    """The real run against each control, and a note per control that beat the warm-up."""
    if not pairs:
        return []
    right = "without a contradiction" if rar else "right"
    lines = ["", "The real run against each broken-trainer control (paired by "
             + ("prompt" if rar else "claim") + ", exact McNemar):", "",
             f"| control | real run | accuracy: real / control | {right} only in the real run / only in the control "
             "| McNemar p |", "|---|---|---|---|---|"]
    for c in pairs:
        acc = f"{c['real_accuracy']:.3f} / {c['control_accuracy']:.3f}" if c["n"] else "-"
        lines.append(f"| {c['control']} | {c['real']} | {acc} | {c['real_only_right']} / {c['control_only_right']} "
                     f"| {c['mcnemar_p']:.2g} |")
    beat = [row for row in rows if row["stage"].startswith("control-") and "mcnemar_p" in row
            and row["fixed_vs_warmup"] > row["broken_vs_warmup"] and row["mcnemar_p"] < 0.05]
    lines += ["", *(f"- **{row['stage']} beats the warm-up** ({row['fixed_vs_warmup']} / {row['broken_vs_warmup']}, "
                    f"p = {row['mcnemar_p']:.2g}): a broken trainer moved the warm-up too, so the warm-up alone "
                    "is no baseline for the real run's gain; the table above compares the two." for row in beat)] \
        if beat else []
    return lines


def _warmup_margins(out: Path, correct: dict[str, dict[str, bool]]) -> dict[str, Any] | None:
    """:func:`factrl.recipes.factworld_margins.margins` of this run (None without the
    warm-up's tokenizer or evaluation, or without worded conclusions)."""
    from factrl.recipes.factworld_margins import conclusions, load_decoder, margins
    from factrl.runs.trajectories import TRAJ_FILE

    traj = out / "eval" / "warmup" / TRAJ_FILE
    decode = load_decoder(out / "warmup" / "final") if traj.is_file() and "warmup" in correct else None
    return margins(conclusions(traj, decode), correct) if decode else None


def _echo_lines(echo: dict[str, dict[str, Any]]) -> list[str]:
    """One report line per inverted-mask control whose observation tokens echo the model's own output."""
    found = [f"- {name}: {e['echoed']} of the {e['observation_tokens']} observation tokens in its held-out "
             f"episodes ({e['share']:.1%}) repeat a run of {e['n']}+ tokens the model wrote of its own earlier "
             "in the episode (not copied from what it was shown): "
             + ("this control masks them too, so it does not train that copy." if "no_echo" in name else
                "the inverted mask trains that copy of the model's own output.")
             for name, e in echo.items() if e["echoed"]]
    return ["", *found] if found else []


def _invert_mask_echo(out: Path, correct: dict[str, dict[str, bool]], n: int = 8) -> dict[str, dict[str, Any]]:
    """Per evaluated ``invert_mask`` control: how much of the observation in its held-out
    episodes repeats the model's own earlier tokens (:func:`factrl.train.controls.echoed_tokens`)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories
    from factrl.train.controls import echoed_tokens

    found = {}
    for name in (x for x in correct if x.startswith("control-invert_mask")):
        d = out / "eval" / name.replace("@", "-").replace("%", "pct")
        streams = [[(prompt, "prompt"), *((turn.token_ids, turn.source) for turn in turns)]
                   for t in read_trajectories(d / TRAJ_FILE)
                   for prompt, turns in ((t.prompt_ids, t.turns), *((seg.prompt_ids, seg.turns) for seg in t.segments))]
        echoed, total = echoed_tokens(streams, n)
        found[name] = {"echoed": echoed, "observation_tokens": total, "share": echoed / total if total else 0.0, "n": n}
    return found


def _vacuous_controls(out: Path, controls: tuple[str, ...]) -> dict[str, int]:
    """Control runs whose every logged update had a zero gradient -> their update count: a
    control that trains nothing cannot fail the way the benchmark needs it to."""
    from factrl.train.callbacks import read_metrics

    found = {}
    for control in controls:
        norms = [row["grad_norm"] for log in sorted((out / f"grpo-{control}").glob("**/metrics.jsonl"))
                 for row in read_metrics(log) if row.get("grad_norm") is not None]
        if norms and all(float(g) == 0.0 for g in norms):
            found[control] = len(norms)
    return found


def _component_by_id(d: Path, key: str) -> dict[str, float]:
    """Binary RAR: one reward component per prompt (e.g. ``supported_sentences``)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    return {t.claim_id: float(t.reward.components.get(key, 0.0)) for t in read_trajectories(d / TRAJ_FILE)}


def _informative(facts: dict[str, float]) -> dict[str, float]:
    """Binary RAR: per prompt 1.0 when the response states at least one fact the world
    supports beyond the entity's type (the guard against a reward won by saying nothing:
    "X is a person." is true and says nothing asked for)."""
    return {i: float(v >= 1) for i, v in facts.items()}


def _meteor_by_id(d: Path) -> dict[str, float]:
    """Per-claim question METEOR of an evaluation (ProFact's AVeriTeC scores; {} when none)."""
    from factrl.metrics.averitec_submission import PER_CLAIM_FILE

    path = d / PER_CLAIM_FILE
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(row["claim_id"]): float(row["q_only"]) for row in rows}


def write_report(r: Any, recipe: dict[str, Any], out: Path, stages: dict[str, Path]) -> dict[str, Any]:
    """``report.md`` and ``results.json`` of a recipe run ``r`` (settings ``recipe``) from
    the evaluations on disk of ``stages``; a stage not evaluated (yet) is left out."""
    from factrl.metrics.significance import mcnemar_by_id, paired_by_id, wilson_interval
    from factrl.recipes.factworld_margins import margin_lines
    from factrl.train.callbacks import plot_curves
    from factrl.train.config import load_run_config

    env = load_run_config(r.preset, dict(r.grpo_overrides)).env.name
    rar, two_way = env == "rar", env == "haris"  # Binary RAR: prompts, not claims; HARIS: Support / Refute
    rows = []
    correct: dict[str, dict[str, bool]] = {}
    base = correct_by_id(out / "eval" / "warmup", rar, two_way)
    base_facts = facts_by_id(out / "eval" / "warmup", out / "heldout") if rar else {}
    base_informative = _informative(base_facts)
    base_meteor = _meteor_by_id(out / "eval" / "warmup")
    base_labels = {} if rar else labels_by_id(out / "eval" / "warmup", two_way)
    for name in stages:
        d = out / "eval" / name.replace("@", "-").replace("%", "pct")
        if not (d / "metrics.json").is_file():  # not evaluated (yet): another process may be on it
            continue
        got = correct_by_id(d, rar, two_way)
        correct[name] = {i: bool(v) for i, v in got.items()}
        n, k = len(got), int(sum(got.values()))
        lo, hi = wilson_interval(k, n)
        row = {"stage": name, "n": n, "accuracy": k / n if n else None, "ci95": [lo, hi]}
        metrics = json.loads((d / "metrics.json").read_text())
        row["format_ok"] = metrics.get("format_ok_rate", metrics.get("format_ok"))
        if name != "warmup":
            b, c, p = mcnemar_by_id(got, base)  # fixed, broken
            row.update({"fixed_vs_warmup": b, "broken_vs_warmup": c, "mcnemar_p": p})
        if rar:  # accuracy: the no-contradiction rate; informative: the share stating a supported fact beyond the type
            row["contradiction_rate"] = 1 - row["accuracy"] if n else None
            facts = facts_by_id(d, out / "heldout")
            info = _informative(facts)
            row["informative"] = sum(info.values()) / len(info) if info else None
            # how much a response says: a reward won by saying less shows here
            for key in ("supported_sentences", "supported_facts", "contradicted_sentences"):
                per, warm = ((facts, base_facts) if key == "supported_facts" else
                             (_component_by_id(d, key), _component_by_id(out / "eval" / "warmup", key)))
                row[key] = sum(per.values()) / len(per) if per else None
                if name != "warmup" and per:
                    test = paired_by_id(per, warm)
                    row[f"{key}_diff"], row[f"{key}_p"] = test["mean_diff"], test["p"]
            if name != "warmup":
                b, c, p = mcnemar_by_id(info, base_informative)
                row.update({"informative_fixed": b, "informative_broken": c, "informative_p": p})
        if not rar:
            labels = labels_by_id(d, two_way)
            row.update(_by_label(labels, labels if name == "warmup" else base_labels))
            row["collapsed_to"] = _collapse(row)
        meteor = _meteor_by_id(d)
        if meteor:
            row["question_meteor"] = sum(meteor.values()) / len(meteor)
            if name != "warmup" and base_meteor:
                test = paired_by_id(meteor, base_meteor)
                row.update({"meteor_diff_vs_warmup": test["mean_diff"], "meteor_p": test["p"]})
        rows.append(row)
    curves = {}
    for control in ("none", *r.controls):
        run = out / f"grpo-{control}"
        # one GRPO run, or HARIS's coordinated stages (foundation/searcher, ...) each with its own
        logs = [run / "metrics.jsonl"] if (run / "metrics.jsonl").is_file() else sorted(run.glob("*/*/metrics.jsonl"))
        for log in logs:
            png = plot_curves(log, log.parent / "curves.png")
            curves[control if log.parent == run else f"{control} {log.parent.relative_to(run)}"] = str(png) if png else None
    vacuous = _vacuous_controls(out, r.controls)
    selection = pick(r, out, stages)
    short = short_rows(r, out, stages) if rar else []
    pairs = real_vs_controls(correct, selection["picked"] if selection else None)
    sure = None if rar else _warmup_margins(out, correct)
    echo = _invert_mask_echo(out, correct)
    result = {"recipe": recipe, "stages": rows, "curves": curves, "vacuous_controls": vacuous, "selection": selection,
              "real_vs_controls": pairs, "warmup_margins": sure, "invert_mask_echo": echo,
              **({"short_form": short} if short else {})}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# factworld learning: {r.preset}", "",
             f"Held-out world seed {r.heldout_seed} ({rows[0]['n'] if rows else 0} {'prompts' if rar else 'claims'}); "
             f"training world seed {r.train_seed}; teacher noise {r.teacher_noise}; "
             + ("NOT ENOUGH INFO claims scored as Refute (HARIS's two-way scale); " if two_way else "")
             + f"{f'sampled at temperature {r.eval_temperature} (seed {r.eval_seed})' if r.eval_temperature else 'greedy'}.", ""]
    if rar:
        lines += _rar_table(rows) + short_table(short)
    else:
        lines += ["| stage | accuracy | 95% CI | format ok | fixed / broken vs warm-up | McNemar p |", "|---|---|---|---|---|---|"]
    for row in [] if rar else rows:
        acc = "-" if row["accuracy"] is None else f"{row['accuracy']:.3f}"
        fmt = "-" if row.get("format_ok") is None else f"{row['format_ok']:.3f}"
        fb = f"{row['fixed_vs_warmup']} / {row['broken_vs_warmup']}" if "mcnemar_p" in row else ""
        p = f"{row['mcnemar_p']:.2g}" if "mcnemar_p" in row else ""
        lines.append(f"| {row['stage']} | {acc} | {row['ci95'][0]:.3f}–{row['ci95'][1]:.3f} | {fmt} | {fb} | {p} |")
    lines += [] if rar else _label_table(rows) + _collapse_notes(rows)
    lines += _real_vs_control_lines(pairs, rows, rar)
    lines += margin_lines(sure)
    lines += _echo_lines(echo)
    staged = [row for row in rows if "question_meteor" in row]
    if staged:
        lines += ["", "| stage | question METEOR | difference vs warm-up | paired sign-flip p |", "|---|---|---|---|"]
        for row in staged:
            diff = f"{row['meteor_diff_vs_warmup']:+.4f}" if "meteor_p" in row else ""
            p = f"{row['meteor_p']:.2g}" if "meteor_p" in row else ""
            lines.append(f"| {row['stage']} | {row['question_meteor']:.4f} | {diff} | {p} |")
    lines += ["", *(f"- **control {c} trained nothing**: grad norm 0 at all {k} updates (no token left in its "
                    "loss, e.g. invert_mask on an agent whose episodes hold no observation tokens); its null "
                    "result says nothing about the trainer." for c, k in vacuous.items())] if vacuous else []
    lines += _selection_lines(selection, rows, "prompts" if rar else "claims")
    lines += ["", *(f"Curves ({c}): {p}" for c, p in curves.items() if p)]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return result


def _rar_table(rows: list[dict[str, Any]]) -> list[str]:
    """Binary RAR's rows: contradiction rate (lower is better; McNemar on the prompts that
    lost or gained a contradiction) and the share of informative responses."""
    lines = ["| stage | contradiction rate | 95% CI | informative | contradictions removed / added vs warm-up | "
             "McNemar p | informative gained / lost, p | supported sentences / facts beyond the type / "
             "contradicted sentences per response (paired sign-flip p) |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if row["accuracy"] is None:
            continue
        lo, hi = row["ci95"]
        fb = f"{row['fixed_vs_warmup']} / {row['broken_vs_warmup']}" if "mcnemar_p" in row else ""
        p = f"{row['mcnemar_p']:.2g}" if "mcnemar_p" in row else ""
        info = "-" if row.get("informative") is None else f"{row['informative']:.3f}"
        ip = (f"{row['informative_fixed']} / {row['informative_broken']}, {row['informative_p']:.2g}"
              if "informative_p" in row else "")
        said = " / ".join(
            "-" if row.get(k) is None else f"{row[k]:.2f}" + (f" ({row[k + '_p']:.2g})" if k + "_p" in row else "")
            for k in ("supported_sentences", "supported_facts", "contradicted_sentences"))
        lines.append(f"| {row['stage']} | {row['contradiction_rate']:.3f} | {1 - hi:.3f}–{1 - lo:.3f} | {info} | "
                     f"{fb} | {p} | {ip} | {said} |")
    return lines


def _selection_lines(selection: dict[str, Any] | None, rows: list[dict[str, Any]], what: str) -> list[str]:
    """The validation world's accuracy per candidate stage and the stage it picks, with
    that stage's held-out figures (chosen without looking at them); Binary RAR: the
    contradiction rate and facts per response, and where utility early stopping ended."""
    if not selection:
        return []
    stop = selection.get("utility_stop")
    lines = ["", f"Checkpoint picked on the validation world (seed {selection['world_seed']}, "
             f"{selection['claims']} {what}; never trained on, not the held-out world):", ""]
    if stop:
        lines += ["| stage | contradiction rate | 95% CI | facts beyond the type per response |", "|---|---|---|---|"]
    else:
        lines += ["| stage | validation accuracy | 95% CI |", "|---|---|---|"]
    after = False
    for name, v in selection["validation"].items():
        after = after or (stop is not None and name == stop["stopped_at"])
        mark = " (picked)" if name == selection["picked"] else " (stopped: utility)" if after else ""
        if stop:
            lo, hi = v["ci95"]
            lines.append(f"| {name}{mark} | {1 - v['accuracy']:.3f} | {1 - hi:.3f}–{1 - lo:.3f} | {v['facts']:.2f} |")
        else:
            lines.append(f"| {name}{mark} | {v['accuracy']:.3f} | {v['ci95'][0]:.3f}–{v['ci95'][1]:.3f} |")
    if stop:
        lines += ["", (f"Utility early stop: {stop['stopped_at']} is the first checkpoint with fewer than "
                       f"{stop['floor']:.2f} facts per response ({1 - stop['max_drop']:.0%} of the warm-up's); "
                       "it and every later one cannot be picked.") if stop["stopped_at"] else
                  f"Utility early stop: no checkpoint fell below {stop['floor']:.2f} facts per response "
                  f"({1 - stop['max_drop']:.0%} of the warm-up's)."]
    held = next((row for row in rows if row["stage"] == selection["picked"]), None)
    if held is not None and held["accuracy"] is not None:
        rar = "contradiction_rate" in held
        fixed, broken = ("contradictions removed", "added") if rar else ("fixed", "broken")
        vs = (f", {held['fixed_vs_warmup']} {fixed} / {held['broken_vs_warmup']} {broken} vs warm-up, "
              f"McNemar p = {held['mcnemar_p']:.2g}") if "mcnemar_p" in held else ""
        if rar and "supported_facts_p" in held:
            vs += (f"; facts beyond the type per response {held['supported_facts']:.2f} "
                   f"(paired sign-flip p = {held['supported_facts_p']:.2g})")
        figure = f"held-out contradiction rate {held['contradiction_rate']:.3f}" if rar else f"held-out {held['accuracy']:.3f}"
        lines += ["", f"**Picked: {selection['picked']}**, {figure}{vs}."]
    return lines
