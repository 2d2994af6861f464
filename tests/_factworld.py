"""A small hand-written factworld fact table, for tests whose statements are written by
hand (the verifier, the exact Binary RAR reward)."""

from __future__ import annotations

import json
from pathlib import Path

HAND_WORLD = {
    "format": "factworld/1",
    "seed": 0,
    "schema": {},
    "vocab": {"occupation": ["painter", "engineer", "poet"], "industry": ["brewing", "mining"],
              "sea": ["Ostrel Sea", "Vandu Sea"], "currency": ["korval", "drim"], "language": ["Velmese", "Trokese"]},
    "entities": [
        {"id": "dara_velkun", "name": "Dara Velkun", "type": "person", "unstated": ["employer"],
         "facts": {"birth_year": 1901, "occupation": "painter", "birthplace": "korvath"}},
        {"id": "mira_velkun", "name": "Mira Velkun", "type": "person", "unstated": ["birthplace", "birth_year"],
         "facts": {"occupation": "engineer", "employer": "zorbatek"}},
        {"id": "korvath", "name": "Korvath", "type": "city", "unstated": [],
         "facts": {"country": "ostrala", "river": "velkor", "founded_year": 1210, "population": 245000}},
        {"id": "karvath", "name": "Karvath", "type": "city", "unstated": ["population"], "twin_of": "korvath",
         "facts": {"country": "ostrala", "river": "velkor", "founded_year": 1350}},
        {"id": "zorbatek", "name": "Zorbatek", "type": "company", "unstated": ["founded_year"],
         "facts": {"founder": "dara_velkun", "headquarters": "korvath", "industry": "brewing"}},
        {"id": "velkor", "name": "Velkor", "type": "river", "unstated": [],
         "facts": {"length_km": 1204, "sea": "Ostrel Sea"}},
        {"id": "ostrala", "name": "Ostrala", "type": "country", "unstated": ["language"],
         "facts": {"capital": "korvath", "currency": "korval"}},
    ],
}


def write_hand_world(directory: Path) -> Path:
    """``directory/world.json`` with :data:`HAND_WORLD`; returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "world.json").write_text(json.dumps(HAND_WORLD), encoding="utf-8")
    return directory
