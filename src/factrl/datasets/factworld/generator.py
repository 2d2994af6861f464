"""``generate(config)``: a world, its corpus, claims, QA and prompts as file contents;
``write_world(config, out)`` writes them (the directory layout is in ``docs/formats.md``).

Independent ``random.Random`` streams, each seeded from the seed and its purpose: the
world, the claims, the splits, the prompts' splits and the short-form questions. So
``seed`` and the world knobs (``entities``, ``distractors``, ``unstated_rate``) fully
define the world, and asking for more claims or another mix keeps the same world. Same config → byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factrl.datasets.factworld.claims import ClaimMaker, TooFewClaims, WorldClaim, claim_row
from factrl.datasets.factworld.schema import RAR_PROMPTS, TYPES
from factrl.datasets.factworld.short_questions import short_questions
from factrl.datasets.factworld.world import World, build_world, document_sentences
from factrl.labels import Label, normalise_label

__all__ = ["SPLITS", "FILES", "WorldConfig", "GeneratedWorld", "generate", "write_world", "parse_hops",
           "parse_label_mix"]

SPLITS = ("train", "dev", "test")
MAX_HOPS = 3
# What a generated directory holds (``<split>`` is each of SPLITS).
FILES = ("corpus.jsonl", "world.json", "claims/<split>.jsonl", "averitec/<split>.json", "rar/<split>.jsonl",
         "rar_short/<split>.jsonl", "manifest.json")
_LABELS = (Label.SUPPORT, Label.REFUTE, Label.NEI)
_AVERITEC = {Label.SUPPORT: "Supported", Label.REFUTE: "Refuted", Label.NEI: "Not Enough Evidence"}


def _mix(text: str, keys: list[str]) -> dict[str, float]:
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise ValueError("empty mix")
    out: dict[str, float] = {}
    if keys and all(":" not in p for p in items):  # positional weights
        if len(items) != len(keys):
            raise ValueError(f"give {len(keys)} weights ({', '.join(keys)}) or name them (key:weight), got {text!r}")
        pairs = list(zip(keys, items))
    else:
        pairs = [(k.strip(), w.strip()) for k, _, w in (p.partition(":") for p in items)]
    for key, weight in pairs:
        if not _is_number(weight) or float(weight) < 0:
            raise ValueError(f"weight {weight!r} of {key!r} is not a number >= 0")
        if key in out:
            raise ValueError(f"{key!r} is given twice")
        out[key] = float(weight)
    if not sum(out.values()) > 0:
        raise ValueError("the weights sum to 0")
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_hops(text: str) -> dict[int, float]:
    """``"1,2,3"`` (equal shares), ``"2"`` or ``"1:0.5,2:0.3,3:0.2"`` → ``{hops: weight}``."""
    items = [p.strip() for p in text.split(",") if p.strip()]
    if items and all(":" not in p for p in items):
        text = ",".join(f"{p}:1" for p in items)
    raw = _mix(text, [])
    out: dict[int, float] = {}
    for key, weight in raw.items():
        if not key.isdigit() or not 1 <= int(key) <= MAX_HOPS:
            raise ValueError(f"hop counts are 1 to {MAX_HOPS}, got {key!r}")
        out[int(key)] = weight
    return dict(sorted(out.items()))


def parse_label_mix(text: str) -> dict[Label, float]:
    """``"1,1,1"`` (SUPPORT, REFUTE, NOT ENOUGH INFO weights) or
    ``"support:2,refute:1,nei:1"`` (any label spelling) → ``{label: weight}``."""
    raw = _mix(text, [lab.value for lab in _LABELS])
    out: dict[Label, float] = {}
    for key, weight in raw.items():
        label = normalise_label(key)
        if label not in _LABELS:
            raise ValueError(f"factworld labels are SUPPORT, REFUTE and NOT ENOUGH INFO, not {key!r}")
        out[label] = weight
    return {lab: out.get(lab, 0.0) for lab in _LABELS}


@dataclass(frozen=True)
class WorldConfig:
    """Every knob of a world. ``hops`` and ``label_mix`` are weights (normalised);
    ``distractors`` is the share of entities that are look-alikes of another;
    ``paraphrase_rate`` the chance a stated claim is worded unlike its document
    sentence; ``unstated_rate`` the chance each attribute is left out of the corpus;
    ``splits`` the train/dev/test shares of the claims and of the prompts."""

    seed: int = 0
    entities: int = 500
    claims: int = 3000
    hops: Mapping[int, float] = field(default_factory=lambda: {1: 1.0, 2: 1.0, 3: 1.0})
    label_mix: Mapping[Label, float] = field(default_factory=lambda: dict.fromkeys(_LABELS, 1.0))
    distractors: float = 0.2
    paraphrase_rate: float = 0.5
    unstated_rate: float = 0.2
    splits: tuple[float, float, float] = (0.8, 0.1, 0.1)

    def __post_init__(self) -> None:
        def bad(msg: str) -> None:
            raise ValueError(msg)


        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            bad(f"seed must be an integer >= 0, got {self.seed!r}")
        if not 20 <= self.entities <= 200_000:
            bad(f"entities must be 20 to 200000, got {self.entities}")
        if self.claims < 1:
            bad(f"claims must be >= 1, got {self.claims}")
        if not self.hops or any(h not in range(1, MAX_HOPS + 1) or w < 0 for h, w in self.hops.items()) \
                or not sum(self.hops.values()) > 0:
            bad(f"hops must weight hop counts 1 to {MAX_HOPS} (weights >= 0, not all 0), got {dict(self.hops)}")
        if set(self.label_mix) - set(_LABELS) or any(w < 0 for w in self.label_mix.values()) \
                or not sum(self.label_mix.values()) > 0:
            bad(f"label_mix must weight SUPPORT, REFUTE, NOT ENOUGH INFO (>= 0, not all 0), got {dict(self.label_mix)}")
        for name, lo, hi in (("distractors", 0.0, 0.5), ("paraphrase_rate", 0.0, 1.0), ("unstated_rate", 0.0, 0.9)):
            if not lo <= getattr(self, name) <= hi:
                bad(f"{name} must be in [{lo}, {hi}], got {getattr(self, name)}")
        if self.label_mix.get(Label.NEI, 0) > 0 and self.unstated_rate == 0:
            bad("NOT ENOUGH INFO claims need unstated attributes: unstated_rate must be > 0")
        if len(self.splits) != 3 or any(s < 0 for s in self.splits) or abs(sum(self.splits) - 1) > 1e-9 \
                or self.splits[0] <= 0:
            bad(f"splits must be three shares (train, dev, test) >= 0 summing to 1, train > 0; got {self.splits}")
        # One canonical order, so equal knobs give equal files however they were written.
        object.__setattr__(self, "hops", {h: float(self.hops[h]) for h in sorted(self.hops)})
        object.__setattr__(self, "label_mix", {lab: float(self.label_mix.get(lab, 0.0)) for lab in _LABELS})
        object.__setattr__(self, "splits", tuple(float(s) for s in self.splits))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["hops"] = {str(h): w for h, w in sorted(self.hops.items())}
        out["label_mix"] = {lab.value: self.label_mix.get(lab, 0.0) for lab in _LABELS}
        out["splits"] = dict(zip(SPLITS, self.splits))
        return out


def _apportion(total: int, weights: Mapping[Any, float]) -> dict[Any, int]:
    """Largest-remainder integer shares of ``total`` (ties to the earlier key)."""
    keys = list(weights)
    s = sum(weights.values())
    raw = [total * weights[k] / s for k in keys]
    out = [int(r) for r in raw]
    order = sorted(range(len(keys)), key=lambda i: (out[i] - raw[i], i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return dict(zip(keys, out))


@dataclass
class GeneratedWorld:
    """A generated world: the fact table, the claims per split and every file's bytes
    (relative path → contents, ``manifest.json`` last)."""

    config: WorldConfig
    world: World
    claims: dict[str, list[dict[str, Any]]]
    files: dict[str, bytes]


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _json(data: list[Any] | dict[str, Any]) -> bytes:
    """JSON with one list item per line (readable, diffable, and written by the C
    encoder, which ``indent`` would give up)."""
    def dump(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False)

    def block(items: list[Any]) -> str:
        return "[\n" + ",\n".join(dump(i) for i in items) + "\n]" if items else "[]"

    if isinstance(data, list):
        return (block(data) + "\n").encode("utf-8")
    fields = [f"{dump(k)}: {block(v) if isinstance(v, list) else dump(v)}" for k, v in data.items()]
    return ("{\n" + ",\n".join(fields) + "\n}\n").encode("utf-8")


def _rng(seed: int, purpose: str) -> random.Random:
    # A string seed is hashed with SHA-512 by random.seed: stable across runs and machines.
    return random.Random(f"factworld:{seed}:{purpose}")


def _claims(cfg: WorldConfig, world: World) -> dict[str, list[WorldClaim]]:
    maker = ClaimMaker(world, _rng(cfg.seed, "claims"), paraphrase_rate=cfg.paraphrase_rate)
    split_rng = _rng(cfg.seed, "splits")
    out: dict[str, list[WorldClaim]] = {s: [] for s in SPLITS}
    for label, n_label in _apportion(cfg.claims, {lab: cfg.label_mix.get(lab, 0.0) for lab in _LABELS}).items():
        for hops, n in _apportion(n_label, cfg.hops).items():
            cell = maker.make(hops, label, n) if n else []
            split_rng.shuffle(cell)
            start = 0
            for split, k in _apportion(len(cell), dict(zip(SPLITS, cfg.splits))).items():
                out[split].extend(cell[start:start + k])
                start += k
    for split in SPLITS:
        split_rng.shuffle(out[split])
    return out


def _corpus(world: World) -> tuple[list[dict[str, Any]], dict[str, str]]:
    rows, texts = [], {}
    for e in world.entities:
        sentences = document_sentences(world, e)
        rows.append({"id": e.id, "title": e.name, "text": " ".join(sentences), "sentences": sentences})
        texts.update({f"{e.id}_sentence_{i}": s for i, s in enumerate(sentences)})
    return rows, texts


def _averitec(row: dict[str, Any]) -> dict[str, Any]:
    meta = row["meta"]
    return {"claim_id": row["id"], "claim": row["claim"], "label": _AVERITEC[normalise_label(row["label"])],
            "justification": meta["justification"], "claim_date": None, "speaker": None,
            "questions": meta["questions"], "claimed_value": meta["claimed_value"]}


def _rar(cfg: WorldConfig, world: World, corpus: list[dict[str, Any]]
         ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Binary RAR's prompts per split: one long-form prompt per entity, and the short-form
    questions about the same entities (:mod:`.short_questions`)."""
    docs = {r["id"]: r for r in corpus}
    short_rng = _rng(cfg.seed, "short")
    short: dict[str, list[dict[str, Any]]] = {}
    order = list(world.entities)
    position = {e.id: i for i, e in enumerate(order)}
    _rng(cfg.seed, "prompts").shuffle(order)
    out: dict[str, list[dict[str, Any]]] = {}
    start = 0
    for split, k in _apportion(len(order), dict(zip(SPLITS, cfg.splits))).items():
        chosen = sorted(order[start:start + k], key=lambda e: position[e.id])
        start += k
        out[split] = [{"id": f"fw{cfg.seed}-rar-{e.id}", "prompt": RAR_PROMPTS[e.type].format(S=e.name), "kind": "long",
                       "documents": [{"id": e.id, "title": e.name, "text": docs[e.id]["text"]}],
                       "entity": e.name, "entity_type": e.type, "world_seed": cfg.seed} for e in chosen]
        short[split] = short_questions(cfg.seed, world, docs, chosen, short_rng)
    return out, short


