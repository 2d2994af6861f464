"""Fixtures for the metric tests: an offline WordNet for METEOR."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def wordnet_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An nltk_data folder with Debian's WordNet 3.0, first on nltk.data.path.

    Skips only where the files cannot be had at all (no /usr/share/wordnet and no
    apt-get); where apt-get exists a missing database is a setup error (`make wordnet`),
    so the METEOR tests fail rather than skip in CI.
    """
    pytest.importorskip("nltk")
    from factrl.metrics import meteor as m

    if not (m.WORDNET_SOURCE / "index.sense").is_file() and not shutil.which("apt-get"):
        pytest.skip(f"no WordNet in {m.WORDNET_SOURCE} and no apt-get for {m.INSTALL_HINT!r}")
    return m.ensure_wordnet(data_dir=tmp_path_factory.mktemp("nltk_data"))
