"""Shared fixtures: the path of the real benchmark data (tests using it skip when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _support import REPO, WordOverlapRetriever  # noqa: F401 (re-exported for tests)

SHARED_DATA = Path(os.environ.get("FACTRL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA
