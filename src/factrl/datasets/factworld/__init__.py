"""factworld: a seeded fictional world to verify claims against, small enough for a
135M model to learn (search the name, read the document, compare the attribute).

Hundreds of invented entities (people, cities, companies, rivers, countries) with typed
attributes and relations, written as one short document per entity; claims at 1–3 hops
with gold labels, gold sentence ids and AVeriTeC-style questions; one long-form prompt
per entity for Binary RAR, with short-form questions (answerable and unanswerable) about
the same entities; and an exact verifier. ::

    from factrl.datasets.factworld import WorldConfig, write_world, FactWorld

    write_world(WorldConfig(seed=7), "runs/world7")          # or: factrl data factworld --seed 7 --out runs/world7
    fw = FactWorld.load("runs/world7")
    fw.check("Korvath lies on the river Velkor.")            # "supported" | "contradicted" | "unknown"

The directory layout and every knob are in ``docs/formats.md`` ("factworld").
"""

from factrl.datasets.factworld.generator import (FILES, SPLITS, GeneratedWorld, WorldConfig, generate, parse_hops,
                                                parse_label_mix, write_world)
from factrl.datasets.factworld.loader import FactWorldLoader
from factrl.datasets.factworld.verifier import FactWorld, Judgement, Verdict
from factrl.datasets.factworld.world import Entity, World

__all__ = [
    "FILES",
    "SPLITS",
    "Entity",
    "FactWorld",
    "FactWorldLoader",
    "GeneratedWorld",
    "Judgement",
    "Verdict",
    "World",
    "WorldConfig",
    "generate",
    "parse_hops",
    "parse_label_mix",
    "write_world",
]
