"""Fixtures for the retrieval tests: a tiny hand-written corpus, the embedded MiniLM
encoder (loaded once per session), and a real uvicorn server on a free local port."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from factrl.types import Passage

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_DOCS = [
    ("lighthouse", "Harbor Lighthouse", ["The harbor lighthouse was built in 1874 from local granite.",
                                          "Its lamp was converted to electricity in 1931."]),
    ("honeybee", "Honeybee Colonies", ["A honeybee colony has one queen and thousands of workers.",
                                        "Workers forage for nectar and pollen near the hive."]),
    ("sourdough", "Sourdough Bread", ["Sourdough is leavened by wild yeast and lactic acid bacteria.",
                                       "The starter is fed with flour and water every day."]),
    ("glacier", "Mountain Glaciers", ["Mountain glaciers form where snowfall exceeds melting for many years.",
                                       "Many alpine glaciers have retreated since 1850."]),
    ("vaccine", "Measles Vaccine", ["The measles vaccine is given in two doses.",
                                     "Two doses are about 97 percent effective at preventing measles."]),
    ("volcano", "Shield Volcanoes", ["Shield volcanoes are built by fluid basaltic lava flows.",
                                      "Mauna Loa in Hawaii is a large shield volcano."]),
]


def make_passages() -> list[Passage]:
    """One passage per sentence, ids ``<doc>#<j>`` and sentence ids ``<doc>_sentence_<j>``."""
    return [
        Passage(id=f"{doc}#{j}", doc_id=doc, title=title, text=s, sentence_ids=[f"{doc}_sentence_{j}"], sentences=[s])
        for doc, title, sents in _DOCS
        for j, s in enumerate(sents)
    ]


@pytest.fixture(scope="session")
def passages() -> list[Passage]:
    return make_passages()


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The embedded all-MiniLM-L6-v2 on the fast path (small: loads in seconds)."""
    from factrl.retrieval.encoders import get_encoder

    return get_encoder("all-MiniLM-L6-v2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[Callable[[Any], str]]:
    """``serve(app) -> url``: run ``app`` under uvicorn in a thread until the test ends."""
    import uvicorn

    servers: list[tuple[Any, threading.Thread]] = []

    def start(app: Any) -> str:
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)