def generate(cfg: WorldConfig) -> GeneratedWorld:
    """Build the world and every file of its directory in memory."""
    world = build_world(cfg.seed, cfg.entities, distractors=cfg.distractors, unstated_rate=cfg.unstated_rate,
                        rng=_rng(cfg.seed, "world"))
    corpus, texts = _corpus(world)
    by_split = _claims(cfg, world)
    rows = {s: [claim_row(world, c, f"fw{cfg.seed}-{s}-{i:05d}", texts) for i, c in enumerate(cs)]
            for s, cs in by_split.items()}
    prompts, short = _rar(cfg, world, corpus)
    files: dict[str, bytes] = {"corpus.jsonl": _jsonl(corpus), "world.json": _json(world.to_json())}
    for s in SPLITS:
        files[f"claims/{s}.jsonl"] = _jsonl(rows[s])
        files[f"averitec/{s}.json"] = _json([_averitec(r) for r in rows[s]])
        files[f"rar/{s}.jsonl"] = _jsonl(prompts[s])
        files[f"rar_short/{s}.jsonl"] = _jsonl(short[s])
    counts: dict[str, Any] = {
        "entities": {t: len(world.of_type(t)) for t in TYPES},
        "look_alikes": sum(e.twin_of is not None for e in world.entities),
        "sentences": len(texts),
        "stated_facts": sum(len(e.facts) for e in world.entities),
        "unstated_facts": sum(len(e.unstated) for e in world.entities),
        "claims": {s: _tally(rows[s]) for s in SPLITS},
        "rar_prompts": {s: len(prompts[s]) for s in SPLITS},
        "rar_short": {s: {"answerable": sum(q["answerable"] for q in short[s]),
                          "unanswerable": sum(not q["answerable"] for q in short[s])} for s in SPLITS},
    }
    manifest = {"format": "factworld/1", "seed": cfg.seed, "config": cfg.to_json(), "counts": counts,
                "files": {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}}
    files["manifest.json"] = _json(manifest)
    return GeneratedWorld(cfg, world, rows, files)


