"""A Binary RAR prompt set built from SciFact and Climate-FEVER evidence (factrl's
``rar_prompts`` format), for the CPU GRPO run and its before/after evaluation.

- long-form: "What did the study <title> find?" for SciFact abstracts cited by train
  claims; the prompt's documents are that abstract and the other abstracts cited by the
  same claims (the evidence pool the verifier and the judge search);
- short-form: "Is it true that <claim>? Answer yes or no." for Climate-FEVER claims
  labelled SUPPORTS (gold "yes") or REFUTES (gold "no"); documents: the claim's five
  evidence sentences, grouped by article.

Writes ``train.jsonl``, ``test.jsonl`` (held out: disjoint abstracts and claims) and
``utility.jsonl`` (further short-form questions, for the no-abstention utility check).

    PYTHONPATH=src .venv/bin/python benchmarks/rar_prompt_set.py --out runs/rar_prompts \\
        [--train 40 --test 12 --utility 20] (per kind)
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from factrl.corpus import iter_json_lines


def scifact_long(data: Path) -> list[dict]:
    corpus = {}
    for _, row in iter_json_lines(data / "scifact" / "corpus.jsonl"):
        corpus[str(row["doc_id"])] = row
    out, seen = [], set()
    for _, row in iter_json_lines(data / "scifact" / "claims_train.jsonl"):
        cited = [str(d) for d in row.get("cited_doc_ids", []) if str(d) in corpus]
        if not row.get("evidence") or not cited or cited[0] in seen:
            continue
        seen.add(cited[0])
        docs = [{"id": d, "title": corpus[d]["title"], "text": " ".join(corpus[d]["abstract"])} for d in cited]
        title = corpus[cited[0]]["title"].rstrip(".")
        out.append({"id": f"scifact-{cited[0]}", "kind": "long", "documents": docs,
                    "prompt": f'What did the study "{title}" find? Answer in a few sentences.'})
    return out


def climate_short(data: Path) -> list[dict]:
    out = []
    for _, row in iter_json_lines(data / "climate_fever" / "climate-fever.jsonl"):
        label = row.get("claim_label")
        if label not in ("SUPPORTS", "REFUTES"):
            continue
        by_article: dict[str, list[str]] = {}
        for e in row["evidences"]:
            by_article.setdefault(e["article"], []).append(e["evidence"])
        docs = [{"id": f"{row['claim_id']}-{i}", "title": a, "text": " ".join(s)}
                for i, (a, s) in enumerate(by_article.items())]
        claim = row["claim"].strip().rstrip(".")
        out.append({"id": f"cfever-{row['claim_id']}", "kind": "short", "documents": docs,
                    "answers": ["yes" if label == "SUPPORTS" else "no"],
                    "prompt": f'Is it true that "{claim}"? Answer yes or no.'})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=Path("runs/rar_prompts"))
    ap.add_argument("--train", type=int, default=40)
    ap.add_argument("--test", type=int, default=12)
    ap.add_argument("--utility", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    long_, short = scifact_long(args.data), climate_short(args.data)
    rng.shuffle(long_)
    rng.shuffle(short)
    # balance yes/no among short-form questions
    yes = [r for r in short if r["answers"] == ["yes"]]
    no = [r for r in short if r["answers"] == ["no"]]
    short = [r for pair in zip(yes, no) for r in pair]
    a, b = args.train, args.train + args.test
    splits = {
        "train": long_[:a] + short[:a],
        "test": long_[a:b] + short[a:b],
        "utility": short[b : b + args.utility],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        rng.shuffle(rows)
        with (args.out / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(name, len(rows), sum(r["kind"] == "long" for r in rows), "long")


if __name__ == "__main__":
    main()