def _tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"total": len(rows)}
    for lab in _LABELS:
        mine = [r for r in rows if r["label"] == lab.value]
        out[lab.value] = {str(h): sum(r["meta"]["num_hops"] == h for r in mine) for h in range(1, MAX_HOPS + 1)}
    return out


def accepted_seed(cfg: WorldConfig, *, tries: int = 50) -> int | None:
    """The first seed after ``cfg.seed`` whose world gives every claim ``cfg`` asks for
    (the rest of ``cfg`` unchanged), or None within ``tries`` seeds: what to suggest when
    a seed is refused with :class:`~factrl.datasets.factworld.claims.TooFewClaims`."""
    from dataclasses import replace

    for seed in range(cfg.seed + 1, cfg.seed + 1 + tries):
        try:
            generate(replace(cfg, seed=seed))
        except TooFewClaims:
            continue
        return seed
    return None


def refused_seed_message(exc: Exception, cfg: WorldConfig, flag: str) -> str:
    """``exc``'s message with the nearest seed these settings accept, as ``flag`` sets it."""
    seed = accepted_seed(cfg)
    hint = (f"; the first seed after {cfg.seed} these settings accept is {seed} ({flag}{seed})" if seed is not None
            else f"; none of the 50 seeds after {cfg.seed} is accepted with these settings either")
    return f"{exc}{hint}"


def write_world(cfg: WorldConfig, out: Path | str, *, overwrite: bool = False) -> GeneratedWorld:
    """Generate and write the world's directory. An ``out`` that already holds a
    generated file is refused unless ``overwrite``."""
    out = Path(out)
    gen = generate(cfg)
    clash = [p for p in gen.files if (out / p).exists()]
    if clash and not overwrite:
        raise FileExistsError(f"{out} already holds {clash[0]}; pass overwrite (--overwrite) to replace it")
    for path, data in gen.files.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return gen
